"""The examples run and reproduce their documented results (the README's shell walkthrough of
paid_orders.py, with the totals its text names: test_docs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fairq
from helpers import load_file, run_check

ROOT = Path(__file__).resolve().parent.parent


def test_fair_relay_reproduces_every_scenario() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "fair_relay.py"), "--check"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "15/15 scenarios as expected" in done.stdout
    assert "DIFF" not in done.stdout


def test_paid_orders_reproduces_its_documented_numbers() -> None:
    done = run_check(ROOT / "examples" / "paid_orders.py")
    assert "17/17 steps as expected" in done.stdout and "DIFF" not in done.stdout
    assert '"total": 17000' in done.stdout and '"total": 20000' in done.stdout


def test_paid_orders_check_exits_1_on_any_difference(monkeypatch, capsys) -> None:
    paid_orders = load_file(ROOT / "examples" / "paid_orders.py", "paid_orders")
    monkeypatch.setitem(paid_orders.EXPECTED, "E0003 generation", 3)
    assert paid_orders.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "DIFF E0003 generation: 2" in out and "16/17 steps as expected" in out
    assert paid_orders.main([]) == 0  # without --check a difference is only reported


def test_paid_orders_sends_every_malformed_order_to_quarantine_at_once(tmp_path) -> None:
    paid_orders = load_file(ROOT / "examples" / "paid_orders.py", "paid_orders_rules")
    bad = {"B01": {"category": ["book"], "amount_cents": 5}, "B02": {"category": 7, "amount_cents": 5},
           "B03": {"amount_cents": 5}, "B04": {"category": "book", "amount_cents": True},
           "B05": {"category": "book", "amount_cents": 0}, "B06": {"category": "book", "amount_cents": 10_000_000},
           "B07": {"category": "book", "amount_cents": 5.0}, "B08": {"category": "book", "amount_cents": "5"},
           "B09": ["book", 5]}
    shop = paid_orders.Shop(tmp_path / "shop.db")
    shop.queue.enqueue_many([(event_id, body) for event_id, body in bad.items()]
                            + [("G01", {"category": "bag", "amount_cents": 9_999_999})], now=0)
    steps = [shop.step(0) for _ in range(11)]
    assert steps[-1] == "idle" and "G01: done" in steps
    for event_id in bad:
        info = shop.queue.get(event_id)
        assert (info.state, info.attempts) == (fairq.State.QUARANTINED, 1), event_id
        assert info.reason.startswith("invalid_payload: "), info.reason
    assert shop.totals() == {"bag": 9_999_999, "total": 9_999_999, "effects": 1}
    shop.queue.close()


def test_the_handlers_example_fills_the_database_the_worker_reads(tmp_path) -> None:
    # Both honour $FAIRQ_DB: what --fill enqueues, `fairq work` claims.
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FAIRQ_DB": "orders.db"}
    fill = subprocess.run([sys.executable, "examples/handlers.py", "--fill", "40"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert fill.returncode == 0, fill.stderr
    assert fill.stdout.startswith("orders.db: {'ready': 40")
    work = subprocess.run([sys.executable, "-m", "fairq", "work", "examples.handlers:handle", "--until-idle"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert work.returncode == 0, work.stderr
    assert "fairq work: claimed 0," not in work.stderr
    with fairq.Queue(tmp_path / "orders.db") as q:
        assert q.stats().counts["acked"] > 0
    assert not (tmp_path / "fairq.db").exists()


def test_the_async_app_drains_request_enqueued_orders_with_an_async_worker() -> None:
    done = run_check(ROOT / "examples" / "async_app.py")
    assert "5/5 results as expected" in done.stdout and "DIFF" not in done.stdout
    assert '"charged": {"ada": 1000, "bob": 700, "cy": 1000}' in done.stdout


def test_the_tenants_example_keeps_small_customers_within_the_rotations_bound() -> None:
    done = run_check(ROOT / "examples" / "tenants.py")
    assert "2060 of 2060 jobs acked" in done.stdout and "all bounds held" in done.stdout
    assert "bigco ran up to 8 jobs at once; each of its flows in step order: True" in done.stdout


def test_the_tenants_example_check_fails_without_tenants(capsys) -> None:
    # The same jobs as flows only: the small customers join behind bigco's 200 flows, past the bound.
    example = load_file(ROOT / "examples" / "tenants.py", "tenants_example")
    assert example.main(["--without-tenants", "--check"]) == 1
    assert "EXCEEDED a small customer's last job was done after the bound in completions" in capsys.readouterr().out
