"""The worker package's shape: small modules, no import cycle between the run loop
and the process runner, and the public import paths unchanged."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import fairq
import fairq.worker

PACKAGE = Path(fairq.__file__).parent / "worker"


def imported_modules(path: Path) -> set[str]:
    """The package-relative modules a file imports at its top level (`from .x import ...`)."""
    tree = ast.parse(path.read_text())
    return {node.module or "" for node in tree.body if isinstance(node, ast.ImportFrom) and node.level == 1}


def test_the_worker_is_a_package_of_small_modules_each_saying_its_job() -> None:
    # Size and docstrings are checked for every module by test_structure.py.
    modules = sorted(PACKAGE.glob("*.py"))
    assert {m.stem for m in modules} >= {"__init__", "job", "heartbeat", "loop", "processes", "signals"}


def test_the_process_runner_does_not_import_the_run_loop() -> None:
    assert "loop" not in imported_modules(PACKAGE / "processes.py")
    assert "processes" in imported_modules(PACKAGE / "loop.py")


def test_the_public_import_paths_still_work() -> None:
    assert fairq.Worker is fairq.worker.Worker and fairq.Job is fairq.worker.Job
    for name in ("Handled", "Retry", "Fail"):
        assert getattr(fairq, name) is getattr(fairq.worker, name)
    from fairq.worker import COUNTS, QueueVerbs  # noqa: F401

    out = subprocess.run([sys.executable, "-c", "import fairq.worker.processes, fairq.worker.heartbeat"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
