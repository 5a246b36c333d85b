"""Random-number generators on the emulated device.

``torch.Generator(device="cuda")`` (a seeded generator for device sampling: diffusers' pipelines,
``torch.randn(..., generator=g, device=device)``) is refused by this CPU build ("Cannot get CUDA
generator without ATen_cuda library"), and a generator's device is checked in C++ against the
op's: a CPU generator handed to a device op, or a device generator to a CPU op (a DataLoader's
sampler given ``torch.Generator(device="cuda")``), raises PyTorch's "Expected a 'cuda' device type
for generator but found 'cpu'". Underneath, the stand-in's device ops are CPU ops, so neither
would happen there by itself. For a stand-in's session:

* ``torch.Generator`` (``generator_type_for``) makes a ``DeviceGenerator`` for the stand-in's kind
  and PyTorch's own generator for anything else; ``isinstance(g, torch.Generator)`` holds for both,
  and the class's own attributes (``torch.Generator.manual_seed``) are PyTorch's;
* a ``DeviceGenerator`` is a CPU generator (its states, seeds and draws are a CPU generator's, as
  the stand-in's default device generator's are) whose ``device`` is the device's;
* ``generator_mismatch`` says PyTorch's error for a call that hands a generator of one device to an
  op on the other (grader/emulation/surface.py asks it of every call that passes ``generator=``).
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from grader.emulation.patching import standing_for

_REAL = torch._C.Generator


class DeviceGenerator(_REAL):
    """A generator of the emulated device: a CPU generator that says it is the device's."""

    def __new__(cls, device: torch.device) -> DeviceGenerator:  # noqa: ARG004 - __init__ keeps it
        return super().__new__(cls)  # a CPU generator underneath (the C constructor reads no device)

    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self._device = device

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self._device


class Holder(Protocol):
    """What generators need of the stand-in."""

    @property
    def index0(self) -> torch.device: ...

    def names(self, device: Any) -> bool: ...


def generator_type_for(holder: Holder) -> type:
    """``torch.Generator`` as it is on a machine whose accelerator is ``holder``'s: ``device=`` that
    accelerator makes a ``DeviceGenerator``; real ``torch.Generator`` objects otherwise, and
    ``isinstance(x, torch.Generator)`` still holds (``standing_for``)."""

    def make(device: Any = "cpu") -> torch.Generator:
        return DeviceGenerator(holder.index0) if holder.names(device) else _REAL(device)

    return standing_for(_REAL, make)


def generator_mismatch(generator: Any, on_device: bool, kind: str) -> RuntimeError | None:
    """PyTorch's error for ``generator`` handed to an op on the device (``on_device``) or on the
    CPU, when the two differ; None when they agree (or ``generator`` is not a generator)."""
    if not isinstance(generator, _REAL):
        return None
    generator_on_device = isinstance(generator, DeviceGenerator)
    if generator_on_device == on_device:
        return None
    expected, found = (kind, "cpu") if on_device else ("cpu", kind)
    return RuntimeError(f"Expected a '{expected}' device type for generator but found '{found}'")
