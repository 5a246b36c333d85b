"""Whole messages over the judge ↔ learner socket: each frame its length, a number, one message.

Each end reads with a ``Budget``, checked before anything of a frame is allocated: its length from
the header, then how many JSON values it can hold (every object, array and separator is one),
counted on the bytes before they are parsed. The judge reads the learner process — whose bytes a
learner's code can write itself — with ``LEARNER_BUDGET``: a 60 MB frame of ``{},`` once became
1.4 GiB of dicts in the judge. Buffering is linear: a frame read in many chunks is copied once.
Standard library only.
"""

from __future__ import annotations

import os
import select
import struct
import time
from dataclasses import dataclass
from typing import Any

from grader.wire.codec import ProtocolError, decode, encode

MAX_FRAME = 64 * 1024 * 1024  # what the judge may send (a Start holds the learner's sources)


@dataclass(frozen=True)
class Budget:
    """What one frame may hold: its bytes, and its JSON values (objects, arrays, separators)."""

    size: int = MAX_FRAME
    items: int | None = None  # None: not counted (a trusted sender)

    def check(self, payload: bytes) -> None:
        if self.items is not None:
            items = payload.count(b",") + payload.count(b"[") + payload.count(b"{")
            if items > self.items:
                raise ProtocolError(f"a frame of {items} values is over the {self.items} budget")


# What the judge accepts from the learner process. Measured 2026-12-01 grading solutions/,
# lesson_style and modern_style: the largest frame 405 KB (an inspected optimizer's state), the most
# values 994 (ex5's losses with their events); 40 and 500 times that.
LEARNER_BUDGET = Budget(16 * 1024 * 1024, 500_000)


class Connection:
    """One end of the judge ↔ learner socket: whole frames in and out, each numbered.

    A frame is its length, a sequence number and one message. The judge numbers each request;
    every answer — and the top-level events a ``Start`` brings — carries its request's number,
    so an answer to anything but the request in flight (bytes a learner's code wrote into the
    socket, a stale answer after them) is a protocol error, never misread as the answer.
    """

    HEADER = struct.Struct(">II")

    def __init__(self, fd: int, budget: Budget = Budget(), sends: Budget = Budget()) -> None:
        self.fd = fd
        self.budget = budget  # what a frame received may hold
        self.sends = sends  # what a frame sent may hold (the learner process sends what the judge accepts)
        self._buffer = bytearray()

    def send(self, message: Any, seq: int = 0) -> None:
        payload = encode(message)
        if len(payload) > self.sends.size:
            raise ProtocolError(f"a message of {len(payload)} bytes is over the {self.sends.size} limit")
        self.sends.check(payload)
        view = memoryview(self.HEADER.pack(len(payload), seq) + payload)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]

    def _read(self, count: int, deadline: float | None) -> bytes:
        while len(self._buffer) < count:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    raise TimeoutError("no answer in time")
            chunk = os.read(self.fd, max(65536, count - len(self._buffer)))
            if not chunk:
                raise EOFError("the other side closed the connection")
            self._buffer += chunk
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    def receive_numbered(self, expected: Any = None, deadline: float | None = None) -> tuple[int, Any]:
        """The next frame's number and message; EOFError when the other side is gone, TimeoutError
        past ``deadline`` (time.monotonic()), ProtocolError for anything but a message of the
        ``expected`` types."""
        length, seq = self.HEADER.unpack(self._read(self.HEADER.size, deadline))
        if length > self.budget.size:
            raise ProtocolError(f"a frame of {length} bytes is over the {self.budget.size} limit")
        payload = self._read(length, deadline)
        self.budget.check(payload)
        try:
            return seq, decode(payload, expected)
        except MemoryError:  # past the reader's own memory limit (the judge's): not an answer
            raise ProtocolError(f"a frame of {length} bytes too large to read") from None

    def receive(self, expected: Any = None, deadline: float | None = None, seq: int | None = None) -> Any:
        """The next message; with ``seq``, it must answer that request."""
        got, message = self.receive_numbered(expected, deadline)
        if seq is not None and got != seq:
            raise ProtocolError(f"an answer numbered {got} while request {seq} is in flight")
        return message

    def close(self) -> None:
        os.close(self.fd)
