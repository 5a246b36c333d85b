"""Fixtures every check can ask for: the learner's modules, the device, clean torch state.

To add a check: write ``def test_<name>(ex3, accel)`` in ``<exercise>/test_public.py`` or
``test_hidden.py``, end it with ``fail("<message id>", ...)`` on each mistake, declare it in
course.yaml, and give its message and hint in grader/messages/{vi,en}.yaml.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from grader.checks.support.devices import Accelerator, open_accelerator
from grader.checks.support.learner import LearnerModule, SourceInfo
from grader.checks.support.outcomes import ImportTimedOut, LearnerRaised

PLUGIN_NAME = "grader-channel"  # registered under this name by grader/child.py
_MODULES: dict[str, LearnerModule] = {}
_NUM_THREADS = torch.get_num_threads()


def _plan(config: pytest.Config) -> dict[str, Any]:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        raise RuntimeError("the checks run only inside the grader's sandbox (grader.child)")
    return plugin.plan  # type: ignore[no-any-return]


def _learner(config: pytest.Config, exercise: str) -> LearnerModule:
    if exercise not in _MODULES:
        source = _plan(config)["sources"][exercise]
        _MODULES[exercise] = LearnerModule(SourceInfo(
            source["module"], source["origin"], tuple(source.get("cell_of_line", ())),
            source["text"], os.path.join(_plan(config)["workdir"], f"{source['module']}.py"),
        ))
    return _MODULES[exercise]


@pytest.fixture(scope="session", autouse=True)
def learner_modules_imported(pytestconfig: pytest.Config) -> None:
    """Import every learner module first, so that clean_torch_state undoes what imports changed."""
    for exercise in _plan(pytestconfig)["sources"]:
        # A failed or timed-out import is kept by the module and reported by its own checks;
        # this check (maybe of another exercise) goes on.
        with contextlib.suppress(LearnerRaised, ImportTimedOut, pytest.fail.Exception):
            _learner(pytestconfig, exercise).load()


@pytest.fixture(autouse=True)
def clean_torch_state(learner_modules_imported: None) -> Iterator[None]:
    """Whatever the learner's import changed, each check starts from PyTorch's defaults."""
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
