"""The private result channel between the sandboxed child and the grader.

One JSON object per line on an inherited pipe, each signed with HMAC-SHA256 under a key the
parent hands over on stdin before any learner code runs. Printing cannot reach the pipe,
files in the work dir are never read, and a line written to the pipe without the key is
rejected and reported as tampering.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any


def sign(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


class Writer:
    def __init__(self, fd: int, key: bytes) -> None:
        self._fd = fd
        self._key = key

    def send(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message, ensure_ascii=True, sort_keys=True).encode()
        line = sign(self._key, payload).encode() + b" " + payload + b"\n"
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]


def parse(key: bytes, line: bytes) -> dict[str, Any] | None:
    """The message, or None when the line was not signed with the key (forged or garbled)."""
    mac, _, payload = line.rstrip(b"\n").partition(b" ")
    if not hmac.compare_digest(mac, sign(key, payload).encode()):
        return None
    try:
        message = json.loads(payload)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
