"""A top-level cell's large CPU product runs in blocks of rows (grader/learner/longcalls.py): the same
numbers, and a cell that cannot end in its time stops in its own process instead of being killed."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.learner.longcalls import MIN_ROWS, OutlastsCell, PartedProducts, _rows
from tests.conftest import Graded, course_with, folder_with, solution_text
from tests.test_modes import CountingCalls

SMALL_PART = 1e5  # FLOPs: makes the small products below run in parts


def parted(time_left: Callable[[], float] = lambda: math.inf,
           clock: Callable[[], float] | None = None) -> PartedProducts:
    if clock is None:
        return PartedProducts(time_left, part_flop=SMALL_PART)
    return PartedProducts(time_left, clock=clock, part_flop=SMALL_PART)


PRODUCTS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "a @ b": lambda a, b: a @ b,
    "torch.matmul": torch.matmul,
    "Tensor.matmul": torch.Tensor.matmul,
    "torch.mm": torch.mm,
    "Tensor.mm": torch.Tensor.mm,
}
SHAPES = {  # rows not a multiple of the block's: the last block takes the rest
    "square": ((2 * MIN_ROWS + 37, 300), (300, 300)),
    "wide": ((3 * MIN_ROWS + 1, 70), (70, 500)),
    "column": ((4 * MIN_ROWS - 1, 256), (256, 1)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64], ids=str)
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("name", PRODUCTS)
def test_a_product_in_blocks_is_the_whole_product_bit_for_bit(name: str, shapes: Any, dtype: torch.dtype) -> None:
    a, b = torch.randn(shapes[0], dtype=dtype), torch.randn(shapes[1], dtype=dtype)
    assert MIN_ROWS <= _rows(a, b, SMALL_PART) <= a.shape[0] // 2  # it does run in parts
    whole = PRODUCTS[name](a, b)
    with parted():
        parts = PRODUCTS[name](a, b)
    assert parts.dtype == whole.dtype and parts.shape == whole.shape
    assert torch.equal(parts, whole)


@pytest.mark.parametrize("batched", ["bmm", "3-D @ 2-D", "2-D @ 3-D", "broadcast batch"])
def test_batched_products_in_blocks_are_the_whole_product(batched: str) -> None:
    m = 2 * MIN_ROWS + 5
    a, b = {
        "bmm": (torch.randn(3, m, 40), torch.randn(3, 40, 50)),
        "3-D @ 2-D": (torch.randn(3, m, 40), torch.randn(40, 50)),
        "2-D @ 3-D": (torch.randn(m, 40), torch.randn(3, 40, 50)),
        "broadcast batch": (torch.randn(2, 1, m, 40), torch.randn(3, 40, 50)),
    }[batched]
    product = torch.bmm if batched == "bmm" else torch.matmul
    whole = product(a, b)
    with parted():
        parts = product(a, b)
    assert parts.shape == whole.shape and torch.equal(parts, whole)


def test_a_default_device_the_learner_set_does_not_move_a_cpu_product() -> None:
    """``torch.set_default_device("cuda")`` in a notebook makes factories build there; a product of two CPU
    tensors stays on the CPU, in blocks too (here the "meta" device stands for the GPU this machine lacks)."""
    a, b = torch.randn(3 * MIN_ROWS, 64), torch.randn(64, 64)
    with torch.device("meta"), parted():
        parts = a @ b
        assert torch.empty(1).device.type == "meta"  # the learner's default, still in force
    assert parts.device.type == "cpu" and torch.equal(parts, a @ b)


def test_what_a_block_cannot_be_cut_from_runs_whole_as_torch_answers() -> None:
    m = 3 * MIN_ROWS
    a, b = torch.randn(m, 64), torch.randn(64, 64)
    with parted():
        # a product whose gradient is wanted keeps its one node in the graph
        grad = (a.clone().requires_grad_() @ b)
        assert type(grad.grad_fn).__name__ == "MmBackward0"
        # out=, integers, a vector, shapes that do not fit: PyTorch's own answers and errors
        out = torch.empty(m, 64)
        assert torch.mm(a, b, out=out) is out
        ints = torch.ones(m, 64, dtype=torch.int64)
        assert torch.equal(ints @ ints.T[:, :64], torch.full((m, 64), 64))
        assert (a @ b[:, 0]).shape == (m,)
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            a @ torch.randn(65, 3)
        with pytest.raises(RuntimeError, match="must match"):
            torch.randn(2, m, 64) @ torch.randn(3, 64, 64)  # batches that do not broadcast
    for x, y in [(a.clone().requires_grad_(), b), (ints, ints.T), (a, b[:, 0]), (a.to_sparse(), b)]:
        assert _rows(x, y, SMALL_PART) == 0
    assert _rows(a[: 2 * MIN_ROWS - 1], b, SMALL_PART) == 0  # a second block would be thinner than MIN_ROWS


def test_blocks_whose_pace_cannot_end_in_the_cells_time_stop_the_cell() -> None:
    """A clock that reads one second more at each look: after the first block, the rest would take
    several seconds at that pace, with one second left — more than PACE_MARGIN times it."""
    ticks = itertools.count()
    a, b = torch.randn(5 * MIN_ROWS, 100), torch.randn(100, 100)
    with pytest.raises(OutlastsCell) as stopped, parted(lambda: 1.0, lambda: float(next(ticks))):
        a @ b
    assert "20% done after 1.0 s, about 4 s more at that pace with 1.0 s left" in stopped.value.why
    assert not isinstance(stopped.value, Exception)  # `except Exception` in the learner's code lets it through
    # the same pace with time enough left: the product ends, whole
    ticks = itertools.count()
    with parted(lambda: 100.0, lambda: float(next(ticks))):
        assert torch.equal(a @ b, torch.mm(a, b))


def test_the_cells_mode_leaves_modes_the_learners_cell_left_on_the_stack() -> None:
    learners = CountingCalls()
    mode = parted()
    mode.__enter__()
    learners.__enter__()  # entered in the cell and never left
    mode.__exit__(None, None, None)
    try:
        torch.ones(2) + 1
        assert learners.calls == 2
        assert torch._C._len_torch_function_stack() == 1
    finally:
        learners.__exit__(None, None, None)


def test_the_lessons_speed_test_at_the_top_level_stops_in_its_own_process(tmp_path: Path,
                                                                          grade_forked: Callable[..., Graded]) -> None:
    """The lesson's N = 10000 CPU matmul (2 TFLOP) in a cell with a 1 s limit: one C call, it kept the
    process past the limit and the grace until the parent killed it, and the report could only name the
    cell. In blocks, the cell stops inside its process: the report names the product's line, the
    cell's later definitions are made, and the next cell runs in the same process."""
    # torch.empty: the pages are the kernel's zeros, mapped as the product reads them. With two torch.ones
    # of 400 MB the test failed once in a fresh clone's `.ci/run` (its output lost); filling 800 MB under
    # the suite's load, past the 1 s limit before the product starts, is the likeliest cause.
    code = ("# %%\nimport torch\nN = 10000\na = torch.empty(N, N)\nb = torch.empty(N, N)\nc = a @ b\n"
            "def made_after_the_product():\n    return 1\n\n"
            "# %%\nprint('the next cell ran')\n\n# %%\n" + solution_text("ex1"))
    course = course_with(tmp_path, {"cell_timeout_s: 10": "cell_timeout_s: 1"})
    graded = grade_forked(folder_with(tmp_path, "speed_test", {"ex1_device": code}), "--course", str(course))
    report = graded.report
    assert graded.code == 0 and report is not None, graded.stderr
    [stop] = report["top_level"]
    assert stop["kind"] == "timeout" and stop["where"] == "ex1_device.py, cell 1, line 6", stop
    assert stop["kept"] == ["made_after_the_product"] and "1 s" in stop["message"]
    assert report["output"].count("the next cell ran") == 1
    assert report["exercises"]["ex1"]["status"] == "passed"
