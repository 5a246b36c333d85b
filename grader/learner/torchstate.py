"""PyTorch's per-thread modes, saved before the grader interrupts the learner's code and put back after.

A cell or a call past its limit is stopped by SIGALRM (grader/learner/toplevel.py), and the
exception lands wherever the learner's code is, also inside PyTorch's own context managers,
between their "set" and their "try": `Optimizer.step` turns grad off and back on around the
update, `torch.autocast` sets its flag, dtype, cache and nesting on enter and undoes them on exit.
Cut there, the mode stays. Measured by stopping the solution's training loop at random times on
CPU: of 300 stops, one left grad off (the next cell's `backward()` raised), some left the CPU
autocast dtype at float32, and some left autocast nested, so its weight-cast cache is never cleared
and later steps train on stale casts (the losses stop moving). With autocast left on, a correct
`train_steps` graded afterwards in that process failed `fp32_losses` and `amp_saves_memory`.

Two places put modes back. The limit's alarm (toplevel.py) restores the modes as they were when
the cut cell or call started: the grader caused the mess, so the cells after it run as in Jupyter,
where what a finished cell set on purpose (`torch.set_grad_enabled(False)` in a demo) stays. And
each check starts from the modes of a fresh process (runner.py's reset, which already did so for
grad and the default dtype): the checks grade functions, not what the top level left behind.
The float32 matmul precision is one of them: a learner module that sets
`torch.set_float32_matmul_precision("high")` (or `torch.backends.cuda.matmul.allow_tf32 = True`, or
PyTorch 2.9's `torch.backends.cuda.matmul.fp32_precision = "tf32"`) at its top, as Lightning tells
people to, made an H200 multiply in TF32 (10-bit mantissa) in every check, where the judge's
reference is FP32: a correct ex4 lost 8 points with each of the three (docs/gpu-validation.md). It
is put back through the legacy setter: in PyTorch >= 2.9 that one sets both the legacy and the new
flags, while setting the new ones after a learner used the legacy API leaves torch in a "mix of the
legacy and new APIs" state whose next legacy read raises (measured on 2.13 for each of the four ways
a learner can ask for TF32). When a learner's new-API setting makes the precision unreadable,
capture() records None and that one is left alone.
And a fresh process has no torch-function or dispatch mode on its stacks: `drop_modes()` takes off
whatever the learner's code left there (a `TorchFunctionMode` or `TorchDispatchMode` its top level
entered and never left, a `with torch.device("cuda"):` cut by a cell's limit, a mode a learner's
function entered and returned inside), with the default device. Measured before it: a logging mode a
top level entered stayed active through every check of a grading (7,830 calls); one that raised on
every torch function failed checks of a correct solution. Only at a check's start (runner.py's reset):
the alarm cannot drop modes, since a finished cell's `torch.set_default_device` is a mode too.
Not covered: inference mode (no public setter for its state); nothing in the lesson uses it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

AUTOCAST_DEVICES = ("cpu", "cuda", "mps")
# What capture() and restore() call: PyTorch >= 2.4 has all of them (the per-device autocast ones are new).
_API = ("is_grad_enabled", "get_default_dtype", "is_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
        "is_autocast_cache_enabled", "set_autocast_cache_enabled", "autocast_increment_nesting",
        "autocast_decrement_nesting", "clear_autocast_cache", "get_float32_matmul_precision",
        "set_float32_matmul_precision")


@dataclass(frozen=True)
class TorchModes:
    grad_enabled: bool
    default_dtype: Any  # a torch.dtype
    autocast: tuple[tuple[str, bool, Any], ...]  # (device type, enabled, dtype)
    autocast_cache: bool
    autocast_nesting: int
    matmul_precision: str | None  # "highest", "high" or "medium"; None when PyTorch refuses to say (see above)


def capture() -> TorchModes | None:
    """This thread's modes now; None when torch is not imported (nothing to put back)."""
    torch = sys.modules.get("torch")
    if torch is None or not all(hasattr(torch, name) for name in _API):  # absent, half imported, or older
        return None
    autocast = []
    for device in AUTOCAST_DEVICES:
        try:
            autocast.append((device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)))
        except (RuntimeError, TypeError):  # a device type this build does not know
            continue
    return TorchModes(torch.is_grad_enabled(), torch.get_default_dtype(), tuple(autocast),
                      torch.is_autocast_cache_enabled(), _nesting(torch), _matmul_precision(torch))


def restore(modes: TorchModes | None) -> None:
    """Put the modes back as ``capture()`` saw them."""
    torch = sys.modules.get("torch")
    if modes is None or torch is None:
        return
    torch.set_grad_enabled(modes.grad_enabled)
    torch.set_default_dtype(modes.default_dtype)
    for device, enabled, dtype in modes.autocast:
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(modes.autocast_cache)
    nesting = _nesting(torch)
    while nesting > modes.autocast_nesting:
        nesting = torch.autocast_decrement_nesting()
    while nesting < modes.autocast_nesting:
        nesting = torch.autocast_increment_nesting()
    if nesting == 0:
        torch.clear_autocast_cache()  # casts cached by an autocast region that never closed
    if modes.matmul_precision is not None:
        torch.set_float32_matmul_precision(modes.matmul_precision)


def _nesting(torch: Any) -> int:
    """How deep in autocast regions this thread is. PyTorch has no getter: step up, read, step back."""
    nesting = int(torch.autocast_increment_nesting()) - 1
    torch.autocast_decrement_nesting()
    return nesting


def _matmul_precision(torch: Any) -> str | None:
    """The float32 matmul precision, or None when the new per-backend API left the legacy one unreadable."""
    try:
        return str(torch.get_float32_matmul_precision())
    except RuntimeError:  # "PyTorch is checking the matmul precision without a specific backend..."
        return None


def drop_modes() -> None:
    """Take every torch-function and dispatch mode off this thread's stacks and unset the default device,
    as in a fresh process. Call it with none of the grader's own modes entered (no session open)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    from grader.reference import modes

    for _ in range(2):  # unsetting the default device may push back a `with torch.device` it had found under it
        modes.clear()
        if hasattr(torch, "set_default_device"):
            torch.set_default_device(None)  # against an empty stack: its DeviceContext's exit asserts nothing

