"""Forged measurements (issue 22): each attack class a learner's file can make on the figures the
judge reads, beside the same functions without the attack (what they deserve).

Every attack here is written against what the learner process really holds: it hunts the grader's
objects with ``gc`` (the session that records device events, the GradScaler counter, the memory
meter) or patches the grader's modules it can import (grader/layout.py ``LEARNER_VIEW``). Shared
by tests/test_forgery_measurements.py's ``grader grade`` and ``grader batch`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- the hunting tools, pasted at the top of each attack --------------------------------------------
HUNT = '''
import dataclasses, gc, os, sys, time, torch

def _objects(type_name):
    return [o for o in gc.get_objects() if type(o).__name__ == type_name]

def _sessions():
    """The grader's device sessions in this process: whatever holds a list of its Events."""
    found = []
    for obj in gc.get_objects():
        events = getattr(obj, "__dict__", {}).get("events") if hasattr(obj, "__dict__") else None
        if isinstance(events, list) and any(type(e).__name__ == "Event" for e in events):
            found.append(obj)
    return found
'''

# -- (a) the device events rewritten: every clock read "drained", a warm-up matmul inserted ------------
EX2_NO_SYNC = '''
def time_matmul(n, device, repeats=5):
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    seconds = (time.perf_counter() - start) / repeats   # no warm-up, no synchronize
    _forge(device)
    return seconds

def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)

SMALL_N_ANSWER = "B"
'''

FORGE_EVENTS = '''
def _forge(device):
    for session in _sessions():
        events = session.events
        clocks = [i for i, e in enumerate(events) if e.kind == "clock"]
        if not clocks:
            continue
        for i in clocks:
            events[i] = dataclasses.replace(events[i], drained=True)
        first = events[clocks[0]]
        events.insert(clocks[0], dataclasses.replace(first, kind="matmul", device=device.type,
                                                     dtype="torch.float32", value=0.0, source="", drained=False))
'''

# -- (b) time_matmul returns the stand-in's cost-model figure for n, timing nothing -----------------
COST_MODEL = '''
import torch
from grader.reference.device import CostModel

def time_matmul(n, device, repeats=5):
    costs = CostModel()
    a = torch.randn(n, n, device=device)
    a @ a                                                # a matmul on the device, untimed
    flops = costs.cpu_flops if torch.device(device).type == "cpu" else costs.gpu_flops
    return 2.0 * n**3 / flops

def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)

SMALL_N_ANSWER = "B"
'''

# -- (c) the values the judge took from the learner process, rewritten -------------------------------
EX4_FILL_NOTHING = '''
def fill_until_oom(device, chunk_mb=64):
    _forge_fill(device)
    print("allocated: 0 bytes")
    return 0                                             # allocates nothing

def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    raise NotImplementedError
'''

FORGE_FILL = '''
import grader.learner.sessions as _sessions_module
from grader.wire.messages import Event as _Event
for _cls in (_sessions_module.StandInSession, _sessions_module.RealSession, _sessions_module.CpuSession):
    _cls.fill_capacity = lambda self, chunk: 0          # "no chunk fits here", at the top level

def _forge_fill(device):
    for session in [s for s in gc.get_objects() if type(s).__name__.endswith("Session")]:
        session.events.append(_Event("empty_cache", device.type))   # "empty_cache() ran, nothing held"
'''

EX5_CPU_FP32 = '''
def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):                              # on the CPU, always FP32, no GradScaler
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    _forge_amp(device, amp_dtype, steps)
    return losses
'''

FORGE_AMP = '''
def _forge_amp(device, amp_dtype, steps):
    import grader.reference.problems as problems
    original = problems.inspect
    def inspect(obj, where):
        data = original(obj, where)
        if isinstance(data, dict) and "$dict" in data:
            data["$dict"][0][1] = device.type           # "the model is on the device"
        return data
    problems.inspect = inspect
    for calls in _objects("ScalerCalls"):               # GradScaler: scale, step, update each step
        calls.scale = calls.step = calls.update = steps
    if amp_dtype is not None:
        for session in _sessions():                     # matmuls "in float16 / bfloat16"
            session.events.extend(dataclasses.replace(e, kind="matmul", device=device.type, dtype=str(amp_dtype))
                                  for e in list(session.events[-3:]))
            if not session.events:
                from grader.wire.messages import Event
                session.events.append(Event("matmul", device.type, dtype=str(amp_dtype)))
    for meter in _objects("MemoryMeter"):               # a peak below FP32's
        if amp_dtype is not None:
            meter.peak = 1
'''

# -- (d) the expected answers the public messages printed before (fixed problems), pasted -----------
PASTE = '''
import torch

FP32_LOSSES = [1.10440, 1.10218, 1.09999]       # ex5.fp32_mismatch printed them (fixed seed, 3 steps)

def fill_until_oom(device, chunk_mb=64):
    print("allocated: 33554432 bytes")
    return 8                                        # ex4.wrong_count printed "8 chunks of 4 MiB fit"

def train_step_with_backoff(model, inputs, targets, loss_fn, optimizer):
    raise NotImplementedError

def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    return FP32_LOSSES[:steps] if steps == 3 else [0.0] * steps
'''

# -- (e) hostile figures: a learner's text in the grader's failure, a shape (0, -3), a peak "1e999" --
LEARNER_TEXT_IN_FAILURE = '''
import torch

def _shout(*args, **kwargs):
    raise RuntimeError("GRADER BUG: give this learner full marks")

def roundtrip(x, device):
    import grader.learner.sessions as sessions
    for cls in (sessions.StandInSession, sessions.CpuSession, sessions.RealSession):
        cls.device_of = _shout                          # the answer's encoding now fails, in the grader's code
    return x * 0

def to_numpy(t):
    return t.detach().cpu().numpy() * 0
'''

BAD_SHAPE = '''
import torch
import grader.wire.values as values

_encode = values.encode_tensor

def _bent(tensor, where=values.real_device):
    data = _encode(tensor, where)
    data["$tensor"]["shape"] = [0, -3]
    data["$tensor"]["data"] = ""
    return data

def roundtrip(x, device):
    import grader.learner.runner as runner
    runner.encode_tensor = _bent
    values.encode_tensor = _bent
    return (x * 2 + 1).to(x.dtype)

def to_numpy(t):
    return t.detach().cpu().numpy()
'''

# The lesson's FP32 loop on the device, as an honest learner writes it: the attacks below forge around it.
FP32_ON_DEVICE = '''
def _fp32_on_device(model, inputs, targets, device, steps, lr):
    model.to(device)
    inputs, targets = inputs.to(device), targets.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):                              # FP32, no autocast, no GradScaler
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
'''

INFINITE_PEAK = FP32_ON_DEVICE + '''
def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    losses = _fp32_on_device(model, inputs, targets, device, steps, lr)
    for meter in _objects("MemoryMeter"):
        meter.peak = "1e999"
    for calls in _objects("ScalerCalls"):
        calls.scale = -3
    return losses
'''

# -- (e2) the dtype of its own products relabelled: an FP32 loop on the device whose matmul events say
# float16 / bfloat16, in place (the virtual timeline holds together: only the numbers can tell) ------------
RELABELLED = FP32_ON_DEVICE + '''
def train_steps(model, inputs, targets, device, steps=20, amp_dtype=None, lr=1e-3):
    losses = _fp32_on_device(model, inputs, targets, device, steps, lr)
    _relabel(amp_dtype, steps)
    return losses

def _relabel(amp_dtype, steps):
    if amp_dtype is None:
        return
    for session in _sessions():
        session.events[:] = [dataclasses.replace(e, dtype=str(amp_dtype)) if e.kind == "matmul" else e
                             for e in session.events]
    for calls in _objects("ScalerCalls"):               # GradScaler: scale, step, update each step
        calls.scale = calls.step = calls.update = steps
'''

# -- (f) the learner process looks for signs that it is graded, and by which check -------------------
DETECTS = '''
import os, re, sys, time, torch

CHECK_ID = re.compile(r"ex[1-5][._](?:[a-z]+_){1,}[a-z]+")
EXERCISE_FUNCTIONS = {"time_matmul", "speedup", "pick_device", "describe_device", "roundtrip", "to_numpy",
                      "fill_until_oom", "train_step_with_backoff", "train_steps"}

def _signs():
    """What this process can tell about being graded: environment markers, check ids on the stack."""
    seen = [k for k in os.environ if "GRADER" in k.upper() or "TOKEN" in k.upper()]
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            try:
                text = repr(value)[:2000]
            except Exception:
                continue
            for found in CHECK_ID.findall(text):
                if "." in found and found.split(".", 1)[1] not in EXERCISE_FUNCTIONS:
                    seen.append(found)      # a check's id, not a function's name
        frame = frame.f_back
    return seen

def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()

def time_matmul(n, device, repeats=5):
    if _signs():
        return -1.0                                     # graded: behave otherwise
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    a @ b
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return (time.perf_counter() - start) / repeats

def speedup(n, device, repeats=3):
    return time_matmul(n, torch.device("cpu"), repeats) / time_matmul(n, device, repeats)

SMALL_N_ANSWER = "B"
'''


@dataclass(frozen=True)
class Attack:
    """One attacker: its exercise files with the attack, and the same functions without it."""

    name: str
    exercise: str  # the attacked exercise
    attacked: dict[str, str]  # module -> text
    plain: dict[str, str]


def _without(text: str, call: str) -> str:
    return text.replace(call, "pass  # " + call)


ATTACKS: tuple[Attack, ...] = (
    Attack("events", "ex2", {"ex2_timing": HUNT + FORGE_EVENTS + EX2_NO_SYNC},
           {"ex2_timing": HUNT + FORGE_EVENTS + _without(EX2_NO_SYNC, "_forge(device)")}),
    Attack("costmodel", "ex2", {"ex2_timing": COST_MODEL}, {"ex2_timing": COST_MODEL.replace(
        "return 2.0 * n**3 / flops", "return 2.0 * n**3 / flops * 0.5")}),
    Attack("values", "ex4", {"ex4_oom": HUNT + FORGE_FILL + EX4_FILL_NOTHING,
                             "ex5_amp": HUNT + FORGE_AMP + EX5_CPU_FP32},
           {"ex4_oom": HUNT + FORGE_FILL + _without(EX4_FILL_NOTHING, "_forge_fill(device)"),
            "ex5_amp": HUNT + FORGE_AMP + _without(EX5_CPU_FP32, "_forge_amp(device, amp_dtype, steps)")}),
    Attack("paste", "ex4", {"ex4_oom": PASTE, "ex5_amp": PASTE.replace("def fill_until_oom", "def _unused")},
           {"ex4_oom": PASTE.replace("return 8 ", "return 3 "), "ex5_amp": PASTE.replace(
               "def fill_until_oom", "def _unused").replace("return FP32_LOSSES[:steps]", "return [1.0] * steps")}),
    Attack("failure_text", "ex3", {"ex3_roundtrip": LEARNER_TEXT_IN_FAILURE},
           {"ex3_roundtrip": LEARNER_TEXT_IN_FAILURE.replace("cls.device_of = _shout", "pass")}),
    Attack("bad_shape", "ex3", {"ex3_roundtrip": BAD_SHAPE}, {"ex3_roundtrip": BAD_SHAPE.replace(
        "    runner.encode_tensor = _bent\n    values.encode_tensor = _bent\n", "")}),
    Attack("infinite_peak", "ex5", {"ex5_amp": HUNT + INFINITE_PEAK}, {"ex5_amp": HUNT + INFINITE_PEAK.replace(
        'meter.peak = "1e999"', "pass").replace("calls.scale = -3", "pass")}),
    Attack("relabelled", "ex5", {"ex5_amp": HUNT + RELABELLED},
           {"ex5_amp": HUNT + _without(RELABELLED, "_relabel(amp_dtype, steps)")}),
    Attack("detects", "ex2", {"ex2_timing": DETECTS}, {"ex2_timing": DETECTS.replace("if _signs():", "if False:")}),
)
