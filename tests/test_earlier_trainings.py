"""ex5's later checks read what its earlier checks' finished trainings saw (grader/checks/ex5_amp/workload.py
``Earlier``) instead of training again — and grade exactly as when they train on their own.

One class, graded twice by ``grader batch`` (in this process, on the session's warm servers): with the
shipped course (fp32_losses and fp16_uses_grad_scaler run before moves_model_and_data and modern_amp_api,
which then read them), and with a course that lists those two last (each later check trains itself). The
class: the reference solution, the mistakes those two checks exist for, mistakes that make the earlier
trainings fail (their checks must then train again and say why themselves), and a loop that raises on any
one-step training — the only kind the two later checks run of their own — which tells the two paths apart.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT, SOLUTIONS, ForkLaunchers, course_with, in_process

LATER = ("ex5.modern_amp_api", "ex5.moves_model_and_data")
MISTAKES = ROOT / "tests" / "submissions" / "mistakes" / "ex5_amp"
# A loop that trains, but raises when asked for a single step.
ONE_STEP_RAISES = "\n".join([
    "_train_steps = train_steps",
    "",
    "",
    "def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):",
    "    if steps == 1:",
    "        raise RuntimeError('this loop trains only for more than one step')",
    "    return _train_steps(model, inputs, targets, device, steps=steps, amp_dtype=amp_dtype, lr=lr)",
    "",
])
LEARNERS = {
    "reference": SOLUTIONS / "ex5_amp.py",
    **{name: MISTAKES / f"{name}.py" for name in (
        "deprecated_cuda_amp",  # modern_amp_api's mistake, seen by fp16_uses_grad_scaler's training
        "nothing_moved",  # moves_model_and_data's: the FP32 training finishes, on the CPU
        "model_not_moved",  # fp32_losses's training raises: moves_model_and_data trains again
        "data_not_moved",
        "losses_as_tensors",  # fp32_losses fails inside its training: nothing kept
    )},
}


def _class(root: Path) -> Path:
    cls = root / "class"
    for name, source in LEARNERS.items():
        (cls / name).mkdir(parents=True)
        shutil.copy(source, cls / name / "ex5_amp.py")
    (cls / "one_step_raises").mkdir()
    text = (SOLUTIONS / "ex5_amp.py").read_text(encoding="utf-8") + "\n\n" + ONE_STEP_RAISES
    (cls / "one_step_raises" / "ex5_amp.py").write_text(text, encoding="utf-8")
    return cls


def _graded(cls: Path, out: Path, course: Path | None,
            launchers: ForkLaunchers) -> dict[str, dict[str, dict[str, Any]]]:
    extra = ["--course", str(course)] if course is not None else []
    code, _, stderr = in_process(["batch", str(cls), "-o", str(out), "--workers", "2", "--quiet", "--lang", "en",
                                  *extra], launchers)
    assert code == 0, stderr
    checks = {}
    for report in sorted(out.glob("*.yaml")):
        if report.stem == "summary":
            continue
        data = yaml.safe_load(report.read_text(encoding="utf-8"))
        checks[report.stem] = {c["id"]: c for c in data["exercises"]["ex5"]["checks"]}
    return checks


def test_later_checks_read_earlier_trainings_and_grade_as_on_their_own(tmp_path: Path,
                                                                       fork_launchers: ForkLaunchers) -> None:
    cls = _class(tmp_path)
    shipped = _graded(cls, tmp_path / "shipped", None, fork_launchers)
    earlier_checks_last = course_with(tmp_path, {
        "      - {id: fp32_losses, points: 4}\n      - {id: fp16_uses_grad_scaler, points: 4}\n": "",
        "      - {id: amp_saves_memory, points: 4, visibility: hidden, timeout_s: 90}\n":
            "      - {id: amp_saves_memory, points: 4, visibility: hidden, timeout_s: 90}\n"
            "      - {id: fp32_losses, points: 4}\n      - {id: fp16_uses_grad_scaler, points: 4}\n",
    })
    alone = _graded(cls, tmp_path / "alone", earlier_checks_last, fork_launchers)
    assert set(shipped) == set(alone) == {*LEARNERS, "one_step_raises"}

    # Every learner but the one that tells the paths apart: the same verdict, message and devices.
    for learner in LEARNERS:
        for check in LATER:
            a, b = shipped[learner][check], alone[learner][check]
            assert (a["status"], a["message"], a["devices"]) == (b["status"], b["message"], b["devices"]), \
                (learner, check, a, b)
    # ... which are the mistakes' own (and the earlier checks' verdicts are the same in either order).
    assert shipped["deprecated_cuda_amp"]["ex5.modern_amp_api"]["status"] == "failed"
    assert shipped["nothing_moved"]["ex5.moves_model_and_data"]["status"] == "failed"
    assert shipped["model_not_moved"]["ex5.moves_model_and_data"]["status"] == "failed"
    assert shipped["reference"]["ex5.modern_amp_api"]["status"] == "passed"
    assert shipped["reference"]["ex5.moves_model_and_data"]["status"] == "passed"
    for learner in shipped:
        for check in ("ex5.fp32_losses", "ex5.fp16_uses_grad_scaler"):
            assert shipped[learner][check]["status"] == alone[learner][check]["status"], (learner, check)

    # A loop that cannot train one step: shipped, the two later checks never asked it to (they read the
    # earlier checks' trainings, on the same devices); on their own, they did, and it raised.
    raises_shipped, raises_alone = shipped["one_step_raises"], alone["one_step_raises"]
    assert raises_shipped["ex5.amp_saves_memory"]["status"] == "error"  # it does raise on one step
    for check in LATER:
        assert raises_shipped[check]["status"] == "passed", raises_shipped[check]
        assert raises_shipped[check]["devices"] == shipped["reference"][check]["devices"]
        assert raises_alone[check]["status"] == "error", raises_alone[check]
        assert "more than one step" in raises_alone[check]["message"]
