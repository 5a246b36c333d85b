"""``python -m grader.learner FD DEVICE GPU_SHARE``: the learner process (or ``main()``, forked by a server).

Before any learner code exists here it sends the judge what this machine has (``Hello``); then it
waits for ``Start``, runs the learner's top level and answers requests until the judge hangs up.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.wire.messages import RequestedDevice


def main(fd: int, device: RequestedDevice, gpu_share: float = 1.0) -> int:
    """``gpu_share``: the fraction of the GPU's memory this process may fill (a batch's workers split it)."""
    # Python's collector walks every object an import has made so far, and torch's import makes enough for
    # three full passes and ~400 smaller ones: 0.1-0.2 s of an exec'd process's start, measured. Off until
    # what is imported is frozen (below), before any learner code runs. (A forked child finds its
    # server's modules imported: nothing to collect meanwhile.)
    gc.disable()
    from grader.learner.deferred import defer_dynamo
    from grader.learner.kernel import Kernel, install
    from grader.learner.runner import Runner
    from grader.learner.sessions import apply_gpu_share, hello
    from grader.learner.toplevel import quiet_lost_limits
    from grader.wire.codec import ProtocolError
    from grader.wire.framing import LEARNER_BUDGET, Connection
    from grader.wire.messages import Start

    defer_dynamo()  # the first optimizer step would import it: 2.2 CPU-s (grader/learner/deferred.py)
    conn = Connection(fd, sends=LEARNER_BUDGET)  # what the judge accepts (grader/wire/framing.py)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    apply_gpu_share(gpu_share)
    conn.send(hello(device))
    code = 0
    try:
        seq, start = conn.receive_numbered(Start)
        os.chdir(start.workdir)
        sys.path.insert(0, start.workdir)
        install(Kernel())  # get_ipython(), display, input(), google.colab for the learner's cells
        quiet_lost_limits()
        # What was imported so far is never collected: a gc the learner's code triggers does not
        # walk torch's objects (nor dirty a fork server's pages).
        gc.freeze()
        gc.enable()
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
    from grader.wire.messages import requested_device

    sys.exit(main(int(sys.argv[1]), requested_device(sys.argv[2]), float(sys.argv[3])))
