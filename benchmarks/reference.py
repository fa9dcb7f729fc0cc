"""The reference queue: the smallest honest at-least-once queue on sqlite3.

This is the bar fairq's overhead is measured against. It is honest (a claim
takes a time-limited lease, and a row whose lease ran out is claimed again)
but has nothing else: no flows or order, no fairness, no fencing (an old
holder can ack a reclaimed row), no idempotent ids, no counts, no audit.

claim = BEGIN IMMEDIATE + UPDATE ... RETURNING of the oldest visible row;
ack = a second commit. Same pragmas as fairq: WAL, synchronous FULL or NORMAL.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS job (id INTEGER PRIMARY KEY, body TEXT NOT NULL, "
    "acked INTEGER NOT NULL DEFAULT 0, visible_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0)",
    # Unacked rows by the time they become visible (claimable) again.
    "CREATE INDEX IF NOT EXISTS job_visible ON job (visible_at) WHERE acked = 0",
)


class ReferenceQueue:
    def __init__(self, path: str, *, synchronous: str = "full", busy_timeout: float = 30.0,
                 lease_seconds: float = 30.0) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = " + {"full": "FULL", "normal": "NORMAL"}[synchronous])
        self.lease_seconds = lease_seconds
        self._write(lambda c: [c.execute(sql) for sql in SCHEMA])

    def _write(self, fn: Any) -> Any:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            out = fn(c)
            c.execute("COMMIT")
            return out
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def enqueue_many(self, bodies: list[Any], now: float) -> None:
        rows = [(json.dumps(b), now) for b in bodies]
        self._write(lambda c: c.executemany("INSERT INTO job (body, visible_at) VALUES (?, ?)", rows))

    def claim_many(self, n: int, now: float) -> list[tuple[int, Any]]:
        rows = self._write(lambda c: c.execute(
            "UPDATE job SET visible_at = :until, attempts = attempts + 1 WHERE id IN "
            "(SELECT id FROM job WHERE acked = 0 AND visible_at <= :now ORDER BY visible_at LIMIT :n) "
            "RETURNING id, body",
            {"until": now + self.lease_seconds, "now": now, "n": n}).fetchall())
        return [(job_id, json.loads(body)) for job_id, body in rows]

    def ack_many(self, ids: list[int]) -> None:
        self._write(lambda c: c.executemany("UPDATE job SET acked = 1 WHERE id = ?", [(i,) for i in ids]))

    def close(self) -> None:
        self.conn.close()
