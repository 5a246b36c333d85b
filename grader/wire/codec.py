"""Messages as JSON and back, refusing anything that is not one (grader/wire/messages.py).

``encode`` tags each dataclass with its type; ``decode`` accepts only the message types, with
their fields and their closed sets (``Literal``), and raises ``ProtocolError`` for anything else
— which the judge charges to the learner's process, never to a verdict. ``encode_plain`` carries
plain values (numbers, strings, tuples, str-keyed dicts) so that they come back as they were;
tensors and arrays are grader/wire/values.py's. Standard library only.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

from grader.wire.messages import MESSAGE_TYPES

MAX_TEXT = 2000  # learner-controlled text (errors, printed output) in one message, cut beyond
_SURROGATE = re.compile("[\ud800-\udfff]")


class ProtocolError(Exception):
    """A frame that is not one of the messages: the sending process broke the protocol."""


# -- small helpers every side uses ----------------------------------------------------------------
def cut(text: str, limit: int = MAX_TEXT) -> str:
    """Learner-controlled text, capped; the cut says so."""
    return text if len(text) <= limit else text[:limit] + f" […{len(text) - limit} more characters cut]"


def whole(text: str) -> str:
    """``text`` as UTF-8 can hold it: a lone surrogate (which a learner's str may carry, and no
    report, page or terminal can encode) becomes U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def bytes_field(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def bytes_of(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _float(value: float) -> Any:
    return value if math.isfinite(value) else {"$float": repr(value)}


def encode_plain(value: Any, depth: int = 0) -> Any:
    """Numbers, strings, None, bools, tuples, lists and str-keyed dicts, tagged so that they come
    back as they were (a tuple stays a tuple). Anything else is the caller's to encode."""
    if depth > 20:
        raise ProtocolError("value nested too deeply")
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, tuple):
        return {"$tuple": [encode_plain(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {"$dict": [[encode_plain(k, depth + 1), encode_plain(v, depth + 1)] for k, v in value.items()]}
    raise ProtocolError(f"cannot send a {type(value).__name__}")


# -- the codec ---------------------------------------------------------------------------------
def to_json(message: Any) -> Any:
    """A message (or a value inside one) as JSON data: dataclasses tagged with their type."""
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        if type(message).__name__ not in MESSAGE_TYPES:
            raise ProtocolError(f"not a message: {type(message).__name__}")
        return {"$msg": type(message).__name__, **{f.name: to_json(getattr(message, f.name))
                                                   for f in dataclasses.fields(message)}}
    if isinstance(message, (tuple, list)):
        return [to_json(v) for v in message]
    if isinstance(message, Mapping):
        return {str(k): to_json(v) for k, v in message.items()}
    if isinstance(message, float):
        return _float(message)
    return message
_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)  # resolved in the module that declares the message
    return _HINTS[cls]


def _conform(value: Any, hint: Any, where: str) -> Any:
    """``value`` (decoded JSON) as the annotation ``hint`` wants it, or ProtocolError."""
    origin = get_origin(hint)
    if hint is Any:
        return value
    if origin is Literal:
        if value not in get_args(hint):
            raise ProtocolError(f"{where}: {value!r} is not one of {get_args(hint)}")
        return value
    if origin in (Union, types.UnionType):
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _conform(value, option, where)
            except ProtocolError as exc:
                errors.append(str(exc))
        raise ProtocolError("; ".join(errors) or f"{where}: unexpected None")
    if origin is tuple:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list")
        args = get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_conform(v, args[0], where) for v in value)
        if len(args) != len(value):
            raise ProtocolError(f"{where}: expected {len(args)} items")
        return tuple(_conform(v, a, where) for v, a in zip(value, args, strict=True))
    if origin is Mapping or hint is Mapping:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object")
        inner = get_args(hint)[1] if get_args(hint) else Any
        return {str(k): _conform(v, inner, where) for k, v in value.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not (isinstance(value, dict) and value.get("$msg") == hint.__name__):
            raise ProtocolError(f"{where}: expected a {hint.__name__}")
        return _build(hint, value)
    if hint is float:
        if isinstance(value, dict) and set(value) == {"$float"}:
            return float(value["$float"])
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"{where}: expected a number")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ProtocolError(f"{where}: expected an integer")
        return value
    if hint in (str, bool):
        if type(value) is not hint:
            raise ProtocolError(f"{where}: expected a {hint.__name__}")
        return value if hint is bool or value.isascii() else whole(value)
    raise ProtocolError(f"{where}: cannot read a {hint!r}")  # pragma: no cover - a field type this codec lacks


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names - {"$msg"}
    if unknown:
        raise ProtocolError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    hints = _hints(cls)
    values = {name: _conform(data[name], hints[name], f"{cls.__name__}.{name}") for name in names if name in data}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProtocolError(f"{cls.__name__}: {exc}") from None


def from_json(data: Any, expected: Any = None) -> Any:
    """A message from JSON data; ``expected`` (a type or a Union of them) narrows what is accepted."""
    if not isinstance(data, dict) or data.get("$msg") not in MESSAGE_TYPES:
        raise ProtocolError("not a message")
    cls = MESSAGE_TYPES[data["$msg"]]
    if expected is None:
        allowed = None
    else:
        allowed = get_args(expected) if get_origin(expected) in (Union, types.UnionType) else (expected,)
    if allowed is not None and cls not in allowed:
        raise ProtocolError(f"a {cls.__name__} where {', '.join(a.__name__ for a in allowed)} was expected")
    return _build(cls, data)


def encode(message: Any) -> bytes:
    return json.dumps(to_json(message), ensure_ascii=True, separators=(",", ":")).encode()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # the encoder tags them ({"$float": "nan"}); a bare one is forged


def decode(payload: bytes, expected: Any = None) -> Any:
    try:
        data = json.loads(payload, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise ProtocolError("a frame that is not JSON") from None
    return from_json(data, expected)
