"""A PostgreSQL queue stores the clock it runs at (schema step 3): an open
with the other clock is refused (UsageError naming both), read-only opens
included, and nothing is written; a queue from before step 3 takes the clock
of the open that upgrades it."""

from __future__ import annotations

import json

import pytest

import fairq
import fairq.cli
from fairq.stores.postgres import schema
from pgcluster import require_psycopg
from pgold import back_to

psycopg = require_psycopg()


def stored_mode(url: str) -> str:
    with psycopg.connect(url) as conn:
        return str(conn.execute("SELECT mode FROM queue_clock").fetchone()[0])


def everything(url: str) -> list[object]:
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")]
        return [(t, conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall()) for t in tables if t != "fairq_schema"]


@pytest.mark.parametrize(("created", "opened"), [(None, "model"), ("model", None), ("server", "model"),
                                                 ("model", "server")])
def test_an_open_with_the_other_clock_is_refused_naming_both(pg_url: str, created, opened) -> None:
    with fairq.Queue(pg_url, clock=created) as q:
        q.enqueue("e", {})
    before = everything(pg_url)
    for readonly in (False, True):
        with pytest.raises(fairq.UsageError) as info:
            fairq.Queue(pg_url, clock=opened, readonly=readonly)
        assert "server clock" in str(info.value) and "model clock" in str(info.value)
    assert everything(pg_url) == before


def test_an_open_with_the_queues_clock_works(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue("e", {}, now=100)
    assert stored_mode(pg_url) == "model"
    with fairq.Queue(pg_url, clock=lambda: 200.0) as q:  # a callable clock is a model clock
        assert q.claim(now=150) is not None
    with fairq.Queue(pg_url, clock="model", readonly=True) as q:
        assert q.get("e").state is fairq.State.INFLIGHT


def test_a_model_clock_queue_is_not_taken_over_by_a_server_clock_worker(pg_url: str) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue("e", {}, now=0)
        assert q.claim(lease_seconds=3600, now=0) is not None
    with pytest.raises(fairq.UsageError):
        fairq.Queue(pg_url)


@pytest.mark.parametrize("clock", [None, "model"])
def test_a_version_2_queue_takes_the_clock_of_the_open_that_upgrades_it(pg_url: str, clock) -> None:
    with fairq.Queue(pg_url, clock=clock) as q:
        q.enqueue("e", {})
    back_to(pg_url, 2)  # as a fairq from before step 3 left it
    with pytest.raises(fairq.SchemaError, match="older"):
        fairq.Queue(pg_url, clock=clock, readonly=True)  # a reader never upgrades
    with fairq.Queue(pg_url, clock=clock) as q:
        assert q.schema_version == schema.LATEST >= 3 and q.get("e") is not None
    assert stored_mode(pg_url) == ("model" if clock else "server")
    with fairq.Queue(pg_url, clock=clock, readonly=True) as q:
        assert q.get("e").state is fairq.State.READY


def test_the_command_line_opens_a_queue_with_its_stored_clock(pg_url: str, capsys) -> None:
    with fairq.Queue(pg_url, clock="model") as q:
        q.enqueue("e", {}, now=0)
    assert fairq.cli.main(["--db", pg_url, "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["ready"] == 1
    assert fairq.cli.main(["--db", pg_url, "clock", "reset", "--to", "0", "--reason", "test"]) == 0
    assert stored_mode(pg_url) == "model"
