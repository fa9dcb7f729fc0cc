"""The raw SKIP LOCKED queue fairq's PostgreSQL store is measured against.

The plainest durable PostgreSQL queue: one table, one partial index on the
ready rows, a claim that is one autocommit UPDATE over a `FOR UPDATE SKIP
LOCKED` subquery, an ack that is one UPDATE fenced on the row still being
claimed. No flows, no fairness, no retries, no audit, no counters: a ceiling
for one-statement-per-verb on this server, not a rival design.
"""

from __future__ import annotations

import json
from typing import Any

# The queue: state 0 ready, 1 claimed, 2 acked.
SCHEMA = ("CREATE TABLE rawq (id bigserial PRIMARY KEY, body jsonb, state smallint DEFAULT 0, "
          "lease_until timestamptz, attempts int DEFAULT 0)")
# Only ready rows are indexed: a claim walks the ready ids in order and nothing else.
READY_INDEX = "CREATE INDEX rawq_ready ON rawq (id) WHERE state = 0"

# Claim one: the lowest ready id not locked by another claim, leased for 30 s.
CLAIM = ("UPDATE rawq SET state = 1, lease_until = now() + interval '30 s', attempts = attempts + 1 "
         "WHERE id = (SELECT id FROM rawq WHERE state = 0 ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) "
         "RETURNING id, body")
# Ack one: only a row still claimed (an acked row stays acked).
ACK = "UPDATE rawq SET state = 2 WHERE id = %(id)s AND state = 1"
# Claim up to n: the lowest n ready ids not locked by another claim.
CLAIM_MANY = ("UPDATE rawq SET state = 1, lease_until = now() + interval '30 s', attempts = attempts + 1 "
              "WHERE id IN (SELECT id FROM rawq WHERE state = 0 ORDER BY id LIMIT %(n)s FOR UPDATE SKIP LOCKED) "
              "RETURNING id, body")
# Ack many: only rows still claimed.
ACK_MANY = "UPDATE rawq SET state = 2 WHERE id = ANY(%(ids)s) AND state = 1"
# How many rows are acked (the drain's check: nothing lost, nothing twice).
ACKED = "SELECT count(*) FROM rawq WHERE state = 2"


def create_and_fill(url: str, events: int) -> None:
    """The table with `events` ready rows, written by COPY, then ANALYZE."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SCHEMA)
        conn.execute(READY_INDEX)
        with conn.cursor() as cur, cur.copy("COPY rawq (body) FROM STDIN") as copy:
            for i in range(events):
                copy.write_row((json.dumps({"i": i}),))
        conn.execute("ANALYZE rawq")  # the planner sees the backlog, as autovacuum would soon


def acked(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(ACKED).fetchone()
    return int(row[0]) if row else 0


class RawClient:
    """One process's autocommit connection to the raw queue: claim(n) and ack(ids)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)

    def claim(self, n: int) -> list[Any]:
        if n == 1:
            row = self.conn.execute(CLAIM).fetchone()
            return [row[0]] if row else []
        return [row[0] for row in self.conn.execute(CLAIM_MANY, {"n": n}).fetchall()]

    def ack(self, ids: list[Any]) -> None:
        if len(ids) == 1:
            done = self.conn.execute(ACK, {"id": ids[0]}).rowcount
        else:
            done = self.conn.execute(ACK_MANY, {"ids": ids}).rowcount
        if done != len(ids):
            raise RuntimeError(f"raw ack: {done} of {len(ids)} rows were still claimed")

    def close(self) -> None:
        self.conn.close()
