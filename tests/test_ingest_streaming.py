"""Queue.ingest streams: memory stays bounded by a chunk of lines, not the
file, and the whole-file promise (one transaction, any bad line refuses all
of it, naming the line) holds across chunks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc

import pytest

import fairq
from fairq.ingest import CHUNK_LINES
from helpers import ROOT

BIG = {"max_lines": 1_000_000, "max_bytes": 1 << 30}


def jsonl(n: int, **overrides: dict) -> bytes:
    """n lines of orders in 100 flows; overrides[line number] replaces a line's object."""
    out = []
    for i in range(1, n + 1):
        obj = {"event_id": f"E{i:07d}", "flow": f"F{i % 100}",
               "body": {"sku": f"SKU-{i:07d}", "qty": i % 7, "note": "x" * 80}}
        out.append(json.dumps(overrides.get(str(i), obj)).encode() + b"\n")
    return b"".join(out)


def test_ingesting_sixty_chunks_holds_a_chunk_in_memory_not_the_file(q, tmp_path, monkeypatch) -> None:
    # Chunks of 50 lines (not 1000) keep the file small and the test quick; the
    # ratio of file to chunk, and so what the bound tells apart, stays the same.
    monkeypatch.setattr(fairq.ingest, "CHUNK_LINES", 50)
    path = tmp_path / "orders.jsonl"
    path.write_bytes(jsonl(3_000))
    size = path.stat().st_size
    assert size > 500_000
    tracemalloc.start()
    try:
        done = q.ingest(path, now=0, summary=True, **BIG)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert done == fairq.ingest.Ingested(3_000, 3_000)
    assert q.stats(now=0).counts["ready"] == 3_000
    # A chunk of 50 parsed lines is a few tens of kB (the peak is about 100 kB);
    # the file is 0.5 MB, and holding it parsed takes about 3.5 MB.
    assert peak < 300_000, peak


def test_a_bad_last_line_of_a_many_chunk_file_refuses_all_of_it(q) -> None:
    n = 3 * CHUNK_LINES + 5
    data = jsonl(n - 1) + b'{"event_id": "late", "body": {"x": NaN}}\n'
    with pytest.raises(fairq.InvalidInput) as refused:
        q.ingest(data, now=0, **BIG)
    assert refused.value.line == n and refused.value.field == "body.x"
    assert q.events() == [] and q.stats(now=0).totals["enqueued"] == 0


def test_a_conflict_between_chunks_names_both_lines_and_stores_nothing(q) -> None:
    n = 2 * CHUNK_LINES + 10
    repeat = {"event_id": "E0000005", "flow": "F5", "body": {"changed": True}}
    with pytest.raises(fairq.Conflict) as refused:
        q.ingest(jsonl(n, **{str(n - 3): repeat}), now=0, **BIG)
    assert refused.value.line == n - 3 and refused.value.event_id == "E0000005"
    assert "repeats line 5 with a different body" in str(refused.value)
    assert q.events() == [] and q.stats(now=0).totals["enqueued"] == 0


def test_an_identical_repeat_in_a_later_chunk_collapses_to_one_event(q) -> None:
    n = CHUNK_LINES + 10
    first = json.loads(jsonl(1))
    done = q.ingest(jsonl(n, **{str(n): first}), now=0, summary=True, **BIG)
    assert (done.lines, done.created, done.duplicates) == (n, n - 1, 1)


def enqueue_piped(tmp_path, data: bytes) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "FAIRQ_DB"}, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "fairq", "--db", "q.db", "enqueue", "-"], input=data,
                          cwd=tmp_path, env=env, capture_output=True, timeout=120)


def test_a_piped_file_spanning_chunks_is_stored_whole_or_refused_whole(tmp_path) -> None:
    fairq.Queue(tmp_path / "q.db").close()
    n = 2 * CHUNK_LINES + 1
    bad = jsonl(n, **{str(n): {"event_id": "E0000002", "flow": "F2", "body": {}}})
    refused = enqueue_piped(tmp_path, bad)
    assert refused.returncode == 1
    assert f"line {n}:".encode() in refused.stderr and b"repeats line 2" in refused.stderr
    done = enqueue_piped(tmp_path, jsonl(n))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"lines": n, "created": n, "duplicates": 0}
