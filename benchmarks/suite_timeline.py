"""A pytest plugin for benchmarks/suite_cost.py: when each xdist worker's tests ended.

    python -m pytest -n 2 -p suite_timeline --suite-timeline OUT.json   (benchmarks/ on PYTHONPATH)

The controller hears every report its workers send; at the session's end it writes, for each worker, the
modules it ran in their order and when its last test ended (seconds since the session started) to OUT.json.
With ``--dist loadscope`` a worker runs whole modules, so the gap between the workers' ends is how long one
core idled at the end of the run: what the order of the modules (tests/conftest.py ``LONGEST_FIRST``) is for.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-timeline", default=None, metavar="OUT.json",
                     help="write when each xdist worker's tests ended (benchmarks/suite_cost.py)")


def pytest_configure(config: pytest.Config) -> None:
    out = config.getoption("--suite-timeline")
    if out and not hasattr(config, "workerinput"):  # the controller only: it hears every worker
        config.pluginmanager.register(Timeline(Path(out)), "suite-timeline")


class Timeline:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.started = time.time()
        self.workers: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)  # the worker that ran it (xdist sets it on the controller)
        if node is None or report.when != "teardown":
            return
        worker = self.workers.setdefault(node.gateway.id, {"last_end_s": 0.0, "modules": []})
        worker["last_end_s"] = max(worker["last_end_s"], report.stop - self.started)
        module = report.nodeid.partition("::")[0]
        if not worker["modules"] or worker["modules"][-1] != module:
            worker["modules"].append(module)

    def pytest_sessionfinish(self) -> None:
        self.out.write_text(json.dumps(self.workers, indent=1), encoding="utf-8")
