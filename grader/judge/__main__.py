"""``python -m grader.judge``: the judge, which runs the checks under pytest, asks the learner
process for every call, and decides.

Started by the grader (grader/run/sandbox.py) beside the learner process, connected to it by a
socket. It reads its Plan — and the channel's key — from stdin and sends the learner process its
Start at once, before it imports pytest, torch or a check (2-3 s on an exec'd judge): the learner's
top level then runs as soon as that process has its own imports, beside the judge's, instead of
after them. Nothing the learner process sends is read before the checks are collected
(grader/judge/session.py ``judge_collecting``, or its server's collection), so a failure to collect them
is still the grader's alone.
"""

from __future__ import annotations

import gc
import os
import sys

from grader.wire.codec import decode
from grader.wire.framing import LEARNER_BUDGET, Connection
from grader.wire.messages import START_SEQ, Done, GraderBroken, Plan
from grader.wire.signed import Writer


def main(collected: object = None) -> int:
    """``collected``: the checks a judge server collected before forking this judge (grader/judge/session.py
    ``Collected``), None where it did not."""
    plan = decode(sys.stdin.buffer.readline(), Plan)
    writer = Writer(plan.channel_fd, bytes.fromhex(plan.key))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # The learner process's bytes are hostile: every frame is held to a budget before it is read.
    conn = Connection(plan.learner_fd, budget=LEARNER_BUDGET)
    try:
        # Read by the learner process once its imports are done (a Start larger than the socket's buffer
        # waits for that here: only the overlap is lost).
        conn.send(plan.start, START_SEQ)
    except OSError as exc:
        writer.send(GraderBroken("child_start_failed", f"the learner process did not start ({exc})"))
        writer.send(Done(-1))
        os._exit(0)
    # The collector stays off through the imports and the checks' collection (as in the learner process,
    # grader/learner/__main__.py), until ``judge`` freezes what they made.
    gc.disable()
    from grader.judge.session import Collected, judge, judge_collecting  # pytest, torch and the checks' support

    if isinstance(collected, Collected):
        judge(plan, conn, writer, collected)
    judge_collecting(plan, conn, writer)


if __name__ == "__main__":
    sys.exit(main())
