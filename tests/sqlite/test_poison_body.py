"""A body every process can read back: integers of more than 4300 digits are
refused on every enqueue path, and a stored body a process cannot decode
quarantines its event instead of stalling every claim."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator

import pytest

import fairq
from fairq.types import UndecodableBody
from helpers import TOKEN, raw, running

DIGITS = "9" * 4301  # one digit past the limit of every default Python process
POISON = '{"n":' + DIGITS + "}"


@contextlib.contextmanager
def no_int_digit_limit() -> Iterator[None]:
    """This process behaves like one without Python's int-digit limit (3.10.0-3.10.6)."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(before)


def huge() -> int:
    with no_int_digit_limit():
        return int(DIGITS)


def stored_ids(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [r[0] for r in conn.execute("SELECT event_id FROM event ORDER BY id")]
    finally:
        conn.close()


def enqueue_paths(q: fairq.Queue, path, body: object, jsonl: bytes):
    """Each in-process enqueue path, as a call that enqueues `body` (or `jsonl`)."""
    def outbox() -> None:
        app = sqlite3.connect(path, isolation_level=None)
        try:
            app.execute("BEGIN IMMEDIATE")
            q.enqueue("outbox", body, conn=app, now=1)
            app.execute("COMMIT")
        finally:
            app.close()
    return {
        "enqueue": lambda: q.enqueue("one", body, now=1),
        "enqueue_many": lambda: q.enqueue_many([("ok", {}), ("many", {"deep": [body]})], now=1),
        "ingest": lambda: q.ingest(jsonl, now=1),
        "outbox": outbox,
    }


@pytest.mark.parametrize("path_name", ["enqueue", "enqueue_many", "ingest", "outbox"])
@pytest.mark.parametrize("limited", [True, False], ids=["default_limit", "no_limit"])
def test_an_integer_of_more_than_4300_digits_is_refused_on_every_enqueue_path(
        q: fairq.Queue, db_path, path_name, limited) -> None:
    body = {"n": huge()}
    jsonl = b'{"event_id": "line", "body": ' + POISON.encode() + b"}\n"
    call = enqueue_paths(q, db_path, body, jsonl)[path_name]
    with contextlib.nullcontext() if limited else no_int_digit_limit():
        with pytest.raises(fairq.InvalidInput) as info:
            call()
    assert "4300" in str(info.value)
    assert stored_ids(db_path) == []


def test_an_integer_of_exactly_4300_digits_is_accepted_and_read_back(q: fairq.Queue) -> None:
    with no_int_digit_limit():
        big = -int("9" * 4300)
    q.enqueue("big", {"n": big}, now=1)
    assert q.claim(now=1).body == {"n": big}


def test_the_http_edge_refuses_an_integer_of_more_than_4300_digits(make_queue, db_path) -> None:
    request = b'{"event_id": "h", "body": ' + POISON.encode() + b"}"
    with running(make_queue()) as server:
        for limit in (contextlib.nullcontext(), no_int_digit_limit()):
            with limit:
                answer = raw(server, "POST", "/v1/enqueue", request, token=TOKEN)
            assert answer.status == 400, answer
    assert stored_ids(db_path) == []


def poison(path, event_id: str) -> None:
    """Write what an older process without the int-digit limit could have stored."""
    conn = sqlite3.connect(path)
    conn.execute("UPDATE event SET body = :body WHERE event_id = :id", {"body": POISON, "id": event_id})
    conn.commit()
    conn.close()


def test_a_claim_quarantines_a_body_it_cannot_decode_and_serves_the_other_flows(q: fairq.Queue, db_path) -> None:
    q.enqueue("bad", {"n": 1}, flow="A", now=0)
    q.enqueue("bad-next", {"n": 2}, flow="A", now=0)
    q.enqueue("good", {"n": 3}, flow="B", now=0)
    q.enqueue("lone", {"n": 4}, now=0)
    poison(db_path, "bad")

    lease = q.claim(now=1)
    assert lease is not None and lease.event_id == "good"
    assert [x.event_id for x in q.claim_many(10, now=1)] == ["lone"]

    bad = q.get("bad")
    assert bad.state is fairq.State.QUARANTINED
    assert bad.reason.startswith("undecodable_body")
    assert isinstance(bad.body, UndecodableBody) and bad.body.text == POISON
    assert "4300" in bad.body.problem
    (entry,) = q.audit("bad")
    assert (entry.action, entry.reason, entry.detail["cause"]) == ("quarantine", "undecodable_body",
                                                                  "undecodable_body")
    # Its flow waits behind it, as behind any quarantined head.
    assert q.why_blocked("A", now=1).why == "quarantined"
    assert q.get("bad-next").state is fairq.State.READY
    assert q.stats(now=1).counts["quarantined"] == 1


def test_reads_of_an_undecodable_body_never_raise(q: fairq.Queue, db_path) -> None:
    q.enqueue("bad", {"n": 1}, now=0)
    poison(db_path, "bad")
    assert isinstance(q.get("bad").body, UndecodableBody)
    (listed,) = q.events()
    assert isinstance(listed.body, UndecodableBody)


def test_a_redriven_undecodable_body_is_quarantined_again_not_stalled(q: fairq.Queue, db_path) -> None:
    q.enqueue("bad", {"n": 1}, now=0)
    q.enqueue("good", {"n": 2}, now=0)
    poison(db_path, "bad")
    assert q.claim(now=1).event_id == "good"
    generation = q.get("bad").generation
    q.redrive("bad", expected_generation=generation, reason="try once more", now=2)
    assert q.claim(now=2) is None
    assert q.get("bad").state is fairq.State.QUARANTINED


def test_an_expired_lease_on_an_undecodable_body_is_quarantined_by_the_next_claim(
        q: fairq.Queue, db_path) -> None:
    q.enqueue("bad", {"n": 1}, now=0)
    q.claim(now=0)
    poison(db_path, "bad")
    assert q.claim(now=10) is None
    bad = q.get("bad")
    assert bad.state is fairq.State.QUARANTINED and bad.lease_until is None
    assert q.stats(now=10).totals["expired"] == 1
