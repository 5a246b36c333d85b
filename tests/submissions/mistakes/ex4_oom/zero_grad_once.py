# mistake: zeroes the gradients once before the loop, so a try that ran out of memory midway leaves its micro-batches' gradients in the step
# fails: ex4.backoff_matches_full_batch
# message: ex4.grads_not_full_batch
"""Bài tập 4 — Tự gây Out of Memory (OOM), bắt lỗi và dọn dẹp.

Bài học: mục "OOM" (CUDA Out of Memory), `empty_cache` và gradient accumulation.

- `fill_until_oom(device, chunk_mb)`: như bước 4 của phần "Bài tập" — cấp phát tensor
  liên tục cho đến khi gặp `torch.OutOfMemoryError`, in bộ nhớ đang cấp phát, rồi dọn
  (`del` các tensor, sau đó `empty_cache()`).
- `train_step_with_backoff(...)`: một bước train chịu được OOM — khi hết bộ nhớ thì
  chia đôi micro-batch và dùng gradient accumulation.

Chỉ chạy `fill_until_oom` trên GPU (Colab / Kaggle): trên CPU máy sẽ hết RAM thật và
có thể treo. Grader tự đặt giới hạn bộ nhớ khi chấm trên CPU.

Exercise 4 — Running out of memory (OOM) on purpose, catching it, cleaning up.

Lesson sections: "OOM" (CUDA out of memory), `empty_cache` and gradient accumulation.

- `fill_until_oom(device, chunk_mb)`: like step 4 of the exercises — keep allocating
  tensors until `torch.OutOfMemoryError`, print the allocated memory, then clean up
  (`del` the tensors, then `empty_cache()`).
- `train_step_with_backoff(...)`: a training step that survives OOM — when memory runs
  out, halve the micro-batch and use gradient accumulation.

Run `fill_until_oom` on a GPU only (Colab / Kaggle): on a CPU it really exhausts RAM
and may hang the machine. The grader sets its own memory limit when grading on a CPU.
"""

from collections.abc import Callable

import torch
from torch import nn

# torch >= 2.5 names the device-agnostic class; older releases only the CUDA alias.
_OutOfMemoryError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def _allocated_bytes(device: torch.device, chunks: list[torch.Tensor]) -> int:
    """Bytes held by live tensors on `device` right now."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    if device.type == "mps":
        return torch.mps.current_allocated_memory()
    # The CPU has no caching allocator to ask: count what we hold ourselves.
    return sum(chunk.nbytes for chunk in chunks)


def _empty_cache(device: torch.device) -> None:
    """Hand the caching allocator's unused blocks back to the driver."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def _accumulate_gradients(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    micro: int,
) -> float:
    """Forward + backward in chunks of `micro` samples; return the batch's mean loss."""
    total_loss = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
        # loss_fn averages over its chunk: weighting each chunk by its share of the
        # batch makes the summed gradients equal the whole batch's, even when the
        # last chunk is smaller.
        loss = loss_fn(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total_loss += loss.item()
    return total_loss


def fill_until_oom(device: torch.device, chunk_mb: int = 64) -> int:
    """Cấp phát liên tục các khối float32 `chunk_mb` MiB trên `device` cho tới khi OOM.

    - Giữ lại MỌI khối đã cấp phát (ví dụ trong một list) để bộ nhớ thật sự đầy.
    - Bắt `torch.OutOfMemoryError` (chính là `torch.cuda.OutOfMemoryError`).
    - Khi bắt được: in ra bộ nhớ đang cấp phát lúc đó (cuda:
      `torch.cuda.memory_allocated()`).
    - Giải phóng hết: bỏ mọi tham chiếu tới các khối (`del` / `clear()`), SAU ĐÓ mới
      gọi `empty_cache()`.
    - Trả về số khối đã cấp phát thành công (int).

    Keep allocating `chunk_mb`-MiB float32 tensors on `device` until memory runs out.

    - Keep EVERY chunk alive (for example in a list) so that memory really fills up.
    - Catch `torch.OutOfMemoryError` (the same class as `torch.cuda.OutOfMemoryError`).
    - When caught: print the memory allocated at that moment (cuda:
      `torch.cuda.memory_allocated()`).
    - Release everything: drop every reference to the chunks (`del` / `clear()`), THEN
      call `empty_cache()`.
    - Return how many chunks were allocated successfully (int).
    """
    n_elems = chunk_mb * 1024 * 1024 // 4  # float32 takes 4 bytes
    chunks: list[torch.Tensor] = []
    while True:
        try:
            chunks.append(torch.empty(n_elems, dtype=torch.float32, device=device))
        except _OutOfMemoryError:
            break
    count = len(chunks)
    allocated = _allocated_bytes(device, chunks)
    print(f"OOM after {count} chunks: {allocated / 2**20:.1f} MiB allocated")
    # Drop the references first: empty_cache() can only return blocks nobody holds.
    chunks.clear()
    del chunks
    _empty_cache(device)
    return count


def train_step_with_backoff(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    optimizer: torch.optim.Optimizer,
) -> tuple[float, int]:
    """Một bước optimizer trên CẢ batch, tự giảm micro-batch khi hết bộ nhớ.

    - Thử trước với micro-batch bằng cả batch (`len(inputs)`).
    - Nếu gặp `torch.OutOfMemoryError`: giải phóng những gì lần thử hỏng còn giữ
      (loss, output, gradient — `optimizer.zero_grad()`, `empty_cache()`), chia đôi
      micro-batch rồi thử lại với gradient accumulation.
    - Gradient cuối cùng phải bằng gradient của cả batch (`loss_fn` lấy trung bình):
      nhân loss mỗi micro-batch với `len(micro-batch) / len(inputs)`.
    - Gọi `optimizer.step()` đúng một lần, sau khi mọi micro-batch đã chạy xong.
    - Trả về `(loss trung bình trên cả batch — float, kích thước micro-batch đã dùng)`.

    One optimizer step over the WHOLE batch, shrinking the micro-batch on OOM.

    - First try with the micro-batch equal to the whole batch (`len(inputs)`).
    - On `torch.OutOfMemoryError`: free what the failed try still holds (loss, output,
      gradients — `optimizer.zero_grad()`, `empty_cache()`), halve the micro-batch and
      retry with gradient accumulation.
    - The final gradients must equal those of the whole batch (`loss_fn` takes the
      mean): scale each micro-batch loss by `len(micro_batch) / len(inputs)`.
    - Call `optimizer.step()` exactly once, after every micro-batch has run.
    - Return `(mean loss over the whole batch as a float, micro-batch size used)`.
    """
    micro = len(inputs)
    optimizer.zero_grad(set_to_none=True)
    while True:
        try:
            total_loss = _accumulate_gradients(model, inputs, targets, loss_fn, micro)
            break
        except _OutOfMemoryError:
            if micro == 1:
                raise
        _empty_cache(inputs.device)  # (the failed try's gradients are kept)
        micro //= 2
    optimizer.step()
    return total_loss, micro
