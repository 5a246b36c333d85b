"""ex4.backoff_steps_once — an example check that needs a new measurement: how many times the
learner's train_step_with_backoff() called optimizer.step() ("exactly once, after every
micro-batch has run", says the stub).

Nothing the judge gets back from a call says so — a call returns plain data, and the optimizer
lives in the learner process — so the learner process has to count, and the judge has to ask for
the count and read it. These are the places that measurement touched, on both sides of the trust
boundary (each marked "optimizer steps" / ``count_steps``):

  learner process (untrusted)  grader/learner/instruments.py   counted_steps(): torch's global step hook
                               grader/learner/runner.py        turns it on for a Call that asks for it
  the wire (both)              grader/wire/messages.py         Call.count_steps: the judge's request
  judge (trusted)              grader/judge/proxy.py           sends the flag; Figures.optimizer_steps
                               grader/judge/devices.py         dev.instruments(count_steps=True)
  the check                    this file

The count comes from the learner process, where the learner's code runs too: like the device
events, code that goes looking can change it (README, "Security model"). A check that needs a
number the learner must not forge computes it in the judge instead, from values.

Installed by tests/test_examples.py as grader/checks/ex4_oom/test_backoff_steps_once.py with
``- {id: backoff_steps_once, points: 2, visibility: hidden}`` under ex4 in course.yaml; the
mistake written for it is docs/examples/mistakes/ex4_oom/steps_every_micro_batch.py.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.checks.ex4_oom.workload import budget_forcing_backoff
from grader.judge.api import Device, LearnerModule, fail
from grader.reference.draws import Draw

HINT = {
    "vi": "Đọc lại snippet gradient accumulation: optimizer.step() nằm ngoài vòng lặp micro-batch.",
    "en": "Reread the gradient accumulation snippet: optimizer.step() is outside the micro-batch loop.",
}
MESSAGES = {
    "ex4.steps_not_once": {
        "vi": "train_step_with_backoff() gọi optimizer.step() {got} lần: gọi đúng một lần, sau khi mọi micro-batch "
              "đã cộng dồn gradient.",
        "en": "train_step_with_backoff() called optimizer.step() {got} times: call it exactly once, after every "
              "micro-batch has added its gradients.",
    },
}


def test_backoff_steps_once(ex4: LearnerModule, devices: Callable[..., list[Device]], draw: Draw) -> None:
    budget = budget_forcing_backoff()  # the full batch runs out of memory: the step must back off
    for dev in devices("cpu", "cuda"):
        with dev:
            model, inputs, targets, optimizer = dev.build("ex4.problem", draw.ex4_seed)
            (loss_fn,) = dev.build("loss.cross_entropy")
            with dev.instruments(meter_budget=budget, count_steps=True) as figures:
                ex4.train_step_with_backoff(model, inputs, targets, loss_fn, optimizer)
        if figures.optimizer_steps != 1:
            fail("ex4.steps_not_once", device=dev.label, got=figures.optimizer_steps)
