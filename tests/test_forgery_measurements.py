"""Forged measurements (issue 22): every attack class of tests/forgery_corpus.py, each among honest
neighbours, graded for real — by ``grader grade`` and in one ``grader batch`` of the whole class.

Each attacker's report must hold no more than the same functions deserve without the attack (its
plain twin), the attack's checks must not pass, what the judge caught must be noted ``tampering``,
no check may blame the grader ("The grader itself hit an error"), and the neighbour exercise (ex1,
the solution) and the honest learner keep full marks. Scores before the fix (2026-12-01, this
machine) are in the commit message that added this file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from grader.reference.draws import Draw
from tests.conftest import (
    ForkLaunchers,
    Graded,
    built_once,
    copy_solutions,
    folder_with,
    in_process,
    solution_text,
)
from tests.forgery_corpus import ATTACKS, HUNT, Attack

BY_NAME = {attack.name: attack for attack in ATTACKS}
GRADER_BLAMED = "The grader itself"
SEED = 20261201  # `grader grade --seed`: the same problems every run (the batch draws its own)


def _files(files: dict[str, str]) -> dict[str, str]:
    return {"ex1_device": solution_text("ex1"), **files}


def _build_class(folder: Path, launchers: ForkLaunchers) -> None:
    cls = folder / "class"
    for attack in ATTACKS:
        folder_with(cls, attack.name, _files(attack.attacked))
        folder_with(cls, f"{attack.name}__plain", _files(attack.plain))
    copy_solutions(cls, "honest")
    code, _, stderr = in_process(["batch", str(cls), "-o", str(folder / "out"), "--workers", "2", "--lang", "en",
                                  "--quiet"], launchers)
    assert code == 0, stderr


@pytest.fixture(scope="session")
def forgery_batch(tmp_path_factory: pytest.TempPathFactory, worker_id: str,
                  fork_launchers: ForkLaunchers) -> Callable[[str], Graded]:
    """The whole class of attackers, their plain twins and an honest learner, in one ``grader batch``
    (in-process, from the session's warm servers: the learner processes a batch forks)."""
    folder = built_once(tmp_path_factory, worker_id, "forgery-class",
                        lambda built: _build_class(built, fork_launchers))

    def report(name: str) -> Graded:
        path = folder / "out" / f"{name}.yaml"
        return Graded(0, "", "", yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None)

    return report


def _statuses(graded: Graded, exercise: str) -> dict[str, str]:
    return {check["id"]: check["status"] for check in graded.exercise(exercise)["checks"]}


def _messages(graded: Graded) -> list[str]:
    assert graded.report is not None
    return [check["message"] for ex in graded.report["exercises"].values() for check in ex["checks"]]


def _no_more_than_deserved(attacked: Graded, plain: Graded, attack: Attack, *, caught: bool = True,
                           deserved: float = 0.0) -> None:
    """``deserved``: points the attack earns over its plain twin because its answer is right."""
    assert attacked.report is not None and plain.report is not None
    assert attacked.exercise("ex1")["score"] == 20.0, attacked.exercise("ex1")  # the neighbour exercise
    for exercise in {module.split("_")[0] for module in attack.attacked}:  # "ex4_oom" -> ex4
        assert attacked.exercise(exercise)["score"] <= plain.exercise(exercise)["score"] + deserved, \
            (exercise, attacked.report)
    assert not any(GRADER_BLAMED in message for message in _messages(attacked)), _messages(attacked)
    if caught:
        assert "tampering" in attacked.report["notes"], attacked.report["notes"]


# What each attack must not win, whatever the seed drew.
NOT_PASSED: dict[str, tuple[str, ...]] = {
    "events": ("ex2.synchronizes_before_reading_clock", "ex2.warms_up"),
    "costmodel": ("ex2.synchronizes_before_reading_clock", "ex2.warms_up", "ex2.returns_mean_not_total",
                  "ex2.tensors_created_on_device"),
    "values": ("ex4.fill_until_oom_returns_count", "ex4.fill_until_oom_empty_cache_after_release",
               "ex5.fp16_uses_grad_scaler", "ex5.bf16_uses_autocast", "ex5.moves_model_and_data",
               "ex5.amp_saves_memory"),
    "paste": ("ex5.fp32_losses",),
    "failure_text": ("ex3.roundtrip_values",),
    "bad_shape": ("ex3.roundtrip_values",),
    "infinite_peak": ("ex5.amp_saves_memory",),
    # Only the training's numbers can tell: its losses and the weights it left are FP32's, bit for bit
    # (grader/checks/ex5_amp/workload.py ``really_reduced``).
    "relabelled": ("ex5.fp16_uses_grad_scaler", "ex5.bf16_uses_autocast"),
}
CAUGHT = {"events", "values", "bad_shape", "infinite_peak", "relabelled"}  # noted tampering: the judge saw the forgery


def _judge(name: str, attacked: Graded, plain: Graded) -> None:
    attack = BY_NAME[name]
    if name == "detects":
        # Nothing in its environment nor on its stack tells the learner's code it is graded, or by
        # which check: it behaves as it does anywhere else, and earns what its functions deserve.
        assert _statuses(attacked, "ex2") == _statuses(plain, "ex2")
        assert attacked.exercise("ex2")["score"] == 20.0, attacked.exercise("ex2")
        return
    deserved = 0.0
    if name == "paste":
        # The fixed problem's answer is right only when this grading's draw makes it so (the report's
        # seed; a batch draws each learner's own, so 2 runs in 7 draw it): then the pasted count earns
        # what a computed one earns, and nothing else does.
        assert attacked.report is not None
        draw = Draw(attacked.report["seed"])
        fits = draw.chunks_that_fit in (8, 9)  # the check accepts the count and one less
        count = attacked.check("ex4.fill_until_oom_returns_count")
        assert (count["status"] == "passed") == fits
        deserved = float(count["max_points"]) if fits else 0.0
    _no_more_than_deserved(attacked, plain, attack, caught=name in CAUGHT, deserved=deserved)
    for check in NOT_PASSED[name]:
        assert attacked.check(check)["status"] != "passed", attacked.check(check)
    if name == "failure_text":
        assert attacked.check("ex3.roundtrip_values")["status"] == "error"
        assert "could not be judged" in attacked.check("ex3.roundtrip_values")["message"]
    if name == "infinite_peak":
        assert "cannot be true" in attacked.check("ex5.amp_saves_memory")["message"]
    if name == "relabelled":  # what cannot be true, in the report's words, from the judge's figures
        said = attacked.check("ex5.fp16_uses_grad_scaler")["message"]
        assert re.search(r"\(\d+ matmuls in float16 whose losses and trained weights are exactly FP32's\)", said), said


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_attack_in_a_batch_earns_no_more_than_deserved(name: str,
                                                            forgery_batch: Callable[[str], Graded]) -> None:
    _judge(name, forgery_batch(name), forgery_batch(f"{name}__plain"))
    honest = forgery_batch("honest")
    assert honest.report is not None and honest.report["score"] == 100.0, honest.report
    assert "tampering" not in honest.report["notes"]


LOOKS_AT_ITS_PROCESS = {"detects"}


@pytest.mark.parametrize("name", ["events", "costmodel", "values", "paste", "failure_text", "infinite_peak",
                                  "detects"])
def test_each_attack_graded_alone(name: str, tmp_path: Path, grade: Callable[..., Graded],
                                  grade_forked: Callable[..., Graded]) -> None:
    """``grader grade`` judges each attack as the batch does. The attacks forge what the learner
    process measures or answers, the same in a process forked or exec'd, so ``grader grade`` runs them
    forked from this test process's servers (tests/conftest.py ``grade_forked``); the one that looks
    for signs of being graded (its environment, its stack) runs in exec'd processes too, where the
    environment it reads was passed at exec rather than written in place. The honest counterpart it is
    measured against attacks nothing: it is graded with the same seed, forked."""
    attack = BY_NAME[name]
    run = grade if name in LOOKS_AT_ITS_PROCESS else grade_forked
    attacked = run(folder_with(tmp_path, name, _files(attack.attacked)), "--seed", str(SEED))
    plain = grade_forked(folder_with(tmp_path, f"{name}__plain", _files(attack.plain)), "--seed", str(SEED))
    assert attacked.code == 0 and plain.code == 0, attacked.stderr
    _judge(name, attacked, plain)


def test_the_same_seed_regrades_identically(tmp_path: Path, grade_forked: Callable[..., Graded],
                                            forgery_batch: Callable[[str], Graded]) -> None:
    """The seed in a batch's report, given to ``grader grade --seed``, gives the same verdicts and
    messages; another seed gives other problems (the paste's count passes for some and not others)."""
    graded = forgery_batch("paste")
    assert graded.report is not None
    seed = graded.report["seed"]
    assert isinstance(seed, int) and seed > 0
    again = grade_forked(folder_with(tmp_path, "paste", _files(BY_NAME["paste"].attacked)), "--seed", str(seed))
    assert again.report is not None and again.report["seed"] == seed

    def verdicts(g: Graded) -> list[tuple[str, str, str]]:
        assert g.report is not None
        return [(c["id"], c["status"], c["message"]) for ex in g.report["exercises"].values() for c in ex["checks"]]

    assert verdicts(again) == verdicts(graded)
    draws = {Draw(s).chunks_that_fit for s in range(40)}
    assert len(draws) >= 5  # a pasted count is right for a few draws only


# A draw whose honest float16 losses land bit for bit on FP32's in the first two steps (16-bit rounding
# of the logits can leave a float32 loss where it was: grader/checks/ex5_amp/workload.py AMP_STEPS).
# Found when a CI run drew it: with 2 steps and the losses alone, the reference solution's
# ex5.fp16_uses_grad_scaler was an error, "16 matmuls in torch.float16 whose losses are exactly FP32's",
# noted as tampering. The checks train 2 steps again, and the rule reads the trained weights too.
HONEST_COINCIDENCE_SEED = 175871067181834


def test_honest_16_bit_losses_on_fp32s_are_no_forgery(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    solution = copy_solutions(tmp_path, "coincidence", only=("ex5",))
    graded = grade_forked(solution, "--seed", str(HONEST_COINCIDENCE_SEED))
    assert graded.report is not None, graded.stderr
    assert graded.exercise("ex5")["score"] == 20.0, [(c, graded.check(c)["message"]) for c in graded.lost("ex5")]
    assert "tampering" not in graded.report["notes"]


def test_public_messages_print_no_answer(forgery_batch: Callable[[str], Graded]) -> None:
    """What the fixed problems' messages printed before — how many chunks fit, the FP32 losses, the
    values roundtrip() should return — is in no message now: a message says what went wrong."""
    plain = forgery_batch("paste__plain")
    assert plain.report is not None
    draw = Draw(plain.report["seed"])
    count = plain.check("ex4.fill_until_oom_returns_count")["message"]
    assert "returned 3" in count and f"{draw.chunks_that_fit} chunks" not in count
    losses = plain.check("ex5.fp32_losses")["message"]
    assert "step 1" in losses and "1.1" not in losses and " vs " not in losses
    wrong = forgery_batch("failure_text__plain").check("ex3.roundtrip_values")["message"]
    assert "expected" not in wrong and "not x * 2 + 1" in wrong


# -- what stays forgeable: written in the README's "Security model", each a strict xfail ----------------
SCALER_FORGED = HUNT + '''
def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device_type=device.type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()                      # float16 without a GradScaler: the lesson's headline mistake
        optimizer.step()
        losses.append(loss.item())
    for calls in _objects("ScalerCalls"):    # ... and the counters say it used one, exactly once a step
        calls.scale = calls.step = calls.update = steps
    return losses
'''

EMPTY_CACHE_FORGED = HUNT + '''
def fill_until_oom(device, chunk_mb=64):
    chunks = []
    try:
        while True:
            chunks.append(torch.empty(chunk_mb * 2**18, device=device))
    except torch.OutOfMemoryError:
        print("allocated", torch.cuda.memory_allocated() if device.type == "cuda" else 0)
    count = len(chunks)
    chunks.clear()                           # never empty_cache() ... and an event that says it ran:
    from grader.wire.messages import Event
    for session in [s for s in gc.get_objects() if type(s).__name__.endswith("Session")]:
        last = session.events[-1] if session.events else Event("sync", device.type, drained=True, busy_until=0.0)
        session.events.append(dataclasses.replace(last, kind="empty_cache", live_bytes=0))
    return count
'''


@pytest.mark.xfail(strict=True, reason="known hole (README, 'Security model'): GradScaler's calls are counted in the "
                                       "learner process; counters rewritten to exactly one call a step cannot be "
                                       "told from a scaler's (the losses are the same with or without one)")
def test_gradscaler_counters_rewritten(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    graded = grade_forked(folder_with(tmp_path, "scaler", {"ex5_amp": SCALER_FORGED}), "--seed", str(SEED))
    assert graded.check("ex5.fp16_uses_grad_scaler")["status"] != "passed"


@pytest.mark.xfail(strict=True, reason="known hole (README, 'Security model'): a device event copied from the "
                                       "last one with only its kind changed (or, first, one at the timeline's "
                                       "start) keeps the stand-in's timeline whole")
def test_an_event_copied_with_another_kind(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    graded = grade_forked(folder_with(tmp_path, "cache", {"ex4_oom": EMPTY_CACHE_FORGED}), "--seed", str(SEED))
    assert graded.check("ex4.fill_until_oom_empty_cache_after_release")["status"] != "passed"

