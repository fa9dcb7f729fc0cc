"""The verb table (fairq.api.verbs) against every place a verb lives: Queue and
its schedules, Client and its schedules, AsyncQueue, AsyncClient and their
schedules, the HTTP routes, and the route table of docs/http.md. A verb the
table holds must be in each place unless the table says why not; a public
verb of any of them must be in the table."""

from __future__ import annotations

import importlib

import inspect
import typing
from pathlib import Path

import fairq
import fairq.aio
import fairq.http.handler  # noqa: F401  (registers every route)
from fairq.api.verbs import NOT_VERBS, VERBS, Place
from fairq.http.routes import ROUTES

ROOT = Path(__file__).resolve().parents[1]
# Public names of the async classes that are neither verbs nor Queue's: run(fn).
ASYNC_ONLY = {"run"}


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def schedules_of(cls: type) -> type | None:
    """The class of `cls().schedules` (its property's return type); None if it has none."""
    prop = inspect.getattr_static(cls, "schedules", None)
    return typing.get_type_hints(prop.fget)["return"] if isinstance(prop, property) else None


def expected(place: Place | None, *more: Place) -> tuple[set[str], set[str]]:
    """The queue verbs and the schedules methods a class at these places must have."""
    names = {v.name for v in VERBS.values() if not ({place, *more} & set(v.absent))}
    return ({n for n in names if "." not in n}, {n.split(".")[1] for n in names if n.startswith("schedules.")})


def gaps(queue: type, client: type, async_queue: type, async_client: type) -> list[str]:
    """Every disagreement between the table and the classes, as sentences (none: they agree)."""
    found = []
    table_queue, table_schedules = expected(None)
    classes = [(queue, (None,), set()),
               (client, (Place.CLIENT,), set()),
               (async_queue, (Place.ASYNC,), ASYNC_ONLY),
               (async_client, (Place.CLIENT, Place.ASYNC), ASYNC_ONLY)]
    for cls, places, extra in classes:
        verbs, methods = expected(*places)
        have = public(cls) - NOT_VERBS - extra
        found += [f"{cls.__name__}.{n} is not in the verb table" for n in sorted(have - table_queue)]
        found += [f"{cls.__name__} lacks {n}" for n in sorted(verbs - have)]
        found += [f"{cls.__name__} has {n}, which the table says it leaves out" for n in sorted(have & table_queue - verbs)]
        schedules = schedules_of(cls)
        if schedules is None:
            found.append(f"{cls.__name__} lacks schedules")
            continue
        have_schedules = public(schedules)
        found += [f"{schedules.__name__}.{n} is not in the verb table" for n in sorted(have_schedules - table_schedules)]
        found += [f"{schedules.__name__} lacks {n}" for n in sorted(methods - have_schedules)]
    return found


def test_queue_client_and_the_async_classes_have_exactly_the_verbs_of_the_table() -> None:
    assert gaps(fairq.Queue, fairq.Client, fairq.aio.AsyncQueue, fairq.aio.AsyncClient) == []


def test_a_verb_missing_from_the_table_or_from_a_class_or_kept_where_it_is_left_out_is_found() -> None:
    class Wider(fairq.Queue):
        def frobnicate(self) -> None:
            """A verb nobody declared."""

    class Leaky(fairq.Client):
        def purge(self) -> None:
            """A verb the table keeps off the wire."""

    Narrower = type("Narrower", (), {n: getattr(fairq.aio.AsyncClient, n)
                                     for n in public(fairq.aio.AsyncClient) - {"ack"}})
    assert gaps(Wider, Leaky, fairq.aio.AsyncQueue, Narrower) == [
        "Wider.frobnicate is not in the verb table",
        "Leaky has purge, which the table says it leaves out",
        "Narrower lacks ack",
    ]


def test_each_verb_of_the_table_with_a_route_is_served_there_once_and_no_route_serves_an_unknown_verb() -> None:
    served = [r for r in ROUTES if r.verb is not None]
    assert sorted(r.verb for r in served) == sorted(v.name for v in VERBS.values() if v.route is not None)
    for r in served:
        assert f"{r.method} /{'/'.join(r.segments)}" == VERBS[r.verb].route  # type: ignore[index]
    # A route registered by hand cannot stand where a verb's route is.
    verb_routes = {v.route for v in VERBS.values()}
    assert not [r for r in ROUTES if r.verb is None and f"{r.method} /{'/'.join(r.segments)}" in verb_routes]


def test_every_absence_says_why_and_every_served_verb_has_a_python_end() -> None:
    for verb in VERBS.values():
        assert all(reason.strip() for reason in verb.absent.values()), verb.name
        if verb.route is not None:
            assert Place.CLIENT not in verb.absent, f"{verb.name} is served but fairq.Client lacks it"
        assert not (verb.claims and verb.absent), verb.name


def test_the_async_forms_of_claim_and_claim_many_are_the_ones_that_give_back_their_leases() -> None:
    assert {v.name for v in VERBS.values() if v.claims} == {"claim", "claim_many"}


def test_docs_http_lists_each_route_of_the_table_with_its_verb() -> None:
    doc = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    for verb in VERBS.values():
        if verb.route is not None:
            assert any(row.split("?")[0].split("`")[1] == verb.route and f"| `{verb.name}`" in row
                       for row in rows), verb.name


def test_each_verb_is_defined_by_the_facade_group_the_table_names() -> None:
    """The table says where a verb lives: a module of fairq.api (the Queue facade by
    concept), or fairq.schedules for the schedules' verbs."""
    for verb in VERBS.values():
        if verb.group == "schedules":
            owners = [fairq.schedules.Schedules]
            name = verb.name.removeprefix("schedules.")
        else:
            module = importlib.import_module(f"fairq.api.{verb.group}")
            owners = [c for c in vars(module).values() if isinstance(c, type) and c.__module__ == module.__name__]
            name = verb.name
        assert any(name in vars(owner) for owner in owners), f"{verb.name} is not defined in {verb.group}"
