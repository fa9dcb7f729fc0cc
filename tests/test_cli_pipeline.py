"""init, enqueue, status, events, show, redrive through the fairq command (in this process;
`--help` runs as a real `python -m fairq` process).

Each checks the exit code (0 done, 1 refused, 2 usage), what stdout says
(JSON where a program reads it) and what stderr says when something is refused.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import fairq
from helpers import cli, fairq_cli

ORDERS = (
    '{"event_id": "E0001", "body": {"category": "book", "amount_cents": 10000}}\n'
    '{"event_id": "E0001", "body": {"amount_cents": 10000, "category": "book"}}\n'
    '{"event_id": "E0002", "body": {"category": "pen", "amount_cents": 2000}}\n'
    '{"event_id": "E0003", "body": {"category": "book", "amount_cents": 5000}}\n'
    '{"event_id": "E0004", "body": {"category": "toy", "amount_cents": 3000}}\n'
)
ORDER_LIMITS = ["--max-bytes", "1000000", "--max-lines", "1000", "--max-body-bytes", "10000",
               "--id-pattern", "E[0-9]{4}"]


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A folder with an initialised shop.db and orders.jsonl."""
    (tmp_path / "orders.jsonl").write_text(ORDERS)
    done = cli("--db", "shop.db", "init", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path


def shop_cli(folder: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return cli("--db", "shop.db", *args, cwd=folder, input=stdin)


def counts(folder: Path) -> dict:
    with fairq.Queue(folder / "shop.db") as q:
        return q.stats().counts


# -- init --------------------------------------------------------------------


def test_init_creates_a_database_and_is_safe_to_repeat(tmp_path: Path) -> None:
    first = cli("init", cwd=tmp_path)
    assert first.returncode == 0 and first.stdout == "fairq database ready: fairq.db\n"
    assert (tmp_path / "fairq.db").exists()
    again = cli("init", cwd=tmp_path, env={"FAIRQ_DB": "other.db"})
    assert again.returncode == 0 and (tmp_path / "other.db").exists()
    assert cli("init", cwd=tmp_path).returncode == 0


def test_init_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("shopping list\n" * 100)
    done = cli("--db", "notes.txt", "init", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert "fairq: " in done.stderr and "notes.txt" in done.stderr


# -- enqueue -----------------------------------------------------------------


def test_enqueue_reports_created_and_duplicate_lines_as_json(shop: Path) -> None:
    first = shop_cli(shop, "enqueue", "orders.jsonl", *ORDER_LIMITS)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"lines": 5, "created": 4, "duplicates": 1}
    again = shop_cli(shop, "enqueue", "orders.jsonl")
    assert json.loads(again.stdout) == {"lines": 5, "created": 0, "duplicates": 5}
    assert counts(shop)["ready"] == 4


def test_enqueue_reads_standard_input_with_a_dash(shop: Path) -> None:
    done = shop_cli(shop, "enqueue", "-", stdin="\ufeff" + ORDERS.replace("\n", "\r\n"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == 4


def test_a_malformed_line_is_refused_with_its_line_field_and_reason(shop: Path) -> None:
    bad = ORDERS.replace('"amount_cents": 2000', '"amount_cents": NaN')
    (shop / "bad.jsonl").write_text(bad)
    done = shop_cli(shop, "enqueue", "bad.jsonl")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == ("fairq: bad.jsonl: line 3: body.amount_cents: NaN is not JSON; "
                           "nothing from the file was stored\n")
    assert counts(shop)["ready"] == 0


def test_a_conflict_with_stored_events_refuses_the_whole_file(shop: Path) -> None:
    shop_cli(shop, "enqueue", "orders.jsonl")
    (shop / "more.jsonl").write_text('{"event_id": "E0005", "body": {}}\n'
                                     '{"event_id": "E0002", "body": {"category": "pen", "amount_cents": 2001}}\n')
    done = shop_cli(shop, "enqueue", "more.jsonl")
    assert done.returncode == 1
    assert "line 2: event 'E0002' is already stored with a different body" in done.stderr
    with fairq.Queue(shop / "shop.db") as q:
        assert q.get("E0005") is None


def test_enqueue_applies_the_limits_it_is_given(shop: Path) -> None:
    done = shop_cli(shop, "enqueue", "orders.jsonl", "--max-lines", "4")
    assert done.returncode == 1 and "line 5: file: has more than 4 non-blank lines" in done.stderr
    done = shop_cli(shop, "enqueue", "orders.jsonl", "--id-pattern", "E000[123]")
    assert done.returncode == 1 and "line 5: event_id: 'E0004' does not match" in done.stderr
    assert counts(shop)["ready"] == 0


def test_enqueue_of_a_missing_file_or_into_a_missing_database_exits_1(shop: Path) -> None:
    done = shop_cli(shop, "enqueue", "nowhere.jsonl")
    assert done.returncode == 1 and "cannot read nowhere.jsonl" in done.stderr
    done = cli("--db", "missing.db", "enqueue", "orders.jsonl", cwd=shop)
    assert done.returncode == 1 and "no fairq database at missing.db" in done.stderr
    assert not (shop / "missing.db").exists()


def test_enqueue_usage_errors_exit_2(shop: Path) -> None:
    assert shop_cli(shop, "enqueue").returncode == 2
    done = shop_cli(shop, "enqueue", "orders.jsonl", "--max-lines", "many")
    assert done.returncode == 2 and "invalid int value" in done.stderr


# -- status, events, show ----------------------------------------------------------


@pytest.fixture
def worked(shop: Path) -> Path:
    """E0001 acked, E0002 retrying, E0003 inflight, E0004 quarantined."""
    shop_cli(shop, "enqueue", "orders.jsonl")
    with fairq.Queue(shop / "shop.db") as q:  # `fairq enqueue` created it with the default policy
        q.ack(q.claim(owner="w1", lease_seconds=3600))
        q.retry(q.claim(owner="w1", lease_seconds=3600), "payment service unavailable", delay=3600)
        q.claim(owner="w2", lease_seconds=3600)
        q.fail(q.claim(owner="w1", lease_seconds=3600),
               "invalid_payload: category 'toy' is not one of book, pen, bag")
    return shop


def test_status_shows_every_state_for_people_and_as_json(worked: Path) -> None:
    human = shop_cli(worked, "status")
    assert human.returncode == 0
    for state in ("ready", "inflight", "acked", "quarantined"):
        assert any(row.split() == [state, "1"] for row in human.stdout.splitlines()), human.stdout
    assert "enqueued 4" in human.stdout
    data = json.loads(shop_cli(worked, "status", "--json").stdout)
    assert data["counts"] == {"ready": 1, "inflight": 1, "acked": 1, "quarantined": 1, "discarded": 0}
    assert data["totals"]["enqueued"] == 4


def test_events_lists_a_table_or_json_filtered_by_state_and_flow(worked: Path) -> None:
    table = shop_cli(worked, "events")
    assert table.returncode == 0
    rows = table.stdout.splitlines()
    assert rows[0].split()[:4] == ["EVENT_ID", "FLOW", "SEQ", "STATE"]
    assert [r.split()[0] for r in rows[1:]] == ["E0001", "E0002", "E0003", "E0004"]
    quarantined = json.loads(shop_cli(worked, "events", "--state", "quarantined", "--json").stdout)
    assert [(e["event_id"], e["state"], e["generation"]) for e in quarantined] == [("E0004", "quarantined", 1)]
    assert quarantined[0]["body"] == {"amount_cents": 3000, "category": "toy"}
    assert json.loads(shop_cli(worked, "events", "--flow", "nosuchflow", "--json").stdout) == []
    assert shop_cli(worked, "events", "--state", "dead").returncode == 2


def test_show_tells_everything_about_one_event_with_its_audit_trail(worked: Path) -> None:
    human = shop_cli(worked, "show", "E0004")
    assert human.returncode == 0
    assert "state              quarantined" in human.stdout
    assert '{"amount_cents": 3000, "category": "toy"}' in human.stdout
    assert "invalid_payload: category 'toy'" in human.stdout
    data = json.loads(shop_cli(worked, "show", "E0002", "--json").stdout)
    assert data["event"]["state"] == "ready" and data["event"]["attempts"] == 1
    assert [(a["action"], a["reason"]) for a in data["audit"]] == [("retry", "payment service unavailable")]


def test_show_of_an_unknown_event_exits_1(worked: Path) -> None:
    done = shop_cli(worked, "show", "E9999")
    assert done.returncode == 1 and done.stderr == "fairq: no event 'E9999'\n"


# -- redrive -------------------------------------------------------------------


def test_redrive_from_the_shell_starts_a_new_audited_round(worked: Path) -> None:
    done = shop_cli(worked, "redrive", "E0004", "--expected-generation", "1", "--reason", "toy is sold now",
               "--actor", "alice")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"event_id": "E0004", "generation": 2}
    with fairq.Queue(worked / "shop.db") as q:
        info = q.get("E0004")
        assert (info.state, info.attempts) == (fairq.State.READY, 0)
        last = q.audit("E0004")[-1]
        assert (last.action, last.reason, last.actor) == ("redrive", "toy is sold now", "alice")


@pytest.mark.parametrize("args, message", [
    (["E0004", "--expected-generation", "7", "--reason", "x"], "is at generation 1, not 7"),
    (["E0001", "--expected-generation", "1", "--reason", "x"], "is acked, not quarantined"),
    (["E9999", "--expected-generation", "1", "--reason", "x"], "does not exist"),
    (["E0004", "--expected-generation", "1", "--reason", "  "], "reason: must not be empty or blank"),
])
def test_a_refused_redrive_exits_1_and_changes_nothing(worked: Path, args: list, message: str) -> None:
    done = shop_cli(worked, "redrive", *args)
    assert done.returncode == 1 and message in done.stderr and done.stdout == ""
    assert counts(worked)["quarantined"] == 1


def test_redrive_without_its_required_options_is_a_usage_error(worked: Path) -> None:
    assert shop_cli(worked, "redrive", "E0004", "--reason", "x").returncode == 2
    assert shop_cli(worked, "redrive", "E0004", "--expected-generation", "1").returncode == 2


def test_help_lists_every_subcommand_and_exits_0(tmp_path: Path) -> None:
    done = fairq_cli("--help", cwd=tmp_path)
    assert done.returncode == 0
    for name in ("init", "enqueue", "status", "events", "show", "redrive", "demo"):
        assert name in done.stdout
