# mistake: returns milliseconds instead of seconds
# fails: ex2.time_matmul_returns_seconds, ex2.returns_mean_not_total
# message: ex2.implausible_seconds
"""Bài tập 2 — Speed test matmul CPU vs GPU, đo thời gian cho đúng.

Bài học: mục "Speed test" và "synchronize" (kèm warm-up).
Phép tính trên GPU chạy bất đồng bộ: `a @ b` chỉ đưa kernel vào hàng đợi rồi trả về
ngay. Vì vậy phải warm-up một lần, rồi gọi synchronize trước khi bắt đầu bấm giờ và
trước khi dừng bấm giờ — nếu không, bạn chỉ đo được thời gian xếp hàng kernel.

- `time_matmul(n, device, repeats)`: thời gian trung bình của một phép nhân n×n @ n×n.
- `speedup(n, device, repeats)`: device nhanh hơn CPU bao nhiêu lần.
- `SMALL_N_ANSWER`: trả lời câu hỏi trắc nghiệm bên dưới bằng một chữ cái.

Thử N = 5000 rồi N = 500 (hoặc 100) trên Colab để thấy khác biệt.

Exercise 2 — CPU vs GPU matmul speed test, timed honestly.

Lesson sections: "Speed test" and "synchronize" (with a warm-up).
GPU work is asynchronous: `a @ b` only queues a kernel and returns at once. So run one
warm-up, then synchronize before the clock starts and before it stops — otherwise you
only measure how long it took to queue the kernel.

- `time_matmul(n, device, repeats)`: mean time of one n×n @ n×n matmul.
- `speedup(n, device, repeats)`: how many times faster the device is than the CPU.
- `SMALL_N_ANSWER`: answer the multiple-choice question below with one letter.

Try N = 5000 and then N = 500 (or 100) on Colab to see the difference.
"""

import time

import torch


def _synchronize(device: torch.device) -> None:
    """Wait until every kernel queued on `device` has finished (no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def time_matmul(n: int, device: torch.device, repeats: int = 5) -> float:
    """Thời gian trung bình (giây) của MỘT phép nhân ma trận n×n @ n×n kiểu float32.

    Quy tắc:
    - Tạo hai tensor float32 trực tiếp trên `device`
      (`torch.randn(n, n, device=device)`), không tạo trên CPU rồi mới `.to()`.
    - Chạy một phép nhân warm-up trước khi bắt đầu bấm giờ.
    - Đồng bộ device trước khi bắt đầu và trước khi dừng bấm giờ (cuda:
      `torch.cuda.synchronize()`, mps: `torch.mps.synchronize()`; CPU không cần).
    - Nhân `repeats` lần, trả về thời gian trung bình của một lần, kiểu float.
    Dùng `torch.utils.benchmark.Timer` cũng được.

    Mean time in seconds of ONE n×n @ n×n float32 matrix multiplication.

    Rules:
    - Create both float32 tensors directly on `device`
      (`torch.randn(n, n, device=device)`), not on the CPU followed by `.to()`.
    - Run one warm-up matmul before the clock starts.
    - Synchronize the device before the clock starts and before it stops (cuda:
      `torch.cuda.synchronize()`, mps: `torch.mps.synchronize()`; the CPU needs none).
    - Multiply `repeats` times and return the mean time of one matmul as a float.
    `torch.utils.benchmark.Timer` is fine too.
    """
    a = torch.randn(n, n, device=device, dtype=torch.float32)
    b = torch.randn(n, n, device=device, dtype=torch.float32)
    _ = a @ b  # warm-up: the first call pays for library loading and autotuning
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        _ = a @ b
    _synchronize(device)  # a @ b only queues the kernel: wait for it to finish
    return (time.perf_counter() - start) / repeats * 1000  # in ms


def speedup(n: int, device: torch.device, repeats: int = 3) -> float:
    """Device nhanh hơn CPU bao nhiêu lần với ma trận n×n.

    Trả về `time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device,
    repeats)`: lớn hơn 1 nghĩa là `device` nhanh hơn CPU.

    How many times faster `device` is than the CPU for n×n matrices.

    Returns `time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device,
    repeats)`: above 1 means `device` is faster than the CPU.
    """
    cpu_seconds = time_matmul(n, torch.device("cpu"), repeats)
    return cpu_seconds / time_matmul(n, device, repeats)


# Câu hỏi: Vì sao với N = 100, GPU thường chậm hơn CPU?
#   A) mỗi core GPU chậm hơn một core CPU
#   B) overhead khởi chạy kernel (kernel launch) và truyền dữ liệu host↔device lấn át
#      khối lượng tính toán quá nhỏ như vậy
#   C) PyTorch không dùng cuBLAS cho ma trận nhỏ
#   D) GIL của Python chặn GPU
# Question: Why is a GPU often slower than the CPU for N = 100?
#   A) each GPU core is slower than a CPU core
#   B) kernel-launch and host↔device transfer overhead dominate such a small amount
#      of work
#   C) PyTorch does not use cuBLAS for small matrices
#   D) the Python GIL blocks the GPU
# Điền MỘT chữ cái: "A", "B", "C" hoặc "D".  Put ONE letter: "A", "B", "C" or "D".
SMALL_N_ANSWER = "B"
