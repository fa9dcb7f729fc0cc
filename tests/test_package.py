"""The package people install works: a wheel built from this tree, installed
into a fresh virtual environment, runs `fairq demo` and an example, away from
the source tree (so missing package data or a missing module shows).

Marked slow (a build and a venv take tens of seconds); it runs by default.
Building needs setuptools>=77: the one installed, else pip fetches it into
an isolated build environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _setuptools_is_new_enough() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


def _clean_env() -> dict[str, str]:
    """The environment without anything pointing at the source tree or the test session's bytecode
    cache; pip and the installed copy write no bytecode (none into the interpreter's packages)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "FAIRQ_DB", "FAIRQ_DEBUG", "PYTHONPYCACHEPREFIX")}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("src") / "fairq"
    # A copy, so that the build's egg-info and build/ folders stay out of the worktree.
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info",
                                                                "__pycache__", ".pytest_cache", "*.db*"))
    isolation = [] if _setuptools_is_new_enough() else ["--use-pep517"]
    no_isolation = ["--no-build-isolation"] if _setuptools_is_new_enough() else []
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", *no_isolation, *isolation,
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=600,
                          env=_clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deprecat" not in (done.stdout + done.stderr).lower()
    (found,) = out.glob("fairq-*.whl")
    return found


def test_the_wheel_carries_the_license_the_type_marker_the_schema_and_the_console(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names
    assert "fairq/py.typed" in names
    assert any(n.startswith("fairq/stores/sqlite/") and n.endswith(".sql") for n in names)
    assert {"fairq/http/console/index.html", "fairq/http/console/console.js",
            "fairq/http/console/console.css"} <= set(names)  # the console, served from the package
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata


def test_the_installed_wheel_runs_the_demo_and_an_example(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)  # this pip installs into it (pip >= 22.3): seconds faster than ensurepip
    python = env_dir / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           str(wheel)], capture_output=True, text=True, timeout=300, env=_clean_env())
    assert done.returncode == 0, done.stdout + done.stderr
    away = tmp_path / "elsewhere"
    away.mkdir()
    demo = subprocess.run([str(env_dir / "bin" / "fairq"), "demo"], cwd=away, capture_output=True, text=True,
                          timeout=300, env=_clean_env())
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "totals: {'A': 11, 'B': 5, 'C': 5}" in demo.stdout
    shutil.copy(ROOT / "examples" / "lease_fencing.py", away)
    example = subprocess.run([str(python), "lease_fencing.py", "--check"], cwd=away, capture_output=True,
                             text=True, timeout=300, env=_clean_env())
    assert example.returncode == 0, example.stdout + example.stderr
    where = subprocess.run([str(python), "-c", "import fairq; print(fairq.__file__)"], cwd=away,
                           capture_output=True, text=True, timeout=60, env=_clean_env())
    assert str(env_dir) in where.stdout  # the installed copy ran, not the source tree
