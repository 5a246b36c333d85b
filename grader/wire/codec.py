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
import operator
import re
import types
import typing
from collections.abc import Callable, Mapping
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
# Both ends of every channel encode and decode hundreds of messages a grading (a grading's ~650
# frames: 2 MB of JSON), so each message type's fields, and the check each field's annotation asks
# for, are worked out once a process and kept (a decode took 33 ms a grading when every field asked
# typing for its annotation's parts again, 2026-12-03).
_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    if cls not in _NAMES:
        _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return _NAMES[cls]


_AS_IS = frozenset({str, int, bool})


# The message a grading sends most of (~900 device events a learner, in its answers): its fields in their
# declared order, under one tag, rather than each under its name (``{"$ev": [...]}``; read with the same check
# of each field: ``_event``). Encoding and reading them was ~10 ms of a batch learner, ~2/3 of it the names.
_EVENT = MESSAGE_TYPES["Event"]
_event_fields = operator.attrgetter(*_field_names(_EVENT))


def to_json(message: Any) -> Any:
    """A message (or a value inside one) as JSON data: dataclasses tagged with their type."""
    cls = type(message)
    if cls in _AS_IS or message is None:  # the bulk of every message: its leaves, by exact type first
        return message
    if cls is float:  # (a float's subclass, numpy's float64, below)
        return _float(message)
    if cls is _EVENT:
        return {"$ev": [to_json(value) for value in _event_fields(message)]}
    if hasattr(cls, "__dataclass_fields__"):
        if MESSAGE_TYPES.get(cls.__name__) is not cls:  # the type itself, not one that shares its name
            raise ProtocolError(f"not a message: {cls.__name__}")
        return {"$msg": cls.__name__, **{name: to_json(getattr(message, name)) for name in _field_names(cls)}}
    if isinstance(message, (tuple, list)):
        return [to_json(v) for v in message]
    if isinstance(message, Mapping):
        return {str(k): to_json(v) for k, v in message.items()}
    if isinstance(message, float):
        return _float(message)
    return message


# A field's check: its decoded JSON value and where it is (for the error) -> the value as the
# annotation wants it, or ProtocolError.
Conformer = Callable[[Any, str], Any]
_CONFORMERS: dict[Any, Conformer] = {}


def _conformer(hint: Any) -> Conformer:
    """The check of a field annotated ``hint`` (compiled at its first use in this process)."""
    if hint not in _CONFORMERS:
        _CONFORMERS[hint] = _compile(hint)
    return _CONFORMERS[hint]


def _compile(hint: Any) -> Conformer:  # noqa: C901, PLR0911 - one branch per kind of annotation
    origin = get_origin(hint)
    if hint is Any:
        return lambda value, where: value
    if origin is Literal:
        choices = get_args(hint)

        def literal(value: Any, where: str) -> Any:
            if value not in choices:
                raise ProtocolError(f"{where}: {value!r} is not one of {choices}")
            return value
        return literal
    if origin in (Union, types.UnionType):
        return _union(get_args(hint))
    if origin is tuple:
        return _tuple(get_args(hint))
    if origin is Mapping or hint is Mapping:
        inner = _conformer(get_args(hint)[1] if get_args(hint) else Any)

        def mapping(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise ProtocolError(f"{where}: expected an object")
            return {str(k): inner(v, where) for k, v in value.items()}
        return mapping
    if hint is _EVENT:
        return _event
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        name = hint.__name__

        def message(value: Any, where: str) -> Any:
            if not (isinstance(value, dict) and value.get("$msg") == name):
                raise ProtocolError(f"{where}: expected a {name}")
            return _build(hint, value)
        return message
    if hint in (float, int, str, bool):
        return _SCALARS[hint]

    def unknown(value: Any, where: str) -> Any:  # pragma: no cover - a field type this codec lacks
        raise ProtocolError(f"{where}: cannot read a {hint!r}")
    return unknown


def _union(options: tuple[Any, ...]) -> Conformer:
    optional = type(None) in options
    tried = [_conformer(option) for option in options if option is not type(None)]

    def union(value: Any, where: str) -> Any:
        if value is None and optional:
            return None
        errors = []
        for conform in tried:
            try:
                return conform(value, where)
            except ProtocolError as exc:
                errors.append(str(exc))
        raise ProtocolError("; ".join(errors) or f"{where}: unexpected None")
    return union


def _tuple(args: tuple[Any, ...]) -> Conformer:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _conformer(args[0])

        def variadic(value: Any, where: str) -> Any:
            if not isinstance(value, list):
                raise ProtocolError(f"{where}: expected a list")
            return tuple(item(v, where) for v in value)
        return variadic
    items = [_conformer(a) for a in args]

    def fixed(value: Any, where: str) -> Any:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list")
        if len(items) != len(value):
            raise ProtocolError(f"{where}: expected {len(items)} items")
        return tuple(conform(v, where) for v, conform in zip(value, items, strict=True))
    return fixed


def _number(value: Any, where: str) -> float:
    if isinstance(value, dict) and set(value) == {"$float"}:
        return float(value["$float"])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"{where}: expected a number")
    return float(value)


def _integer(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProtocolError(f"{where}: expected an integer")
    return value


def _text(value: Any, where: str) -> str:
    if type(value) is not str:
        raise ProtocolError(f"{where}: expected a str")
    return value if value.isascii() else whole(value)


def _flag(value: Any, where: str) -> bool:
    if type(value) is not bool:
        raise ProtocolError(f"{where}: expected a bool")
    return value


_SCALARS: dict[type, Conformer] = {float: _number, int: _integer, str: _text, bool: _flag}
# A message type's fields: their names, and each one's check and name in errors.
_PLANS: dict[type, tuple[frozenset[str], tuple[tuple[str, Conformer, str], ...]]] = {}


def _plan(cls: type) -> tuple[frozenset[str], tuple[tuple[str, Conformer, str], ...]]:
    if cls not in _PLANS:
        hints = typing.get_type_hints(cls)  # resolved in the module that declares the message
        names = _field_names(cls)
        _PLANS[cls] = (frozenset(names) | {"$msg"},
                       tuple((name, _conformer(hints[name]), f"{cls.__name__}.{name}") for name in names))
    return _PLANS[cls]


def _event(value: Any, where: str) -> Any:
    """An ``Event`` as ``to_json`` writes it: each field, in order, checked as a field of its type is."""
    items = value.get("$ev") if type(value) is dict and len(value) == 1 else None
    _, fields = _plan(_EVENT)
    if type(items) is not list or len(items) != len(fields):
        raise ProtocolError(f"{where}: expected an Event")
    return _EVENT(*[conform(item, field) for item, (_, conform, field) in zip(items, fields, strict=True)])


def prepare() -> None:
    """Every message type's plan, compiled now: what a fork server does before it forks, so that no
    child compiles them again (7 ms in a freshly forked child, both sides of a grading)."""
    for cls in MESSAGE_TYPES.values():
        _plan(cls)


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    known, fields = _plan(cls)
    unknown = [key for key in data if key not in known]
    if unknown:
        raise ProtocolError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    values = {name: conform(data[name], where) for name, conform, where in fields if name in data}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProtocolError(f"{cls.__name__}: {exc}") from None


def from_json(data: Any, expected: Any = None) -> Any:
    """A message from JSON data; ``expected`` (a type or a Union of them) narrows what is accepted."""
    tag = (_EVENT.__name__ if "$ev" in data else data.get("$msg")) if isinstance(data, dict) else None
    if type(tag) is not str or tag not in MESSAGE_TYPES:  # (a list or a dict as the tag: not hashable, not one)
        raise ProtocolError("not a message")
    cls = MESSAGE_TYPES[tag]
    if expected is None:
        allowed = None
    else:
        allowed = get_args(expected) if get_origin(expected) in (Union, types.UnionType) else (expected,)
    if allowed is not None and cls not in allowed:
        raise ProtocolError(f"a {cls.__name__} where {', '.join(a.__name__ for a in allowed)} was expected")
    return _event(data, "Event") if cls is _EVENT else _build(cls, data)  # an Event only as to_json writes it


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # the encoder tags them ({"$float": "nan"}); a bare one is forged


# Made once: ``json.dumps`` and ``json.loads`` given any option build a new encoder or decoder at every call
# (2-3 us of a message's ~9 us, each way, on every frame and every judge line).
_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"))
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def encode(message: Any) -> bytes:
    return _ENCODER.encode(to_json(message)).encode()


def decode(payload: bytes, expected: Any = None) -> Any:
    try:  # as ``json.loads`` reads bytes: UTF-8, -16 or -32 by their first bytes
        data = _DECODER.decode(payload.decode(json.detect_encoding(payload), "surrogatepass"))
    except (ValueError, RecursionError):
        raise ProtocolError("a frame that is not JSON") from None
    return from_json(data, expected)
