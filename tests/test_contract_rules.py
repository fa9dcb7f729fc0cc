"""The promise suite (tests/contract/) uses the public API only, so every store can run it."""

from __future__ import annotations

import ast
from pathlib import Path

CONTRACT = Path(__file__).resolve().parent / "contract"
STORE_HANDLES = {"db", "conn"}  # how a Queue's store reaches SQLite


def private_uses(source: str) -> list[str]:
    """Where a module reaches past the public API: a private attribute on anything but `self`
    (dunders allowed), a store's `.db` or `.conn`, an import of sqlite3 or of a private fairq
    module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in STORE_HANDLES:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not (
                node.attr.startswith("__") and node.attr.endswith("__")):
            if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "sqlite3" or any(p.startswith("_") for p in alias.name.split(".")):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            parts = node.module.split(".")
            if parts[0] == "sqlite3" or any(p.startswith("_") and p != "__future__" for p in parts):
                found.append(f"line {node.lineno}: from {node.module}")
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_promise_test_touches_a_private_attribute_or_sqlite3() -> None:
    modules = sorted(p for p in CONTRACT.glob("*.py") if p.name != "conftest.py")  # the store adapters
    assert len(modules) > 10
    offenders = {p.name: uses for p in modules if (uses := private_uses(p.read_text(encoding="utf-8")))}
    assert offenders == {}


def test_the_check_finds_private_attributes_and_sqlite3() -> None:
    source = "import sqlite3\nfrom fairq._json import x\nq._store.conn\nself._ok\nq.__class__\nq.db\n"
    assert sorted(private_uses(source)) == [
        "line 1: import sqlite3", "line 2: from fairq._json", "line 3: ._store", "line 3: .conn", "line 6: .db"]
