"""The private result channel between the judge and the grader.

One message (grader/wire/messages.py) per line on an inherited pipe, each signed with HMAC-SHA256
under a key the grader hands the judge on stdin. The learner process never has the key, so a
line it manages to write to the pipe (through /proc, where isolation is off) is rejected and
reported as tampering, and nothing it prints can reach the pipe.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from grader.wire.codec import ProtocolError, decode, encode
from grader.wire.messages import JudgeReport


def sign(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


class Writer:
    def __init__(self, fd: int, key: bytes) -> None:
        self._fd = fd
        self._key = key

    def send(self, message: Any) -> None:
        payload = encode(message)
        line = sign(self._key, payload).encode() + b" " + payload + b"\n"
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]


def parse(key: bytes, line: bytes) -> Any | None:
    """The judge's message, or None when the line was not signed with the key (forged or garbled)."""
    mac, _, payload = line.rstrip(b"\n").partition(b" ")
    if not hmac.compare_digest(mac, sign(key, payload).encode()):
        return None
    try:
        return decode(payload, JudgeReport)
    except ProtocolError:
        return None
