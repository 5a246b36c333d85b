"""The seccomp filter every sandboxed learner process runs under: the kernel's keyrings refused.

Namespaces give a learner process its own pids, mounts, IPC and network (grader/run/isolation.py,
grader/spawn/confine.py ``enter_run``), but the kernel's keyrings are not namespaced: every learner
process runs as ``nobody``, and a key one adds to that uid's user keyring, or to its persistent
keyring (which outlives every process for days), the next one reads — measured here, across a
batch's forked learner processes and into a later ``grader grade``'s exec'd one. Docker's default
profile refuses the same three calls for the same reason. Nothing a learner's code needs uses them.

The filter is a classic BPF program, handed to bubblewrap (``--seccomp FD``), which installs it
just before it execs the sandbox's command: an exec'd learner process, or a learner fork server,
whose forked children inherit it. A call of another architecture's ABI (i386's ``int 0x80`` on
x86-64, x32's numbers) is refused too. On an architecture not listed here there is no filter
(``filter_program()`` is None); where bubblewrap cannot install it, the sandbox runs without it
(grader/run/isolation.py ``probe``); either way the isolation every report carries lists it as missing.
"""

from __future__ import annotations

import errno
import platform
import struct

# <linux/audit.h> and each architecture's syscall table: add_key, request_key, keyctl.
_ARCHES = {
    "x86_64": (0xC000003E, (248, 249, 250)),
    "aarch64": (0xC00000B7, (217, 218, 219)),
}
_X32_SYSCALL_BIT = 0x40000000

# <linux/filter.h>, <linux/seccomp.h>
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_REFUSE = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO: the call fails with EPERM
_NR, _ARCH = 0, 4  # offsets in struct seccomp_data


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)  # struct sock_filter


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture (or ``machine``'s), as bubblewrap reads it."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, refused = arch
    # Instruction i jumps jt/jf instructions past i + 1; the last instruction refuses.
    last = 4 + len(refused) + 1
    program = [_op(_LD_W_ABS, _ARCH), _op(_JEQ_K, audit_arch, 0, last - 2),
               _op(_LD_W_ABS, _NR), _op(_JGE_K, _X32_SYSCALL_BIT, last - 4, 0)]
    program += [_op(_JEQ_K, number, last - (5 + i), 0) for i, number in enumerate(refused)]
    program += [_op(_RET_K, _ALLOW), _op(_RET_K, _REFUSE)]
    return b"".join(program)
