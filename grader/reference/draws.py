"""The problems of one grading, drawn from its secret seed (issue 22, item 4).

A fixed problem has a fixed answer: one printed by a public message, or by a neighbour's report,
can be pasted in and computes nothing (9 points, measured before this module). So every grading
draws its own: the grader picks a seed (``os.urandom``, or ``grader grade --seed N`` to regrade),
gives it to the judge in its ``Plan`` — never to the learner process — and writes it in the
instructor's report; the checks ask ``draw`` (grader/checks/conftest.py) for their sizes and values.
What the learner process sees of it is only what a call needs (a tensor's values, a recipe's
arguments): a per-problem number derived from the seed, never the seed.

Every draw stays within the contract (shared/contract.md) and within what the checks' thresholds
were measured on: the sizes below are the ranges each threshold's comment names.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Draw:
    """One grading's problems: the same seed gives the same problems, in every check and every run."""

    seed: int

    def _rng(self, purpose: str) -> random.Random:
        return random.Random(f"{self.seed}/{purpose}")

    def derived(self, purpose: str) -> int:
        """A number for one problem (a generator's seed), that says nothing of the others."""
        return self._rng(purpose).randrange(1, 2**31)

    # -- ex2: the matrix size (the stand-in's cost model makes any n deterministic; 384-640 keeps a
    #    CPU matmul under 10 ms and the device's time far above the launch overhead)
    @property
    def matmul_n(self) -> int:
        return self._rng("ex2.n").choice((384, 448, 512, 576, 640))

    # -- ex3: what roundtrip() is handed — values no learner can know before the call
    def roundtrip_offset(self, purpose: str) -> tuple[int, int]:
        """``x = arange(k) * scale + offset``: small integers, exact in every dtype the checks use."""
        rng = self._rng(f"ex3.{purpose}")
        return rng.choice((1, 2, 3)), rng.randrange(-8, 9)

    # -- ex4: the chunk size and how many chunks fit (the stand-in runs out at the next one)
    @property
    def chunk_mb(self) -> int:
        """4 or 8 MiB: the smallest budget (5.5 chunks of 4 MiB) still holds a real GPU's 20 MiB segment."""
        return self._rng("ex4.chunk").choice((4, 8))

    @property
    def chunks_that_fit(self) -> int:
        return self._rng("ex4.fit").randrange(5, 12)

    @property
    def ex4_seed(self) -> int:
        return self.derived("ex4.problem")

    # -- ex5: the problem's weights and data, and its batch
    @property
    def ex5_seed(self) -> int:
        return self.derived("ex5.problem")

    @property
    def ex5_batch(self) -> int:
        return self._rng("ex5.batch").choice((48, 64, 80))

    @property
    def ex5_lr(self) -> float:
        """train_steps's ``lr`` (the contract's default is 1e-3, never drawn: a loop that ignores its
        ``lr`` trains at 1e-3 and its losses after the first step are not the reference's). The
        tampering rule's AMP-vs-FP32 gap (grader/checks/ex5_amp/workload.py, FP32_OWN) is the largest
        over the steps, so at least the first step's, which is computed before any update: no
        learning rate changes it."""
        return self._rng("ex5.lr").choice((5e-4, 2e-3, 3e-3))
