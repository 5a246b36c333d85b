"""Auto-grader for Lesson 14 "GPU và CUDA" of the PyTorch course.

Learners call ``grader.check()`` in a notebook; everything else is the ``grader`` command.
Importing this package stays cheap: the self-check is imported only when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from os import PathLike

__version__ = "0.1.0"


def check(exercise: str | int | None = None, *, lang: str | None = None, device: str = "auto",
          path: str | PathLike[str] | None = None) -> dict[str, Any]:
    """Grade your exercises with the public checks and show a table; never raises.

    ``grader.check()`` grades every exercise whose functions this notebook defines so far,
    ``grader.check("ex3")`` one exercise, ``lang="en"`` shows English (default: the course's,
    Vietnamese). Outside a notebook it grades the files in ``exercises/`` (or ``path``).
    Returns the report as a mapping: ``score``, ``max_score``, ``exercises`` (as the YAML report).
    """
    # A notebook graded by the grader still holds its ``grader.check()`` cell: there the learner
    # process has put a ``grader`` of its own in its place, whose check() does nothing
    # (grader/learner/kernel.py), so this one never runs inside a grading.
    try:
        from grader.commands import selfcheck
    except Exception as exc:  # noqa: BLE001 - a broken install must not raise in the learner's cell
        reason = f"{type(exc).__name__}: {exc}"
        print(f"grader.check: {reason}")
        return {"score": 0.0, "max_score": 0.0, "exercises": {}, "notices": [reason]}
    return selfcheck.check(exercise, lang=lang, device=device, path=path)


def doctor() -> bool:
    """Print what the grader finds on this machine — its version, Python, torch and the devices,
    whether every check loads, the sandbox's features — to paste into a problem report.
    Returns True when everything the grader needs works."""
    from grader.commands import doctor as diagnosis

    text, ok = diagnosis.diagnose()
    print(text)
    return ok


def emulated(kind: str = "cuda", *, virtual_clock: bool = False, memory_bytes: int | None = None,
             costs: Any = None) -> AbstractContextManager[Any]:
    """Run code on the grader's stand-in GPU: ``with grader.emulated("cuda") as gpu: ...``.

    Inside, ``torch.cuda.is_available()`` is True and ``"cuda"`` tensors and models work (on the
    CPU underneath), with the GPU's rules: devices that must not mix, asynchronous kernels,
    ``synchronize()``, CUDA's autocast, out-of-memory past ``memory_bytes``. ``"mps"`` stands for an
    Apple GPU. With ``virtual_clock=True`` every clock reads the stand-in's timeline, so a timing
    shows what it would on a GPU. Importing torch happens here, not at ``import grader``.
    The context manager gives a ``grader.emulation.public.Emulated``.
    """
    from grader.emulation.public import emulated as run

    return run(kind, virtual_clock=virtual_clock, memory_bytes=memory_bytes, costs=costs)  # type: ignore[arg-type]
