# mistake: modifies the caller's x in place (x.mul_(2); x.add_(1)) before moving it, so the input is changed (and the arithmetic runs on the CPU)
# fails: ex3.roundtrip_input_unchanged, ex3.roundtrip_computes_on_device
# message: ex3.input_modified
"""Bài tập 3, kiểu code trong bài học."""


def roundtrip(x, device):
    """CPU -> device -> x * 2 + 1 -> CPU."""
    x.mul_(2)
    x.add_(1)
    return x.to(device).cpu()


def to_numpy(t):
    """Tensor -> NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
