"""Tensors, arrays and devices as plain data, both ways across the judge ↔ learner boundary.

The learner process encodes what the learner's code returned without running any of it: a
``torch.Tensor`` subclass's ``__torch_function__``, a mode, an ``ndarray`` subclass's
``__array_function__`` or a property it overrides are all bypassed (torch function handling
disabled, base-class methods called directly), and what crosses is bytes + dtype + shape +
device tag. The judge rebuilds *base* ``torch.Tensor`` and ``numpy.ndarray`` objects from them,
so only honest values reach a comparison.

What the judge decodes is hostile: a learner's code can write any frame into its socket under the
number of the request in flight (tests/test_hostile_bytes.py). Every decode checks before it
allocates — a dtype from a closed set of numeric ones, a shape of at most ``MAX_DIMS`` sizes whose
bytes match, at most ``MAX_TENSOR_BYTES``, integers within int64, a float tag that is ``nan`` or
``±inf``, a device that exists — and anything else is a ``ProtocolError``, the learner's protocol
break, never the grader's error (a 60-byte ``$npscalar`` once asked for a 150 MB ``numpy.void``).

A rebuilt tensor carries the device it was on in the learner process as ``_grader_device``
(``device_of``): on a stand-in that is a tag the judge's CPU tensors cannot otherwise hold.
"""

from __future__ import annotations

import math
import re
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
_ARRAY_NBYTES: Any = numpy.ndarray.nbytes
_DEVICE_TYPE: Any = torch.device.type
_DEVICE_INDEX: Any = torch.device.index
# The largest tensor or array that crosses, either way: the checks send and read small ones (the
# largest frame seen is 405 KB); a learner's 1 GB return goes as an opaque value.
MAX_TENSOR_BYTES = 8 * 1024 * 1024
MAX_DIMS = 16
INT64 = 1 << 63  # a plain integer is within ±2**63: a 4,000-digit one is no answer (no float holds it)
_NUMERIC_KINDS = "biufc"  # numpy's bool, signed, unsigned, float and complex dtypes
_FLOAT_TAGS = {"nan", "inf", "-inf"}  # what the codec writes for a float JSON has none for
_DEVICE = re.compile(r"(cpu|cuda|mps|meta)(:\d{1,2})?")
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
        if base.numel() * base.element_size() > MAX_TENSOR_BYTES:
            raise ProtocolError(f"a tensor of {base.numel()} elements is too large to send")
        dtype = str(base.dtype).removeprefix("torch.")
        if dtype not in _DTYPES:
            raise ProtocolError(f"a tensor of dtype {dtype} cannot be sent")
        flat = torch.Tensor.contiguous(torch.Tensor.cpu(base)).reshape(-1)
        raw = torch.Tensor.numpy(flat.view(torch.uint8)).tobytes() if flat.numel() else b""
        return {"$tensor": {"dtype": dtype, "shape": list(base.shape), "data": bytes_field(raw),
                            "device": where(tensor), "requires_grad": bool(tensor.requires_grad)}}


def _shape(value: Any, itemsize: int, size: int) -> list[int]:
    """A shape: at most MAX_DIMS sizes (non-negative ints) whose elements take ``size`` bytes."""
    if (type(value) is not list or len(value) > MAX_DIMS
            or not all(type(n) is int and 0 <= n <= MAX_TENSOR_BYTES for n in value)):
        raise ProtocolError("a shape that is not a list of sizes")
    if math.prod(value) * itemsize != size:
        raise ProtocolError("bytes that do not match their shape")
    return list(value)


def _bytes(data: dict[str, Any]) -> bytes:
    """A tensor's or an array's bytes, their size checked before they are decoded."""
    text = data.get("data")
    if type(text) is not str or len(text) > 4 * (MAX_TENSOR_BYTES // 3 + 1):
        raise ProtocolError("bytes over the size budget")
    return bytes_of(text)


def _fields(data: Any) -> dict[str, Any]:
    if type(data) is not dict:
        raise ProtocolError("a malformed value")
    return data


def decode_tensor(data: dict[str, Any], place: Place | None = None) -> torch.Tensor:
    data = _fields(data)
    try:
        dtype = _DTYPES[data["dtype"]]
        raw = _bytes(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"a malformed tensor: {exc}") from None
    element = torch.empty(0, dtype=dtype).element_size()
    shape = _shape(data.get("shape"), element, len(raw))
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    tensor = flat.view(dtype).reshape(shape).clone() if raw else torch.empty(shape, dtype=dtype)
    if data.get("requires_grad") and (tensor.is_floating_point() or tensor.is_complex()):
        tensor.requires_grad_(True)
    device = _device_text(data.get("device") or "cpu")
    if place is not None:
        return place(tensor, device)
    setattr(tensor, DEVICE_ATTR, device)
    return tensor


def _device_text(text: Any) -> str:
    """A device's name (``cuda:0``), or ProtocolError: one that does not exist is no answer."""
    if type(text) is not str or not _DEVICE.fullmatch(text):
        raise ProtocolError("not a device")
    return text


def _numeric(text: Any) -> numpy.dtype[Any]:
    """A plain numeric numpy dtype (no object, record, void, string or sub-array one), or ProtocolError."""
    try:
        dtype = numpy.dtype(text) if type(text) is str and len(text) <= 8 else None
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind not in _NUMERIC_KINDS or dtype.fields or dtype.subdtype or dtype.itemsize > 16:
        raise ProtocolError(f"not a numeric dtype: {str(text)[:20]!r}")
    return dtype


def encode_array(array: numpy.ndarray) -> dict[str, Any]:
    if _ARRAY_NBYTES.__get__(array) > MAX_TENSOR_BYTES:
        raise ProtocolError("an array too large to send")
    base = numpy.ndarray.copy(array, order="C")  # the base method: an override cannot answer
    dtype = _ARRAY_DTYPE.__get__(base)
    if dtype.hasobject:
        raise ProtocolError("an object array cannot be sent")
    return {"$ndarray": {"dtype": dtype.str, "shape": list(_ARRAY_SHAPE.__get__(base)),
                         "data": bytes_field(numpy.ndarray.tobytes(base))}}


def decode_array(data: dict[str, Any]) -> numpy.ndarray:
    data = _fields(data)
    dtype = _numeric(data.get("dtype"))
    try:
        raw = _bytes(data)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"a malformed array: {exc}") from None
    shape = _shape(data.get("shape"), dtype.itemsize, len(raw))
    array: numpy.ndarray = numpy.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    return array


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
    if issubclass(kind, numpy.generic):  # a datetime or a string scalar goes as an opaque value
        dtype = _numeric(numpy.dtype(kind).str)
        return {"$npscalar": {"dtype": dtype.str, "value": encode_plain(numpy.generic.item(value))}}
    if issubclass(kind, _device):
        return {"$device": str(_device(_DEVICE_TYPE.__get__(value), _DEVICE_INDEX.__get__(value)))}
    if issubclass(kind, _dtype):
        return {"$dtype": str(value).removeprefix("torch.")}
    if kind is int and not -INT64 <= value < INT64:  # json.dumps would write all its digits
        return {"$opaque": {"type": "int", "repr": f"an integer of {value.bit_length()} bits"}}
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
        return _encode(int.__index__(value), depth)
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
    if type(data) is list:
        return [decode_value(v, depth + 1, resolve, place) for v in data]
    if type(data) is not dict:
        if type(data) is int and not -INT64 <= data < INT64:
            raise ProtocolError("an integer out of range")
        if data is None or type(data) in (bool, int, float, str):
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
        inner = _fields(inner)
        value = decode_value(inner.get("value"), depth + 1)
        if type(value) not in (bool, int, float):
            raise ProtocolError("a numpy scalar that is not a number")
        return _numeric(inner.get("dtype")).type(value)
    if tag == "$device":
        return _device(_device_text(inner))
    if tag == "$dtype":
        if type(inner) is not str or inner not in _DTYPES:
            raise ProtocolError(f"unknown dtype {str(inner)[:20]!r}")
        return _DTYPES[inner]
    if tag == "$tuple":
        return tuple(decode_value(_items(inner), depth + 1, resolve, place))
    if tag == "$dict":
        pairs = _items(inner)
        if not all(type(pair) is list and len(pair) == 2 and type(pair[0]) is str for pair in pairs):
            raise ProtocolError("a malformed dict")
        return {k: decode_value(v, depth + 1, resolve, place) for k, v in pairs}
    if tag == "$ref" and resolve is not None:
        handle, part = inner
        return resolve(int(handle), int(part))
    if tag == "$float":
        if inner not in _FLOAT_TAGS:
            raise ProtocolError("a float tag that is not nan or infinity")
        return float(inner)
    if tag == "$opaque":
        inner = _fields(inner)
        return Opaque(cut(str(inner.get("type", "?")), 80), cut(str(inner.get("repr", "")), 200))
    raise ProtocolError(f"unknown value tag {str(tag)[:20]!r}")


def _items(inner: Any) -> list[Any]:
    if type(inner) is not list:
        raise ProtocolError("a malformed sequence")
    return inner
