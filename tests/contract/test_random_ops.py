"""Random sequences of every verb keep every rule, checked against a plain model.

The model is deliberately simple: per event its flow, seq and state. After each
step the store's bookkeeping is recounted (the store's check) and the
claims are checked against the rules: only a flow's lowest unacked seq is
claimed, never two live leases in one flow, nothing acked twice.
"""

from __future__ import annotations

import random

import pytest

import fairq


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_keep_order_fencing_and_bookkeeping(make_queue, store, seed: int) -> None:
    rng = random.Random(seed)
    q = make_queue(max_attempts=3, backoff=fairq.Backoff(base=1, factor=2, cap=4, jitter=True))
    now = 0.0
    flows = ["A", "B", "C", "D", None]
    model: dict[str, dict] = {}  # event_id -> {"flow", "seq", "state"}
    held: list[fairq.Lease] = []
    stale: list[fairq.Lease] = []
    counter = 0

    def unacked_head(flow: str | None, event_id: str) -> bool:
        info = model[event_id]
        if flow is None:
            return True
        lower = [e for e in model.values() if e["flow"] == flow and e["seq"] < info["seq"]]
        return all(e["state"] == "acked" for e in lower)

    for step in range(250):
        now += rng.choice([0, 0, 0.5, 1, 3, 6])
        action = rng.choice(["enqueue", "enqueue", "batch", "claim", "claim_many", "settle",
                             "settle_many", "extend", "redrive", "stale"])
        if action in ("enqueue", "batch"):
            items = []
            for _ in range(1 if action == "enqueue" else rng.randint(1, 5)):
                counter += 1
                items.append((f"e{counter}", {"n": counter}, rng.choice(flows)))
            for got in q.enqueue_many(items, now=now):
                model[got.event_id] = {"flow": got.flow, "seq": got.seq, "state": "ready"}
        elif action in ("claim", "claim_many"):
            leases = q.claim_many(1 if action == "claim" else rng.randint(1, 4), now=now)
            assert len({lease.flow for lease in leases if lease.flow}) == len(
                [lease for lease in leases if lease.flow])
            for lease in leases:
                assert unacked_head(lease.flow, lease.event_id), (step, lease)
                # Any older holder of this event is now stale.
                stale += [h for h in held if h.event_id == lease.event_id]
                held = [h for h in held if h.event_id != lease.event_id]
                held.append(lease)
                model[lease.event_id]["state"] = "inflight"
        elif action in ("settle", "settle_many") and held:
            chosen = rng.sample(held, rng.randint(1, min(3, len(held))) if action == "settle_many" else 1)
            items = [(lease, rng.choice(["ack", "ack", "retry", "fail", "release"]), "why") for lease in chosen]
            items = [(lease, o) if o in ("ack", "release") else (lease, o, r) for lease, o, r in items]
            for (lease, outcome, *_), result in zip(items, q.settle_many(items, now=now)):
                held.remove(lease)
                if isinstance(result, fairq.LeaseLost):
                    # Only a lease that ran out can lose its event (reclaimed,
                    # or quarantined by a claim when its budget was spent).
                    assert now >= lease.lease_until, (step, result)
                    continue
                assert isinstance(result, fairq.Settled), result
                model[lease.event_id]["state"] = result.state.value
        elif action == "extend" and held:
            lease = rng.choice(held)
            try:
                extended = q.extend(lease, rng.choice([1, 5, 10]), now=now)
            except fairq.LeaseLost:
                assert now >= lease.lease_until
                held.remove(lease)
            else:
                held[held.index(lease)] = extended
        elif action == "redrive":
            dead = q.events(state="quarantined", limit=5)
            if dead:
                info = rng.choice(dead)
                q.redrive(info.event_id, expected_generation=info.generation, reason="retry it", now=now)
                model[info.event_id]["state"] = "ready"
        elif action == "stale" and stale:
            lease = stale.pop()
            with pytest.raises(fairq.LeaseLost):
                q.ack(lease, now=now)
        # A claim may quarantine an expired, spent head without handing out a
        # lease, which no result above reports: take states from the store's
        # rows (the order and fencing checks above used the model before this).
        for info in q.events(limit=10_000):
            model[info.event_id]["state"] = info.state.value
        if step % 25 == 0:
            store.check()
    acked = [e for e in q.events(state="acked", limit=10_000)]
    assert len({e.event_id for e in acked}) == len(acked)
    # The counts kept with the clock equal the events' rows, state by state.
    assert q.stats(now=now).counts == {s: sum(1 for e in model.values() if e["state"] == s)
                                       for s in ("ready", "inflight", "acked", "quarantined", "discarded")}
