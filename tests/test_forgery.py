"""Forging a verdict (issue 15): each attack a learner's file can make on the judge, graded for real.

The attacker's functions are wrong; beside them, the solution of another exercise is right. Each
attack must leave the attacker with what its functions deserve — the checks of the attacked
exercise as for the same functions without the attack, or failed where the attack broke the
grader's connection — and the other exercise with its full score. The attacks on the processes
(the channel's key, the judge's socket, the judge's pytest and verdicts) run in ``grader grade``'s own
exec'd processes (``grade``), where what they reach was set up at exec; the attacks on what the
judge reads (lying tensor subclasses, a session's events rewritten) reach the same in a forked
learner process and are graded in this test process (tests/conftest.py ``grade_forked``), as are the
same functions without the attack, what an attack is measured against.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import Graded, folder_with, solution_text

WRONG_EX3 = '''
import numpy, torch

def roundtrip(x, device):
    return x            # no arithmetic, on no device

def to_numpy(t):
    return numpy.zeros(1)
'''

KEY_HUNT = '''
import gc, glob, hashlib, hmac, json, os, re
CANDIDATES = set()
for obj in gc.get_objects():
    if isinstance(obj, (bytes, bytearray)) and len(obj) == 32:
        CANDIDATES.add(bytes(obj))
    elif isinstance(obj, str) and re.fullmatch(r"[0-9a-f]{64}", obj):
        CANDIDATES.add(bytes.fromhex(obj))
for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    CANDIDATES.update(bytes.fromhex(m.decode()) for m in re.findall(rb"[0-9a-f]{64}", data))
LINES = b""
for key in CANDIDATES | {b"0" * 32}:  # what it found, and a guess
    for check in ("roundtrip_values", "roundtrip_keeps_dtype", "to_numpy_cpu", "to_numpy_grad_and_device",
                  "roundtrip_returns_cpu", "roundtrip_computes_on_device", "roundtrip_input_unchanged"):
        payload = json.dumps({"$msg": "CheckEnded", "check": "ex3." + check, "status": "passed"}).encode()
        LINES += hmac.new(key, payload, hashlib.sha256).hexdigest().encode() + b" " + payload + b"\\n"

def spray():
    """Every pipe of this run's processes (the grader's children), and every fd of this one."""
    siblings = set()
    for task in glob.glob(f"/proc/{os.getppid()}/task/*/children"):
        siblings.update(int(pid) for pid in open(task).read().split())
    for pid in siblings:
        for fd in glob.glob(f"/proc/{pid}/fd/*"):
            try:
                if os.readlink(fd).startswith("pipe:"):
                    out = os.open(fd, os.O_WRONLY | os.O_NONBLOCK)
                    os.write(out, LINES)
                    os.close(out)
            except OSError:
                pass
    for fd in range(3, 64):
        try:
            os.write(fd, LINES)
        except OSError:
            pass
'''

VERDICT_PATCH = '''
try:
    import _pytest.python
    _pytest.python.Function.runtest = lambda self: None
    import grader.judge.plugin as plugin, grader.judge.outcomes as outcomes
    plugin.classify = lambda exc: ("passed", "", {})
    outcomes.fail = lambda *a, **k: None
except ImportError:
    pass        # not even there to patch: an isolated learner process sees none of grader/judge
'''

LYING = '''
import numpy, torch

class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("equal", "allclose", "eq", "__eq__", "isclose", "array_equal"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

class LyingArray(numpy.ndarray):
    def __array_function__(self, func, types, args, kwargs):
        return True
    def __eq__(self, other):
        return True

def roundtrip(x, device):
    return torch.zeros_like(x).as_subclass(Liar)

def to_numpy(t):
    return numpy.zeros(t.shape, dtype=numpy.float32).view(LyingArray)
'''

INJECTS_ANSWERS = '''
import json, os, struct, torch

def _answer(value, seq):
    payload = json.dumps({"$msg": "Returned", "value": value}).encode()
    return struct.pack(">II", len(payload), seq) + payload

def roundtrip(x, device):
    """Writes an answer with the right values into every socket, under every number it may have."""
    data = (x.detach().cpu() * 2 + 1).flatten().tolist()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                for seq in range(1, 60):
                    os.write(int(fd), _answer({"$opaque": {"type": "Tensor", "repr": str(data)}}, seq))
        except OSError:
            pass
    return x

def to_numpy(t):
    return t.detach().numpy() * 0
'''


def _graded(grade: Callable[..., Graded], tmp_path: Path, name: str, ex3: str) -> Graded:
    folder = folder_with(tmp_path, name, {"ex3_roundtrip": ex3, "ex1_device": solution_text("ex1")})
    graded = grade(folder)
    assert graded.code == 0, graded.stderr
    assert graded.exercise("ex1")["score"] == 20.0, (name, graded.exercise("ex1"))  # the neighbour exercise
    return graded


def _verdicts(graded: Graded) -> dict[str, str]:
    return {check["id"]: check["status"] for check in graded.exercise("ex3")["checks"]}


def _no_more_than_deserved(attacked: Graded, plain: Graded) -> None:
    """Each check as for the functions without the attack, or failed where the call wrote into the
    judge's socket; the report says the learner tampered."""
    assert "tampering" in attacked.report["notes"]  # type: ignore[index]
    assert attacked.exercise("ex3")["score"] <= plain.exercise("ex3")["score"]
    for check in attacked.exercise("ex3")["checks"]:
        broke = "connection between the judge and your code" in check["message"]
        assert broke or check["status"] == _verdicts(plain)[check["id"]], check
    assert "connection between" in attacked.check("ex3.roundtrip_values")["message"]


def test_a_key_found_nowhere_signs_nothing(tmp_path: Path, grade: Callable[..., Graded],
                                           grade_forked: Callable[..., Graded]) -> None:
    plain = _graded(grade_forked, tmp_path, "plain", WRONG_EX3)
    attacked = _graded(grade, tmp_path, "keyhunt", WRONG_EX3.replace("    return x ", "    spray()\n    return x ")
                       + KEY_HUNT)
    _no_more_than_deserved(attacked, plain)


def test_patched_verdicts_and_pytest_change_nothing(tmp_path: Path, grade: Callable[..., Graded],
                                                    grade_forked: Callable[..., Graded]) -> None:
    deserved = _verdicts(_graded(grade_forked, tmp_path, "plain", WRONG_EX3))
    attacked = _graded(grade, tmp_path, "patcher", VERDICT_PATCH + WRONG_EX3)
    assert _verdicts(attacked) == deserved
    assert attacked.exercise("ex3")["score"] < 20
    assert "tampering" not in attacked.report["notes"]  # type: ignore[index]


def test_lying_tensor_and_array_subclasses_are_judged_by_their_values(
        tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    honest = LYING.replace(".as_subclass(Liar)", "").replace(".view(LyingArray)", "")
    deserved = _verdicts(_graded(grade_forked, tmp_path, "zeros", honest))
    attacked = _graded(grade_forked, tmp_path, "liar", LYING)  # values the judge decodes: forked or exec'd alike
    assert _verdicts(attacked) == deserved
    for check in ("roundtrip_values", "roundtrip_keeps_dtype", "to_numpy_cpu", "to_numpy_grad_and_device"):
        assert deserved[f"ex3.{check}"] == "failed", check


def test_answers_written_into_the_socket_are_caught(tmp_path: Path, grade: Callable[..., Graded],
                                                    grade_forked: Callable[..., Graded]) -> None:
    honest = INJECTS_ANSWERS.replace("    for fd in os.listdir", "    for fd in []:  #")
    _no_more_than_deserved(_graded(grade, tmp_path, "injector", INJECTS_ANSWERS),
                           _graded(grade_forked, tmp_path, "plain", honest))


FORGES_EVENTS = '''
import dataclasses, gc, time, torch

def _forge():
    """Find the grader's recorder in this process and make every clock read look synchronized."""
    for obj in gc.get_objects():
        events = getattr(obj, "events", None) if type(obj).__name__.endswith("Session") else None
        if isinstance(events, list):
            for i, event in enumerate(events):
                if getattr(event, "kind", "") == "clock":
                    events[i] = dataclasses.replace(event, drained=True)

def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    seconds = (time.perf_counter() - start) / repeats   # no synchronize: the launches only
    _forge()
    return seconds
'''


def test_device_events_rewritten_in_the_learner_process(tmp_path: Path, grade_forked: Callable[..., Graded]) -> None:
    """Once a known hole (an xfail): the recorder hunted and every clock read marked "drained". The
    judge now holds a stand-in's events to one timeline (grader/judge/evidence.py), so the rewrite is
    seen: the check is the learner's error, noted tampering. What stays forgeable:
    tests/test_forgery_measurements.py."""
    folder = folder_with(tmp_path, "forger", {"ex2_timing": FORGES_EVENTS})
    graded = grade_forked(folder)  # the sessions it hunts are made per check, in a forked process as in an exec'd one
    check = graded.check("ex2.synchronizes_before_reading_clock")
    assert check["status"] == "error" and "cannot be true" in check["message"], check
    assert "tampering" in graded.report["notes"]  # type: ignore[index]
