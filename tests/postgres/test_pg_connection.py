"""The PostgreSQL store's connection: a lost one is opened again on the next call (the
call that met the loss raises Unavailable and is never repeated), opening says nothing
was written when it fails, a host that never answers cannot hang an open, and fairq's
own URL parameters (fairq_prepare) are taken out before the driver sees the URL."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest

import fairq
import pgcluster
from fairq.stores.postgres import url as pg_url_module
from fairq.stores.postgres.url import CONNECT_TIMEOUT, parse
from pgsessions import cut


def test_the_call_after_a_lost_connection_opens_a_new_one_and_the_failed_write_is_not_repeated(
        pg_url: str) -> None:
    victim = f"fairq-lost-{uuid.uuid4().hex[:8]}"
    with fairq.Queue(f"{pg_url}&application_name={victim}") as q:
        q.enqueue("before", {})
        assert cut(pg_url, victim) == 1
        with pytest.raises(fairq.Unavailable) as info:
            q.enqueue("lost", {})
        # An enqueue is one statement, its own transaction: once sent, the
        # client cannot tell whether the server committed it.
        assert "may or may not have committed" in str(info.value)
        assert q.get("lost") is None  # the next call reconnects by itself; the write was not repeated
        q.enqueue("after", {})
        assert [e.event_id for e in q.events()] == ["before", "after"]


def test_a_write_whose_connection_is_lost_midway_may_or_may_not_have_committed(pg_url: str) -> None:
    victim = f"fairq-midway-{uuid.uuid4().hex[:8]}"
    with fairq.Queue(f"{pg_url}&application_name={victim}") as q:
        q.enqueue("e", {})
        lease = q.claim()
        with pytest.raises(fairq.Unavailable) as info:
            q.ack(lease, effect=lambda conn: cut(pg_url, victim))  # the effect cuts its own transaction
        assert "may or may not have committed" in str(info.value)
        assert q.get("e").state is fairq.State.INFLIGHT  # it had not: the server rolled it back
        assert q.ack(lease).state is fairq.State.ACKED


def test_a_queue_goes_on_after_a_server_restart_without_being_told_to_reconnect(
        own_cluster: pgcluster.Cluster) -> None:
    with fairq.Queue(own_cluster.url) as q:
        q.enqueue("e1", {})
        own_cluster.stop("immediate")
        with pytest.raises(fairq.Unavailable) as info:
            q.claim()
        # A claim is one statement, its own transaction: once sent, the client
        # cannot tell whether the server committed it before it went.
        assert "may or may not have committed" in str(info.value)
        with pytest.raises(fairq.Unavailable):
            q.stats()  # still down: each call tries a new connection and says so
        own_cluster.start()
        lease = q.claim()
        assert lease is not None and lease.event_id == "e1"
        assert q.ack(lease).state is fairq.State.ACKED


def test_an_unreachable_server_at_open_says_nothing_was_written() -> None:
    with pytest.raises(fairq.Unavailable) as info:
        fairq.Queue("postgresql://nobody@127.0.0.1:1/nowhere?connect_timeout=2")
    assert "nothing was written" in str(info.value) and "may or may not" not in str(info.value)


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port that accepts TCP connections and never answers (a server that hangs)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield int(sock.getsockname()[1])


def test_a_server_that_never_answers_cannot_hang_an_open(blackhole: int, monkeypatch) -> None:
    monkeypatch.setattr(pg_url_module, "CONNECT_TIMEOUT", 2)  # libpq's shortest; fairq's default is 10
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    started = time.monotonic()
    with pytest.raises(fairq.Unavailable):
        fairq.Queue(f"postgresql://nobody@127.0.0.1:{blackhole}/nowhere")
    assert time.monotonic() - started < 8  # without a timeout the open waits for ever


def test_the_connect_timeout_is_fairqs_default_unless_the_url_or_the_environment_gives_one(
        monkeypatch) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    assert parse("postgresql://h/db").connect_args()["connect_timeout"] == CONNECT_TIMEOUT == 10
    assert "connect_timeout" not in parse("postgresql://h/db?connect_timeout=3").connect_args()  # the URL's own is kept
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    assert "connect_timeout" not in parse("postgresql://h/db").connect_args()  # libpq reads the environment's


def test_fairq_parameters_are_taken_out_of_the_url_and_the_rest_is_kept_as_written() -> None:
    url = "postgresql://u@h:5/db?options=-csearch_path%3Dq&fairq_prepare=off&application_name=a%20b"
    target = parse(url)
    assert target.conninfo == "postgresql://u@h:5/db?options=-csearch_path%3Dq&application_name=a%20b"
    assert target.prepare is False and target.connect_args()["prepare_threshold"] is None
    assert parse("postgresql://u@h/db?fairq_prepare=on").prepare is True
    plain = "postgresql://u@h/db?sslmode=disable"
    assert parse(plain).conninfo == plain and parse(plain).prepare is True


def test_unknown_fairq_parameters_and_bad_values_are_refused_naming_them(pg_url: str) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(f"{pg_url}&fairq_prepared=off&fairq_pools=3")
    assert info.value.field == "fairq_pools" and "fairq_prepared" in str(info.value)
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(f"{pg_url}&fairq_prepare=never")
    assert info.value.field == "fairq_prepare"


def test_a_queue_with_prepared_statements_off_prepares_none_and_still_listens(pg_url: str) -> None:
    with fairq.Queue(f"{pg_url}&fairq_prepare=off") as q:
        for i in range(12):  # psycopg prepares a statement on its 5th run, unless told not to
            q.enqueue(f"e{i}", {}, flow="F")
            q.ack(q.claim())
        assert q.stats().counts["acked"] == 12
        prepared = q._store.read(lambda snapshot: snapshot.connection.execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM pg_prepared_statements").fetchone()[0])
        assert prepared == 0
        assert q.wait_for_work(0.2) is True  # the listening connection opened with the URL too
    with fairq.Queue(pg_url) as q:
        for i in range(12):
            q.stats()
        assert q._store.read(lambda snapshot: snapshot.connection.execute(  # type: ignore[attr-defined]
            "SELECT count(*) FROM pg_prepared_statements").fetchone()[0]) > 0
