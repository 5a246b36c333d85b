"""Fixtures every check can ask for: the learner's modules, the device, clean torch state.

To add a check: write ``def test_<name>(ex3, accel)`` in ``<exercise>/test_public.py`` or
``test_hidden.py``, end it with ``fail("<message id>", ...)`` on each mistake, declare it in
course.yaml, and give its message and hint in grader/messages/{vi,en}.yaml.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from grader.checks.support.devices import Accelerator, open_accelerator
from grader.checks.support.learner import LearnerModule
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
    yield


def _exercise_fixture(exercise: str) -> Any:
    @pytest.fixture(name=exercise)
    def learner_module(pytestconfig: pytest.Config) -> LearnerModule:
        return _learner(pytestconfig, exercise)

    return learner_module


# ``def test_x(ex3)`` receives exercise 3's learner module.
ex1, ex2, ex3, ex4, ex5 = (_exercise_fixture(f"ex{n}") for n in range(1, 6))


@pytest.fixture
def accel(request: pytest.FixtureRequest, pytestconfig: pytest.Config) -> Callable[..., Accelerator]:
    """``with accel(virtual_clock=True) as acc:`` — the accelerator this check grades on.

    ``real_ok=lambda mode: ...`` names the real devices this check can grade fairly on; on
    any other it gets the stand-in.
    """
    forced = _plan(pytestconfig).get("device")

    def make(*, virtual_clock: bool = False, budget_bytes: int | None = None,
             real_ok: Callable[[str], bool] = lambda mode: True) -> Accelerator:
        acc = open_accelerator(forced, virtual_clock=virtual_clock, budget_bytes=budget_bytes, real_ok=real_ok)
        request.node.user_properties.append(("mode", acc.mode))
        return acc

    return make


@pytest.fixture
def cpu(request: pytest.FixtureRequest) -> torch.device:
    request.node.user_properties.append(("mode", "cpu"))
    return torch.device("cpu")
