# mistake: brings the result back to the CPU only when the device is CUDA, as code written for a Colab GPU does
# fails: ex3.roundtrip_result_on_cpu, ex3.roundtrip_returns_cpu
# message: ex3.result_not_on_cpu
"""Bài tập 3 — CPU → device → CPU (viết cho GPU của Colab)."""

import torch


def roundtrip(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Sang device, tính x * 2 + 1 ở đó, rồi về CPU. / To the device, compute there, back."""
    y = x.to(device) * 2 + 1
    if device.type == "cuda":  # an Apple GPU's result stays on "mps"
        y = y.cpu()
    return y


def to_numpy(t: torch.Tensor):
    """Sang NumPy. / To NumPy."""
    return t.detach().cpu().numpy()
