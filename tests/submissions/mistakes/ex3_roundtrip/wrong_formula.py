# mistake: computes x * 2 + 2 instead of x * 2 + 1
# fails: ex3.roundtrip_values, ex3.roundtrip_keeps_dtype
# message: ex3.wrong_values
"""Bài tập 3 — Chuyển tensor CPU → device → CPU.

Bài học: mục "Di chuyển tensor" (`tensor.to()` không in-place, phải gán lại) và
"NumPy chỉ ở CPU" (phải `.cpu().numpy()`).
Như bước 3 của phần "Bài tập": lấy `x = torch.arange(10)`, chuyển sang device bằng
`.to(device)`, tính `x * 2 + 1` trên device, rồi chuyển kết quả về CPU.

- `roundtrip(x, device)`: làm đúng chuỗi trên và trả kết quả về CPU.
- `to_numpy(t)`: đổi một tensor bất kỳ (trên GPU, cần grad…) sang NumPy.

Exercise 3 — Moving a tensor CPU → device → CPU.

Lesson sections: moving tensors (`tensor.to()` is not in-place, assign the result)
and "NumPy chỉ ở CPU" (NumPy lives on the CPU only: `.cpu().numpy()`).
Like step 3 of the exercises: take `x = torch.arange(10)`, move it to the device with
`.to(device)`, compute `x * 2 + 1` on the device, then bring the result back.

- `roundtrip(x, device)`: do exactly that and return the result on the CPU.
- `to_numpy(t)`: turn any tensor (on a GPU, requiring grad, ...) into a NumPy array.
"""

import numpy as np
import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Chuyển `x` sang `device`, tính `x * 2 + 1` NGAY TRÊN đó, trả kết quả về CPU.

    - Phép `* 2 + 1` phải chạy trên `device`, không phải trên CPU.
    - Kết quả trả về nằm trên CPU và có cùng dtype với `x`.
    - Không được sửa `x`: `x` giữ nguyên giá trị và device ban đầu.
    Nhớ: `tensor.to(device)` không in-place — phải gán lại kết quả.

    Move `x` to `device`, compute `x * 2 + 1` THERE, return the result on the CPU.

    - The `* 2 + 1` must run on `device`, not on the CPU.
    - The returned tensor is on the CPU and has `x`'s dtype.
    - Do not modify `x`: it keeps its values and its device.
    Remember: `tensor.to(device)` is not in-place — assign its result.
    """
    y = x.to(device)  # a new tensor (or x itself when already there): x is untouched
    y = y * 2 + 2  # runs on `device`, and creates a new tensor
    return y.to("cpu", dtype=x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Đổi tensor `t` sang `numpy.ndarray` cùng giá trị.

    Phải chạy được với tensor trên mọi device (cpu, cuda, mps), kể cả tensor có
    `requires_grad=True`. NumPy chỉ sống trên CPU.

    Convert tensor `t` to a `numpy.ndarray` with the same values.

    Must work for a tensor on any device (cpu, cuda, mps), including one with
    `requires_grad=True`. NumPy lives on the CPU only.
    """
    return t.detach().cpu().numpy()
