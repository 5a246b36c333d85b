# mistake: moves x to the device the lesson's block chose at the top of the file, not to the `device` it is handed: right for the machine's own device, but handed the CPU on a GPU it still computes on the GPU
# fails: ex3.roundtrip_computes_on_device
# message: ex3.device_argument_ignored
"""Bài tập 3, kiểu code trong bài học: device chọn một lần ở đầu file."""

import torch

if torch.cuda.is_available():
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")


def roundtrip(x, target_device):
    """CPU -> device -> x * 2 + 1 -> CPU."""
    x_dev = x.to(device)
    y = x_dev * 2 + 1
    return y.to("cpu", x.dtype)


def to_numpy(t):
    """Tensor -> NumPy (NumPy chỉ ở CPU)."""
    return t.detach().cpu().numpy()
