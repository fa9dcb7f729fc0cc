"""The docs tell the truth: the README runs, names are pinned and documented."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import fairq
from fairq.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

PUBLIC = [
    "ACK", "FAIL", "RETRY", "AuditEntry", "Backoff", "Busy", "ClockError", "Conflict", "Enqueued",
    "EventInfo", "FairqError", "Inbox", "InvalidInput", "Lease", "LeaseExpired", "LeaseLost",
    "Outcome", "Queue", "Receipt", "RedriveRefused", "SchemaError", "Settled", "StaleLease",
    "State", "Stats",
    "Misfire", "Schedule",
    "Client", "RemoteError", "Unavailable",
    "Blocked", "Purged", "Worker", "Job", "Handled", "Retry", "Fail",
    "UnknownSchedule",
    "Policy", "PolicyMismatch",
]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_all_is_pinned() -> None:
    assert sorted(fairq.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(fairq, name)


def test_every_public_name_and_method_has_a_docstring() -> None:
    for name in PUBLIC:
        obj = getattr(fairq, name)
        if isinstance(obj, fairq.Outcome):
            continue
        assert (obj.__doc__ or "").strip(), name
        for attr, member in vars(obj).items() if isinstance(obj, type) else []:
            if not attr.startswith("_") and callable(member):
                assert (member.__doc__ or "").strip(), f"{name}.{attr}"


def test_every_error_defaults_to_its_docstring() -> None:
    assert str(fairq.Busy()) == fairq.Busy.__doc__.strip()
    for cls in (fairq.Conflict, fairq.InvalidInput, fairq.LeaseLost, fairq.ClockError,
                fairq.RedriveRefused, fairq.Busy, fairq.SchemaError):
        assert issubclass(cls, fairq.FairqError)
    assert issubclass(fairq.StaleLease, fairq.LeaseLost) and issubclass(fairq.LeaseExpired, fairq.LeaseLost)
    assert issubclass(fairq.InvalidInput, ValueError)


def test_the_readme_opens_with_the_two_setup_commands() -> None:
    first = blocks("sh")[0].strip().splitlines()
    assert first[0].startswith("python3 -m pip install -e . && fairq demo")
    assert first[1].startswith("python3 -m pip install -e '.[test]' && python3 -m pytest -q")
    assert README.index("```sh") < README.index("```python")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m pip install -e '.[test]'" in ci
    assert re.search(r"^python3 -m pytest -q$", ci, flags=re.M)
    assert "-eq 5" in ci


def test_the_readme_example_runs(tmp_path) -> None:
    code = blocks("python")[0]
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert "handling order-1001" in done.stdout and "handling order-1002" in done.stdout
    assert "'acked': 2" in done.stdout


def test_every_cli_command_is_documented() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands
    for name in commands:
        assert f"## `fairq {name}" in doc, name


def test_docs_name_every_crash_point_verb() -> None:
    # Every named write transaction in the code has crash points
    # <verb>.before_commit / <verb>.after_commit; the docs list them all.
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src" / "fairq").rglob("*.py"))
    verbs = set(re.findall(r'(?:transaction|write)\("([a-z_]+)"', source))
    assert {"enqueue", "claim", "settle", "extend", "redrive", "receive"} <= verbs
    crash_section = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8").split("## Crash points")[1]
    listed = set(re.findall(r"`([a-z_]+)`", crash_section))
    assert verbs <= listed, verbs - listed
