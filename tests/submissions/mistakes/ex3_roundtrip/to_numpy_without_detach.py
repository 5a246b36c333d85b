# mistake: to_numpy calls t.cpu().numpy() without .detach(), which fails for a tensor that requires grad
# fails: ex3.to_numpy_grad_and_device
# message: ex3.numpy_requires_grad
"""Bài tập 3, kiểu code trong bài học."""


def roundtrip(x, device):
    """CPU -> device -> x * 2 + 1 -> CPU."""
    x_gpu = x.to(device)  # .to() không in-place — phải gán lại
    x_gpu = x_gpu * 2 + 1
    x_back = x_gpu.cpu()
    return x_back.to(x.dtype)


def to_numpy(t):
    """Tensor -> NumPy (NumPy chỉ ở CPU)."""
    return t.cpu().numpy()
