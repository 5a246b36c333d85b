"""The stand-ins against PyTorch's own definitions, sampled to stay fast in CI (the whole sweep is
``python benchmarks/standin_conformance.py``): every miss must be one declared, with its reason, in
tests/conformance/known.py — a new miss fails here.

Each suite runs in this process (the stand-ins are context managers); the samples are fixed (every
Nth case of op_db and module_db) so that a run is reproducible.
"""

from __future__ import annotations

import pytest
import torch

from grader.emulation import autocast
from tests.conformance import suites
from tests.conformance.known import KNOWN


def undeclared(figure: suites.Figure, suite: str, kind: str) -> dict[str, str]:
    declared = KNOWN.get((suite, kind), {})
    return {case: reason for case, reason in figure.misses.items() if case not in declared}


@pytest.mark.parametrize(("suite", "kind", "params"), [
    ("ops", "cuda", {"every": 37}),
    ("ops", "mps", {"every": 41}),
    ("modules", "cuda", {"every": 5}),
    ("modules", "mps", {"every": 9}),
    ("cost", "cuda", {}),
    ("autocast", "cuda", {}),
    ("autocast", "mps", {}),
    ("api", "cuda", {}),
    ("api", "mps", {}),
    ("clocks", "cuda", {}),
])
def test_every_miss_is_declared(suite: str, kind: str, params: dict[str, int]) -> None:
    with suites.quiet():
        figure = suites.SUITES[suite](kind=kind, **params)
    assert figure.total > 0
    assert not undeclared(figure, suite, kind), f"{figure.line()}; undeclared misses: {undeclared(figure, suite, kind)}"
    if not params:  # the whole suite ran: a declared miss it no longer misses is a stale declaration
        stale = sorted(set(KNOWN.get((suite, kind), {})) - set(figure.misses))
        assert not stale, f"{figure.line()}; declared in known.py but no longer missed: {stale}"


def test_a_declared_miss_still_fails_its_case() -> None:
    """The suites can fail: a stand-in without its autocast policy (CPU autocast's) misses CUDA's."""
    class CpuPolicy(autocast.DeviceAutocast):
        def __init__(self, kind: str, on_device: object) -> None:
            super().__init__("cuda", on_device)  # type: ignore[arg-type]
            self.device_policy = autocast.policy("cpu")

    original = autocast.DeviceAutocast
    autocast_module = __import__("grader.emulation.standin", fromlist=["DeviceAutocast"])
    autocast_module.DeviceAutocast = CpuPolicy
    try:
        with suites.quiet():
            figure = suites.autocast_figure("cuda")
    finally:
        autocast_module.DeviceAutocast = original
    assert "torch_fp32.softmax" in figure.misses and figure.percent < 90


@pytest.mark.parametrize("device", ["cuda", "mps", "cpu"])
def test_the_autocast_tables_name_ops_the_installed_torch_registers(device: str) -> None:
    """LOWER, PROMOTE and BANNED are each a subset of the ops torch registers on the device's autocast
    key (a stale name would silently cast nothing); every other registered op runs in float32."""
    registered = autocast.registered(device)
    stale = (autocast.LOWER[device] | autocast.PROMOTE[device] | set(autocast.BANNED[device])) - registered
    assert not stale, f"not registered on {autocast.KEYS[device]} in torch {torch.__version__}: {sorted(stale)}"
    policy = autocast.policy(device)
    assert {name for name, cast in policy.items() if cast == "fp32"} == \
        registered - autocast.LOWER[device] - autocast.PROMOTE[device] - set(autocast.BANNED[device])
