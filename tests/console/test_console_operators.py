"""The console's discard and pause/resume buttons, clicked in a real Chromium: each is
fenced (a generation, a reason) and confirmed, and writes its audit row; a bulk discard
of the filtered Quarantine list lists what was discarded and what was refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import fairq

from test_console_pages import css, open_page, quarantine, shots, wait


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
