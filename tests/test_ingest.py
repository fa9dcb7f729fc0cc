"""Queue.ingest: strict JSONL in, one transaction, every refusal names its line."""

from __future__ import annotations

import io
import json

import pytest

import fairq
from helpers import inject, snapshot

ORDER_LIMITS = {"max_bytes": 1_000_000, "max_lines": 1000, "max_body_bytes": 10_000}


def line(event_id: str = "E0001", body: object = None, **extra: object) -> bytes:
    obj = {"event_id": event_id, "body": {"category": "book", "amount_cents": 10000} if body is None else body}
    return json.dumps({**obj, **extra}).encode() + b"\n"


GOOD = line("E0001") + line("E0002", {"category": "pen", "amount_cents": 2000})


@pytest.fixture
def stored(q: fairq.Queue) -> fairq.Queue:
    """A queue that already holds one event, so "nothing written" is checked against real state."""
    q.enqueue("E0000", {"category": "bag", "amount_cents": 1}, now=5)
    return q


def assert_nothing_written(q: fairq.Queue) -> None:
    assert [e.event_id for e in q.events()] == ["E0000"]
    stats = q.stats(now=5)
    assert stats.totals["enqueued"] == 1 and stats.counts["ready"] == 1
    with pytest.raises(fairq.ClockError):  # the stored clock did not move past 5
        q.enqueue("probe", {}, now=4)


# (name, file bytes, line reported, field reported, extra ingest arguments)
MALFORMED = [
    ("cut-off object", GOOD + b'{"event_id": "E0003", "body": {"a": 1}', 3, "json", {}),
    ("trailing comma", b'{"event_id": "E0003", "body": 1,}\n', 1, "json", {}),
    ("single quotes", b"{'event_id': 'E0003', 'body': 1}\n", 1, "json", {}),
    ("two objects on one line", b'{"event_id": "a", "body": 1} {"event_id": "b", "body": 1}\n', 1, "json", {}),
    ("objects split by a bare CR", b'{"event_id": "a", "body": 1}\r{"event_id": "b", "body": 1}\n', 1, "json", {}),
    ("an array, not an object", GOOD + b'[1, 2]\n', 3, "json", {}),
    ("a bare string", b'"E0001"\n', 1, "json", {}),
    ("null", b"\n\nnull\n", 3, "json", {}),
    ("duplicate top-level key", b'{"event_id": "a", "event_id": "b", "body": 1}\n', 1, "event_id", {}),
    ("duplicate key in the body", b'{"event_id": "a", "body": {"n": 1, "n": 2}}\n', 1, "body.n", {}),
    ("duplicate key deep in a list", b'{"event_id": "a", "body": {"items": [{}, {"sku": 1, "sku": 1}]}}\n',
     1, "body.items[1].sku", {}),
    ("NaN in the body", GOOD + b'{"event_id": "E3", "body": {"amount": NaN}}\n', 3, "body.amount", {}),
    ("Infinity in the body", b'{"event_id": "a", "body": [1, Infinity]}\n', 1, "body[1]", {}),
    ("-Infinity as the delay", b'{"event_id": "a", "body": 1, "delay": -Infinity}\n', 1, "delay", {}),
    ("a number too large for a float", b'{"event_id": "a", "body": {"x": 1e400}}\n', 1, "body.x", {}),
    ("an integer of 5000 digits", b'{"event_id": "a", "body": ' + b"7" * 5000 + b"}\n", 1, "json", {}),
    ("nesting too deep to parse", b'{"event_id": "a", "body": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
     1, "json", {"max_line_bytes": 300_000}),
    ("nesting deeper than bodies may be", b'{"event_id": "a", "body": ' + b"[" * 150 + b"]" * 150 + b"}\n",
     1, "body" + "[0]" * 100, {}),
    ("an unknown key", GOOD + line("E0003", payload={"x": 1}), 3, "payload", {}),
    ("a payload key instead of body", b'{"event_id": "E0003", "payload": {}}\n', 1, "payload", {}),
    ("no body", b'{"event_id": "E0003"}\n', 1, "body", {}),
    ("no event_id", b'{"body": {}}\n', 1, "event_id", {}),
    ("a numeric event_id", b'{"event_id": 3, "body": {}}\n', 1, "event_id", {}),
    ("an empty event_id", b'{"event_id": "", "body": {}}\n', 1, "event_id", {}),
    ("a control character in the event_id", b'{"event_id": "E\\u0001", "body": {}}\n', 1, "event_id", {}),
    ("an event_id of 256 characters", line("E" * 256), 1, "event_id", {}),
    ("a lone surrogate in the event_id", b'{"event_id": "E\\ud800", "body": {}}\n', 1, "event_id", {}),
    ("a lone surrogate in the body", b'{"event_id": "a", "body": "\\udfff"}\n', 1, "body", {}),
    ("a numeric flow", line("a", flow=7), 1, "flow", {}),
    ("a negative delay", line("a", delay=-1), 1, "delay", {}),
    ("a delay as text", line("a", delay="5"), 1, "delay", {}),
    ("a boolean delay", line("a", delay=True), 1, "delay", {}),
    ("bytes that are not UTF-8", GOOD + b'{"event_id": "a", "body": "caf\xe9"}\n', 3, "encoding", {}),
    ("a UTF-16 file", '{"event_id": "a", "body": 1}\n'.encode("utf-16"), 1, "encoding", {}),
    ("a BOM that is not at the start", GOOD + b"\xef\xbb\xbf" + line("E0003"), 3, "encoding", {}),
    ("an event_id outside the pattern", GOOD + line("E12345"), 3, "event_id", {"id_pattern": r"E\d{4}"}),
    ("a body over a 10,000-byte limit", line("E0003", {"s": "x" * 9_993}), 1, "body", ORDER_LIMITS),
    ("a line over its limit", GOOD + line("E0003", {"s": "x" * 100}), 3, "line", {"max_line_bytes": 100}),
    ("more lines than allowed", GOOD + b"\r\n  \n" + line("E0003"), 5, "file", {"max_lines": 2}),
    ("a file over its limit", GOOD * 10, 13, "file", {"max_bytes": 900}),  # lines 1-12 are 888 bytes
]


@pytest.mark.parametrize("name, data, at_line, field, limits", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_file_is_refused_naming_line_and_field_and_nothing_is_written(
        stored: fairq.Queue, name: str, data: bytes, at_line: int, field: str, limits: dict) -> None:
    with pytest.raises(fairq.InvalidInput) as refused:
        stored.ingest(data, now=10, **limits)
    assert (refused.value.line, refused.value.field) == (at_line, field), str(refused.value)
    assert str(refused.value).startswith(f"line {at_line}: {field}: ")
    assert_nothing_written(stored)


def test_the_table_covers_at_least_25_distinct_malformations() -> None:
    assert len({name for name, *_ in MALFORMED}) == len(MALFORMED) >= 25


def test_bom_crlf_and_blank_lines_are_accepted_and_line_numbers_count_every_line(q: fairq.Queue) -> None:
    data = b"\xef\xbb\xbf" + line("E0001").replace(b"\n", b"\r\n") + b"\r\n   \r\n\t\n" + line("E0002") + b"\n"
    done = q.ingest(data, now=0)
    assert [(e.event_id, e.created) for e in done] == [("E0001", True), ("E0002", True)]
    with pytest.raises(fairq.InvalidInput) as refused:
        q.ingest(data.replace(b'"E0002"', b"2"), now=0)
    assert refused.value.line == 5


def test_a_file_without_a_final_newline_is_read_whole(q: fairq.Queue) -> None:
    assert len(q.ingest(line("E0001") + line("E0002").rstrip(b"\n"), now=0)) == 2


def test_identical_repeats_collapse_to_one_event_whatever_the_key_order(q: fairq.Queue) -> None:
    data = (b'{"event_id": "E0001", "body": {"category": "book", "amount_cents": 10000}}\n'
            b'{"body": {"amount_cents": 10000, "category": "book"}, "event_id": "E0001"}\n'
            b'{"event_id":"E0001","body":{"category":"book","amount_cents":10000},"delay":0}\n')
    done = q.ingest(data, now=0)
    assert [e.created for e in done] == [True, False, False]
    assert q.stats(now=0).counts["ready"] == 1
    assert q.get("E0001").body == {"amount_cents": 10000, "category": "book"}


def test_a_second_load_of_the_same_file_creates_nothing(q: fairq.Queue) -> None:
    q.ingest(GOOD + GOOD, now=0)
    again = q.ingest(GOOD + GOOD, now=1)
    assert [e.created for e in again] == [False] * 4
    assert q.stats(now=1).totals["enqueued"] == 2


@pytest.mark.parametrize("repeat, field", [
    (line("E0001", {"category": "book", "amount_cents": 10001}), "body"),
    (line("E0001", {"category": "book", "amount_cents": 10000.0}), "body"),  # int and float differ
    (line("E0001", flow="shop"), "flow"),
])
def test_a_conflict_inside_the_file_refuses_all_of_it(q: fairq.Queue, repeat: bytes, field: str) -> None:
    with pytest.raises(fairq.Conflict) as refused:
        q.ingest(line("E0009") + line("E0001") + repeat + line("E0010"), now=0)
    assert (refused.value.line, refused.value.event_id, refused.value.field) == (3, "E0001", field)
    assert f"repeats line 2 with a different {field}" in str(refused.value)
    assert q.events() == []


def test_a_conflict_with_a_stored_event_refuses_the_whole_file_with_its_new_lines(stored: fairq.Queue) -> None:
    data = line("E0005", {"category": "bag", "amount_cents": 700}) + line("E0000", {"changed": True})
    with pytest.raises(fairq.Conflict) as refused:
        stored.ingest(data, now=10)
    assert str(refused.value) == "line 2: event 'E0000' is already stored with a different body"
    assert refused.value.line == 2 and refused.value.event_id == "E0000"
    assert_nothing_written(stored)


def test_tight_limits_accept_exactly_up_to_each_limit(q: fairq.Queue) -> None:
    def padded(i: int, size: int) -> bytes:  # one line of exactly `size` bytes, newline included
        stub = line(f"E{i:04d}", {"pad": ""})
        return line(f"E{i:04d}", {"pad": "x" * (size - len(stub))})

    full = b"".join(padded(i, 1000) for i in range(1000))
    assert len(full) == 1_000_000
    assert len(q.ingest(full, now=0, **ORDER_LIMITS)) == 1000
    with pytest.raises(fairq.InvalidInput, match="over the limit of 1000000 bytes"):
        q.ingest(full + b"\n", now=0, **ORDER_LIMITS)
    with pytest.raises(fairq.InvalidInput, match="more than 1000 non-blank lines") as refused:
        q.ingest(b"".join(padded(i, 900) for i in range(1001)), now=0, **ORDER_LIMITS)
    assert refused.value.line == 1001
    body = {"s": "x" * (10_000 - len('{"s":""}'))}
    assert q.ingest(line("E9999", body), now=0, **ORDER_LIMITS)[0].created
    with pytest.raises(fairq.InvalidInput, match="10001 bytes of canonical JSON, over the limit of 10000"):
        q.ingest(line("E9998", {"s": body["s"] + "x"}), now=0, **ORDER_LIMITS)


def test_flows_get_seqs_in_file_order_and_delays_are_kept(q: fairq.Queue) -> None:
    q.ingest(line("a1", flow="A") + line("b1", flow="B") + line("a2", flow="A", delay=2.5), now=10)
    assert [(e.event_id, e.seq) for e in q.events(flow="A")] == [("a1", 1), ("a2", 2)]
    assert q.get("a2").next_at == 12.5


@pytest.mark.parametrize("kind", ["str path", "Path", "binary file", "bytes", "bytearray"])
def test_a_file_can_be_given_as_a_path_a_binary_file_or_bytes(q: fairq.Queue, tmp_path, kind: str) -> None:
    path = tmp_path / "orders.jsonl"
    path.write_bytes(GOOD)
    source = {"str path": str(path), "Path": path, "binary file": io.BytesIO(GOOD), "bytes": GOOD,
              "bytearray": bytearray(GOOD)}[kind]
    assert [e.event_id for e in q.ingest(source, now=0)] == ["E0001", "E0002"]


@pytest.mark.parametrize("source, problem", [
    ("missing.jsonl", "cannot read"),
    (io.StringIO('{"event_id": "a", "body": 1}\n'), "binary mode"),
    (42, "must be a path, bytes or a binary file"),
])
def test_an_unreadable_source_is_refused(q: fairq.Queue, source, problem: str) -> None:
    with pytest.raises(fairq.InvalidInput, match=problem) as refused:
        q.ingest(source, now=0)
    assert refused.value.field == "source"


@pytest.mark.parametrize("limits, field", [
    ({"max_body_bytes": 10 << 20}, "max_body_bytes"),  # above the queue's own limit
    ({"max_lines": 0}, "max_lines"),
    ({"max_bytes": True}, "max_bytes"),
    ({"max_line_bytes": 1}, "max_line_bytes"),
    ({"id_pattern": "E("}, "id_pattern"),
])
def test_bad_limits_are_refused_before_the_file_is_read(q: fairq.Queue, limits: dict, field: str) -> None:
    with pytest.raises(fairq.InvalidInput) as refused:
        q.ingest(b"not even json", **limits)
    assert refused.value.field == field and refused.value.line is None


def test_an_empty_file_stores_nothing_and_does_not_move_the_clock(stored: fairq.Queue) -> None:
    assert stored.ingest(b"\xef\xbb\xbf\r\n\n", now=10) == []
    assert_nothing_written(stored)


def test_a_failing_insert_in_the_middle_of_a_file_leaves_nothing(make_queue) -> None:
    q = make_queue()
    q.enqueue("E0000", {}, flow="F", now=0)
    conn = q._store.db.conn
    before = snapshot(conn)
    conn.execute("CREATE TEMP TRIGGER third_fails BEFORE INSERT ON main.event WHEN NEW.event_id = 'E0003' "
                 "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    data = b"".join(line(f"E000{i}", flow="F") for i in range(1, 6))
    with pytest.raises(fairq.StoreError, match="injected failure"):
        q.ingest(data, now=1)
    assert snapshot(conn) == before and not conn.in_transaction
    conn.execute("DROP TRIGGER temp.third_fails")
    assert len(q.ingest(data, now=1)) == 5


def test_ingest_writes_every_table_enqueue_does_and_nothing_else(make_queue) -> None:
    q = make_queue()
    inject(q._store.db.conn, "audit", "INSERT")  # ingest appends no audit rows
    q.ingest(line("a", flow="F") + line("b"), now=0)
    assert q.stats(now=0).counts["ready"] == 2


def test_a_line_may_carry_a_kind_and_its_own_policy(q: fairq.Queue) -> None:
    data = (line("a", {}, kind="email", max_attempts=2, timeout=1.5, backoff={"base": 3, "jitter": False})
            + line("b", {}, kind="email") + line("a", {}, kind="email", max_attempts=2, timeout=1.5))
    assert [e.created for e in q.ingest(data, now=0)] == [True, True, False]
    info = q.get("a")
    assert (info.kind, info.max_attempts, info.timeout) == ("email", 2, 1.5)
    assert [e.event_id for e in q.events(kind="email")] == ["a", "b"]
    lease = q.claim(now=0)
    assert (lease.kind, q.retry(lease, "later", now=0).next_at) == ("email", 3)


def test_a_line_repeating_an_id_with_another_kind_is_refused_naming_the_line(q: fairq.Queue) -> None:
    with pytest.raises(fairq.Conflict) as caught:
        q.ingest(line("a", {}, kind="email") + line("a", {}, kind="sms"), now=0)
    assert (caught.value.line, caught.value.field) == (2, "kind")
    with pytest.raises(fairq.InvalidInput) as caught:
        q.ingest(line("b", {}, kind=""), now=0)
    assert (caught.value.line, caught.value.field) == (1, "kind")
    assert q.events() == []
