"""Round trips and statements one call of each verb sends, counted on the wire.

A fairq queue (and the raw queue, as a check of the counting: one round trip
per verb by construction) is opened through a LatencyProxy with no delay
that counts, per call:
  round trips  the client speaking again after the server answered (BEGIN
               and COMMIT are each one, as is any statement psycopg sends
               on its own);
  statements   Query and Execute messages (BEGIN and COMMIT included).
The queue is warm: every verb runs WARM times first (psycopg prepares a
statement on its fifth run, which costs one extra round trip then), and the
figure is the median over the ROUNDS calls after that; min and max show
whether it varied. The SQL of the last measured call is kept (JSON).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pg_raw
import pgcluster
from latency_proxy import LatencyProxy

WARM = 8
ROUNDS = 5
MANY = 10


def per_verb(server: str, host: str, port: int) -> dict[str, dict[str, Any]]:
    """verb -> {round_trips, statements, min/max round trips, sql}."""
    import fairq

    seen: dict[str, list[tuple[int, int, list[str]]]] = {}
    schema, direct = pgcluster.fresh_schema(server, prefix="trips")
    try:
        with LatencyProxy(host, port, 0, count_statements=True) as proxy:
            def measure(verb: str, call: Callable[[], Any]) -> Any:
                turns, statements = proxy.counts()
                out = call()
                turns2, statements2 = proxy.counts()
                seen.setdefault(verb, []).append(
                    (turns2 - turns, statements2 - statements, proxy.statements[statements:statements2]))
                return out

            with fairq.Queue(direct) as q:  # a backlog over several flows, written straight to the server
                q.enqueue_many([(f"b{i}", {"i": i}, f"f{i % 50}") for i in range(500)])
            pg_raw.create_and_fill(direct, 500)
            raw = pg_raw.RawClient(proxy.via_proxy(direct))
            with fairq.Queue(proxy.via_proxy(direct)) as q:
                for r in range(WARM + ROUNDS):
                    measure("enqueue", lambda: q.enqueue(f"t{r}", {"r": r}, flow=f"t{r % 5}"))
                    measure(f"enqueue_many({MANY})",
                            lambda: q.enqueue_many([(f"m{r}-{i}", {}, f"m{i}") for i in range(MANY)]))
                    lease = measure("claim", q.claim)
                    lease = measure("extend", lambda: q.extend(lease, 60))
                    measure("ack", lambda: q.ack(lease))
                    lease = q.claim()
                    assert lease is not None, "the backlog ran out"
                    measure("release", lambda: q.release(lease))
                    leases = measure(f"claim_many({MANY})", lambda: q.claim_many(MANY))
                    measure(f"settle_many({MANY}, ack)", lambda: q.settle_many([(x, "ack") for x in leases]))
                    ids = measure("raw claim", lambda: raw.claim(1))
                    measure("raw ack", lambda: raw.ack(ids))
                    ids = measure(f"raw claim {MANY}", lambda: raw.claim(MANY))
                    measure(f"raw ack {MANY}", lambda: raw.ack(ids))
            raw.close()
    finally:
        pgcluster.drop_schema(server, schema)
    out = {}
    for verb, calls in seen.items():
        warm = calls[WARM:]
        trips = [c[0] for c in warm]
        out[verb] = {"round_trips": statistics.median(trips), "min": min(trips), "max": max(trips),
                     "statements": statistics.median(c[1] for c in warm), "sql": warm[-1][2]}
    return out


def first_words(sql: list[str]) -> str:
    """The statements as their first keyword each: BEGIN, SELECT, UPDATE ..."""
    return ", ".join(s.split(" ", 1)[0].upper() if s else "?" for s in sql)
