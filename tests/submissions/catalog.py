"""The known submissions: correct styles and the catalog of one-mistake files.

Read by tests/test_mistakes.py and by benchmarks/validate_gpu.py, so the GPU run grades
exactly what the tests grade on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.score.texts import catalog, check_messages

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MODULES = {"ex1": "ex1_device", "ex2": "ex2_timing", "ex3": "ex3_roundtrip", "ex4": "ex4_oom", "ex5": "ex5_amp"}
EXERCISE_OF = {module: ex for ex, module in MODULES.items()}
# bound_names imports every library function by name (`from time import perf_counter`,
# `from torch.cuda import synchronize`): the grader's patches must reach those names too.
# idioms/correct/: styles of real projects (timm, fastai, transformers, accelerate, Lightning,
# skorch, PyTorch's tutorials), each file's header naming the project file it follows.
CORRECT_STYLES = {"solutions": ROOT / "solutions", "lesson_style": HERE / "lesson_style",
                  "modern_style": HERE / "modern_style", "bound_names": HERE / "bound_names",
                  **{f"idioms/{p.name}": p for p in sorted((HERE / "idioms" / "correct").iterdir()) if p.is_dir()}}


@dataclass(frozen=True)
class Mistake:
    path: Path
    exercise: str  # "ex3"
    module: str  # "ex3_roundtrip"
    what: str  # the header's "# mistake:" line
    fails: tuple[str, ...]  # the checks that must lose points, first one carries `message`
    message: str  # message id the first failing check must show

    @property
    def name(self) -> str:
        kind = "idioms/" if "idioms" in self.path.parts else ""
        return f"{kind}{self.module}/{self.path.stem}"

    def message_prefix(self) -> str:
        """The declared message's text up to its first placeholder: what every rendering holds (after the
        device, "On mps (stand-in): ", when the check ran on several)."""
        template = catalog("en")["messages"].get(self.message) or check_messages()[self.message]["en"]
        return template.split("{")[0]


def read_mistake(path: Path) -> Mistake:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[:3]:
        key, _, value = line.removeprefix("# ").partition(":")
        fields[key.strip()] = value.strip()
    module = path.parent.name
    return Mistake(path, EXERCISE_OF[module], module, fields["mistake"],
                   tuple(c.strip() for c in fields["fails"].split(",")), fields["message"])


def mistakes() -> list[Mistake]:
    """The one-mistake files: ours (mistakes/) and those from real projects' bug reports (idioms/mistakes/)."""
    paths = sorted((HERE / "mistakes").glob("*/*.py")) + sorted((HERE / "idioms" / "mistakes").glob("*/*.py"))
    return [read_mistake(p) for p in paths]
