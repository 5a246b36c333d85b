"""How closely the stand-ins follow PyTorch's own definitions: prints each figure (x/y and %) and
every miss with its reason; not a test (tests/conformance/ runs samples of the same suites in CI).

    python benchmarks/standin_conformance.py [--suite ops|modules|cost|autocast|api|clocks ...] [--every N]

The suites (tests/conformance/suites.py) measure against references nobody on this project wrote:
torch.testing._internal's op_db and module_db, the autocast lists test_cuda.py checks CUDA autocast
with (each dtype judged against the device's own autocast kernels on fake tensors), the FLOP
counter, the device API enumerated from torch.cuda / torch.mps / torch.accelerator's ``__all__``,
and the standard library's clocks enumerated from their modules. Run from a checkout whose grader
has ``grader.emulated`` (the stand-in since issue 21) or an older one (the stand-in before it):
the same suites measure either. Needs the test extras (``expecttest``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conformance import suites  # noqa: E402 - after the path
from tests.conformance.known import KNOWN  # noqa: E402

RUNS: dict[str, list[dict[str, object]]] = {
    "ops": [{"kind": "cuda"}, {"kind": "mps"}],
    "modules": [{"kind": "cuda"}, {"kind": "mps"}],
    "cost": [{"kind": "cuda"}],
    "autocast": [{"kind": "cuda"}, {"kind": "mps"}],
    "api": [{"kind": "cuda"}, {"kind": "mps"}],
    "clocks": [{"kind": "cuda"}],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", action="append", choices=sorted(RUNS), help="default: all")
    parser.add_argument("--every", type=int, default=1, help="ops and modules: every Nth case only")
    args = parser.parse_args()
    print(f"stand-in measured: {suites.which()}")
    for name in args.suite or list(RUNS):
        for params in RUNS[name]:
            started = time.perf_counter()
            extra = {"every": args.every} if name in ("ops", "modules") else {}
            with suites.quiet():
                figure = suites.SUITES[name](**params, **extra)
            print(f"\n{figure.line()}   [{time.perf_counter() - started:.0f} s]")
            declared = KNOWN.get((name, str(params["kind"])), {})
            for case, reason in sorted(figure.misses.items()):
                why = declared.get(case)
                print(f"  miss {case}: {reason}" + (f"\n       (declared: {why})" if why else "  (NOT DECLARED)"))
            for case, reason in sorted(figure.unjudged.items()):
                print(f"  not judged {case}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
