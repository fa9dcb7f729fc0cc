"""How an enqueued event is stored in SQLite."""

from __future__ import annotations

import sqlite3

import fairq


def test_bodies_are_stored_canonically(q: fairq.Queue, db_path) -> None:
    q.enqueue("x", {"b": [1, 2.5, "é"], "a": {"z": None, "y": True}}, now=0)
    conn = sqlite3.connect(db_path)
    stored = conn.execute("SELECT body FROM event").fetchone()[0]
    conn.close()
    assert stored == '{"a":{"y":true,"z":null},"b":[1,2.5,"é"]}'
