"""The judge's reference training: the same numbers as torch.optim's optimizers, bit for bit, without
the torch._dynamo import an Optimizer's first step costs (grader/reference/problems.py); and the
live-tensor meter (grader/reference/meter.py)."""

from __future__ import annotations

import contextlib
import copy
import gc
import subprocess
import sys
import traceback

import pytest
import torch
from torch import nn

from grader.checks.ex4_oom.workload import WEIGHTS_ATOL, WEIGHTS_RTOL
from grader.checks.ex5_amp.workload import small
from grader.emulation.patching import NO_LEARNER_CODE
from grader.learner.instruments import metered
from grader.learner.sessions import open_session
from grader.reference import meter as meter_module
from grader.reference.draws import Draw
from grader.reference.meter import MemoryMeter, Storages
from grader.reference.problems import (
    EX4_BATCH,
    KINK_MARGIN,
    build,
    ex4_optimizer,
    ex4_problem,
    ex4_reference_step,
    ex5_problem,
    ex5_training_fp32,
)
from grader.wire.messages import OpenDevice

DRAWS = [Draw(seed) for seed in (1, 22, 333)]


def _optimizer_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, micro: int) -> float:
    """The lesson's accumulation step, with the SGD the learner is handed."""
    optimizer = ex4_optimizer(model)
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for xb, yb in zip(inputs.split(micro), targets.split(micro), strict=True):
        loss = nn.functional.cross_entropy(model(xb), yb) * (len(xb) / len(inputs))
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def test_the_back_off_reference_is_torch_optim_sgd_bit_for_bit() -> None:
    for draw in DRAWS:
        for micro in (EX4_BATCH, 150):
            model, inputs, targets = ex4_problem(torch.device("cpu"), draw.ex4_seed)
            mine, theirs = copy.deepcopy(model), copy.deepcopy(model)
            assert ex4_reference_step(mine, inputs, targets, micro) == _optimizer_step(theirs, inputs, targets, micro)
            assert all(torch.equal(a, b) for a, b in zip(mine.parameters(), theirs.parameters(), strict=True))


# Draws of the back-off problem on which an H200 lost ex4.backoff_matches_full_batch for correct code
# (skorch's and the PyTorch FAQ's back-off, 2026-12-04): each had a hidden unit whose input, for one
# sample, lay 7e-9 to 1.3e-8 from ReLU's kink.
KINKED_DRAWS = (845283656, 1033727072, 310538591)


def test_the_back_off_problem_is_the_same_step_on_any_devices_rounding() -> None:
    """Another device rounds the first layer's products differently (~1e-7 here): moved by ten times
    that either way, the one step's weights stay within the check's tolerance of the judge's, because
    no sample's input to a ReLU is within the margin of its kink (where one sample's share of a
    unit's gradient would be in on one device and out on the other: a row off by ~2e-4)."""
    for seed in (*KINKED_DRAWS, *(draw.ex4_seed for draw in DRAWS)):
        model, inputs, targets = ex4_problem(torch.device("cpu"), seed)
        hidden = (inputs.double() @ model[0].weight.double().T + model[0].bias.double()).detach()
        assert float(hidden.abs().min()) >= KINK_MARGIN * 0.99, seed
        judge = copy.deepcopy(model)
        ex4_reference_step(judge, inputs, targets, EX4_BATCH)
        for rounding in (1e-6, -1e-6):
            device = copy.deepcopy(model)
            with torch.no_grad():
                device[0].bias += rounding
            ex4_reference_step(device, inputs, targets, 150)
            with torch.no_grad():
                device[0].bias -= rounding
            for theirs, ours in zip(device.parameters(), judge.parameters(), strict=True):
                assert torch.allclose(theirs, ours, rtol=WEIGHTS_RTOL, atol=WEIGHTS_ATOL), (seed, rounding)


def test_each_back_off_build_is_the_draw_whatever_an_earlier_build_went_through() -> None:
    """The draw is kept once per process (grader/reference/problems.py ``_ex4_drawn``); a learner's
    step writes into what it is handed — the weights, and inputs a hostile one may scribble on — and
    the next check's build must still be the draw the judge computes with."""
    first = ex4_problem(torch.device("cpu"), 4242)
    expected = [p.detach().clone() for p in first[0].parameters()], first[1].clone(), first[2].clone()
    with torch.no_grad():
        for p in first[0].parameters():
            p.add_(1.0)
    first[1].mul_(-1)
    first[2].zero_()
    again = ex4_problem(torch.device("cpu"), 4242)
    assert all(torch.equal(a, b) for a, b in zip(again[0].parameters(), expected[0], strict=True))
    assert torch.equal(again[1], expected[1]) and torch.equal(again[2], expected[2])


def test_the_fp32_losses_are_the_same_on_any_devices_rounding() -> None:
    """ex5's networks have ReLUs too, and their inputs are not kept clear of the kink (training moves
    them); but ex5.fp32_losses compares losses, which a sample crossing the kink hardly moves: the
    first layer moved +-1e-6, 3 steps of each drawn problem stay within a tenth of the check's 1e-4
    (300 draws measured at most 2.9e-6, 2026-12-04)."""
    for seed in range(1, 31):
        draw = Draw(seed * 7919)
        model, inputs, targets = ex5_problem(*small(draw))
        judge = ex5_training_fp32(model, inputs, targets, 3, draw.ex5_lr).losses
        for rounding in (1e-6, -1e-6):
            device = copy.deepcopy(model)
            with torch.no_grad():
                device[0].bias += rounding
            losses = ex5_training_fp32(device, inputs, targets, 3, draw.ex5_lr).losses
            assert all(abs(a - b) <= 1e-5 * max(1.0, abs(b)) for a, b in zip(losses, judge, strict=True)), seed


def test_the_fp32_reference_is_torch_optim_adam_bit_for_bit() -> None:
    for draw in DRAWS:
        model, inputs, targets = ex5_problem(draw.ex5_batch, 8, 32, 3, draw.ex5_seed)
        theirs = copy.deepcopy(model)
        optimizer = torch.optim.Adam(theirs.parameters(), lr=1e-3)
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(theirs(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert list(ex5_training_fp32(model, inputs, targets, 3).losses) == losses


def test_the_reference_training_does_not_import_torch_dynamo() -> None:
    """In a fresh Python, as the judge of `grader grade` is: both references trained, torch._dynamo
    (sympy with it, 2.5-3 CPU-s) never imported. An Optimizer's step would import it."""
    code = (
        "import sys, torch\n"
        "from grader.reference.problems import ex4_problem, ex4_reference_step, ex5_problem, ex5_training_fp32\n"
        "model, x, y = ex4_problem(torch.device('cpu'), 7)\n"
        "ex4_reference_step(model, x, y, 150)\n"
        "ex5_training_fp32(*ex5_problem(64, 8, 32, 3, 7), 2)\n"
        "print('torch._dynamo' in sys.modules)\n"
        "torch.optim.SGD(model.parameters(), lr=0.1).step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, check=True)
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


@pytest.mark.parametrize("watched", ["meter", "cpu session", "call on the cpu", "call on a stand-in"])
def test_an_out_of_memory_error_caught_frees_the_ops_inputs_at_once(watched: str) -> None:
    """A learner's back-off catches the meter's out-of-memory error and drops what it held: the
    memory must come back then, not at the garbage collector's next pass (the error's traceback
    holds the dispatch mode's frame, which held the error: a cycle that kept the op's inputs — the
    learner's activations — and made ex4's lesson-style back-off halve twice more). The meter is a
    mode of its own, a CPU session's, or a call's (``meter_budget``), which the session's own mode
    counts for (grader/reference/meter.py ``counted``)."""
    budget = 3 * 4096 * 4
    gc.disable()
    try:
        with contextlib.ExitStack() as stack:
            if watched == "meter":
                meter = stack.enter_context(MemoryMeter(budget))
            elif watched == "cpu session":
                session = stack.enter_context(open_session(OpenDevice("cpu", False, budget_bytes=budget),
                                                           NO_LEARNER_CODE))
                meter = session.meter  # type: ignore[union-attr]
            else:
                request = OpenDevice("cpu", False) if watched == "call on the cpu" else OpenDevice("cuda", True)
                session = stack.enter_context(open_session(request, NO_LEARNER_CODE))
                meter = stack.enter_context(metered(budget, "the call's", session.meters))
            activations = torch.ones(4096) + 0  # made under the meter: counted
            caught = False
            try:  # as a learner's back-off catches it
                torch.cat([activations, activations, activations])  # 3 x 16 KiB: past 48 KiB with it
            except torch.OutOfMemoryError:
                caught = True
            assert caught
            assert meter.live_bytes() == 4096 * 4
            del activations
            assert meter.live_bytes() == 0
    finally:
        gc.enable()


@pytest.mark.parametrize("watched", ["meter", "stand-in"])
def test_an_allocation_asks_only_the_storages_that_may_have_died(watched: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each op that allocates asks for the live bytes (a peak, a budget); asking every storage held
    whether it was freed made a learner's 4000 small device tensors cost 1 s on a stand-in, a
    quadratic cost. Counted in C calls, not seconds: holding 400 tensors and freeing 100 asks about
    as many as there are tensors, never their square; the bytes stay exact all along."""
    asked = 0
    real = meter_module.handle_expired

    def counting(cdata: int) -> bool:
        nonlocal asked
        asked += 1
        return bool(real(cdata))

    monkeypatch.setattr(meter_module, "handle_expired", counting)
    with contextlib.ExitStack() as stack:
        if watched == "meter":
            meter = stack.enter_context(MemoryMeter())
            device, live = "cpu", meter.live_bytes
        else:
            session = stack.enter_context(open_session(OpenDevice("cuda", True), NO_LEARNER_CODE))
            device, live = "cuda", session.live_bytes
        base = live()
        held = [torch.ones(4, device=device) for _ in range(400)]
        assert live() - base == 400 * 16
        del held[::4]
        more = [torch.ones(4, device=device) for _ in range(100)]
        assert live() - base == 400 * 16
        del held, more
        assert live() == base
    assert asked < 3 * 500, asked  # each of the 400 before it, were every storage asked: ~100000


def test_a_storage_key_is_the_storage_s_address_or_none() -> None:
    """``storage_key`` (one C call, asked for every tensor of every op) answers what the storage object
    would, ``untyped_storage()._cdata``, for each tensor that has a storage of its own — views and
    parameters share their base's — and None for one that has none (sparse), where the long way answers."""
    base = torch.randn(4, 4)
    dense = {"dense": base, "view": base[1:], "transposed": base.T, "parameter": nn.Parameter(torch.randn(3)),
             "empty": torch.empty(0), "scalar": torch.tensor(1.0), "meta": torch.empty(3, device="meta")}
    for name, t in dense.items():
        assert meter_module.storage_key(t) == t.untyped_storage()._cdata, name
    assert meter_module.storage_key(base[1:]) == meter_module.storage_key(base)
    assert meter_module.storage_key(torch.randn(3, 3).to_sparse()) is None


@pytest.mark.parametrize("fast", [True, False], ids=["storage_key", "a torch without it"])
def test_a_stand_in_places_every_layout_alike_with_or_without_the_quick_key(
        fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a release has no quick key, the stand-in and a meter ask the storage object, with the same
    answers: each tensor on the device, its views, a sparse one (by its values), a host tensor; bytes exact."""
    if not fast:
        monkeypatch.setattr(meter_module, "_STORAGE_ID", None)
    with open_session(OpenDevice("cuda", True), NO_LEARNER_CODE) as session:
        base = session.live_bytes()
        on = torch.ones(4, 4, device="cuda")
        view = on[1:]
        sparse = torch.ones(3, 3).to_sparse().to("cuda")
        host = torch.ones(2)
        assert [t.is_cuda for t in (on, view, on.T, sparse, host, view.cpu())] == [True] * 4 + [False] * 2
        with MemoryMeter() as meter:
            doubled = on * 2
            doubled.add_(1)  # in place: nothing new
            assert meter.live_bytes() == 16 * 4
        assert session.live_bytes() - base == (16 + 16) * 4 + sparse.values().nbytes  # (sparse: its values')
        del doubled


def test_a_storage_whose_weak_reference_fired_early_is_counted_until_it_dies() -> None:
    """Python's collector can clear a weak reference while the storage lives on (its Python object in
    an unreachable cycle, pytorch#145253): the address is then asked at every look, and the storage
    counted exactly until it is freed."""
    storages = Storages()
    kept, other = torch.ones(8), torch.ones(2)
    for t in (kept, other):
        storage = t.untyped_storage()
        storages.add(storage._cdata, storage, storage.nbytes(), counted=True)
    del t, storage
    key = kept.untyped_storage()._cdata
    storages._noted.add(key)  # what the callback does, while the storage is alive
    assert storages.live_bytes() == 8 * 4 + 2 * 4
    assert key in storages._asked
    del other
    assert storages.live_bytes() == 8 * 4
    del kept
    assert storages.live_bytes() == 0
    assert not storages._asked


def test_the_ex4_budget_is_the_same_for_every_draw() -> None:
    """The budget that makes ex4's back-off halve twice is computed once for a class
    (grader/judge/ahead.py): the reference step's peak follows the problem's shapes, never its drawn
    values."""
    from grader.checks.ex4_oom.workload import BATCH, peak_bytes
    from grader.reference.problems import EX4_SEED

    for micro in (BATCH // 2, (BATCH + 3) // 4):
        assert len({peak_bytes(micro, seed) for seed in (EX4_SEED, *(Draw(s).ex4_seed for s in (1, 2, 3)))}) == 1


def test_ex5s_problem_draws_torch_manual_seeds_weights_without_seeding_a_device_that_never_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ex5_problem seeds the CPU's generator alone: the weights, and the global stream after them, are
    torch.manual_seed's, and nothing queues CUDA's or XPU's seeding, whose lazy call formats the whole
    stack (a learner builds the problem ~20 times a grading)."""
    torch.manual_seed(11)
    expected = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))
    expected_next = torch.rand(4)
    formatted: list[int] = []
    monkeypatch.setattr(traceback, "format_stack", lambda *args, **kwargs: formatted.append(1) or [])
    model, _, _ = ex5_problem(64, 8, 32, 3, 11)
    assert torch.equal(torch.rand(4), expected_next)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), expected.parameters(), strict=True))
    assert formatted == []


def test_the_ex4_budget_fits_a_quarter_of_the_batch_and_not_a_half_with_room_either_side() -> None:
    """ex4.backoff_matches_full_batch's premise, whatever the problem's shapes (its hidden layer went from
    2048 to 512 wide): the reference step's peak at B/4 fits the budget and at B/2 does not, each by a
    fifth of B/4's peak at least — room for a learner's loop that holds a little more or less."""
    from grader.checks.ex4_oom.workload import BATCH, budget_forcing_backoff, peak_bytes

    budget = budget_forcing_backoff()
    quarter, half = peak_bytes((BATCH + 3) // 4), peak_bytes(BATCH // 2)
    assert quarter + quarter / 5 < budget < half - quarter / 5


def test_the_ops_walker_finds_pytrees_tensors_in_pytrees_order_at_any_depth() -> None:
    """``tensors`` (every op's arguments and outputs, in the meter, the stand-in and the observer) against
    PyTorch's own pytree: the same tensors in the same order, through tuples, lists, dicts and
    scalars; and a nesting 5000 deep (past Python's recursion limit) walked all the same."""
    from torch.utils._pytree import tree_leaves

    a, b, c = torch.ones(1), torch.zeros(2), nn.Parameter(torch.ones(3))
    cases = [a, ((a, b), {}), ((a, [b, c], 1.0, None, "x"), {"dtype": torch.float16, "out": (c, {"k": [a]})}),
             ((), {}), [[], [[[]]], ([a],)], {"z": c, "a": [{"b": (a, [b])}], "m": 3}]
    for case in cases:
        assert [id(t) for t in meter_module.tensors(case)] == [
            id(t) for t in tree_leaves(case) if isinstance(t, torch.Tensor)], case
    deep: list[object] = [a]
    for _ in range(5000):
        deep = [{"in": deep}, b]
    assert [id(t) for t in meter_module.tensors((deep, {}))] == [id(a)] + [id(b)] * 5000


@pytest.mark.parametrize("request_", [OpenDevice("cpu", standin=False), OpenDevice("cuda", standin=True),
                                      OpenDevice("mps", standin=True)], ids=["cpu", "cuda", "mps"])
def test_a_recipe_s_parts_are_made_on_the_host_as_outside_any_session_and_moved_as_the_learner_moves_them(
        request_: OpenDevice) -> None:
    """The learner process makes a recipe's parts with the session's modes off (grader/reference/problems.py
    ``modes.off``): the same weights and batches as the judge's outside any session; ex5's stay CPU tensors
    as the session sees them, with no event of the build's ops (through the modes, the old way, the same tensors
    and an event no check reads); ex4's then go to the device with the modes on, each a transfer."""
    args = list(small(Draw(7)))
    with open_session(request_, NO_LEARNER_CODE) as session:
        parts = build("ex5.problem", args, session.device)
        assert session.events == []
        through_modes = ex5_problem(*args)  # the modes on
        assert [e.kind for e in session.events] == ["op"]  # "ops ran on the cpu in float32"
        assert all(session.device_of(t) == "cpu" for t in (*parts[0].parameters(), *parts[1:]))
        session.events.clear()
        model, inputs, targets, optimizer = build("ex4.problem", [22], session.device)
        moved = [*model.parameters(), inputs, targets]
        assert all(session.device_of(t) == session.device.type for t in moved)
        assert [e.kind for e in session.events] == ([] if request_.kind == "cpu" else ["h2d"] * len(moved))
        assert optimizer.param_groups[0]["params"] == list(model.parameters())
    outside = ex5_problem(*args)
    for built in (parts, through_modes):
        assert all(torch.equal(a, b) for a, b in zip(built[0].state_dict().values(),
                                                      outside[0].state_dict().values(), strict=True))
        assert torch.equal(built[1], outside[1]) and torch.equal(built[2], outside[2])
    judge_s = ex4_problem(torch.device("cpu"), 22)
    assert all(torch.equal(a.cpu(), b) for a, b in zip(moved, [*judge_s[0].parameters(), *judge_s[1:]], strict=True))
