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
from fairq.stores import backend
from fairq.stores.sqlite.store import SqliteStore, SqliteTxn
from fairq.stores.sqlite.reads import SqliteReads
from fairq.stores.sqlite.schedules import ScheduleTxn

SRC = Path(fairq.__file__).parent

PAIRS = [
    (backend.Store, SqliteStore),
    (backend.WriteTxn, SqliteTxn),
    (backend.Snapshot, SqliteReads),
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
        assert isinstance(store, SqliteStore)
        with store.transaction("probe") as tx:
            assert isinstance(tx, SqliteTxn)


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) for each import anywhere in the file (type-only and
    lazy ones too), relative imports resolved against the file's package."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ["fairq", *path.relative_to(SRC).parent.parts]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.append((module, [alias.name for alias in node.names]))
    return out


# Modules above the stores that still name sqlite3, and why.
ALLOWED = {
    # An Inbox hands its apply() the receiver's own connection (typed as SQLite's).
    "inbox.py": {"sqlite3"},
    # The demo is application code: it shows the outbox on the app's own connection.
    "cli/demo.py": {"sqlite3"},
    # The command line's last resort: a driver error no store typed is still
    # said in one line, never as a traceback.
    "cli/__init__.py": {"sqlite3"},
}


def test_nothing_above_the_stores_names_a_database_or_a_store_module() -> None:
    """Only fairq.stores picks a store: code outside fairq/stores/ imports neither a
    store's modules nor a database driver (lazy and type-only imports included),
    so it cannot branch on the kind of store."""
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith("stores/"):
            continue
        for module, names in imports(path):
            targets = {f"{module}.{name}" for name in names} if module == "fairq.stores" else {module}
            for found in sorted(targets):
                if found.startswith("fairq.stores.") and f"fairq.stores.{found.split('.')[2]}" in {
                        "fairq.stores.sqlite", "fairq.stores.postgres"}:
                    raise AssertionError(f"{relative} imports the store module {found}")
                if found.split(".")[0] in {"sqlite3", "psycopg", "psycopg_pool"}:
                    assert found in ALLOWED.get(relative, set()), f"{relative} imports {found}"


# No import cycle anywhere (the stores and the kernel included): tests/test_structure.py.


def test_the_kernel_names_no_database_and_no_store_module() -> None:
    """The kernel decides; it runs no SQL: it imports no driver and nothing of
    the stores, which sit above it (the records they take are kernel.records)."""
    for path in sorted((SRC / "kernel").rglob("*.py")):
        for module, _names in imports(path):
            assert module.split(".")[0] not in {"sqlite3", "psycopg", "psycopg_pool"}, f"{path.name}: {module}"
            assert module != "fairq.stores" and not module.startswith("fairq.stores."), \
                f"{path.name} imports {module}"


# Same-named functions of the two stores whose jobs differ, and why.
DIFFERENT_JOBS = {
    # A PostgreSQL queue also stores the name of its clock, which the open records and checks.
    "schema.ensure_schema",
}
#: Classes that do the same job in the two stores: (module, SQLite's, PostgreSQL's).
SAME_JOB_CLASSES = [
    ("store", "SqliteStore", "PgStore"), ("store", "SqliteTxn", "PgTxn"), ("txn", "TxnCore", "TxnCore"),
    ("reads", "SqliteReads", "PgReads"), ("connection", "Database", "PgDatabase"),
    ("schedules", "ScheduleTxn", "PgSchedules"), ("inbox", "SqliteInbox", "PgInbox"),
]


def parameters(node: ast.FunctionDef) -> list[tuple[str, str]]:
    """A function's parameters as written: (name, kind), defaults marked."""
    args = node.args
    positional = args.posonlyargs + args.args
    with_default = {a.arg for a in positional[len(positional) - len(args.defaults):]} if args.defaults else set()
    with_default |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    out = [(a.arg, "positional" + ("=" if a.arg in with_default else "")) for a in positional]
    out += [(a.arg, "keyword" + ("=" if a.arg in with_default else "")) for a in args.kwonlyargs]
    return out


def public_functions(module: str, store: str, cls: str | None = None) -> dict[str, list[tuple[str, str]]]:
    tree = ast.parse((SRC / "stores" / store / f"{module}.py").read_text(encoding="utf-8"))
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return {n.name: parameters(n) for n in body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")}


def test_functions_of_the_same_name_in_the_two_stores_take_the_same_parameters() -> None:
    """A file of the same name does the same job in both stores, and a function
    of the same name there has the same contract (or a name of its own)."""
    sqlite_files = {p.stem for p in (SRC / "stores" / "sqlite").glob("*.py")}
    shared = sorted(sqlite_files & {p.stem for p in (SRC / "stores" / "postgres").glob("*.py")} - {"__init__"})
    assert {"store", "txn", "claim", "settle", "maintenance", "policy_store", "reads"} <= set(shared)
    assert not {"retention", "clock"} & sqlite_files  # PostgreSQL's name for their job: maintenance
    pairs = [(m, None, None) for m in shared] + SAME_JOB_CLASSES
    compared = 0
    for module, lite, pg in pairs:
        mine, theirs = public_functions(module, "sqlite", lite), public_functions(module, "postgres", pg)
        for name in sorted(mine.keys() & theirs.keys()):
            if f"{module}.{name}" in DIFFERENT_JOBS:
                continue
            compared += 1
            assert mine[name] == theirs[name], f"{module}.{lite + '.' if lite else ''}{name}"
    assert compared > 40
