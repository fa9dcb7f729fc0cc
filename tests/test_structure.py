"""The package's shape: no import cycle anywhere, small modules that say their
job, no private name borrowed across modules, no private attribute of another
module's object read or written, and the demo kept with the CLI.

Every import counts, wherever it stands: at module level, inside a function
(it runs when the function is first called) and under ``if TYPE_CHECKING:``
(the type checker follows it). A cycle that only a lazy or type-only import
closes is still a cycle: the two modules cannot be understood, moved or
tested apart. Importing a submodule of a package (``from .. import x``)
counts as importing that submodule, not the package's __init__.

A private attribute is a name with one leading underscore (or a mangled
``__name``; dunders are public protocol). It may be read or written only on
``self``, ``cls``, ``super()`` or a class defined in the same module, by
attribute syntax or by getattr/setattr/hasattr/delattr with a literal name.
Anything else reaches into another module's object: its owner should offer a
public name instead. The exceptions are listed below, each with its reason.
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


def every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the module: module level, in functions and
    classes, and under ``if TYPE_CHECKING:``."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def imported_from(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` statement of module `name` reads."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join(base + ([node.module] if node.module else []))


def dependencies(name: str, path: Path, modules: dict[str, Path] = MODULES) -> set[str]:
    """The fairq modules `name` imports, by any import statement."""
    deps: set[str] = set()
    for node in every_import(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            deps.update(alias.name for alias in node.names)
            continue
        module = imported_from(name, path, node)
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
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle (lazy and type-only imports count): " + " -> ".join(cycle or [])
    assert "fairq.stores.sqlite.transactions" in graph["fairq.stores.sqlite.connection"]  # the walk does see imports


def test_the_cycle_check_sees_two_modules_that_import_each_other(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("try:\n    from .a import thing\nexcept ImportError:\n    pass\n")
    modules = {"fairq.a": tmp_path / "a.py", "fairq.b": tmp_path / "b.py"}
    graph = {name: dependencies(name, path, modules) for name, path in modules.items()}
    assert graph == {"fairq.a": {"fairq.b"}, "fairq.b": {"fairq.a"}}
    assert find_cycle(graph) == ["fairq.a", "fairq.b", "fairq.a"]


def test_imports_under_type_checking_and_inside_functions_count_too(tmp_path: Path) -> None:
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .queue import Queue\n"
              "def f():\n    from .errors import Busy\n")
    (tmp_path / "m.py").write_text(source)
    (tmp_path / "queue.py").write_text("def g():\n    from . import m\n")
    modules = {"fairq.m": tmp_path / "m.py", "fairq.queue": tmp_path / "queue.py", "fairq.errors": SRC / "errors.py"}
    graph = {name: dependencies(name, path, modules) for name, path in modules.items()}
    assert graph["fairq.m"] == {"fairq.queue", "fairq.errors"}
    assert find_cycle(graph) == ["fairq.m", "fairq.queue", "fairq.m"]


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
        for node in every_import(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = imported_from(name, path, node)
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                assert not private or f"{module}.{alias.name}" in MODULES, \
                    f"{name} imports the private {module}.{alias.name}"


# -- private attributes ------------------------------------------------------------------

#: Private-looking names that are public API of the standard library, allowed on
#: any receiver. Each must still occur (test_the_allowlists_are_not_stale).
ALLOWED_PRIVATE_ACCESS = {
    # os._exit is documented: leave a child process (or a test's crash point) now,
    # without running cleanup handlers or flushing buffers the parent shares.
    "os._exit",
    # The type add_subparsers() returns; argparse (and typeshed) has no public name for it.
    "argparse._SubParsersAction",
}
#: typing.NamedTuple's documented methods: underscored only so they cannot clash
#: with a field's name. No fairq class defines a name of this set (checked below).
NAMEDTUPLE_API = frozenset({"_make", "_replace", "_asdict", "_fields", "_field_defaults"})
ATTRIBUTE_CALLS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def is_private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def private_accesses(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, receiver.attribute as written, attribute) for each private attribute
    read or written on something other than self, cls, super() or a class of the module."""
    own = {"self", "cls"} | {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}

    def foreign(receiver: ast.expr) -> bool:
        if isinstance(receiver, ast.Name):
            return receiver.id not in own
        called = receiver.func if isinstance(receiver, ast.Call) else None
        return not (isinstance(called, ast.Name) and called.id == "super")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr) and foreign(node.value):
            found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}", node.attr))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATTRIBUTE_CALLS
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str) and is_private(node.args[1].value) and foreign(node.args[0])):
            found.append((node.lineno, f"{node.func.id}({ast.unparse(node.args[0])}, {node.args[1].value!r})",
                          node.args[1].value))
    return sorted(found)


def offenders(name: str, tree: ast.Module) -> list[str]:
    """The module's private accesses that no allowlist excuses, as `module:line: expression`."""
    return [f"{name}:{line}: {written}" for line, written, attr in private_accesses(tree)
            if written not in ALLOWED_PRIVATE_ACCESS and attr not in NAMEDTUPLE_API]


def test_no_module_reads_or_writes_a_private_attribute_of_another_modules_object() -> None:
    found = [o for name, path in MODULES.items() for o in offenders(name, ast.parse(path.read_text("utf-8")))]
    for offender in found:
        print(offender)
    assert not found, "private attributes reached from outside their owner:\n" + "\n".join(found)


def test_the_private_access_check_flags_a_foreign_object_and_spares_the_owner() -> None:
    source = (
        "import os\nclass Job:\n    def run(self, other):\n        self._phase = 1\n"
        "        super()._start()\n        Job._count += 1\n        other._phase = 2\n"
        "        return getattr(other, '_lost'), hasattr(self, '_lost'), row._replace(a=1)\n"
        "def loop(job):\n    os._exit(1)\n    return job._decision, job.__class__\n"
    )
    assert offenders("fairq.m", ast.parse(source)) == [
        "fairq.m:7: other._phase", "fairq.m:8: getattr(other, '_lost')", "fairq.m:11: job._decision"]


def test_the_allowlists_are_not_stale() -> None:
    written = {w for path in MODULES.values() for _, w, _ in private_accesses(ast.parse(path.read_text("utf-8")))}
    assert ALLOWED_PRIVATE_ACCESS <= written, ALLOWED_PRIVATE_ACCESS - written
    defined = {node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else getattr(node, "id", "")
               for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text("utf-8")))
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Name))}
    assert not NAMEDTUPLE_API & defined, "a fairq name shadows typing.NamedTuple's API"


def test_the_http_client_imports_its_lease_helpers_from_their_public_module() -> None:
    for name in ("fairq.http.client", "fairq.http.client_wire"):
        deps = dependencies(name, MODULES[name])
        assert "fairq.leases" in deps and "fairq.api.requests" not in deps
    from fairq import leases
    from fairq.http import client_wire
    assert client_wire.lease_key is leases.lease_key and client_wire.settle_parts is leases.settle_parts


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
