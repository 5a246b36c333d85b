# mistake: describe_device treats every accelerator as CUDA ("if device.type != 'cpu'"), so an Apple GPU is described with torch.cuda, which a Mac does not have
# fails: ex1.describe_device_mps
# message: cuda_api_off_cuda
"""Bài tập 1 — Kiểm tra GPU, viết code device-agnostic.

Bài học: mục "Kiểm tra GPU" và "device-agnostic".
Viết hai hàm dưới đây, thay mỗi dòng `raise NotImplementedError` bằng code của bạn:

- `pick_device()`: chọn device theo thứ tự cuda → mps → cpu, như đoạn if/elif/else
  trong bài.
- `describe_device(device)`: trả về một dict mô tả device — tên GPU, số GPU, compute
  capability, tổng bộ nhớ — đúng những gì bạn in ra ở bước 1 của phần "Bài tập"
  (`torch.cuda.get_device_name(0)`, `torch.cuda.get_device_properties(0)`).

Code phải chạy được trên mọi máy: Colab / Kaggle (CUDA), MacBook (MPS) và máy chỉ có
CPU.

Exercise 1 — Checking the GPU, writing device-agnostic code.

Lesson sections: "Kiểm tra GPU" (checking the GPU) and "device-agnostic".
Write the two functions below, replacing each `raise NotImplementedError` line:

- `pick_device()`: pick the device in the order cuda → mps → cpu, like the lesson's
  if/elif/else chain.
- `describe_device(device)`: return a dict describing the device — GPU name, number of
  GPUs, compute capability, total memory — the things you print in step 1 of the
  exercises (`torch.cuda.get_device_name(0)`, `torch.cuda.get_device_properties(0)`).

The code must run on any machine: Colab / Kaggle (CUDA), a MacBook (MPS), CPU only.
"""

import platform

import torch


def pick_device() -> torch.device:
    """Chọn device để chạy code.

    Trả về `torch.device("cuda")` nếu `torch.cuda.is_available()`; nếu không thì
    `torch.device("mps")` nếu `torch.backends.mps.is_available()`; còn lại
    `torch.device("cpu")`. Phải trả về một đối tượng `torch.device`, không phải str.

    Pick the device to run on.

    Returns `torch.device("cuda")` if `torch.cuda.is_available()`; otherwise
    `torch.device("mps")` if `torch.backends.mps.is_available()`; otherwise
    `torch.device("cpu")`. Must return a `torch.device` object, not a str.
    """
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> dict:
    """Mô tả `device` bằng một dict có đúng 5 khóa sau (không thừa, không thiếu):

    - "type": str, chính là `device.type` ("cuda", "mps" hoặc "cpu").
    - "name": str khác rỗng; với cuda dùng `torch.cuda.get_device_name(device)`.
    - "count": int; với cuda là `torch.cuda.device_count()`, device khác là 1.
    - "capability": với cuda là tuple `(major, minor)` gồm hai số int
      (`torch.cuda.get_device_capability(device)`); device khác là None.
    - "total_memory_bytes": với cuda là int
      `torch.cuda.get_device_properties(device).total_memory`; device khác là None.

    Describe `device` as a dict with exactly these five keys (no more, no fewer):

    - "type": str, the same as `device.type` ("cuda", "mps" or "cpu").
    - "name": a non-empty str; for cuda use `torch.cuda.get_device_name(device)`.
    - "count": int; for cuda `torch.cuda.device_count()`, 1 for any other device.
    - "capability": for cuda a `(major, minor)` tuple of two ints
      (`torch.cuda.get_device_capability(device)`); None for any other device.
    - "total_memory_bytes": for cuda the int
      `torch.cuda.get_device_properties(device).total_memory`; None otherwise.
    """
    if device.type != "cpu":  # "a GPU": but an Apple GPU is not CUDA
        return {
            "type": device.type,
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
            "capability": torch.cuda.get_device_capability(device),
            "total_memory_bytes": torch.cuda.get_device_properties(device).total_memory,
        }
    name = platform.processor() or platform.machine() or "cpu"
    return {
        "type": device.type,
        "name": name,
        "count": 1,
        "capability": None,
        "total_memory_bytes": None,
    }
