"""fill_until_oom under a memory budget that makes it end in seconds: on CUDA (its stand-in, or a
real GPU under a memory cap) and on MPS's stand-in. A real Apple GPU reports running out of memory
as a plain RuntimeError ("MPS backend out of memory"), which the contract's `except
torch.OutOfMemoryError` cannot catch, so it could not grade this fairly: there too the checks take
the stand-in, whose OOM is typed for them, so that what comes *after* the OOM — emptying the right
device's cache (torch.mps.empty_cache() on a Mac) — is graded on every kind."""

from __future__ import annotations

from collections.abc import Callable

from grader.judge.api import Device, LearnerModule, LearnerRaised, MiB, TimedOut, cut, fail
from grader.reference.draws import Draw


def fill_budget(draw: Draw) -> int:
    """This grading's budget: room for ``draw.chunks_that_fit`` chunks and a half, so that the next
    allocation fails on the stand-in (5-11 chunks of 4 or 8 MiB: the earlier fixed 8 of 4 MiB, which
    a public message printed, is one draw among 14). Under a real GPU's memory cap the caching
    allocator reserves whole segments, so there the count is measured (``dev.fill_capacity``)."""
    return int((draw.chunks_that_fit + 0.5) * draw.chunk_mb * MiB)
MESSAGES = {
    "ex4.fill_never_full": {
        "vi": "fill_until_oom() vẫn còn cấp phát khi hết giờ của check, dù bộ nhớ chỉ đủ cho vài khối: nó phải dừng "
              "ở lỗi hết bộ nhớ đầu tiên — giữ mọi khối còn sống (chunks.append(...)) để bộ nhớ thật sự đầy, và "
              "break khỏi vòng lặp khi bắt được lỗi.",
        "en": "fill_until_oom() was still allocating when the check's time ran out, though memory holds only a few "
              "chunks: it must stop at the first out-of-memory error — keep every chunk alive (chunks.append(...)) "
              "so that memory really fills up, and break out of the loop when the error comes.",
    },
    "ex4.oom_not_caught": {
        "vi": "Lỗi hết bộ nhớ thoát ra khỏi fill_until_oom(): bắt torch.OutOfMemoryError (torch.cuda.OutOfMemoryError) "
              "quanh vòng lặp cấp phát. ({error})",
        "en": "The out-of-memory error escaped fill_until_oom(): catch torch.OutOfMemoryError "
              "(torch.cuda.OutOfMemoryError) around the allocation loop. ({error})",
    },
}


def fill_devices(devices: Callable[..., list[Device]], draw: Draw) -> list[Device]:
    """The devices fill_until_oom is graded on, each under this grading's ``fill_budget``."""
    return devices("cuda", "mps", budget_bytes=fill_budget(draw), typed_oom=True, real_ok=lambda mode: mode != "mps")


def is_oom(raised: LearnerRaised) -> bool:
    """The learner's code let an out-of-memory error escape."""
    return names_oom(raised.exc_text)


def names_oom(exc_text: str) -> bool:
    """``exc_text`` ("Type: message") is an out-of-memory error (CUDA's class, MPS's RuntimeError)."""
    return "OutOfMemoryError" in exc_text or "out of memory" in exc_text


def run_fill(ex4: LearnerModule, dev: Device, draw: Draw) -> tuple[object, int]:
    """Call fill_until_oom (inside ``with dev:``); return its result and the live bytes once it returned."""
    baseline = dev.live_bytes()
    try:
        count = ex4.fill_until_oom(dev.device, chunk_mb=draw.chunk_mb)
    except LearnerRaised as raised:
        if is_oom(raised):
            fail("ex4.oom_not_caught", device=dev.label, error=cut(raised.exc_text, 160))
        raise
    except TimedOut:
        # Under this budget the loop meets its out-of-memory error within a dozen chunks: one still
        # running at the check's limit never kept them (a name rebound frees the last) or never left.
        fail("ex4.fill_never_full", device=dev.label)
    return count, dev.live_bytes() - baseline
