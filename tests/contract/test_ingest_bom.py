"""A byte order mark before the first line does not count against the line limit."""

from __future__ import annotations

import json

import fairq


def test_a_first_line_of_exactly_the_line_limit_after_a_bom_is_accepted(make_queue) -> None:
    line = json.dumps({"event_id": "E1", "body": {"pad": ""}}).encode()
    line = json.dumps({"event_id": "E1", "body": {"pad": "x" * (100 - len(line))}}).encode()
    assert len(line) == 100
    q = make_queue()
    for prefix in (b"", b"\xef\xbb\xbf"):
        done = q.ingest(prefix + line + b"\n", max_line_bytes=100)
        assert [e.event_id for e in done] == ["E1"]
    longer = line[:-2] + b'x"}}'
    try:
        q.ingest(b"\xef\xbb\xbf" + longer + b"\n", max_line_bytes=100)
    except fairq.InvalidInput as exc:
        assert exc.field == "line" and exc.line == 1
    else:
        raise AssertionError("a line over the limit was accepted")
