"""Bài tập 3, viết theo đúng kiểu code trong bài học (lesson style)."""


def roundtrip(x, device):
    """CPU -> device -> x * 2 + 1 -> CPU."""
    x_gpu = x.to(device)  # .to() không in-place — phải gán lại
    x_gpu = x_gpu * 2 + 1
    x_back = x_gpu.cpu()
    return x_back.to(x.dtype)


def to_numpy(t):
    """Tensor -> NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
