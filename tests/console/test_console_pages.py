"""The console in a real headless Chromium against a served queue: every page shows the
queue's data, a redrive clicked through the Quarantine page changes the event and writes
its audit row, a stale redrive shows the refusal, a bulk redrive lists what was redriven
and refused, text from the database is shown as text (no script runs), and a read-only
server shows no action and refuses them. Each page's screenshot goes to the test's tmp dir."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq
from helpers import ROOT, load_file, raw

# The screenshot script (docs/console_screenshots.py): its data set, server and browser.
shots = load_file(ROOT / "docs" / "console_screenshots.py", "console_screenshots")

TIMEOUT = 20  # seconds; only to stop a hung test
REFRESH_SECONDS = 5  # console.js REFRESH_MS


def wait(driver: Any, condition: Any) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, TIMEOUT).until(condition)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, selector)


def open_page(driver: Any, server: Any, fragment: str, marker: str) -> None:
    """Show `fragment` of the console, signing in with the token if the tab has none yet."""
    if driver.current_url.startswith(server.url):  # the page shown now is not the one awaited; no refresh
        driver.execute_script("for (const s of document.querySelectorAll('main > section')) s.dataset.old = '1';"
                              "sessionStorage.setItem('fairq.paused', '1');")
    fresh = f"#{marker}:not([data-old])"
    driver.get(server.url + "/ui/" + fragment)
    wait(driver, lambda d: css(d, fresh) or css(d, "#token-form"))
    if css(driver, "#token-form"):
        css(driver, "#token-form input[name=token]")[0].send_keys(shots.TOKEN)
        css(driver, "#token-form button")[0].click()
        wait(driver, lambda d: css(d, fresh))
    if css(driver, "#refresh-toggle")[0].text == "Pause refresh":
        css(driver, "#refresh-toggle")[0].click()  # hold still while the test reads


def quarantine(q: fairq.Queue, wanted: dict[str, tuple[str, Any, str]]) -> dict[str, int]:
    """Quarantine new events {event_id: (flow, body, reason)}; the other claimable heads
    are released untouched. Returns each new event's generation."""
    for event_id, (flow, body, _) in wanted.items():
        q.enqueue(event_id, body, flow=flow)
    generations = {}
    for lease in q.claim_many(10_000, owner="test-worker"):
        if lease.event_id in wanted:
            q.fail(lease, wanted[lease.event_id][2])
            generations[lease.event_id] = lease.generation
        else:
            q.release(lease)
    assert set(generations) == set(wanted)
    return generations


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    """The screenshot script's shop, served with the console (one per module)."""
    path = tmp_path_factory.mktemp("console") / "shop.db"
    server = shots.serve(path, shots.populate(path))
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        server.queue.close()


def test_every_page_renders_the_queue_data_and_is_photographed(browser, served, tmp_path: Path) -> None:
    q = served.queue
    stats, flows = q.stats(), q.flows()
    quarantined = [e.event_id for e in q.events(state="quarantined")]
    assert quarantined and stats.counts["acked"] > 100  # the data set is worth showing

    open_page(browser, served, "#/overview?slo=0.5", "page-overview")
    cards = {c.find_element("css selector", ".label").text: c.find_element("css selector", ".n").text
             for c in css(browser, ".card")}
    assert cards["acked"] == str(stats.counts["acked"]) and cards["quarantined"] == str(len(quarantined))
    assert len(css(browser, "#lag-chart rect.bar")) == len(stats.claim_lag_buckets)
    assert "SLO 500 ms" in css(browser, "#lag-chart .slo-label")[0].text
    assert "% of first claims within the SLO of 500 ms" in css(browser, "#slo-share")[0].text
    assert len(css(browser, "#rate-chart polyline")) == 2
    page = css(browser, "#page-overview")[0].text
    assert f"schema version\n{q.schema_version}" in page.replace("\t", "\n") or str(q.schema_version) in page
    assert f"max attempts {q.policy().max_attempts}" in page.replace("\n", " ")
    browser.save_screenshot(str(tmp_path / "overview.png"))

    open_page(browser, served, "#/flows", "page-flows")
    rows = css(browser, "#flows-table tbody tr")
    assert sorted(r.get_attribute("data-flow") for r in rows) == sorted(f.name for f in flows)
    stuck = max((f for f in flows if f.head), key=lambda f: f.blocked.now - f.head.due_at)
    assert rows[0].get_attribute("data-flow") == stuck.name  # sorted by stuck longest
    held = next(r for r in rows if r.get_attribute("data-flow") == "tenant-globex")
    assert "order-9001" in held.text and "leased by worker-2" in held.text
    browser.save_screenshot(str(tmp_path / "flows.png"))

    open_page(browser, served, "#/quarantine", "page-quarantine")
    assert [r.get_attribute("data-event") for r in css(browser, "#quarantine-table tbody tr")] == quarantined
    assert "card declined: insufficient funds" in css(browser, "#quarantine-table")[0].text
    browser.save_screenshot(str(tmp_path / "quarantine.png"))

    open_page(browser, served, "#/event/order-0130", "page-event")
    assert css(browser, "#event-title")[0].text == "order-0130"
    assert '"sku": "SKU-11"' in css(browser, "#event-body")[0].text
    assert [li.get_attribute("data-action") for li in css(browser, "#event-audit li")] == ["quarantine"]
    assert "quarantined" in css(browser, "#event-fields")[0].text
    browser.save_screenshot(str(tmp_path / "event.png"))

    open_page(browser, served, "#/schedules", "page-schedules")
    by_name = {r.get_attribute("data-schedule"): r.text for r in css(browser, "#schedules-table tbody tr")}
    assert sorted(by_name) == ["heartbeat", "nightly-report", "weekly-cleanup"]
    assert "skip: found" in by_name["heartbeat"] and "paused" in by_name["weekly-cleanup"]
    assert "0 3 * * * (Europe/Berlin)" in by_name["nightly-report"]
    browser.save_screenshot(str(tmp_path / "schedules.png"))

    assert all((tmp_path / f"{name}.png").stat().st_size > 10_000
               for name in ("overview", "flows", "quarantine", "event", "schedules"))
    # Only the sign-in's first unauthorized answer is logged; no script error.
    errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401 (Unauthorized)" in message for message in errors), errors


def fill_redrive(browser: Any, event_id: str, reason: str, actor: str) -> Any:
    """Open the redrive form of `event_id`'s row on the Quarantine page and fill it in."""
    row = next(r for r in css(browser, "#quarantine-table tbody tr") if r.get_attribute("data-event") == event_id)
    row.find_element("css selector", "button.redrive-open").click()
    form = wait(browser, lambda d: css(d, "#redrive-form"))[0]
    form.find_element("css selector", "input[name=reason]").send_keys(reason)
    actor_field = form.find_element("css selector", "input[name=actor]")
    actor_field.clear()
    actor_field.send_keys(actor)
    return form


def test_a_redrive_clicked_through_quarantine_changes_the_event_and_writes_the_audit_row(browser, served) -> None:
    q = served.queue
    generation = quarantine(q, {"order-7001": ("tenant-click", {"sku": "SKU-1"}, "sku table stale")})["order-7001"]
    open_page(browser, served, "#/quarantine?flow=tenant-click", "page-quarantine")
    form = fill_redrive(browser, "order-7001", "sku table reloaded", "ops-ann")
    assert form.find_element("css selector", "input[name=expected_generation]").get_attribute("value") == str(generation)
    form.find_element("css selector", "button[type=submit]").click()
    done = wait(browser, lambda d: [p for p in css(d, "#flash") if p.text])[0]
    assert done.text == f"Redriven: order-7001 is ready again at generation {generation + 1}."
    assert not css(browser, "#quarantine-table")  # the page shown again: nothing left quarantined in the flow
    event = q.get("order-7001")
    assert event.state is fairq.State.READY and event.generation == generation + 1
    last = q.audit("order-7001")[-1]
    assert (last.action, last.actor, last.reason, last.generation) == ("redrive", "ops-ann", "sku table reloaded",
                                                                      generation + 1)
    assert last.detail["replaced_reason"] == "sku table stale"


def test_a_stale_redrive_shows_the_refusal_and_changes_nothing(browser, served) -> None:
    q = served.queue
    generation = quarantine(q, {"order-7002": ("tenant-stale", {"sku": "SKU-2"}, "timeout")})["order-7002"]
    open_page(browser, served, "#/quarantine?flow=tenant-stale", "page-quarantine")
    form = fill_redrive(browser, "order-7002", "retry it", "ops-bob")
    q.redrive("order-7002", expected_generation=generation, reason="someone else was faster", actor="ops-eve")
    form.find_element("css selector", "button[type=submit]").click()
    refusal = wait(browser, lambda d: [p for p in css(d, "#redrive-result p.error") if p.text])[0]
    assert refusal.text == "Refused: redrive_refused: event 'order-7002' is ready, not quarantined"
    assert q.get("order-7002").generation == generation + 1
    assert [a.actor for a in q.audit("order-7002") if a.action == "redrive"] == ["ops-eve"]


def test_a_bulk_redrive_of_the_filtered_list_shows_what_was_redriven_and_what_was_refused(browser, served) -> None:
    q = served.queue
    generations = quarantine(q, {f"order-75{i}": (f"tenant-bulk-{i}", {"i": i}, "bulk: warehouse offline")
                                 for i in range(3)})
    open_page(browser, served, "#/quarantine?reason=warehouse%20offline", "page-quarantine")
    assert [r.get_attribute("data-event") for r in css(browser, "#quarantine-table tbody tr")] == [
        "order-750", "order-751", "order-752"]
    q.redrive("order-751", expected_generation=generations["order-751"], reason="by hand", actor="ops-eve")
    form = css(browser, "#bulk-redrive")[0]
    form.find_element("css selector", "input[name=reason]").send_keys("warehouse back")
    actor = form.find_element("css selector", "input[name=actor]")
    actor.clear()
    actor.send_keys("ops-ann")
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).accept()
    result = wait(browser, lambda d: [x for x in css(d, "#bulk-result") if "Redriven" in x.text])[0].text
    assert "Redriven: 2" in result and "order-750 → generation" in result and "order-752 → generation" in result
    assert "Refused: 1" in result and "order-751: event 'order-751' is ready, not quarantined" in result
    states = {e: q.get(e).state for e in generations}
    assert states == {e: fairq.State.READY for e in generations}
    assert [a.actor for a in q.audit("order-750") if a.action == "redrive"] == ["ops-ann"]
    assert [a.actor for a in q.audit("order-751") if a.action == "redrive"] == ["ops-eve"]


HOSTILE = "<script>window.__pwned = 1</script>"
HOSTILE_FLOW = '<img src=x onerror="window.__pwned = 2">'
HOSTILE_REASON = '<b onmouseover="window.__pwned = 3">bold</b><script>window.__pwned = 4</script>'


def test_text_from_the_database_is_shown_as_text_and_runs_no_script(browser, served) -> None:
    body = {"note": "<script>window.__pwned = 5</script>", "html": "<iframe src=javascript:alert(1)>"}
    quarantine(served.queue, {HOSTILE: (HOSTILE_FLOW, body, HOSTILE_REASON)})

    def clean(page: str) -> None:
        assert browser.execute_script("return window.__pwned === undefined")
        assert len(css(browser, "script")) == 1  # console.js only
        assert not css(browser, "main img, main iframe, main b")

    open_page(browser, served, "#/quarantine", "page-quarantine")
    row = next(r for r in css(browser, "#quarantine-table tbody tr") if r.get_attribute("data-event") == HOSTILE)
    assert HOSTILE in row.text and HOSTILE_FLOW in row.text and "<b onmouseover" in row.text
    clean("quarantine")
    row.find_element("css selector", "a").click()
    wait(browser, lambda d: css(d, "#page-event"))
    assert css(browser, "#event-title")[0].text == HOSTILE
    assert "<script>window.__pwned = 5</script>" in css(browser, "#event-body")[0].text
    assert HOSTILE_REASON in css(browser, "#event-audit")[0].text
    clean("event")
    open_page(browser, served, "#/flows", "page-flows")
    flow_row = next(r for r in css(browser, "#flows-table tbody tr") if r.get_attribute("data-flow") == HOSTILE_FLOW)
    assert HOSTILE_FLOW in flow_row.text and HOSTILE in flow_row.text
    clean("flows")


def test_a_read_only_server_shows_no_action_and_refuses_them(browser, served) -> None:
    q = served.queue
    generation = quarantine(q, {"order-7100": ("tenant-ro", {"sku": "SKU-9"}, "read-only check")})["order-7100"]
    server = shots.serve(Path(q.path), [], read_only=True)
    try:
        open_page(browser, server, "#/quarantine", "page-quarantine")
        assert css(browser, "#mode")[0].text == "read-only"
        assert css(browser, "#quarantine-table tbody tr") and not css(browser, "button.redrive-open, #bulk-redrive")
        open_page(browser, server, "#/event/order-7100", "page-event")
        assert not css(browser, "#redrive-form")
        open_page(browser, server, "#/flows", "page-flows")
        assert css(browser, "#flows-table tbody tr") and not css(browser, "form.weight-form")
        open_page(browser, server, "#/schedules", "page-schedules")
        assert css(browser, "#schedules-table tbody tr") and not css(browser, "button.schedule-toggle")
        refused = raw(server, "POST", "/v1/redrive", {"event_id": "order-7100", "expected_generation": generation,
                                                     "reason": "x"}, token=shots.TOKEN)
        assert (refused.status, refused.json["error"]) == (403, "forbidden")
    finally:
        server.shutdown()
        server.server_close()
        server.queue.close()
    assert q.get("order-7100").state is fairq.State.QUARANTINED


def test_the_token_stays_in_the_tab_and_a_wrong_one_is_asked_for_again(browser, served) -> None:
    open_page(browser, served, "#/overview", "page-overview")
    assert browser.execute_script("return sessionStorage.getItem('fairq.token')") == shots.TOKEN
    assert browser.execute_script("return document.cookie") == ""
    assert shots.TOKEN not in browser.current_url
    browser.execute_script("sessionStorage.setItem('fairq.token', 'wrong-token')")
    browser.get(served.url + "/ui/#/flows")
    message = wait(browser, lambda d: css(d, "#token-form .error"))[0]
    assert message.text == "That token was not accepted."
    assert browser.execute_script("return sessionStorage.getItem('fairq.token')") is None


def test_refresh_shows_new_data_only_when_not_paused(browser, served) -> None:
    q = served.queue
    open_page(browser, served, "#/quarantine?flow=tenant-refresh", "page-quarantine")  # paused by open_page
    assert not css(browser, "#quarantine-table")
    quarantine(q, {"order-7200": ("tenant-refresh", {"sku": "SKU-4"}, "appears later")})
    time.sleep(REFRESH_SECONDS + 1)
    assert not css(browser, "#quarantine-table")  # paused: the page holds still
    css(browser, "#refresh-toggle")[0].click()
    assert css(browser, "#refresh-toggle")[0].text == "Pause refresh"
    row = wait(browser, lambda d: css(d, "#quarantine-table tbody tr"))[0]
    assert row.get_attribute("data-event") == "order-7200"


def test_a_phone_width_page_scrolls_only_inside_its_tables(browser, served, tmp_path: Path) -> None:
    browser.set_window_size(390, 844)
    try:
        for fragment, marker in (("#/overview", "page-overview"), ("#/flows", "page-flows"),
                                 ("#/quarantine", "page-quarantine"), ("#/schedules", "page-schedules")):
            open_page(browser, served, fragment, marker)
            assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), fragment
        browser.save_screenshot(str(tmp_path / "schedules-phone.png"))
    finally:
        browser.set_window_size(1280, 720)
