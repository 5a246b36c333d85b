# mistake: computes on the device, then copies the result back into the caller's x (x.copy_(...)) and returns x, changing the input
# fails: ex3.roundtrip_input_unchanged
# message: ex3.input_modified
"""Bài tập 3, kiểu code trong bài học."""


def roundtrip(x, device):
    """CPU -> device -> x * 2 + 1 -> CPU."""
    x_gpu = x.to(device)
    x_gpu = x_gpu * 2 + 1
    x.copy_(x_gpu)  # đưa kết quả về lại CPU
    return x


def to_numpy(t):
    """Tensor -> NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
