"""Tenants on SQLite: the counts the claim relies on stay exact through every
verb, a tenant's cap holds at every claim, and a queue without claimable
tenants claims with the statements it always did.

tenant.runnable (how many of a tenant's heads are runnable) decides whether
a claim looks at the tenant at all; every verb keeps it by hand, so a random
mix of every verb is recounted (helpers.check_invariants) after each step.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import fairq
from fairq.kernel import rules, tenants
from helpers import check_invariants


def rows(path: Path, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def traced(q: fairq.Queue, call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """call()'s result and the statements fairq's connection ran for it."""
    seen: list[str] = []
    conn = q._store.db.conn
    conn.set_trace_callback(seen.append)
    try:
        return call(), seen
    finally:
        conn.set_trace_callback(None)


@pytest.mark.parametrize("seed", range(5))
def test_every_verb_keeps_each_tenants_count_of_runnable_heads_exact(make_queue, db_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    q = make_queue(max_attempts=3, backoff=fairq.Backoff(base=1, factor=2, cap=4, jitter=False))
    q.set_tenant("capped", max_inflight=2, now=0)
    q.set_tenant("slow", rate=1, burst=2, now=0)
    q.set_tenant("heavy", weight=3, now=0)
    # Each flow belongs to one tenant (or none) for good.
    flows = {"a": "capped", "b": "capped", "c": "slow", "d": "heavy", "e": "heavy", "f": None, "g": "new"}
    lone = [None, "capped", "slow", "heavy"]  # tenants of unordered events
    now = 0.0
    held: list[fairq.Lease] = []
    counter = 0
    for step in range(300):
        now += rng.choice([0, 0, 0.25, 0.5, 1, 3, 7])
        action = rng.choice(["enqueue", "batch", "claim", "claim", "claim_many", "settle", "settle_many",
                             "extend", "redrive", "purge", "set_tenant", "reset_clock"])
        if action in ("enqueue", "batch"):
            items = []
            for _ in range(1 if action == "enqueue" else rng.randint(1, 6)):
                counter += 1
                flow = rng.choice([*flows, None])
                tenant = flows[flow] if flow is not None else rng.choice(lone)
                items.append({"event_id": f"e{counter}", "body": {"n": counter}, "flow": flow, "tenant": tenant,
                              "delay": rng.choice([0, 0, 0, 1, 5])})
            q.enqueue_many(items, now=now)
        elif action in ("claim", "claim_many"):
            leases = q.claim_many(1 if action == "claim" else rng.randint(1, 5), now=now,
                                  lease_seconds=rng.choice([2, 5, 30]))
            held = [h for h in held if h.event_id not in {lease.event_id for lease in leases}] + leases
            # The cap holds at every claim: capped's live leases are at most 2.
            live = [e for e in q.events(state="inflight", limit=1000)
                    if e.flow in ("a", "b") or (e.flow is None and e.event_id in capped_lone(db_path))]
            assert len([e for e in live if e.lease_until is not None and e.lease_until > now]) <= 2, (step, live)
        elif action in ("settle", "settle_many") and held:
            chosen = rng.sample(held, rng.randint(1, min(3, len(held))) if action == "settle_many" else 1)
            outcomes = [(lease, rng.choice(["ack", "ack", "retry", "fail", "release"])) for lease in chosen]
            q.settle_many([(lease, o) if o in ("ack", "release") else (lease, o, "why") for lease, o in outcomes],
                          now=now)
            held = [h for h in held if h not in chosen]
        elif action == "extend" and held:
            lease = rng.choice(held)
            try:
                held[held.index(lease)] = q.extend(lease, 10, now=now)
            except fairq.LeaseLost:
                held.remove(lease)
        elif action == "redrive":
            dead = q.events(state="quarantined", limit=5)
            if dead:
                info = rng.choice(dead)
                q.redrive(info.event_id, expected_generation=info.generation, reason="again", now=now)
        elif action == "purge":
            q.purge(acked_before=now, now=now)
        elif action == "set_tenant":
            q.set_tenant(rng.choice(["capped", "slow", "heavy", "new"]), max_inflight=rng.choice([None, 0, 1, 2]),
                         rate=rng.choice([None, 0, 2]), burst=rng.choice([None, 3]), now=now)
            if rows(db_path, "SELECT max_inflight FROM tenant WHERE name = 'capped'")[0][0] != 2:
                q.set_tenant("capped", max_inflight=2, now=now)
        elif action == "reset_clock" and now > 2:
            now -= 1
            q.reset_clock(reason="test", to=now)
        check_invariants(db_path)
    # Everything still drains, tenant by tenant, and every count comes back to zero.
    for name in ("capped", "slow", "heavy", "new"):
        q.set_tenant(name, max_inflight=0, rate=0, now=now)
    now += 100
    for lease in q.claim_many(1000, now=now):
        q.ack(lease, now=now)
    while leases := q.claim_many(100, now=now):
        q.settle_many([(lease, "ack") for lease in leases], now=now)
    for info in q.events(state="quarantined", limit=1000):
        q.redrive(info.event_id, expected_generation=info.generation, reason="drain", now=now)
    while leases := q.claim_many(100, now=now):
        q.settle_many([(lease, "ack") for lease in leases], now=now)
    check_invariants(db_path)
    assert q.stats(now=now).counts["ready"] == q.stats(now=now).counts["inflight"] == 0
    assert rows(db_path, "SELECT sum(runnable) FROM tenant") == [(0,)]


class TwoLevelModel:
    """The shared design's claim order, kept in memory with the kernel's rules:
    heads of no tenant by (pass, turn); tenants with a runnable head by (pass,
    turn), each claim taking its lowest head; one turn counter for all."""

    def __init__(self) -> None:
        self.vtime = self.tail = self.turn = 0
        self.tenants: dict[str, dict[str, int]] = {}
        self.weights: dict[str, int] = {}  # flow weights (1 unless set)
        self.flows: dict[str, list[str]] = {}  # unacked events of each flow (unordered: its own id)
        self.owner: dict[str, str | None] = {}  # each flow's tenant
        self.heads: dict[str, list[int]] = {}  # flow -> [pass, turn, leased]

    def next_turn(self) -> int:
        self.turn += 1
        return self.turn

    def enqueue(self, event_id: str, flow: str | None, tenant: str | None) -> None:
        key = flow if flow is not None else event_id
        self.owner.setdefault(key, tenant)
        events = self.flows.setdefault(key, [])
        events.append(event_id)
        if len(events) > 1:
            return  # the flow has a head already
        if tenant is None:
            self.heads[key] = [rules.join_pass(self.tail), self.next_turn(), 0]
            return
        t = self.tenants.setdefault(tenant, {"pass": 0, "turn": 0, "vtime": 0, "tail": 0, "weight": 1})
        busy = any(self.owner[f] == tenant for f in self.heads if f != key)
        joined = tenants.join(tail=self.tail, tenant_tail=t["tail"], tenant_pass=t["pass"] if busy else None)
        if not busy:
            t["pass"], t["turn"] = joined.tenant_pass, self.next_turn()
        self.heads[key] = [joined.flow_pass, self.next_turn(), 0]

    def claim(self) -> str | None:
        free = {f: h for f, h in self.heads.items() if not h[2]}
        mine = [(h[0], h[1], f) for f, h in free.items() if self.owner[f] is None]
        theirs = [(t["pass"], t["turn"], name) for name, t in self.tenants.items()
                  if any(self.owner[f] == name for f in free)]
        u, t = min(mine, default=None), min(theirs, default=None)
        if u is None and t is None:
            return None
        if t is not None and (u is None or t[:2] < u[:2]):
            name = t[2]
            tenant = self.tenants[name]
            _, _, flow = min((h[0], h[1], f) for f, h in free.items() if self.owner[f] == name)
            head = self.heads[flow]
            step = tenants.tenant_step(tenant["pass"], tenant["weight"], head[0], self.weights.get(flow, 1),
                                       vtime=self.vtime, tail=self.tail, tenant_vtime=tenant["vtime"],
                                       tenant_tail=tenant["tail"])
            tenant["pass"], tenant["turn"] = step.tenant.pass_, self.next_turn()
            self.vtime, self.tail = step.tenant.vtime, step.tenant.tail
            head[:] = [step.flow.pass_, self.next_turn(), 1]
            tenant["vtime"], tenant["tail"] = step.flow.vtime, step.flow.tail
        else:
            flow = u[2]
            head = self.heads[flow]
            step1 = rules.rotate(head[0], self.weights.get(flow, 1), vtime=self.vtime, tail=self.tail)
            self.vtime, self.tail = step1.vtime, step1.tail
            head[:] = [step1.pass_, self.next_turn(), 1]
        return self.flows[flow][0]

    def ack(self, event_id: str) -> None:
        flow = next(f for f, events in self.flows.items() if events and events[0] == event_id)
        self.flows[flow].pop(0)
        if self.flows[flow]:
            self.heads[flow][2] = 0  # the next event inherits the flow's place
        else:
            del self.heads[flow]


@pytest.mark.parametrize("seed", range(4))
def test_claims_follow_the_two_level_design_exactly(q: fairq.Queue, seed: int) -> None:
    rng = random.Random(seed)
    model = TwoLevelModel()
    owners = {"a": "T1", "b": "T1", "c": "T1", "d": "T2", "e": None, "f": None, "g": "T3", "h": "T3"}
    for name, weight in (("T1", 2), ("T3", 3)):
        q.set_tenant(name, weight=weight, now=0)
        model.tenants[name] = {"pass": 0, "turn": 0, "vtime": 0, "tail": 0, "weight": weight}
    for flow, weight in (("a", 3), ("e", 2)):
        q.set_weight(flow, weight)
        model.weights[flow] = weight
    held: list[fairq.Lease] = []
    counter = claimed = 0
    for _ in range(400):
        action = rng.choice(["enqueue", "enqueue", "claim", "claim_many", "ack"])
        if action == "enqueue":
            batch = []
            for _ in range(rng.randint(1, 4)):
                counter += 1
                flow = rng.choice([*owners, None])
                tenant = owners[flow] if flow is not None else rng.choice([None, "T1", "T2", "T4"])
                batch.append((f"e{counter}", {}, flow, tenant))
                model.enqueue(f"e{counter}", flow, tenant)
            q.enqueue_many(batch, now=0)
        elif action in ("claim", "claim_many"):
            n = 1 if action == "claim" else rng.randint(2, 6)
            leases = q.claim_many(n, now=0)
            expected = [e for e in (model.claim() for _ in range(n)) if e is not None]
            assert [lease.event_id for lease in leases] == expected
            held += leases
            claimed += len(leases)
        elif held:
            lease = held.pop(rng.randrange(len(held)))
            q.ack(lease, now=0)
            model.ack(lease.event_id)
    assert claimed > 60


def capped_lone(path: Path) -> set[str]:
    """The unordered events of tenant 'capped'."""
    return {r[0] for r in rows(path, "SELECT e.event_id FROM event AS e JOIN tenant AS t USING (tenant_id) "
                                     "WHERE t.name = 'capped' AND e.flow_id IS NULL")}


def test_a_flow_made_by_set_weight_takes_the_tenant_of_its_first_event(q: fairq.Queue) -> None:
    q.set_weight("a", 3)
    q.enqueue("a1", {}, flow="a", tenant="acme", now=0)
    assert {f.name: f.tenant for f in q.flows(now=0)} == {"a": "acme"}
    with pytest.raises(fairq.Conflict):
        q.enqueue("a2", {}, flow="a", now=0)


def test_a_repeat_of_a_purged_id_of_a_tenants_flow_must_name_its_tenant(q: fairq.Queue) -> None:
    q.enqueue("a1", {}, flow="a", tenant="acme", now=0)
    q.ack(q.claim(now=0), now=0)
    assert q.purge(acked_before=1, now=1).events == 1
    assert not q.enqueue("a1", {}, flow="a", tenant="acme", now=1).created
    with pytest.raises(fairq.Conflict) as info:
        q.enqueue("a1", {}, flow="a", now=1)
    assert info.value.field in ("flow", "tenant")


def test_a_queue_with_idle_tenants_claims_with_the_statements_it_always_did(q: fairq.Queue) -> None:
    q.set_tenant("idle", weight=2, now=0)
    q.enqueue("t1", {}, flow="t", tenant="idle", now=0)
    q.ack(q.claim(now=0), now=0)  # the tenant has nothing left
    q.enqueue("warm", {}, now=1)
    q.ack(q.claim(now=1), now=1)
    q.enqueue("e1", {}, now=2)
    lease, claim = traced(q, lambda: q.claim(now=2))
    assert lease is not None and lease.event_id == "e1"
    # BEGIN, the state row (with the head and the tenants' facts), the claim,
    # the state row write, COMMIT: no tenant is claimable, none is read.
    assert len(claim) == 5, claim
    _, ack = traced(q, lambda: q.ack(lease, now=2))
    assert len(ack) == 6, ack


def test_a_tenant_claim_reads_one_candidate_and_writes_the_head_and_the_tenant(q: fairq.Queue) -> None:
    q.enqueue_many([(f"a{i}", {}, "a", "T") for i in range(3)], now=0)
    lease, claim = traced(q, lambda: q.claim(now=0))
    assert lease is not None and lease.event_id == "a0"
    # BEGIN, the state row, the candidate tenant with its head, the tenant's
    # step, the head's lease, the state row write, COMMIT.
    assert [s.split()[0] for s in claim] == ["BEGIN", "SELECT", "SELECT", "UPDATE", "UPDATE", "UPDATE",
                                             "COMMIT"], claim
    assert "FROM tenant AS t INDEXED BY tenant_rotation" in claim[2]


def test_a_held_tenant_leaves_the_rotation_index_until_its_hold_ends(q: fairq.Queue, db_path: Path) -> None:
    q.set_tenant("A", max_inflight=1, now=0)
    q.enqueue_many([("a1", {}, "a", "A"), ("b1", {}, "b", "A")], now=0)
    lease = q.claim(now=0, lease_seconds=10)
    assert q.claim(now=1) is None
    assert rows(db_path, "SELECT held_until_ms, runnable FROM tenant") == [(10_000, 1)]
    # While held, a claim does not look at it: no candidate is read.
    _, claim = traced(q, lambda: q.claim(now=2))
    assert len(claim) == 3, claim  # BEGIN, the state row, COMMIT (nothing written)
    q.ack(lease, now=3)  # a lease ended: the hold with it
    assert rows(db_path, "SELECT held_until_ms FROM tenant") == [(0,)]
    assert q.claim(now=3).event_id == "b1"


def test_a_rate_hold_ends_at_the_next_token(q: fairq.Queue, db_path: Path) -> None:
    q.set_tenant("A", rate=2, burst=1, now=0)
    q.enqueue_many([(f"a{i}", {}, f"a{i}", "A") for i in range(3)], now=0)
    assert q.claim(now=0) is not None
    assert q.claim(now=0.1) is None
    assert rows(db_path, "SELECT held_until_ms, tokens_milli, at_ms FROM tenant") == [(500, 0, 0)]
    assert q.claim(now=0.4) is None
    assert q.claim(now=0.5) is not None
    assert rows(db_path, "SELECT held_until_ms, tokens_milli, at_ms FROM tenant") == [(0, 0, 500)]


def test_a_clock_reset_ends_holds_and_moves_the_buckets_time_back(q: fairq.Queue, db_path: Path) -> None:
    q.set_tenant("A", rate=1, burst=1, now=0)
    q.enqueue_many([(f"a{i}", {}, f"a{i}", "A") for i in range(3)], now=0)
    assert q.claim(now=100) is not None  # a mistaken time
    assert q.claim(now=100) is None
    q.reset_clock(reason="clock was ahead", to=10)
    assert rows(db_path, "SELECT held_until_ms, tokens_milli, at_ms FROM tenant") == [(0, 0, 10_000)]
    assert q.claim(now=10.5) is None
    assert q.claim(now=11) is not None  # one second after the (moved) claim


def test_tenant_statements_never_scan_a_table_or_sort(q: fairq.Queue, db_path: Path) -> None:
    # The planner sees tables of a realistic shape: many tenants, flows and events.
    q.enqueue_many([(f"bg{i}", {}, f"bg-{i % 300}", f"t{i % 100}") for i in range(3000)], now=0)
    q.enqueue_many([(f"free{i}", {}) for i in range(300)], now=0)
    q.settle_many([(lease, "ack") for lease in q.claim_many(300, now=0)], now=0)
    conn = q._store.db.conn
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        q.set_tenant("t1", max_inflight=1, rate=5, now=1)
        q.enqueue_many([("x1", {}, "x", "t1"), ("x2", {}, "x", "t1"), ("y1", {}, None, "t2")], now=1)
        leases = q.claim_many(20, now=1)
        q.settle_many([(lease, "retry", "later") for lease in leases[:5]]
                      + [(lease, "ack") for lease in leases[5:10]] + [(lease, "fail", "bad") for lease in leases[10:]],
                      now=1)
        q.claim_many(20, now=40)
        q.tenants(now=40)
        q.why_blocked("x", now=40)
        q.flows(now=40)
        q.stats(now=40)
    finally:
        conn.set_trace_callback(None)
    checked = {sql for sql in seen if sql.split()[0] in ("SELECT", "UPDATE", "INSERT", "DELETE")}
    assert any("tenant" in sql for sql in checked)
    for sql in checked:
        for line in (r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)):
            # (stats sorts its few heads by backlog, as it always did)
            assert "TEMP B-TREE" not in line or "ORDER BY backlog" in sql, (sql, line)
            if line.startswith("SCAN"):
                # Walks of an index in order, stopped by LIMIT, or of a batch's JSON list.
                assert any(name in line for name in (
                    "INDEX event_rotation", "INDEX tenant_rotation", "INDEX sqlite_autoindex_tenant_1",
                    "INDEX sqlite_autoindex_flow_1", "INDEX event_waiting", "INDEX event_tenant_rotation",
                    "INDEX event_quarantined", "INDEX event_paused", "VIRTUAL TABLE", "CONSTANT ROW",
                    "subquery")), (sql, line)
