"""The layers keep to their places: the SQLite store does everything the
backend protocols ask, with the same parameters; nothing above the store
names a database or a store class except the one place that picks the store;
and the store's modules import each other without a cycle."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import fairq
from fairq import backend
from fairq.store.queue import QueueStore, QueueTxn
from fairq.store.reads import QueueReads
from fairq.store.schedules import ScheduleTxn

SRC = Path(fairq.__file__).parent

PAIRS = [
    (backend.Store, QueueStore),
    (backend.WriteTxn, QueueTxn),
    (backend.Snapshot, QueueReads),
    (backend.ScheduleStatements, ScheduleTxn),
]


def protocol_methods(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items()
            if callable(value) and not name.startswith("_")]


@pytest.mark.parametrize(("protocol", "implementation"), PAIRS, ids=lambda c: c.__name__)
def test_the_sqlite_store_has_every_method_the_backend_names_with_the_same_parameters(
    protocol: type, implementation: type
) -> None:
    methods = protocol_methods(protocol)
    assert methods, protocol
    for name in methods:
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {name}"
        wanted = [(p.name, p.kind) for p in inspect.signature(getattr(protocol, name)).parameters.values()]
        found = [(p.name, p.kind) for p in inspect.signature(getattr(implementation, name)).parameters.values()]
        assert found == wanted, f"{implementation.__name__}.{name}"


def test_a_queue_opens_its_store_through_the_backend_interface(tmp_path: Path) -> None:
    with fairq.Queue(tmp_path / "q.db") as q:
        store = q._store
        assert isinstance(store, QueueStore)
        with store.transaction("probe") as tx:
            assert isinstance(tx, QueueTxn)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for each import outside `if TYPE_CHECKING:` blocks,
    relative imports resolved against the file's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ["fairq", *path.relative_to(SRC).parent.parts]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.append((module, [alias.name for alias in node.names]))
    return out


# Modules above the store that still hold an SQLite handle, and why.
ALLOWED = {
    # The receiving end of a relay keeps receipts in the receiver's own SQLite
    # database and hands its apply() that connection.
    "inbox.py": {"sqlite3", "fairq.store.inbox", "fairq.store.sqlite"},
    # The demo is application code: it shows the outbox on the app's own connection.
    "cli/demo.py": {"sqlite3"},
    # The command line's last resort: a driver error no store typed is still
    # said in one line, never as a traceback.
    "cli/__init__.py": {"sqlite3"},
}


def test_nothing_above_the_store_names_sqlite_or_a_store_module() -> None:
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith("store/"):
            continue
        for module, names in imports(path):
            if module == "fairq.store" and set(names) <= {"open_store", "uses_server_clock"}:
                # Only the facade may pick the store (and learn whose clock it runs
                # on), and only through these functions.
                assert relative == "queue.py", relative
                continue
            targets = {f"fairq.store.{name}" for name in names} if module == "fairq.store" else {module}
            for found in sorted(m for m in targets if m == "sqlite3" or m.startswith("fairq.store.")):
                assert found in ALLOWED.get(relative, set()), f"{relative} imports {found}"
