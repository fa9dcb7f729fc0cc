"""The console's discard and pause/resume buttons, clicked in a real Chromium: each is
fenced (a generation, a reason) and confirmed, and writes its audit row; a bulk discard
of the filtered Quarantine list lists what was discarded and what was refused; a flow paused
from the Flows page is not claimed until it is resumed there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq

from browsing import accept_confirm, click, css, open_page, shots, text, wait
from test_console_pages import quarantine


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("console-operators") / "shop.db"
    server = shots.serve(path, shots.populate(path))
    try:
        yield server
    finally:
        server.shutdown()


def fill(form: Any, reason: str, actor: str) -> None:
    form.find_element("css selector", "input[name=reason]").send_keys(reason)
    field = form.find_element("css selector", "input[name=actor]")
    field.clear()
    field.send_keys(actor)


def test_discard_one_quarantined_event_from_its_page_and_its_flow_moves_on(browser, served) -> None:
    q = served.queue
    generation = quarantine(q, {"poison-9001": ("discard-click", {"sku": None}, "sku missing")})["poison-9001"]
    q.enqueue("next-9002", {"sku": "SKU-2"}, flow="discard-click")
    open_page(browser, served, "#/event/poison-9001", "page-event")
    form = wait(browser, lambda d: css(d, "#discard-form"))[0]
    assert form.find_element("css selector", "input[name=expected_generation]").get_attribute("value") == str(generation)
    fill(form, "cannot ever parse", "ops-ann")
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).dismiss()  # not confirmed: nothing is sent
    assert q.get("poison-9001").state is fairq.State.QUARANTINED
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).accept()
    done = wait(browser, lambda d: [p for p in css(d, "#flash") if p.text])[0]
    assert done.text.startswith(f"Discarded: poison-9001 is settled for good at generation {generation + 1}")
    assert q.get("poison-9001").state is fairq.State.DISCARDED
    fields = browser.execute_script("return Array.from(document.querySelectorAll('#event-fields dt'))"
                                    ".map((dt) => [dt.innerText, dt.nextElementSibling.innerText]);")
    assert fields[1] == ["state", "discarded"] and fields[-1][0] == "discarded" and fields[-1][1] != "—"
    last = q.audit("poison-9001")[-1]
    assert (last.action, last.actor, last.reason) == ("discard", "ops-ann", "cannot ever parse")
    assert q.why_blocked("discard-click").event_id == "next-9002"


def test_a_stale_discard_shows_the_refusal_and_changes_nothing(browser, served) -> None:
    q = served.queue
    generation = quarantine(q, {"poison-9101": ("discard-stale", {}, "timeout")})["poison-9101"]
    open_page(browser, served, "#/quarantine?flow=discard-stale", "page-quarantine")
    row = next(r for r in css(browser, "#quarantine-table tbody tr") if r.get_attribute("data-event") == "poison-9101")
    row.find_element("css selector", "button.discard-open").click()
    form = wait(browser, lambda d: css(d, "#discard-form"))[0]
    fill(form, "drop it", "ops-bob")
    q.redrive("poison-9101", expected_generation=generation, reason="someone else was faster", actor="ops-eve")
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).accept()
    refusal = wait(browser, lambda d: [p for p in css(d, "#discard-result p.error") if p.text])[0]
    assert "generation" in refusal.text and refusal.text.startswith("Refused: redrive_refused")
    assert q.get("poison-9101").state is fairq.State.READY
    assert not [a for a in q.audit("poison-9101") if a.action == "discard"]
    # The refusal's 409 is the only error logged; read off here so later tests on this browser see their own.
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401 (Unauthorized)" in m or "/v1/discard" in m and "409" in m for m in errors), errors


def test_a_bulk_discard_of_the_filtered_list_shows_what_was_discarded_and_refused(browser, served) -> None:
    q = served.queue
    generations = quarantine(q, {f"poison-95{i}": (f"discard-bulk-{i}", {"i": i}, "bulk: schema v1") for i in range(3)})
    open_page(browser, served, "#/quarantine?reason=schema%20v1", "page-quarantine")
    q.discard("poison-951", expected_generation=generations["poison-951"], reason="by hand", actor="ops-eve")
    form = css(browser, "#bulk-discard")[0]
    fill(form, "schema v1 is gone", "ops-ann")
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).accept()
    result = wait(browser, lambda d: [x for x in css(d, "#bulk-result") if "Discarded" in x.text])[0].text
    assert "Discarded: 2" in result and "poison-950 → generation" in result and "poison-952 → generation" in result
    assert "Refused: 1" in result and "poison-951: event 'poison-951' is at generation" in result
    assert {e: q.get(e).state for e in generations} == {e: fairq.State.DISCARDED for e in generations}
    assert [a.actor for a in q.audit("poison-950") if a.action == "discard"] == ["ops-ann"]


def flow_row(browser: Any, flow: str) -> str | None:
    """The shown text of `flow`'s row on the Flows page (None: no such row)."""
    return text(browser, f'#flows-table tr[data-flow="{flow}"]')


def open_pause_form(browser: Any, flow: str, label: str) -> Any:
    """Click `flow`'s pause button (it reads `label`) and return the form it opens."""
    assert text(browser, f'#flows-table tr[data-flow="{flow}"] button.pause-open') == label
    click(browser, f'#flows-table tr[data-flow="{flow}"] button.pause-open')
    return wait(browser, lambda d: css(d, "#pause-form"))[0]


def submit_confirmed(browser: Any, form: Any, flash: str) -> str:
    """Submit `form`, accept its confirm dialog and wait for the page redrawn with `flash`
    on top; the dialog's question."""
    form.find_element("css selector", "button[type=submit]").click()
    question = accept_confirm(browser)
    wait(browser, lambda d: (text(d, "#flash") or "").startswith(flash))
    return question


def test_pause_and_resume_a_flow_from_the_flows_page(browser, tmp_path: Path) -> None:
    path = tmp_path / "pause.db"
    with fairq.Queue(path) as setup:
        setup.enqueue_many([("held-1", {}, "pause-click"), ("held-2", {}, "pause-click")])
    server = shots.serve(path, [])
    q = server.queue
    try:
        open_page(browser, server, "#/flows?sort=name", "page-flows")
        assert "not blocked: head held-1 (seq 1) is claimable now" in (flow_row(browser, "pause-click") or "")
        form = open_pause_form(browser, "pause-click", "Pause…")
        fill(form, "vendor down", "ops-ann")
        question = submit_confirmed(browser, form, "Paused: flow pause-click is not claimed until resumed.")
        assert question.startswith("Pause flow pause-click?")
        assert [(f.name, f.paused) for f in q.flows()] == [("pause-click", True)]
        blocked = q.why_blocked("pause-click")
        assert (blocked.why, blocked.actor, blocked.reason, blocked.event_id) == ("paused", "ops-ann", "vendor down",
                                                                                  "held-1")
        last = q.audit()[-1]
        assert (last.action, last.actor, last.reason, last.detail) == ("pause", "ops-ann", "vendor down",
                                                                       {"flow": "pause-click"})
        assert q.claim(owner="worker-1") is None  # its head is the only one due, and it is held
        assert "paused by ops-ann (vendor down)" in (flow_row(browser, "pause-click") or "")

        form = open_pause_form(browser, "pause-click", "Resume…")
        fill(form, "vendor back", "ops-bob")
        question = submit_confirmed(browser, form, "Resumed: flow pause-click can be claimed again.")
        assert question.startswith("Resume flow pause-click?")
        assert [(f.name, f.paused) for f in q.flows()] == [("pause-click", False)]
        last = q.audit()[-1]
        assert (last.action, last.actor, last.reason) == ("resume", "ops-bob", "vendor back")
        assert "not blocked: head held-1 (seq 1)" in (flow_row(browser, "pause-click") or "")
        assert text(browser, '#flows-table tr[data-flow="pause-click"] button.pause-open') == "Pause…"
        lease = q.claim(owner="worker-1")
        assert lease is not None and lease.event_id == "held-1"
    finally:
        server.shutdown()
        server.server_close()
        server.queue.close()


def test_a_refresh_under_way_when_a_form_opens_or_refresh_is_paused_draws_nothing(browser, served) -> None:
    open_page(browser, served, "#/flows?sort=name", "page-flows")
    # The timer's refresh starts, and before its answer comes the operator opens a form.
    still_open = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const refresh = render(true);"
        "document.querySelector('#flows-table tr[data-flow=\"tenant-acme\"] button.pause-open').click();"
        "refresh.then(() => done(document.getElementById('pause-form') !== null));")
    assert still_open is True
    assert len(css(browser, "#pause-form")) == 1
    open_page(browser, served, "#/flows?sort=name", "page-flows")
    # The timer's refresh starts, and before its answer comes the operator presses Pause refresh.
    kept = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "sessionStorage.setItem('fairq.paused', '0');"
        "const shown = document.getElementById('page-flows');"
        "const refresh = render(true);"
        "document.getElementById('refresh-toggle').click();"
        "refresh.then(() => done(document.getElementById('page-flows') === shown));")
    assert kept is True
    assert css(browser, "#refresh-toggle")[0].text == "Resume refresh"
