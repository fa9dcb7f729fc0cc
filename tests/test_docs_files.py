"""Docs examples do not step on each other: each document's examples use database files of
their own, and a reader who runs the README's examples and then another document's, in one
folder, twice, meets no refusal (a stored policy or a later clock of another example's file)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from test_docs import DOCS, DRIVER, ROOT, console_parts, doc_blocks

DB_NAME = re.compile(r"[\w.-]+\.db\b")


def test_no_two_documents_run_examples_on_the_same_database_file() -> None:
    owner: dict[str, str] = {}
    for doc in DOCS:
        names = {name for block in doc_blocks(doc.read_text(encoding="utf-8"))
                 for name in DB_NAME.findall(str(block["code"]))}
        for name in names:
            assert name not in owner, f"{name} is used by the examples of {owner[name]} and {doc.name}"
            owner[name] = doc.name


def run_in(folder: Path, doc: Path) -> list[dict[str, object]]:
    blocks = doc_blocks(doc.read_text(encoding="utf-8"))
    for block in blocks:
        block["script"] = console_parts(str(block["code"]))[0] if block["lang"] == "console" else block["code"]
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_DEBUG", "FAIRQ_TOKEN")}
    env.update(PY=sys.executable, PYTHONPATH=str(ROOT / "src"), BLOCK_SECONDS="60")
    done = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(blocks), capture_output=True,
                          text=True, cwd=folder, env=env, timeout=600, start_new_session=True)
    results: list[dict[str, object]] = json.loads(done.stdout)
    assert len(results) == len(blocks), results[-1:]
    return results


def test_the_readme_then_the_schedules_and_inbox_examples_run_twice_in_one_folder(tmp_path: Path) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for _ in range(2):
        for name in ("README.md", "docs/schedules.md", "docs/inbox.md", "docs/effects.md"):
            for result in run_in(tmp_path, ROOT / name):
                assert result["ok"] and "Traceback" not in str(result["output"]), (name, result["output"])
