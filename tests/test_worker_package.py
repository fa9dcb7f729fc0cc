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
    assert {m.stem for m in modules} >= {"__init__", "job", "heartbeat", "core", "threads", "processes", "signals"}


def test_the_process_runner_does_not_import_the_thread_driver() -> None:
    assert "threads" not in imported_modules(PACKAGE / "processes.py")
    assert "processes" in imported_modules(PACKAGE / "threads.py")


def test_the_public_import_paths_still_work() -> None:
    assert fairq.Worker is fairq.worker.Worker and fairq.Job is fairq.worker.Job
    for name in ("Handled", "Retry", "Fail"):
        assert getattr(fairq, name) is getattr(fairq.worker, name)
    from fairq.worker import COUNTS, QueueVerbs  # noqa: F401

    out = subprocess.run([sys.executable, "-c", "import fairq.worker.processes, fairq.worker.heartbeat"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def private_reaches(path: Path) -> list[str]:
    """`x._name` in the file where x is not self or cls: another object's private name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os"))):
            found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_a_jobs_state_is_read_and_written_only_through_its_public_interface() -> None:
    aio = PACKAGE.parent / "aio"
    files = [*PACKAGE.glob("*.py"), *(aio / f"{name}.py" for name in ("worker", "job", "heartbeat", "waits"))]
    assert [reach for path in files for reach in private_reaches(path)] == []


def test_the_thread_and_asyncio_workers_drive_one_core() -> None:
    assert "core" in imported_modules(PACKAGE / "threads.py")
    tree = ast.parse((PACKAGE.parent / "aio" / "worker.py").read_text())
    assert any(isinstance(node, ast.ImportFrom) and node.module == "worker.core" for node in tree.body)
