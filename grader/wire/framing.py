"""Whole messages over the judge ↔ learner socket: each frame its length, a number, one message.

The frame size is capped (``MAX_FRAME``): a learner's code flooding the socket is cut off, never
buffered without end. Standard library only.
"""

from __future__ import annotations

import os
import select
import struct
import time
from typing import Any

from grader.wire.codec import ProtocolError, decode, encode

MAX_FRAME = 64 * 1024 * 1024  # no check sends or expects more; a learner flooding the socket is cut off


class Connection:
    """One end of the judge ↔ learner socket: whole frames in and out, each numbered.

    A frame is its length, a sequence number and one message. The judge numbers each request;
    every answer — and the top-level events a ``Start`` brings — carries its request's number,
    so an answer to anything but the request in flight (bytes a learner's code wrote into the
    socket, a stale answer after them) is a protocol error, never misread as the answer.
    """

    HEADER = struct.Struct(">II")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""

    def send(self, message: Any, seq: int = 0) -> None:
        payload = encode(message)
        if len(payload) > MAX_FRAME:
            raise ProtocolError(f"a message of {len(payload)} bytes is over the {MAX_FRAME} limit")
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
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data

    def receive_numbered(self, expected: Any = None, deadline: float | None = None) -> tuple[int, Any]:
        """The next frame's number and message; EOFError when the other side is gone, TimeoutError
        past ``deadline`` (time.monotonic()), ProtocolError for anything but a message of the
        ``expected`` types."""
        length, seq = self.HEADER.unpack(self._read(self.HEADER.size, deadline))
        if length > MAX_FRAME:
            raise ProtocolError(f"a frame of {length} bytes is over the {MAX_FRAME} limit")
        return seq, decode(self._read(length, deadline), expected)

    def receive(self, expected: Any = None, deadline: float | None = None, seq: int | None = None) -> Any:
        """The next message; with ``seq``, it must answer that request."""
        got, message = self.receive_numbered(expected, deadline)
        if seq is not None and got != seq:
            raise ProtocolError(f"an answer numbered {got} while request {seq} is in flight")
        return message

    def close(self) -> None:
        os.close(self.fd)
