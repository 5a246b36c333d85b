"""``python -m grader.learner FD DEVICE GPU_SHARE [ahead]``: the learner process (or ``main()``, forked by a server).

Before any learner code exists here it sends the judge what this machine has (``Hello``); then it
waits for ``Start``, runs the learner's top level and answers requests until the judge hangs up.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys

from grader.learner.kernel import Kernel, install
from grader.learner.runner import Runner
from grader.learner.sessions import apply_gpu_share, hello
from grader.wire.codec import ProtocolError
from grader.wire.framing import LEARNER_BUDGET, Connection
from grader.wire.messages import IMPORT_AHEAD_ARG, IMPORTED_AHEAD, RequestedDevice, Start, requested_device


def import_ahead() -> None:
    """Import IMPORTED_AHEAD (grader/wire/messages.py: what the first optimizer step of a process
    imports, 2.5-3.5 CPU-s) after saying hello, while the judge finishes starting, before any learner
    code runs: the checks of an exercise that trains (course.yaml ``trains``: ex4, ex5) would
    otherwise pay it inside the first one. Only a run with such checks does (``ahead``): a run of
    ex1-ex3 alone, a learner's self-check of one exercise, would spend seconds on nothing. A fork
    server's child has them already (grader/spawn/forkserver.py ``serve``).

    Here, in this thread, never beside the learner's code: on a thread of its own (as until
    2026-12-02) it raced the learner's own imports — a top level's ``from torch.utils.data import
    DataLoader`` while torch._dynamo was being imported is a concurrent circular import, which the
    import system resolves by handing one side a partially initialized module, and every later
    optimizer step raised "partially initialized module 'torch._dynamo' has no attribute 'utils'"
    (PyTorch's Reproducibility idiom lost 30 points: tests/test_harness.py). One that fails here is
    left out of sys.modules by the import system and fails again, with the learner's own traceback,
    where the learner's code imports it."""
    for name in IMPORTED_AHEAD:
        if name not in sys.modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)


def main(fd: int, device: RequestedDevice, gpu_share: float = 1.0, *, ahead: bool = False) -> int:
    """``gpu_share``: the fraction of the GPU's memory this process may fill (a batch's workers split it);
    ``ahead``: this run has checks of an exercise that trains (``import_ahead``)."""
    conn = Connection(fd, sends=LEARNER_BUDGET)  # what the judge accepts (grader/wire/framing.py)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    apply_gpu_share(gpu_share)
    conn.send(hello(device))
    if ahead:
        import_ahead()
    code = 0
    try:
        seq, start = conn.receive_numbered(Start)
        os.chdir(start.workdir)
        sys.path.insert(0, start.workdir)
        install(Kernel())  # get_ipython(), display, input(), google.colab for the learner's cells
        # What was imported so far is never collected: a gc the learner's code triggers does not
        # walk torch's objects (nor dirty a fork server's pages).
        gc.freeze()
        Runner(conn, gpu_share).serve(start, seq)
    except (EOFError, ConnectionError):
        pass  # the judge is done, or gone (it hangs up on a protocol break): nothing for the learner's output
    except ProtocolError:
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Threads or atexit hooks the learner left behind must not keep the process alive.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), requested_device(sys.argv[2]), float(sys.argv[3]),
                  ahead=sys.argv[4:5] == [IMPORT_AHEAD_ARG]))
