"""The fair relay, end to end, on two SQLite files.

A sender queue (queue.db) relays counting events of flows A, B, C to a
receiver (receiver.db) that adds each event's delta to its flow's total in
seq order, with an Inbox receipt in the same transaction. Every named
scenario runs in a fresh pair of files and prints its result; --check exits
1 if any result differs from the expected one.

    python examples/fair_relay.py            # print every scenario
    python examples/fair_relay.py --check    # and compare with EXPECTED
    python examples/fair_relay.py --output results.json

Times are logical seconds passed as `now=`, so every run prints the same.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fairq

LEASE = 5  # logical seconds
BACKOFF = fairq.Backoff(base=2, factor=2, cap=8, jitter=False)
CRASH_CODE = 73

# The receiver's answers and what the relay settles each with.
SETTLE = {
    "accepted": "ack", "duplicate": "ack",
    "id_conflict": "fail", "sequence_conflict": "fail", "unsupported_delta": "fail",
    "gap": "retry", "unavailable": "retry",
}


class Receiver:
    """The other end: an Inbox plus a projection of totals, in receiver.db."""

    def __init__(self, path: Path, max_delta: int = 5) -> None:
        self.path = path
        self.max_delta = max_delta
        self.sends = 0
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("CREATE TABLE IF NOT EXISTS projection "
                         "(flow TEXT PRIMARY KEY, total INTEGER NOT NULL, last_seq INTEGER NOT NULL)")
        conn.close()
        self.inbox = fairq.Inbox(path)

    def send(self, lease: fairq.Lease) -> str:
        self.sends += 1
        delta = lease.body["delta"]
        if delta > self.max_delta:
            return "unsupported_delta"

        def apply(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO projection VALUES (:flow, :delta, :seq) ON CONFLICT (flow) "
                         "DO UPDATE SET total = total + :delta, last_seq = :seq",
                         {"flow": lease.flow, "delta": delta, "seq": lease.seq})

        return self.inbox.receive(lease.event_id, lease.flow, lease.seq, lease.body, apply=apply).value

    def totals(self) -> dict[str, list[int]]:
        conn = sqlite3.connect(self.path)
        try:
            return {f: [t, s] for f, t, s in conn.execute("SELECT * FROM projection ORDER BY flow")}
        finally:
            conn.close()

    def receipts(self) -> int:
        return self.inbox.received()


class Relay:
    """A queue.db and a receiver.db in one directory, and the relay step between them."""

    def __init__(self, directory: Path) -> None:
        self.queue = fairq.Queue(directory / "queue.db", lease_seconds=LEASE, max_attempts=3,
                                 backoff=BACKOFF)
        self.receiver = Receiver(directory / "receiver.db")

    def load(self, deltas: dict[str, list[int]], now: float = 0) -> None:
        for flow, values in deltas.items():
            self.queue.enqueue_many([(f"{flow}{i}", {"delta": d}, flow)
                                     for i, d in enumerate(values, start=1)], now=now)

    def step(self, now: float) -> str:
        """claim -> send -> settle; returns 'A1:accepted' or 'idle'."""
        lease = self.queue.claim(owner="relay", now=now)
        if lease is None:
            return "idle"
        answer = self.receiver.send(lease)
        outcome = SETTLE[answer]
        self.queue.settle(lease, outcome, reason=None if outcome == "ack" else answer, now=now)
        return f"{lease.event_id}:{answer}"

    def state(self, event_id: str) -> str:
        info = self.queue.get(event_id)
        return "missing" if info is None else info.state.value


# -- scenarios ---------------------------------------------------------------


def rotation(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [1, 1, 1], "B": [1, 1, 1], "C": [1, 1, 1]})
    return [r.step(0).split(":")[0] for _ in range(9)]


def _race_child(path: str, barrier: Any, out: Any) -> None:
    q = fairq.Queue(path, lease_seconds=LEASE, busy_timeout=30)
    barrier.wait()
    lease = q.claim(owner=f"pid{os.getpid()}", now=0)
    out.put("idle" if lease is None else lease.event_id)
    q.close()


def eight_process_race(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [1, 1], "B": [1, 1], "C": [1, 1]})
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(8), ctx.Queue()
    procs = [ctx.Process(target=_race_child, args=(str(d / "queue.db"), barrier, out)) for _ in range(8)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    return {"claimed": sorted(g for g in got if g != "idle"), "idle": got.count("idle"),
            "inflight": sorted(e.event_id for e in r.queue.events(state="inflight"))}


def retry_backoff(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [1], "B": [1]})
    r.receiver.send = _flaky(r.receiver.send, "A1")  # A1's receiver is unavailable
    steps = {t: r.step(t) for t in (0, 0.5)}
    steps.update({t: r.step(t) for t in (1, 2, 5, 6)})
    info = r.queue.get("A1")
    return {"steps": {str(t): s for t, s in steps.items()}, "A1": info.state.value,
            "attempts": info.attempts}


def _flaky(send: Callable[[fairq.Lease], str], event_id: str) -> Callable[[fairq.Lease], str]:
    def flaky(lease: fairq.Lease) -> str:
        return "unavailable" if lease.event_id == event_id else send(lease)
    return flaky


def stale_holder(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [3]})
    old = r.queue.claim(owner="old", now=0)
    new = r.queue.claim(owner="new", now=5)
    old_send = r.receiver.send(old)
    try:
        r.queue.ack(old, now=6)
        old_settle = "acked"
    except fairq.StaleLease:
        old_settle = "stale"
    new_send = r.receiver.send(new)
    new_settle = r.queue.ack(new, now=6).state.value
    return {"generations": [old.generation, new.generation], "old": [old_send, old_settle],
            "new": [new_send, new_settle], "sends": r.receiver.sends, "receipts": r.receiver.receipts(),
            "totals": r.receiver.totals()}


def expired_holder(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [3]})
    lease = r.queue.claim(now=0)
    try:
        r.queue.ack(lease, now=5)
        return "acked"
    except fairq.LeaseExpired:
        return {"settle": "expired", "state": r.state("A1")}


def quarantine_blocks_only_its_flow(d: Path) -> Any:
    r = Relay(d)
    r.receiver.inbox.receive("X9", "A", 1, {"delta": 1})  # another id already took A's seq 1
    r.load({"A": [1, 1], "B": [1]})
    steps = [r.step(0) for _ in range(3)]
    return {"steps": steps, "A1": r.state("A1"), "A2": r.state("A2")}


def redrive(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [10, 1], "B": [2]})
    before = [r.step(0) for _ in range(3)]
    info = r.queue.get("A1")
    r.receiver.max_delta = 1000
    generation = r.queue.redrive("A1", expected_generation=info.generation,
                                 reason="receiver cap raised to 1000", actor="operator", now=1)
    after = [r.step(1) for _ in range(3)]
    audit = [(a.action, a.reason, a.detail.get("replaced_reason")) for a in r.queue.audit("A1")]
    return {"before": before, "after": after, "generation": generation,
            "totals": r.receiver.totals(), "lifetime_attempts": r.queue.get("A1").lifetime_attempts,
            "audit": audit}


def newcomers_do_not_starve(d: Path) -> Any:
    r = Relay(d)
    r.load({"A": [1, 1, 1]})
    order = [r.step(0)]
    for newcomer in "BCD":
        r.load({newcomer: [1]})
        order.append(r.step(0))
    while (s := r.step(0)) != "idle":
        order.append(s)
    return [s.split(":")[0] for s in order]


def weights(d: Path) -> Any:
    r = Relay(d)
    r.queue.set_weight("A", 3)
    r.load({"A": [1] * 9, "B": [1] * 3})
    return "".join(r.step(0)[0] for _ in range(12))


CRASH_POINTS = ["claim.before_commit", "claim.after_commit", "receive.before_commit",
                "receive.after_commit", "settle.before_commit", "settle.after_commit"]


def crash(point: str) -> Callable[[Path], Any]:
    def scenario(d: Path) -> Any:
        r = Relay(d)
        r.load({"A": [4]})
        env = dict(os.environ, FAIRQ_CRASH_AT=point, FAIRQ_CRASH_CODE=str(CRASH_CODE))
        child = subprocess.run([sys.executable, __file__, "--child", str(d)], env=env,
                               capture_output=True, text=True, timeout=60)
        seen = {"exit": child.returncode, "state": r.state("A1"), "receipts": r.receiver.receipts()}
        steps = []
        while (s := r.step(10)) != "idle":  # recovery after the dead lease ran out
            steps.append(s)
        return {"after_crash": seen, "recovery": steps, "final": r.state("A1"),
                "receipts": r.receiver.receipts(), "totals": r.receiver.totals()}
    return scenario


SCENARIOS: dict[str, Callable[[Path], Any]] = {
    "rotation": rotation,
    "eight_process_race": eight_process_race,
    "retry_backoff": retry_backoff,
    "stale_holder": stale_holder,
    "expired_holder": expired_holder,
    "quarantine_blocks_only_its_flow": quarantine_blocks_only_its_flow,
    "redrive": redrive,
    "newcomers_do_not_starve": newcomers_do_not_starve,
    "weights": weights,
    **{f"crash_{p.replace('.', '_')}": crash(p) for p in CRASH_POINTS},
}


def _recovered(after_crash: dict, recovery: list) -> dict:
    return {"after_crash": after_crash, "recovery": recovery, "final": "acked", "receipts": 1,
            "totals": {"A": [4, 1]}}


EXPECTED: dict[str, Any] = {
    "rotation": ["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"],
    "eight_process_race": {"claimed": ["A1", "B1", "C1"], "idle": 5, "inflight": ["A1", "B1", "C1"]},
    "retry_backoff": {"steps": {"0": "A1:unavailable", "0.5": "B1:accepted", "1": "idle",
                                "2": "A1:unavailable", "5": "idle", "6": "A1:unavailable"},
                      "A1": "quarantined", "attempts": 3},
    "stale_holder": {"generations": [1, 2], "old": ["accepted", "stale"], "new": ["duplicate", "acked"],
                     "sends": 2, "receipts": 1, "totals": {"A": [3, 1]}},
    "expired_holder": {"settle": "expired", "state": "inflight"},
    "quarantine_blocks_only_its_flow": {"steps": ["A1:sequence_conflict", "B1:accepted", "idle"],
                                        "A1": "quarantined", "A2": "ready"},
    "redrive": {"before": ["A1:unsupported_delta", "B1:accepted", "idle"],
                "after": ["A1:accepted", "A2:accepted", "idle"], "generation": 2,
                "totals": {"A": [11, 2], "B": [2, 1]}, "lifetime_attempts": 2,
                "audit": [["quarantine", "unsupported_delta", None],
                          ["redrive", "receiver cap raised to 1000", "unsupported_delta"]]},
    "newcomers_do_not_starve": ["A1", "A2", "B1", "A3", "C1", "D1"],
    "weights": "ABAABAAABAAA",  # 9 of 12 for A (weight 3), 3 for B
    "crash_claim_before_commit": _recovered({"exit": CRASH_CODE, "state": "ready", "receipts": 0},
                                            ["A1:accepted"]),
    "crash_claim_after_commit": _recovered({"exit": CRASH_CODE, "state": "inflight", "receipts": 0},
                                           ["A1:accepted"]),
    "crash_receive_before_commit": _recovered({"exit": CRASH_CODE, "state": "inflight", "receipts": 0},
                                              ["A1:accepted"]),
    "crash_receive_after_commit": _recovered({"exit": CRASH_CODE, "state": "inflight", "receipts": 1},
                                             ["A1:duplicate"]),
    "crash_settle_before_commit": _recovered({"exit": CRASH_CODE, "state": "inflight", "receipts": 1},
                                             ["A1:duplicate"]),
    "crash_settle_after_commit": _recovered({"exit": CRASH_CODE, "state": "acked", "receipts": 1}, []),
}


def run_all() -> dict[str, Any]:
    results = {}
    for name, scenario in SCENARIOS.items():
        with tempfile.TemporaryDirectory(prefix=f"fair-relay-{name}-") as directory:
            # JSON round trip: tuples become lists, as in the expected table.
            results[name] = json.loads(json.dumps(scenario(Path(directory))))
    return results


def child(directory: str) -> int:
    """One relay step in a child process; FAIRQ_CRASH_AT decides where it dies."""
    Relay(Path(directory)).step(0)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a result differs from EXPECTED")
    parser.add_argument("--output", help="write the results as JSON to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    results = run_all()
    failed = []
    for name, result in results.items():
        ok = result == EXPECTED[name]
        mark = "ok  " if ok else "DIFF"
        print(f"{mark} {name}: {json.dumps(result, sort_keys=True)}")
        if not ok:
            failed.append(name)
            print(f"     expected: {json.dumps(EXPECTED[name], sort_keys=True)}")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(f"{len(results) - len(failed)}/{len(results)} scenarios as expected")
    return 1 if args.check and failed else 0


if __name__ == "__main__":
    sys.exit(main())
