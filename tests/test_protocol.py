"""The messages between the grader, the judge and the learner process (grader/wire/messages.py), and
the values they carry (grader/wire/values.py): typed both ways, and nothing else gets through."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import typing

import numpy
import pytest
import torch

from grader.emulation.standin import StandIn
from grader.wire.codec import ProtocolError, decode, encode
from grader.wire.framing import Connection
from grader.wire.messages import (
    MESSAGE_TYPES,
    Call,
    CellStop,
    CheckEnded,
    Closed,
    Event,
    Hello,
    JudgeReport,
    LearnerMessage,
    Returned,
    TopLevelEvent,
)
from grader.wire.values import DEVICE_ATTR, Opaque, decode_value, device_of, encode_value


def test_every_message_comes_back_as_it_was_sent() -> None:
    samples = [
        Call("ex3", "roundtrip", (encode_value(torch.arange(3.0)), encode_value(torch.device("cuda"))), {"n": 3}),
        Returned(encode_value((1, 2.5, float("inf"))), "printed", (None,), (Event("sync", "cuda", 1.0, 0, "", 0.0,
                                                                                   "", True),), {"peak": 4}),
        TopLevelEvent("cell_stop", "ex1_device", 2, "In [3]", CellStop("ex1_device", 2, "In [3]", 1, "no_gpu", "E")),
        CheckEnded("ex1.a", "failed", "ex1.wrong_order", {"got": "cpu"}, "standin", ("cuda (stand-in)",), 0.1),
        Event("clock", "", float("inf"), 7, "torch.float16", 2.5, "perf_counter", None, float("-inf")),
        Closed((Event("matmul", "mps", 1e-3, 2**40, "torch.bfloat16", 0.0, "", False, 2e-3), Event("sync"))),
    ]
    for message in samples:
        assert decode(encode(message)) == message


def test_every_message_type_is_a_frozen_dataclass() -> None:
    for cls in MESSAGE_TYPES.values():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]


@pytest.mark.parametrize("payload", [
    b"not json",
    b"[]",
    json.dumps({"$msg": "Verdict", "status": "passed"}).encode(),  # no such message
    json.dumps({"$msg": "Event", "kind": "verdict"}).encode(),  # outside the closed set
    json.dumps({"$msg": "Raised", "kind": "passed", "name": "f"}).encode(),
    json.dumps({"$msg": "Returned", "value": 1, "extra": True}).encode(),  # an unknown field
    json.dumps({"$msg": "Hello", "torch": 2, "cuda": None, "mps": False}).encode(),  # a wrong type
    # Each kind of field refuses what is not its own (grader/wire/codec.py compiles one check a kind):
    *[json.dumps({"$msg": "Hello", "torch": "2", "cuda": cuda, "mps": False}).encode() for cuda in (
        {"$msg": "CudaFacts", "name": "H", "capability": [9], "total_memory": 1, "count": 1},  # a short tuple
        {"$msg": "CudaFacts", "name": "H", "capability": [9, 0, 1], "total_memory": 1, "count": 1},  # a long one
        {"$msg": "CudaFacts", "name": "H", "capability": "90", "total_memory": 1, "count": 1},  # not a list
        {"$msg": "CudaFacts", "name": "H", "capability": [9, 0], "total_memory": True, "count": 1},  # a bool as int
        {"$msg": "CudaFacts", "name": "H", "capability": [9, 0], "total_memory": 1.5, "count": 1},  # a float as int
        {"$msg": "CudaFacts", "name": 7, "capability": [9, 0], "total_memory": 1, "count": 1},  # a number as str
        {"$msg": "CellStop", "name": "H", "capability": [9, 0], "total_memory": 1, "count": 1},  # another message's tag
        {"name": "H", "capability": [9, 0], "total_memory": 1, "count": 1},  # no tag
        "cuda",  # not a message at all
    )],
    json.dumps({"$msg": "Hello", "torch": "2", "cuda": None, "mps": 0}).encode(),  # an int as bool
    json.dumps({"$msg": "CellStop", "module": "m", "index": 1, "label": "l", "line": "3", "kind": "exit",
                "error": ""}).encode(),  # an optional int that is neither
    # a str as a float:
    json.dumps({"$msg": "CheckEnded", "check": "ex1.a", "status": "passed", "duration_s": "0.1"}).encode(),
    json.dumps({"$msg": "CheckEnded", "check": "ex1.a", "status": None}).encode(),  # None for a closed set
    json.dumps({"$msg": "Call", "exercise": "ex1", "function": "f", "kwargs": []}).encode(),  # a list as a mapping
    # Events travel as their fields in order (grader/wire/codec.py ``_event``), each checked as a field is:
    *[json.dumps({"$msg": "Closed", "events": [event]}).encode() for event in (
        {"$ev": ["verdict", "", 0.0, 0, "", 0.0, "", None, None]},  # outside the closed set
        {"$ev": ["sync", "", 0.0, 0, "", 0.0, "", None]},  # a field short
        {"$ev": ["sync", "", 0.0, 0, "", 0.0, "", None, None, 1]},  # a field over
        {"$ev": ["sync", "", "0.0", 0, "", 0.0, "", None, None]},  # a str as a float
        {"$ev": ["sync", "", 0.0, True, "", 0.0, "", None, None]},  # a bool as an int
        {"$ev": ["sync", "", 0.0, 0, "", 0.0, "", 1, None]},  # an int as a bool
        {"$ev": ["sync", "", 0.0, 0, "", 0.0, "", None, None], "$msg": "Event"},  # a second tag
        {"$ev": {"kind": "sync"}},  # not a list
        {"$msg": "Event", "kind": "sync"},  # by name: not how an Event travels
    )],
    json.dumps({"$ev": ["verdict", "", 0.0, 0, "", 0.0, "", None, None]}).encode(),  # alone, outside the closed set
    json.dumps({"$msg": "Event", "kind": "sync"}).encode(),  # alone by name: not how an Event travels either
    # a tag that is not a name (once a TypeError in the judge, not the protocol error it is):
    json.dumps({"$msg": []}).encode(), json.dumps({"$msg": {}}).encode(), json.dumps({"$msg": None}).encode(),
])
def test_anything_else_is_a_protocol_error(payload: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode(payload)


def test_only_a_message_type_is_encoded_as_a_message() -> None:
    """A dataclass that is not one of the messages (a learner's own, say) is never sent as one."""

    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int = 1

    @dataclasses.dataclass(frozen=True)
    class Hello:  # a message's name, not its type
        torch: str = "2"

    for impostor in (Point(), Hello()):
        with pytest.raises(ProtocolError, match="not a message"):
            encode(Returned(value=impostor))


def test_a_side_accepts_only_its_own_messages() -> None:
    verdict = encode(CheckEnded("ex1.a", "passed"))
    assert decode(verdict, JudgeReport) == CheckEnded("ex1.a", "passed")
    with pytest.raises(ProtocolError):
        decode(verdict, LearnerMessage)  # a learner process cannot answer with a verdict
    assert typing.get_args(LearnerMessage)  # a closed set of answers


def test_frames_over_a_socket() -> None:
    ours, theirs = socket.socketpair()
    a, b = Connection(ours.detach()), Connection(theirs.detach())
    hello = Hello("2.13.0", None, mps=False)
    a.send(hello, seq=7)
    assert b.receive(Hello, seq=7) == hello
    a.send(hello, seq=6)
    with pytest.raises(ProtocolError):  # an answer to another request than the one in flight
        b.receive(Hello, seq=7)
    os.write(a.fd, b"\xff\xff\xff\xff\x00\x00\x00\x01")  # a frame far over the limit
    with pytest.raises(ProtocolError):
        b.receive()
    a.close()
    with pytest.raises(EOFError):
        b.receive()
    b.close()


class LyingTensor(torch.Tensor):
    """Answers "equal" to every comparison (issue 15's attack)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if getattr(func, "__name__", "") in ("equal", "allclose", "eq", "__eq__", "isclose"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


class LyingArray(numpy.ndarray):
    def __array_function__(self, func, types, args, kwargs):  # type: ignore[no-untyped-def]
        return True


def test_subclasses_come_back_as_base_types_with_their_real_values() -> None:
    liar = torch.zeros(4).as_subclass(LyingTensor)
    assert torch.equal(liar, torch.ones(4))  # the lie, in its own process
    rebuilt = decode_value(encode_value(liar))
    assert type(rebuilt) is torch.Tensor and not torch.equal(rebuilt, torch.ones(4))
    array = decode_value(encode_value(numpy.zeros(3).view(LyingArray)))
    assert type(array) is numpy.ndarray and not numpy.array_equal(array, numpy.ones(3))


def test_an_object_that_claims_to_be_a_tensor_is_opaque() -> None:
    class Pretender:
        __class__ = property(lambda self: torch.Tensor)  # type: ignore[assignment]

    assert isinstance(Pretender(), torch.Tensor)
    value = decode_value(encode_value(Pretender()))
    assert isinstance(value, Opaque) and not isinstance(value, torch.Tensor)


def test_containers_are_read_with_their_base_methods() -> None:
    class Shifty(list):  # type: ignore[type-arg]
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter([1.0, 1.0])

    assert decode_value(encode_value(Shifty([0.5, 0.25]))) == [0.5, 0.25]
    assert decode_value(encode_value({"k": (1, 2)})) == {"k": (1, 2)}


def test_a_tensors_device_travels_with_it() -> None:
    with StandIn("cuda") as standin:  # its tensors are CPU tensors underneath: the session says where
        on_device = torch.ones(2, device="cuda")
        encoded = encode_value([on_device, torch.ones(2)], where=standin.device_of)
    rebuilt = decode_value(encoded)
    assert [device_of(t) for t in rebuilt] == ["cuda", "cpu"] and getattr(rebuilt[0], DEVICE_ATTR) == "cuda"
    # An attribute a learner's code sets on its tensor says nothing: only the session does.
    forged = torch.ones(2)
    forged._grader_device = "cuda"  # type: ignore[attr-defined]
    assert device_of(decode_value(encode_value(forged))) == "cpu"


def test_what_cannot_be_sent_goes_as_its_type_name() -> None:
    huge = torch.empty(1 << 25, dtype=torch.uint8)
    value = decode_value(encode_value(huge))
    assert isinstance(value, Opaque) and value.type_name == "Tensor"
    assert isinstance(decode_value(encode_value(object())), Opaque)
