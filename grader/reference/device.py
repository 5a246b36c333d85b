"""The emulated devices' facts, which the judge and the learner process must agree on.

The stand-ins (grader/emulation/standin.py) answer ``torch.cuda`` and ``torch.mps`` with these
names, capability and memory, raise PyTorch's own texts, and run on this cost model; the judge
(grader/judge/) expects the same facts and times from them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

NAMES: dict[str, str] = {"cuda": "Stand-in GPU (emulated on CPU)", "mps": "Stand-in Apple GPU (emulated on CPU)"}
TOTAL_MEMORY = 16 * 1024**3
CAPABILITY = (8, 0)
# What PyTorch itself says (checked on torch 2.13; MPS texts from its sources and bug reports).
NO_CUDA = "Torch not compiled with CUDA enabled"
# PyTorch's own words for two device mistakes of data loading, in every version it raises them in:
# a generator of one device handed to an op on another ("Expected a 'cuda' device type for generator
# but found 'cpu'": a DataLoader's shuffle under torch.set_default_device), and pinning a tensor that is
# already on the device ("cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned").
GENERATOR_OFF_DEVICE = "device type for generator but found"
PIN_OFF_CPU = "only dense CPU tensors can be pinned"
# What the learner's code running out of memory looks like, from inside its process and from the
# judge: Python's, PyTorch's (CPU and CUDA allocators) and the C++ runtime's words for it.
MEMORY_SIGNS = ("MemoryError", "can't allocate memory", "std::bad_alloc", "OutOfMemoryError", "out of memory")
# What the learner's code hitting the file-size limit looks like from inside its process: one file
# past it (EFBIG), or files together past it — the sandbox's work dir and /dev/shm are tmpfs as large
# as the limit (grader/run/isolation.py ``view_args``), full at the limit (ENOSPC). Writers that say
# neither (torch.save: "unexpected pos ...") are caught by the learner process's look at its files
# (grader/learner/toplevel.py ``files_full``). A check's call (grader/judge/plugin.py) and a top-level
# cell (grader/learner/toplevel.py) are told the size limit by the same signs.
FILE_LIMIT_SIGNS = ("File too large", "[Errno 27]", "No space left on device", "[Errno 28]")
MPS_FLOAT64 = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
               "Please use float32 instead.")


@dataclass(frozen=True)
class CostModel:
    """Virtual costs; chosen so that each timing mistake is off by a large factor.

    A matmul of n=512 costs 268 µs on the stand-in and 2.7 ms on the virtual CPU; a launch
    costs the host 10 µs, so timing without synchronize reads ~25x too low; the first matmul
    costs 30 ms more (library load + autotune), so no warm-up reads >20x too high over 5
    repeats; copying both operands in the loop adds 2 x 1 MiB / 12 GB/s = 175 µs (+65 %).

    An op's work is what PyTorch's FLOP counter counts for it (torch.utils.flop_counter: products,
    convolutions, attention, forward and backward; so a product written as mm, @, einsum, linear or a
    convolution costs the same), any other op the bytes it reads and writes; the stand-in charges
    the larger of the two (grader/emulation/standin.py). tests/conformance measures 18 real-size
    cases: each is charged at least its FLOP-counter work at ``gpu_flops``.
    """

    launch_s: float = 10e-6
    gpu_flops: float = 1e12  # an op's FLOPs as torch.utils.flop_counter counts them (2*n**3 for n x n @ n x n)
    cpu_flops: float = 1e11
    elementwise_bytes_per_s: float = 2e11  # any other op: the bytes it reads and writes
    transfer_bytes_per_s: float = 12e9
    first_matmul_s: float = 30e-3
    cpu_op_s: float = 2e-6  # the host's time for one op on the CPU that the FLOP counter does not count

    def matmul_seconds(self, n: int) -> float:
        """One n x n float32 product on the stand-in (a real GPU is measured, not modelled)."""
        return 2.0 * n**3 / self.gpu_flops

    def smaller(self, factor: int) -> CostModel:
        """This model for problems ``factor`` times smaller on each side, at the same virtual times: an
        n/f x n/f product costs what n x n does here (its FLOPs are f**3 fewer), a copy or elementwise
        op of an n/f x n/f tensor what n x n's does (f**2 fewer bytes); a launch, the first product's
        set-up and a host op are the same. A timing check so runs the learner's code on f**3 less real
        arithmetic and reads the same times, mistakes and margins as at the size it drew."""
        if factor == 1:
            return self
        return dataclasses.replace(self, gpu_flops=self.gpu_flops / factor**3, cpu_flops=self.cpu_flops / factor**3,
                                   elementwise_bytes_per_s=self.elementwise_bytes_per_s / factor**2,
                                   transfer_bytes_per_s=self.transfer_bytes_per_s / factor**2)
