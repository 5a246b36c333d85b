# mistake: calls x.to(device) without assigning the result, so x * 2 + 1 runs on the CPU
# fails: ex3.roundtrip_computes_on_device
# message: ex3.to_not_assigned
"""Bài tập 3, kiểu code trong bài học."""


def roundtrip(x, device):
    """CPU -> device -> x * 2 + 1 -> CPU."""
    x.to(device)
    x_gpu = x * 2 + 1
    x_back = x_gpu.cpu()
    return x_back.to(x.dtype)


def to_numpy(t):
    """Tensor -> NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
