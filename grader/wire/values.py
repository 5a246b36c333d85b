"""Tensors, arrays and devices as plain data, both ways across the judge ↔ learner boundary.

The learner process encodes what the learner's code returned without running any of it: a
``torch.Tensor`` subclass's ``__torch_function__``, a mode, an ``ndarray`` subclass's
``__array_function__`` or a property it overrides are all bypassed (torch function handling
disabled, base-class methods called directly), and what crosses is bytes + dtype + shape +
device tag. The judge rebuilds *base* ``torch.Tensor`` and ``numpy.ndarray`` objects from them,
so only honest values reach a comparison. A rebuilt tensor carries the device it was on in the
learner process as ``_grader_device`` (``device_of``): on a stand-in that is a tag the judge's
CPU tensors cannot otherwise hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy
import torch
from torch.utils._python_dispatch import _disable_current_modes

from grader.wire.codec import ProtocolError, bytes_field, bytes_of, cut, encode_plain

DEVICE_ATTR = "_grader_device"  # on a judge-side tensor: the device it lived on, learner side
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}
# Taken at import, before any session patches torch (a stand-in replaces torch.device).
_Tensor, _device, _dtype = torch.Tensor, torch.device, torch.dtype
# The base classes' own descriptors, read through ``__get__``: a subclass's override never answers.
_TENSOR_DEVICE: Any = torch.Tensor.device
_ARRAY_DTYPE: Any = numpy.ndarray.dtype
_ARRAY_SHAPE: Any = numpy.ndarray.shape
_DEVICE_TYPE: Any = torch.device.type
_DEVICE_INDEX: Any = torch.device.index
MAX_ELEMENTS = 1 << 24  # the checks send and read small tensors; a learner's 1 GB return is not sent
Resolve = Callable[[int, int], Any]  # (handle, part) -> an object a recipe built (learner side)
Place = Callable[[torch.Tensor, str], torch.Tensor]  # a tensor the judge sent, onto the session's device
Where = Callable[[torch.Tensor], str]  # the device type a learner-side tensor is on (a stand-in knows its own)


def device_of(tensor: torch.Tensor) -> str:
    """Where a tensor lived in the learner process (the device it came back with), or its real device."""
    tagged = getattr(tensor, DEVICE_ATTR, None)
    return str(tagged) if tagged else real_device(tensor)


def real_device(tensor: torch.Tensor) -> str:
    return str(torch.Tensor.device.__get__(tensor).type)


def encode_tensor(tensor: torch.Tensor, where: Where = real_device) -> dict[str, Any]:
    with torch._C.DisableTorchFunction(), _disable_current_modes():
        base = torch.Tensor.detach(tensor)
        if base.numel() > MAX_ELEMENTS:
            raise ProtocolError(f"a tensor of {base.numel()} elements is too large to send")
        dtype = str(base.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            raise ProtocolError(f"a tensor of dtype {dtype} cannot be sent")
        flat = torch.Tensor.contiguous(torch.Tensor.cpu(base)).reshape(-1)
        raw = torch.Tensor.numpy(flat.view(torch.uint8)).tobytes() if flat.numel() else b""
        return {"$tensor": {"dtype": dtype, "shape": list(base.shape), "data": bytes_field(raw),
                            "device": where(tensor), "requires_grad": bool(tensor.requires_grad)}}


def decode_tensor(data: dict[str, Any], place: Place | None = None) -> torch.Tensor:
    try:
        dtype = _DTYPES[data["dtype"]]
        shape = [int(n) for n in data["shape"]]
        raw = bytes_of(data["data"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"a malformed tensor: {exc}") from None
    element = torch.empty(0, dtype=dtype).element_size()
    count = 1
    for n in shape:
        count *= n
    if count * element != len(raw) or count > MAX_ELEMENTS:
        raise ProtocolError("a tensor whose bytes do not match its shape")
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    tensor = flat.view(dtype).reshape(shape).clone() if raw else torch.empty(shape, dtype=dtype)
    if data.get("requires_grad") and (tensor.is_floating_point() or tensor.is_complex()):
        tensor.requires_grad_(True)
    device = str(data.get("device") or "cpu")
    if place is not None:
        return place(tensor, device)
    setattr(tensor, DEVICE_ATTR, device)
    return tensor


def encode_array(array: numpy.ndarray) -> dict[str, Any]:
    base = numpy.ndarray.copy(array, order="C")  # the base method: an override cannot answer
    dtype = _ARRAY_DTYPE.__get__(base)
    if dtype.hasobject:
        raise ProtocolError("an object array cannot be sent")
    return {"$ndarray": {"dtype": dtype.str, "shape": list(_ARRAY_SHAPE.__get__(base)),
                         "data": bytes_field(numpy.ndarray.tobytes(base))}}


def decode_array(data: dict[str, Any]) -> numpy.ndarray:
    try:
        dtype = numpy.dtype(data["dtype"])
        shape = tuple(int(n) for n in data["shape"])
        raw = bytes_of(data["data"])
        if dtype.hasobject:
            raise ValueError("object dtype")
        array: numpy.ndarray = numpy.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        return array
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"a malformed array: {exc}") from None


def encode_value(value: Any, depth: int = 0, where: Where = real_device) -> Any:
    """What the learner's code returned (or a check passes), as plain data; what cannot be sent
    (a huge tensor, an object array, an object of its own) goes as an opaque value: its type name.
    ``where`` says which device a tensor is on (a stand-in's tensors are CPU tensors underneath)."""
    try:
        return _encode(value, depth, where)
    except Exception as exc:  # noqa: BLE001 - whatever the learner's object does, an answer goes back
        return {"$opaque": {"type": cut(type(value).__name__, 80), "repr": cut(f"{type(exc).__name__}: {exc}", 200)}}


def _encode(value: Any, depth: int, where: Where = real_device) -> Any:
    # Types are read with type(), never isinstance(): an object can claim any __class__. Values are
    # read with the base types' own methods: a subclass's overrides never run.
    kind = type(value)
    if issubclass(kind, _Tensor):
        return encode_tensor(value, where)
    if issubclass(kind, numpy.ndarray):
        return encode_array(value)
    if issubclass(kind, numpy.generic):
        return {"$npscalar": {"dtype": numpy.dtype(kind).str, "value": encode_plain(numpy.generic.item(value))}}
    if issubclass(kind, _device):
        return {"$device": str(_device(_DEVICE_TYPE.__get__(value), _DEVICE_INDEX.__get__(value)))}
    if issubclass(kind, _dtype):
        return {"$dtype": str(value).removeprefix("torch.")}
    if value is None or kind in (bool, int, float, str):
        return encode_plain(cut(value) if kind is str else value)
    if depth >= 20:
        raise ProtocolError("nested too deeply")
    if issubclass(kind, (tuple, list)):
        items = list(tuple.__iter__(value) if issubclass(kind, tuple) else list.__iter__(value))
        if len(items) > 10_000:
            raise ProtocolError(f"a {kind.__name__} of {len(items)} items is too long to send")
        encoded = [_encode(v, depth + 1, where) for v in items]
        return {"$tuple": encoded} if issubclass(kind, tuple) else encoded
    if issubclass(kind, dict):
        pairs = list(dict.items(value))
        if len(pairs) <= 10_000 and all(type(k) is str for k, _ in pairs):
            return {"$dict": [[cut(k, 200), _encode(v, depth + 1, where)] for k, v in pairs]}
    if issubclass(kind, bool):
        return bool.__bool__(value)  # pragma: no cover - bool cannot be subclassed
    if issubclass(kind, int):
        return int.__index__(value)
    if issubclass(kind, float):
        return encode_plain(float.__float__(value))
    if issubclass(kind, str):
        return cut(str.__str__(value))
    return {"$opaque": {"type": cut(kind.__name__, 80), "repr": cut(_safe_repr(value), 200)}}


def _safe_repr(value: Any) -> str:
    try:
        return object.__repr__(value)
    except Exception:  # noqa: BLE001 - nothing of the learner's object may run here either
        return "?"


class Opaque:
    """A value the learner's code returned that is none of the above: only its type name and a repr."""

    def __init__(self, type_name: str, text: str) -> None:
        self.type_name = type_name
        self.text = text

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def type_name(value: Any) -> str:
    """The learner's value's type, as a message names it."""
    return value.type_name if isinstance(value, Opaque) else type(value).__name__




def reference(handle: int, part: int) -> dict[str, Any]:
    """An argument that is part ``part`` of the objects built as ``handle`` (grader/reference/problems.py)."""
    return {"$ref": [handle, part]}


def decode_value(data: Any, depth: int = 0, resolve: Resolve | None = None, place: Place | None = None) -> Any:
    """Plain data back to values: base tensors and arrays only. In the learner process ``resolve``
    turns a recipe reference into the object and ``place`` puts a tensor on the session's device;
    in the judge a reference is a protocol error, and a tensor carries its device as ``device_of``."""
    if depth > 40:
        raise ProtocolError("value nested too deeply")
    if isinstance(data, list):
        return [decode_value(v, depth + 1, resolve, place) for v in data]
    if not isinstance(data, dict):
        if data is None or isinstance(data, (bool, int, float, str)):
            return data
        raise ProtocolError("a malformed value")
    if len(data) != 1:
        raise ProtocolError("a malformed tagged value")
    (tag, inner), = data.items()
    if tag == "$tensor":
        return decode_tensor(inner, place)
    if tag == "$ndarray":
        return decode_array(inner)
    if tag == "$npscalar":
        return numpy.dtype(inner["dtype"]).type(decode_value(inner["value"], depth + 1))
    if tag == "$device":
        return _device(str(inner))
    if tag == "$dtype":
        if inner not in _DTYPES:
            raise ProtocolError(f"unknown dtype {inner!r}")
        return _DTYPES[inner]
    if tag == "$tuple":
        return tuple(decode_value(v, depth + 1, resolve, place) for v in inner)
    if tag == "$dict":
        return {str(k): decode_value(v, depth + 1, resolve, place) for k, v in inner}
    if tag == "$ref" and resolve is not None:
        handle, part = inner
        return resolve(int(handle), int(part))
    if tag == "$float":
        return float(inner)
    if tag == "$opaque":
        return Opaque(str(inner.get("type", "?")), str(inner.get("repr", "")))
    raise ProtocolError(f"unknown value tag {tag!r}")
