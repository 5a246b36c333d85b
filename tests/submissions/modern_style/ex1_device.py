"""Bài tập 1, modern style: `torch.accelerator` (torch >= 2.6), with a fallback."""

import platform

import torch


def _accelerator_type() -> str | None:
    """The type of this machine's accelerator ("cuda", "mps", ...), or None."""
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6
    if accelerator is not None:
        if not accelerator.is_available():
            return None
        return accelerator.current_accelerator().type
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return None


def pick_device() -> torch.device:
    """cuda → mps → cpu. A build has one accelerator at most: ask which one it is."""
    kind = _accelerator_type()
    # The course knows cuda and mps only; any other accelerator (xpu, ...) -> cpu.
    return torch.device(kind if kind in ("cuda", "mps") else "cpu")


def describe_device(device: torch.device) -> dict[str, object]:
    """type, name, count, capability, total_memory_bytes."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "type": device.type,
            "name": props.name,
            "count": torch.cuda.device_count(),
            "capability": (props.major, props.minor),
            "total_memory_bytes": props.total_memory,
        }
    names = {"mps": "Apple Silicon GPU (MPS)", "cpu": platform.machine() or "CPU"}
    return {
        "type": device.type,
        "name": names.get(device.type, device.type),
        "count": 1,
        "capability": None,
        "total_memory_bytes": None,
    }
