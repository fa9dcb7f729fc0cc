"""N processes draining a filled PostgreSQL queue: the raw queue or fairq's own loop, measured alike.

DrainPool.drain() fills a fresh schema (the raw table by COPY; a fairq
queue with Queue.enqueue_many over FLOWS flows, or for batches over
flows_for(processes, batch) flows), runs ANALYZE, and hands the
drain to `processes` of the pool's spawned processes (started once, reused),
which each open their connection, wait on a barrier, then claim and ack
until every event is acked:

  raw    one autocommit UPDATE ... SKIP LOCKED to claim, one UPDATE to ack
         (batches: LIMIT n and id = ANY), benchmarks/pg_raw.py;
  fairq  q.claim() / q.ack(lease) (batches: q.claim_many(n) /
         q.settle_many(... "ack")), nothing else: no Worker, no handler.

A process whose claim comes back empty while events are still unacked (the
others hold them, or in fairq every remaining flow's head is leased) sleeps
1 ms and tries again; it stops when the acks counted by all processes reach
the events filled. The clock runs from the barrier to the last process's last
ack. Afterwards the acked count is checked against the events filled.
"""

from __future__ import annotations

import multiprocessing
import time
import urllib.parse
import uuid
from contextlib import nullcontext
from typing import Any

import pg_raw
import pgcluster
from pg_waits import WaitSampler

SPAWN = multiprocessing.get_context("spawn")
FLOWS = 100
FILL_BATCH = 10_000
#: Seconds a drain may take before it is declared hung (a guard, not a measure).
HUNG = 1800


def with_parameter(url: str, key: str, value: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != key] + [(key, value)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def flows_for(processes: int, batch: int) -> int:
    """The flows a fairq drain fills: FLOWS for single items; for batches
    enough that every process can fill its batch five times over. A flow has
    one event leased at a time (its order), so with fewer flows than
    processes x batch the drain would measure that order, which the raw
    queue does not keep, not the verbs."""
    return FLOWS if batch == 1 else max(FLOWS, 5 * processes * batch)


def fill_fairq(url: str, events: int, flows: int = FLOWS) -> None:
    import fairq

    with fairq.Queue(url) as q:
        for start in range(0, events, FILL_BATCH):
            q.enqueue_many([(f"e{i}", {"i": i}, f"f{i % flows}")
                            for i in range(start, min(events, start + FILL_BATCH))])
    analyze(url)


def analyze(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")  # the planner sees the backlog, as autovacuum would soon


def fairq_acked(url: str) -> int:
    import fairq

    with fairq.Queue(url) as q:
        return q.stats(top=0).counts["acked"]


class FairqClient:
    """One process's fairq queue: claim(n) and ack(leases) through the public verbs only."""

    def __init__(self, url: str, batch: int) -> None:
        import fairq

        self.fairq = fairq
        self.q = fairq.Queue(url)
        self.batch = batch

    def claim(self, n: int) -> list[Any]:
        if self.batch == 1:
            lease = self.q.claim()
            return [] if lease is None else [lease]
        return self.q.claim_many(n)

    def ack(self, leases: list[Any]) -> None:
        if self.batch == 1:
            self.q.ack(leases[0])
            return
        lost = [r for r in self.q.settle_many([(lease, "ack") for lease in leases])
                if isinstance(r, self.fairq.LeaseLost)]
        if lost:
            raise RuntimeError(f"fairq settle_many: {len(lost)} of {len(leases)} leases lost")

    def close(self) -> None:
        self.q.close()


def _serve(tasks: Any, barriers: dict[int, Any], done: Any, failed: Any, results: Any) -> None:
    """A pooled drain process: runs the drains it is given until told to stop (None)."""
    while (task := tasks.get()) is not None:
        kind, url, batch, events, processes = task
        _drain_once(kind, url, batch, events, barriers[processes], done, failed, results)


def _drain_once(kind: str, url: str, batch: int, events: int, barrier: Any, done: Any, failed: Any,
                results: Any) -> None:
    """One process's part of a drain: open, wait for the others, claim and ack until all `events` are acked."""
    try:
        client: Any = pg_raw.RawClient(url) if kind == "raw" else FairqClient(url, batch)
    except BaseException as exc:
        failed.value = 1
        results.put(("error", f"open: {type(exc).__name__}: {exc}"))
        barrier.abort()
        return
    try:
        barrier.wait()
        claims = empty = items = 0
        while not failed.value:
            got = client.claim(batch)
            if not got:
                if done.value >= events:
                    break
                empty += 1
                time.sleep(0.001)
                continue
            client.ack(got)
            claims += 1
            items += len(got)
            with done.get_lock():
                done.value += len(got)
        results.put(("ok", claims, empty, items, time.monotonic()))
    except BaseException as exc:
        failed.value = 1
        results.put(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        client.close()


class DrainPool:
    """Spawned drain processes, started once and reused by every drain (a context manager).

    counts: the process counts drains will use; a barrier of each size is
    made up front, since a barrier reaches a process only when it starts.
    """

    def __init__(self, counts: list[int]) -> None:
        self.barriers = {n: SPAWN.Barrier(n + 1) for n in set(counts)}
        self.done, self.failed, self.results = SPAWN.Value("q", 0), SPAWN.Value("b", 0), SPAWN.Queue()
        self.tasks = [SPAWN.Queue() for _ in range(max(counts))]
        self.procs = [SPAWN.Process(target=_serve, args=(t, self.barriers, self.done, self.failed, self.results),
                                    daemon=True) for t in self.tasks]
        for p in self.procs:
            p.start()

    def __enter__(self) -> DrainPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.failed.value = 1  # a process still draining stops at its next claim
        for t in self.tasks:
            t.put(None)
        for p in self.procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()

    def drain(self, kind: str, server: str, events: int, processes: int, batch: int, *, via: Any = None,
              sample: bool = False) -> dict[str, Any]:
        """One drain of `events` events by `processes` processes on a fresh schema of `server`.

        via: a LatencyProxy the drain's connections go through (filling and
        checking go straight to the server). sample: sample pg_stat_activity.
        Returns items_per_s, seconds, claims (calls that got something), empty
        claims, and (sampled) the waits summary.
        """
        schema, direct = pgcluster.fresh_schema(server, prefix="drain")
        try:
            if kind == "raw":
                pg_raw.create_and_fill(direct, events)
            else:
                fill_fairq(direct, events, flows_for(processes, batch))
            app = f"fairq-bench-{uuid.uuid4().hex[:8]}"
            reach = via.via_proxy(direct) if via is not None else direct
            url = with_parameter(reach, "application_name", app)
            self.done.value, self.failed.value = 0, 0
            sampler = WaitSampler(reach, app) if sample else None
            for t in self.tasks[:processes]:
                t.put((kind, url, batch, events, processes))
            self.barriers[processes].wait(timeout=300)
            began = time.monotonic()
            with sampler if sampler is not None else nullcontext():
                outs = [self.results.get(timeout=HUNG) for _ in range(processes)]
            errors = [o[1] for o in outs if o[0] == "error"]
            if errors:
                raise RuntimeError(f"{kind} drain: {errors[0]}")
            acked = pg_raw.acked(direct) if kind == "raw" else fairq_acked(direct)
            if acked != events:
                raise RuntimeError(f"{kind} drain: {acked} of {events} acked")
            seconds = max(o[4] for o in outs) - began
            claims = sum(o[1] for o in outs)
            out = {"items_per_s": events / seconds, "seconds": seconds, "claims": claims,
                   "empty_claims": sum(o[2] for o in outs)}
            if sampler is not None:
                out["waits"] = sampler.summary(claims)
            return out
        finally:
            pgcluster.drop_schema(server, schema)
