"""The package's shape: no import cycle anywhere, small modules that say their
job, no private name borrowed across modules, and the demo kept with the CLI.

An import counts when it runs while its module is imported: a statement at
module level (also inside a module-level if, try or class body). Imports
inside functions run later, when called, and imports under
``if TYPE_CHECKING:`` never run, so neither can make an import cycle; both
are left out. Importing a submodule of a package (``from .. import x``)
counts as importing that submodule, not the package's __init__.
"""

from __future__ import annotations

import ast
from pathlib import Path

import fairq

SRC = Path(fairq.__file__).parent
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = ["fairq", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def runs_at_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run while the module is imported."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                    visit(block)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                visit(node.body)

    visit(tree.body)
    return found


def dependencies(name: str, path: Path, modules: dict[str, Path] = MODULES) -> set[str]:
    """The fairq modules `name` imports while it is itself imported."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    deps: set[str] = set()
    for node in runs_at_import(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            deps.update(alias.name for alias in node.names)
            continue
        base = package[: len(package) - node.level + 1] if node.level else []
        module = ".".join(base + ([node.module] if node.module else []))
        for alias in node.names:
            sub = f"{module}.{alias.name}"
            deps.add(sub if sub in modules else module)
    return {d for d in deps if d in modules and d != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph (its modules, the first again at the end), or None."""
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> list[str] | None:
        if node in trail:
            return trail[trail.index(node):] + [node]
        if node in done:
            return None
        for dep in sorted(graph[node]):
            cycle = visit(dep, trail + [node])
            if cycle:
                return cycle
        done.add(node)
        return None

    for node in sorted(graph):
        cycle = visit(node, [])
        if cycle:
            return cycle
    return None


def test_no_module_of_the_package_imports_itself_back_through_others() -> None:
    graph = {name: dependencies(name, path) for name, path in MODULES.items()}
    assert find_cycle(graph) is None, "import cycle: " + " -> ".join(find_cycle(graph) or [])
    assert "fairq.stores.sqlite.transactions" in graph["fairq.stores.sqlite.connection"]  # the walk does see imports


def test_the_cycle_check_sees_two_modules_that_import_each_other(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("try:\n    from .a import thing\nexcept ImportError:\n    pass\n")
    modules = {"fairq.a": tmp_path / "a.py", "fairq.b": tmp_path / "b.py"}
    graph = {name: dependencies(name, path, modules) for name, path in modules.items()}
    assert graph == {"fairq.a": {"fairq.b"}, "fairq.b": {"fairq.a"}}
    assert find_cycle(graph) == ["fairq.a", "fairq.b", "fairq.a"]


def test_imports_under_type_checking_and_inside_functions_do_not_count(tmp_path: Path) -> None:
    # store.transactions names store.sqlite's Database only for the type checker.
    assert "fairq.stores.sqlite.connection" not in dependencies("fairq.stores.sqlite.transactions", MODULES["fairq.stores.sqlite.transactions"])
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .queue import Queue\n"
              "def f():\n    from .errors import Busy\n")
    (tmp_path / "m.py").write_text(source)
    assert dependencies("fairq.m", tmp_path / "m.py") == set()


def test_every_module_is_at_most_400_lines_and_opens_with_a_docstring_saying_its_job() -> None:
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= MAX_LINES, f"{name} has {len(text.splitlines())} lines"
        if path.name != "__main__.py":
            assert ast.get_docstring(ast.parse(text)), f"{name} has no module docstring"


def test_no_module_borrows_a_private_name_of_another() -> None:
    # A name with a leading underscore stays in its module; the package's
    # private helper modules (fairq._validate, ...) are imported whole.
    for name, path in MODULES.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in runs_at_import(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                assert not private or f"{module}.{alias.name}" in MODULES, \
                    f"{name} imports the private {module}.{alias.name}"


def test_the_http_client_imports_its_lease_helpers_from_their_public_module() -> None:
    client = MODULES["fairq.http.client"]
    deps = dependencies("fairq.http.client", client)
    assert "fairq.leases" in deps and "fairq.api.requests" not in deps
    from fairq import leases
    from fairq.http import client as client_module
    assert client_module.lease_key is leases.lease_key and client_module.settle_parts is leases.settle_parts


def test_the_demo_lives_with_the_command_line() -> None:
    assert "fairq.demo" not in MODULES and "fairq.cli.demo" in MODULES
    from fairq.cli import demo
    assert callable(demo.run_demo) and callable(demo.register)


def test_a_queue_and_a_client_have_every_verb_the_worker_protocol_names() -> None:
    # mypy --strict (CI) checks the full signatures; this checks the names and
    # keyword parameters at run time, so a renamed verb fails here too.
    import inspect

    from fairq.worker.verbs import QueueVerbs
    verbs = [name for name, member in vars(QueueVerbs).items()
             if not name.startswith("_") and (callable(member) or isinstance(member, property))]
    assert {"claim_many", "settle_many", "extend", "stats", "tick", "settings", "lease_seconds"} <= set(verbs)
    queue = fairq.Queue(":memory:")
    client = fairq.Client("http://127.0.0.1:9")  # connects only when called
    try:
        for obj in (queue, client):
            kind = type(obj).__name__
            assert isinstance(obj.lease_seconds, float), kind
            for name in verbs:
                wanted = getattr(QueueVerbs, name)
                if callable(wanted):
                    theirs = inspect.signature(getattr(obj, name)).parameters
                    for param in list(inspect.signature(wanted).parameters)[1:]:  # after self
                        assert param in theirs, f"{kind}.{name} lacks {param}"
    finally:
        queue.close()
