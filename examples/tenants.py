"""Tenants: small customers stay fast beside a big one, which still uses every worker.

One big customer ("bigco") has 2,000 independent jobs in 200 flows (ten
ordered steps each) and eight worker threads are busy with them. Then three
small customers arrive with 20 independent jobs each (a flow per job). Each
customer is a tenant of weight 1, so claims rotate over the four tenants:
whatever bigco enqueued before them and however many flows it has, a small
customer gets one claim in every four. Its 20th job is claimed within
4 x 20 = 80 claims of its arrival; add the jobs already leased when it
arrived and those running beside it (8 workers each) and it is done within
80 + 2 x 8 = 96 completions: in seconds, within the longest any 96
completions in a row take (96 x 4 ms / 8 workers = 48 ms if the handlers
alone took time).
Without tenants (a flow per job) the small jobs would join behind bigco's 200
flows (about 260 claims); in arrival order (FIFO) behind all of bigco's
remaining jobs.

The example prints the small customers' longest wait (enqueue to done), in
completions and in seconds, beside the bound; it also checks that bigco's
steps ran in order within each flow and that bigco used every worker.

    python3 examples/tenants.py                 # a temporary database
    python3 examples/tenants.py --db t.db       # a new file (or a postgresql:// URL of an empty queue)
    python3 examples/tenants.py --check         # exit 1 when a bound is exceeded
    python3 examples/tenants.py --without-tenants   # the same jobs as flows only: the bounds fail
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from typing import Any

import fairq

BIG, BIG_FLOWS, STEPS = "bigco", 200, 10  # 2,000 jobs
SMALL, SMALL_JOBS = ("initech", "umbrella", "hooli"), 20
WORKERS = 8
HANDLER_SECONDS = 0.004
ARRIVE_AFTER = 200  # the small customers enqueue once bigco has this many jobs done


class Record:
    """What the handlers saw: completions in order, running counts, each flow's steps."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[tuple[str, str, float]] = []  # (tenant, event_id, monotonic time), in completion order
        self.running: dict[str, int] = defaultdict(int)
        self.most_running: dict[str, int] = defaultdict(int)
        self.steps: dict[str, list[int]] = defaultdict(list)  # flow -> seqs in the order handled
        self.arrive = threading.Event()

    def handle(self, job: fairq.Job) -> None:
        """The handler: a short piece of work, recorded."""
        tenant = job.body["tenant"]
        with self.lock:
            self.running[tenant] += 1
            self.most_running[tenant] = max(self.most_running[tenant], self.running[tenant])
            self.steps[job.flow].append(job.seq)
        time.sleep(HANDLER_SECONDS)
        with self.lock:
            self.running[tenant] -= 1
            self.done.append((tenant, job.event_id, time.monotonic()))
            if len(self.done) == ARRIVE_AFTER:
                self.arrive.set()


def enqueue_bigco(q: fairq.Queue, tenants: bool) -> None:
    jobs = [(f"{BIG}-{f:03d}-{s:02d}", {"tenant": BIG, "step": s}, f"{BIG}-flow-{f:03d}", BIG if tenants else None)
            for s in range(1, STEPS + 1) for f in range(BIG_FLOWS)]
    for start in range(0, len(jobs), 500):
        q.enqueue_many(jobs[start:start + 500])


def enqueue_small(q: fairq.Queue, tenants: bool) -> float:
    """The small customers' jobs, one flow each; returns when they were enqueued."""
    q.enqueue_many([(f"{name}-{j:02d}", {"tenant": name, "job": j}, f"{name}-job-{j:02d}", name if tenants else None)
                    for name in SMALL for j in range(1, SMALL_JOBS + 1)])
    return time.monotonic()


def run(target: str, tenants: bool = True) -> dict[str, Any]:
    record = Record()
    with fairq.Queue(target) as q:
        if sum(q.stats(top=0).counts.values()):
            raise SystemExit(f"{target} already holds events: give a new database")
        enqueue_bigco(q, tenants)
        worker = fairq.Worker(q, record.handle, concurrency=WORKERS)
        began = time.monotonic()
        drain = threading.Thread(target=lambda: worker.run(until_empty=True, signals=False))
        drain.start()
        if not record.arrive.wait(120):
            raise SystemExit("bigco's first jobs were not done within 120 s")
        with record.lock:
            before = len(record.done)
        arrived = enqueue_small(q, tenants)
        drain.join()
        ended = time.monotonic()
        counts = q.stats(top=0).counts
    after = record.done[before:]
    small_done = [(i + 1, t - arrived) for i, (tenant, _, t) in enumerate(after) if tenant in SMALL]
    per_completion = (ended - arrived) / len(after)
    claims_bound = (1 + len(SMALL)) * SMALL_JOBS + 2 * WORKERS
    # In seconds: the small ones' last job is done within claims_bound completions of their
    # arrival, so within the longest any claims_bound consecutive completions took in this run.
    times = [t for _, _, t in record.done]
    slowest = max(times[i + claims_bound] - times[i] for i in range(len(times) - claims_bound))
    return {
        "acked": counts["acked"], "tenants": 1 + len(SMALL), "drain_seconds": ended - began,
        "last_small_completion": max(i for i, _ in small_done), "completions_bound": claims_bound,
        "small_max_wait": max(w for _, w in small_done),
        "wait_bound": slowest,
        "per_completion": per_completion,
        "bigco_remaining_at_arrival": BIG_FLOWS * STEPS - sum(1 for tenant, _, _ in record.done[:before]
                                                              if tenant == BIG),
        "bigco_most_running": record.most_running[BIG],
        "in_order": all(seqs == sorted(seqs) for seqs in record.steps.values()),
    }


def report(r: dict[str, Any]) -> list[str]:
    """Print the figures; return the checks that failed."""
    total = BIG_FLOWS * STEPS + len(SMALL) * SMALL_JOBS
    print(f"{r['acked']} of {total} jobs acked in {r['drain_seconds']:.2f} s by {WORKERS} workers "
          f"({HANDLER_SECONDS * 1000:g} ms handler; {r['per_completion'] * 1000:.2f} ms per completion)")
    print(f"small customers arrived with {len(SMALL)} x {SMALL_JOBS} jobs when bigco had "
          f"{r['bigco_remaining_at_arrival']} left")
    print(f"their last job was done at completion {r['last_small_completion']} after they arrived "
          f"(bound {r['completions_bound']} = {r['tenants']} tenants x {SMALL_JOBS} jobs + 2 x {WORKERS} workers; "
          f"without tenants about {BIG_FLOWS + len(SMALL) * SMALL_JOBS}, in FIFO order "
          f"{r['bigco_remaining_at_arrival'] + len(SMALL) * SMALL_JOBS})")
    print(f"their longest wait, enqueue to done: {r['small_max_wait'] * 1000:.0f} ms (bound "
          f"{r['wait_bound'] * 1000:.0f} ms: the longest {r['completions_bound']} completions in a row took in "
          f"this run; with the handlers alone, {r['completions_bound']} x {HANDLER_SECONDS * 1000:g} ms / {WORKERS} "
          f"workers = {r['completions_bound'] * HANDLER_SECONDS / WORKERS * 1000:.0f} ms)")
    print(f"bigco ran up to {r['bigco_most_running']} jobs at once; each of its flows in step order: {r['in_order']}")
    failed = []
    if r["acked"] != total:
        failed.append(f"acked {r['acked']}, not {total}")
    if r["last_small_completion"] > r["completions_bound"]:
        failed.append("a small customer's last job was done after the bound in completions")
    if r["small_max_wait"] > r["wait_bound"]:
        failed.append("a small customer's job waited longer than the bound")
    if r["bigco_most_running"] != WORKERS:
        failed.append(f"bigco ran at most {r['bigco_most_running']} jobs at once, not {WORKERS}")
    if not r["in_order"]:
        failed.append("a flow's steps ran out of order")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a new database file or postgresql:// URL (default: a temporary file)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a bound is exceeded")
    parser.add_argument("--without-tenants", action="store_true",
                        help="the same jobs as flows only, for comparison (the bounds then do not hold)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fairq-tenants-") as folder:
        results = run(args.db or os.path.join(folder, "tenants.db"), tenants=not args.without_tenants)
    failed = report(results)
    for problem in failed:
        print("EXCEEDED", problem)
    if args.check:
        print("all bounds held" if not failed else f"{len(failed)} bound(s) exceeded")
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
