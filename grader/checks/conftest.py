"""Fixtures every check can ask for: the learner's modules, the devices, clean torch state.

A check is one module, ``<exercise>/test_<name>.py``: its ``HINT``, its ``MESSAGES`` and
``def test_<name>(ex3, devices)``, which fails with ``fail("<message id>", ...)``; course.yaml
gives its points and whether learners see it (README, "How to add a check").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from grader.checks.support.devices import Device, open_accelerator, open_device
from grader.checks.support.learner import LearnerModule, clear_learner_caches
from grader.submission import SourceFile

PLUGIN_NAME = "grader-channel"  # registered under this name by grader/child.py
_MODULES: dict[str, LearnerModule] = {}
_NUM_THREADS = torch.get_num_threads()


def _plugin(config: pytest.Config) -> Any:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        raise RuntimeError("the checks run only inside the grader's sandbox (grader.child)")
    return plugin


def _plan(config: pytest.Config) -> dict[str, Any]:
    return _plugin(config).plan  # type: ignore[no-any-return]


def _learner(config: pytest.Config, exercise: str) -> LearnerModule:
    if exercise not in _MODULES:
        source = SourceFile.from_plan(_plan(config)["sources"][exercise])
        _MODULES[exercise] = LearnerModule(source, _plugin(config).toplevel)
    return _MODULES[exercise]


@pytest.fixture(autouse=True)
def clean_torch_state() -> Iterator[None]:
    """Whatever the learner's top level changed, each check starts from PyTorch's defaults."""
    torch.set_default_dtype(torch.float32)
    torch.set_grad_enabled(True)
    torch.set_num_threads(_NUM_THREADS)
    torch.manual_seed(0)
    if hasattr(torch, "set_default_device"):
        torch.set_default_device(None)
    clear_learner_caches()
    yield
    clear_learner_caches()  # what a simulated machine made the learner's code cache goes with it


def _exercise_fixture(exercise: str) -> Any:
    @pytest.fixture(name=exercise)
    def learner_module(pytestconfig: pytest.Config) -> LearnerModule:
        return _learner(pytestconfig, exercise)

    return learner_module


# ``def test_x(ex3)`` receives exercise 3's learner module.
ex1, ex2, ex3, ex4, ex5 = (_exercise_fixture(f"ex{n}") for n in range(1, 6))


def _graded_on(request: pytest.FixtureRequest, device: Device) -> Device:
    """The report says where this check ran (mode and label), for each device it entered."""
    device.on_enter = lambda: request.node.user_properties.append(("device", (device.mode, device.label)))
    return device


@pytest.fixture
def devices(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Callable[..., list[Device]]:
    """``for dev in devices("cpu", "cuda", "mps"):`` — each device this check grades on, in order.

    An accelerator kind is the machine's real device when it has one (and ``real_ok(mode)``
    says the check can judge fairly there), else its stand-in on the CPU. ``virtual_clock`` and
    ``budget_bytes`` are for timing and out-of-memory checks (grader/checks/support/devices.py).
    """
    forced = _plan(pytestconfig).get("device")

    def make(*kinds: str, virtual_clock: bool = False, budget_bytes: int | None = None,
             real_ok: Callable[[str], bool] = lambda mode: True, typed_oom: bool = False) -> list[Device]:
        return [_graded_on(request, open_device(kind, forced, virtual_clock=virtual_clock, budget_bytes=budget_bytes,
                                                real_ok=real_ok, typed_oom=typed_oom))
                for kind in kinds]

    return make


@pytest.fixture
def accel(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Callable[..., Device]:
    """``with accel(virtual_clock=True) as acc:`` — the machine's accelerator (CUDA's stand-in when
    it has none), for a check about one accelerator."""
    forced = _plan(pytestconfig).get("device")

    def make(*, virtual_clock: bool = False, budget_bytes: int | None = None,
             real_ok: Callable[[str], bool] = lambda mode: True) -> Device:
        return _graded_on(request, open_accelerator(forced, virtual_clock=virtual_clock, budget_bytes=budget_bytes,
                                                    real_ok=real_ok))

    return make


@pytest.fixture
def cpu(request: pytest.FixtureRequest) -> torch.device:
    request.node.user_properties.append(("device", ("cpu", "cpu")))
    return torch.device("cpu")
