"""Exercise 1's helpers: pick_device() in a simulated machine, describe_device()'s fields, and
the messages several checks share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from grader.judge.api import LearnerModule, RemoteWorld, fail, type_name

KEYS = {"type", "name", "count", "capability", "total_memory_bytes"}
MESSAGES = {
    "ex1.not_a_device": {
        "vi": "pick_device() phải trả về torch.device, không phải {got} ({value}). Bọc lại: torch.device(\"cuda\").",
        "en": "pick_device() must return a torch.device, not {got} ({value}). Wrap it: torch.device(\"cuda\").",
    },
    "ex1.wrong_order": {
        "vi": "Với {situation} pick_device() trả về {got}, cần {expected}: thứ tự là cuda, rồi mps, rồi cpu.",
        "en": "With {situation} pick_device() returned {got}, expected {expected}: the order is cuda, then mps, "
              "then cpu.",
    },
    "ex1.describe_not_dict": {
        "vi": "describe_device() phải trả về dict, không phải {got}.",
        "en": "describe_device() must return a dict, not {got}.",
    },
    "ex1.describe_field": {
        "vi": "describe_device(): `{key}` là {got}, cần {expected} cho device này.",
        "en": "describe_device(): `{key}` is {got}, expected {expected} for this device.",
    },
}


def as_device(value: object) -> torch.device:
    if not isinstance(value, torch.device):
        fail("ex1.not_a_device", got=type_name(value), value=repr(value)[:60])
    return value


def pick(ex1: LearnerModule, machine: Callable[..., RemoteWorld], *, cuda: bool, mps: bool,
         mps_built: bool = False) -> tuple[torch.device, torch.device, str]:
    """pick_device() on a machine with these devices: (what it returned, what it should, in words)."""
    with machine(cuda=cuda, mps=mps, mps_built=mps_built) as world:
        returned = ex1.pick_device()
    return as_device(returned), world.expected, world.situation


def expect(info: Any, key: str, ok: bool, expected: object) -> None:
    if not ok:
        fail("ex1.describe_field", key=key, got=repr(info.get(key))[:60], expected=expected)


def check_common(info: Any, device: torch.device) -> None:
    """A dict whose type is the device's and whose name is a non-empty string."""
    if not isinstance(info, dict):
        fail("ex1.describe_not_dict", got=type_name(info))
    expect(info, "type", info.get("type") == device.type, repr(device.type))
    name = info.get("name")
    expect(info, "name", isinstance(name, str) and bool(name.strip()), "a non-empty str")


def check_not_cuda(info: Any) -> None:
    """What the contract says of any device but CUDA: one of it, no capability, no total memory."""
    expect(info, "count", info.get("count") == 1 and type(info.get("count")) is int, "1 (int)")
    expect(info, "capability", info.get("capability") is None, "None")
    expect(info, "total_memory_bytes", info.get("total_memory_bytes") is None, "None")
