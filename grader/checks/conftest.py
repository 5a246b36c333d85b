"""Fixtures every check can ask for: the learner's modules, the devices, a simulated machine.

A check is one module, ``<exercise>/test_<name>.py``: its ``HINT``, its ``MESSAGES`` and
``def test_<name>(ex3, devices)``, which fails with ``fail("<message id>", ...)``; course.yaml
gives its points and whether learners see it (README, "How to add a check"). Checks run in the
judge (grader/judge/); the learner's functions run in the learner process, and each call's
answer comes back as plain data (grader/judge/proxy.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from grader.judge.api import DeviceKind, Smaller
from grader.judge.devices import RemoteDevice, RemoteWorld, real_accelerator_type
from grader.judge.plugin import PLUGIN_NAME
from grader.judge.proxy import LearnerModule, LearnerProcess
from grader.reference.draws import Draw


def _plugin(config: pytest.Config) -> Any:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        raise RuntimeError("the checks run only inside the grader's judge (grader.judge)")
    return plugin


def _learner(config: pytest.Config) -> LearnerProcess:
    return _plugin(config).learner  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def fresh_learner_state(pytestconfig: pytest.Config) -> Iterator[None]:
    """Whatever the learner's top level or an earlier check changed, each check starts from
    PyTorch's defaults, with the learner's functools caches cleared."""
    _learner(pytestconfig).reset()
    yield


# What is the same for every check of a judge process (its one learner process, its plan): set up once a
# process, not once a check (pytest's setup and teardown of a fixture, 30-60 us, for each of ~36 checks).
def _exercise_fixture(exercise: str) -> Any:
    @pytest.fixture(name=exercise, scope="session")
    def learner_module(pytestconfig: pytest.Config) -> LearnerModule:
        start = _plugin(pytestconfig).plan.start
        return LearnerModule(_learner(pytestconfig), exercise, start.sources[exercise].module)

    return learner_module


# ``def test_x(ex3)`` receives exercise 3's learner module.
ex1, ex2, ex3, ex4, ex5 = (_exercise_fixture(f"ex{n}") for n in range(1, 6))


def _recorder(request: pytest.FixtureRequest) -> Callable[[RemoteDevice], None]:
    """The report says where this check ran (mode and label), for each device it entered."""
    plugin = _plugin(request.config)
    return lambda dev: plugin.graded_on_device(request.node.nodeid, dev.mode, dev.label)


@pytest.fixture
def devices(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Callable[..., list[RemoteDevice]]:
    """``for dev in devices("cpu", "cuda", "mps"):`` — each device this check grades on, in order.

    An accelerator kind is the machine's real device when it has one (and ``real_ok(mode)``
    says the check can judge fairly there), else its stand-in on the CPU. ``virtual_clock`` and
    ``budget_bytes`` are for timing and out-of-memory checks (grader/judge/devices.py); ``smaller``
    runs a stand-in's problems that much smaller on each side at the same virtual times (a timing
    check's: ``dev.size(n)`` is the side to ask for).
    """
    learner = _learner(pytestconfig)
    forced = _plugin(pytestconfig).plan.device
    real = real_accelerator_type(learner.hello) if forced in ("auto", "cuda", "mps") else None
    on_enter = _recorder(request)

    def make(*kinds: DeviceKind, virtual_clock: bool = False, budget_bytes: int | None = None,
             real_ok: Callable[[DeviceKind], bool] = lambda mode: True, typed_oom: bool = False,
             smaller: Smaller = 1) -> list[RemoteDevice]:
        return [RemoteDevice(learner, kind, standin=kind != "cpu" and not (kind == real and real_ok(kind)),
                             virtual_clock=virtual_clock, budget_bytes=budget_bytes, typed_oom=typed_oom,
                             smaller=smaller, on_enter=on_enter)
                for kind in kinds]

    return make


@pytest.fixture
def machine(pytestconfig: pytest.Config) -> Callable[..., RemoteWorld]:
    """``with machine(cuda=False, mps=True) as world:`` — ex1's simulated machine."""
    learner = _learner(pytestconfig)

    def make(*, cuda: bool, mps: bool, mps_built: bool = False, cuda_count: int = 1) -> RemoteWorld:
        return RemoteWorld(learner, cuda=cuda, mps=mps, mps_built=mps_built, cuda_count=cuda_count)

    return make


@pytest.fixture(scope="session")
def draw(pytestconfig: pytest.Config) -> Draw:
    """This grading's problems, drawn from the secret seed the grader gave the judge (never the
    learner process): sizes and values no earlier grading or neighbour's report can answer."""
    return Draw(_plugin(pytestconfig).plan.seed)


@pytest.fixture(scope="session")
def hello(pytestconfig: pytest.Config) -> Any:
    """What the learner process found on this machine before any learner code ran."""
    return _learner(pytestconfig).hello


@pytest.fixture
def cpu(request: pytest.FixtureRequest) -> Any:
    """``torch.device("cpu")``, for a check that calls the learner's function on the CPU only."""
    import torch

    _plugin(request.config).graded_on_device(request.node.nodeid, "cpu", "cpu")
    return torch.device("cpu")
