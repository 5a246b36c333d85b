"""Storages on the emulated device: what a device tensor's storage says, and storages made there.

A storage is not a tensor: no mode sees it. PyTorch writes in Python, over its C storage objects,
everything a device means for one (torch/storage.py, torch/_utils.py ``_to``,
torch/serialization.py), and all of it asks two things of the C layer: a storage's ``device``, and
a storage built with ``torch.UntypedStorage(nbytes, device=...)``. On this CPU build the first is
always the CPU and the second refuses "cuda" and "mps" outright. So, on a stand-in, ``torch.load(f,
map_location="cuda")`` raised "Storage device not recognized: cuda" (the lesson's own checkpoint
idiom, and the PyTorch tutorial's "save on CPU, load on GPU"), ``storage.cuda()`` and
``torch.UntypedStorage(n, device="cuda")`` too, and ``torch.save`` tagged a device tensor's storage
"cpu", so that loading it back gave a CPU tensor where a GPU gives a device one.

For the length of a stand-in's session, ``device_storages`` answers both as the emulated machine does:

* a storage the stand-in holds as the device's (grader/emulation/standin.py: a device tensor's) says
  ``cuda:0`` (``mps:0``); so do ``is_cuda``, a TypedStorage's ``device``, and the location tag
  ``torch.save`` writes (``cuda:0``, read back by ``torch.load`` onto the device);
* ``torch.UntypedStorage(n, device=<the stand-in's kind>)`` is a device tensor's storage, made
  through the stand-in's dispatcher: its bytes count toward the device's memory and budget, and the
  ``copy_`` that fills it (``torch.load``, ``storage.cuda()``, ``clone()``) is a transfer.

Everything else goes to PyTorch's own C layer unchanged: a CPU storage, the meta device, another
accelerator (refused as this build refuses it, as a machine without it would).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import torch

from grader.emulation.patching import Injected

_STORAGE = torch.UntypedStorage
_REAL_DEVICE = torch._C.StorageBase.__dict__["device"]  # the C getter: the real (CPU) device
_REAL_NEW = torch._C.StorageBase.__new__


class Holder(Protocol):
    """What storages need of the stand-in."""

    @property
    def kind(self) -> str: ...

    @property
    def device(self) -> torch.device:
        """``torch.device(kind)``: what its factories are asked for."""

    @property
    def index0(self) -> torch.device:
        """``torch.device(kind, 0)``: what its storages report."""

    def holds(self, storage: torch.UntypedStorage) -> bool: ...

    def names(self, device: Any) -> bool: ...


@contextlib.contextmanager
def device_storages(holder: Holder) -> Iterator[None]:
    """``torch.UntypedStorage``'s device and constructor as ``holder``'s machine has them, until the end."""
    def device(storage: torch.UntypedStorage) -> torch.device:
        real: torch.device = _REAL_DEVICE.__get__(storage)
        return holder.index0 if real.type == "cpu" and holder.holds(storage) else real

    def new(cls: type, *args: Any, **kwargs: Any) -> Any:
        wanted = kwargs.get("device")
        if wanted is not None and set(kwargs) == {"device"} and len(args) <= 1 and holder.names(wanted):
            return _made_on(holder.device, args[0] if args else 0)
        return _REAL_NEW(cls, *args, **kwargs)

    injected = Injected()  # put back even where the learner's code deleted them
    injected.set(_STORAGE, "device", property(device))
    injected.set(_STORAGE, "__new__", staticmethod(new))
    try:
        yield
    finally:
        injected.undo()


def _made_on(device: torch.device, size_or_data: int | Sequence[int]) -> torch.UntypedStorage:
    """A storage of ``size_or_data`` bytes (or holding those bytes) made on the device, as a device
    tensor's: through the stand-in's dispatcher, which places and counts it."""
    if isinstance(size_or_data, int):
        made = torch.empty(size_or_data, dtype=torch.uint8, device=device)
    else:
        made = torch.tensor(list(size_or_data), dtype=torch.uint8, device=device)
    return made.untyped_storage()
