"""A child process for the PostgreSQL lock-order test: every verb, mixed, on
one queue (`python pg_mixed.py URL SEED ROUNDS`). Prints one JSON line: how
many calls it made, and every failure by kind; a deadlock (SQLSTATE 40P01)
is counted apart."""

from __future__ import annotations

import json
import random
import sys

import fairq


def main(url: str, seed: int, rounds: int) -> None:
    rng = random.Random(seed)
    calls, deadlocks, errors = 0, 0, []
    q = fairq.Queue(url)  # the queue stores short leases: claims reclaim expired ones too
    held: list[fairq.Lease] = []
    for i in range(rounds):
        try:
            verb = rng.random()
            if verb < 0.3:
                items = [{"event_id": f"{seed}-{i}-{k}", "body": {"i": i},
                          "flow": None if rng.random() < 0.1 else f"f{rng.randrange(12)}"}
                         for k in range(rng.randrange(1, 4))]
                q.enqueue_many(items)
            elif verb < 0.55:
                held.extend(q.claim_many(rng.randrange(1, 4), owner=f"p{seed}"))
            elif verb < 0.85 and held:
                rng.shuffle(held)
                batch, held = held[:3], held[3:]
                outcome = rng.choice(["ack", "ack", "retry", "release", "fail"])
                q.settle_many([(lease, outcome) if outcome in ("ack", "release") else (lease, outcome, "mixed")
                               for lease in batch])
            elif verb < 0.92 and held:
                held[0] = q.extend(held[0], 1.0)
            elif verb < 0.96:
                for info in q.events(state="quarantined", limit=2):
                    q.redrive(info.event_id, expected_generation=info.generation, reason="again")
            else:
                q.set_weight(f"f{rng.randrange(12)}", rng.randrange(1, 5))
            calls += 1
        except (fairq.LeaseLost, fairq.RedriveRefused):
            held = [lease for lease in held if lease]  # a lost lease is expected here
            calls += 1
        except fairq.FairqError as exc:
            cause = exc.__cause__
            if getattr(cause, "sqlstate", None) == "40P01":
                deadlocks += 1
            else:
                errors.append(f"{type(exc).__name__}: {exc}")
    q.close()
    print(json.dumps({"calls": calls, "deadlocks": deadlocks, "errors": errors[:5], "n_errors": len(errors)}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
