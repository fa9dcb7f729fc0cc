"""The console's Tenants page in a real headless Chromium against a served queue: it lists
every tenant with its weight, limits, leased and ready events, tokens and the limit that
holds it, a page at a time; an edit clicked through it (confirmed) sets the tenant and
writes the audit row; a refused edit shows the refusal and changes nothing; the Flows page
shows each flow's tenant and why a flow waits for it; a read-only server offers no edit."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import fairq
from fairq.http.server import Server

from browsing import click, css, open_page, shots, wait

# The served queues' clock stands still, so a lease or an empty token bucket holds as long as a test runs.
FROZEN = float(int(time.time()))
HOSTILE = '<img src=x onerror="window.__pwned = 1">'


def serve(path: Path, **kw: Any) -> Server:
    """A console server on a free loopback port for the queue at `path`, on the frozen clock."""
    server = Server(fairq.Queue(path, clock=lambda: FROZEN), token=shots.TOKEN, port=0, **kw)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def rows(driver: Any) -> dict[str, list[str]]:
    """{tenant: its cells' text} of the Tenants table shown, read in one step of the page."""
    found = driver.execute_script(
        "return Array.from(document.querySelectorAll('#tenants-table tbody tr[data-tenant]'))"
        ".map((r) => [r.dataset.tenant, Array.from(r.cells).map((c) => c.innerText.trim())]);")
    return {name: cells for name, cells in found}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    """A queue of four tenants (acme at its cap, globex out of tokens, one with a hostile
    name, initech which only the edit test changes) and a flow without a tenant, served with
    the console. Each test changes only what no other test reads, so they pass in any order."""
    path = tmp_path_factory.mktemp("console-tenants") / "tenants.db"
    with fairq.Queue(path, clock=lambda: FROZEN) as q:
        q.set_tenant("acme", weight=3, max_inflight=1, reason="gold plan", actor="ops")
        q.set_tenant("globex", rate=1, burst=1)
        q.set_tenant("initech", weight=3)
        q.enqueue_many([("a1", {}, "acme-orders", "acme"), ("a2", {}, "acme-mail", "acme"),
                        ("g1", {}, "globex-1", "globex"), ("g2", {}, "globex-2", "globex"),
                        ("h1", {}, "hostile-flow", HOSTILE), ("i1", {}, "initech-1", "initech"),
                        ("p1", {}, "plain")])
        leased = {lease.event_id for lease in q.claim_many(10, owner="worker-1", lease_seconds=3600)}
        assert {"a1", "g1"} <= leased and not {"a2", "g2"} & leased
    server = serve(path)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        server.queue.close()


def test_the_tenants_page_lists_each_tenant_with_its_limits_and_what_holds_it(browser, served,
                                                                               tmp_path: Path) -> None:
    open_page(browser, served, "#/tenants", "page-tenants")
    shown = rows(browser)
    assert list(shown) == [t.name for t in served.queue.tenants()] == [HOSTILE, "acme", "globex", "initech"]
    acme, globex = shown["acme"], shown["globex"]
    assert acme[:9] == ["acme", "3", "1", "none", "—", "1", "1", "2", "—"]
    assert acme[9].startswith("max_inflight until ")
    assert globex[:9] == ["globex", "1", "none", "1", "1", "1", "1", "2", "0"]
    assert globex[9].startswith("rate until ")
    assert shown[HOSTILE][9] == "—"
    assert browser.execute_script("return window.__pwned === undefined") and not css(browser, "main img")
    assert [a.text for a in css(browser, "#nav a.current")] == ["Tenants"]
    browser.save_screenshot(str(tmp_path / "tenants.png"))
    assert (tmp_path / "tenants.png").stat().st_size > 10_000


def test_the_flows_page_shows_each_flows_tenant_and_why_it_waits_for_it(browser, served) -> None:
    open_page(browser, served, "#/flows?sort=name", "page-flows")
    by_flow = dict(browser.execute_script(
        "return Array.from(document.querySelectorAll('#flows-table tbody tr'))"
        ".map((r) => [r.dataset.flow, [r.querySelector('td.flow-tenant').innerText, r.innerText]]);"))
    tenant = {name: cells[0] for name, cells in by_flow.items()}
    assert tenant == {"acme-mail": "acme", "acme-orders": "acme", "globex-1": "globex", "globex-2": "globex",
                      "hostile-flow": HOSTILE, "initech-1": "initech", "plain": "—"}
    assert "waiting for its tenant acme: head a2 (seq 1) is due, but the tenant has max_inflight events leased" \
        in by_flow["acme-mail"][1]
    assert "waiting for its tenant globex: head g2 (seq 1) is due, but the tenant's rate limit allows its next " \
        "claim in " in by_flow["globex-2"][1]


def open_edit(browser: Any, served: Any, tenant: str) -> Any:
    """The Tenants page with `tenant`'s edit form open."""
    open_page(browser, served, "#/tenants", "page-tenants")
    click(browser, f'#tenants-table tr[data-tenant="{tenant}"] button.tenant-edit')
    return wait(browser, lambda d: css(d, "#tenant-form"))[0]


def fill(form: Any, **values: str) -> None:
    for name, value in values.items():
        field = form.find_element("css selector", f"input[name={name}]")
        field.clear()
        field.send_keys(value)


def test_an_edit_confirmed_sets_the_tenant_and_writes_the_audit_row(browser, served) -> None:
    q = served.queue
    form = open_edit(browser, served, "initech")
    assert form.find_element("css selector", "input[name=weight]").get_attribute("value") == "3"
    fill(form, weight="5", max_inflight="2", reason="bigger plan", actor="ops-ann")
    form.find_element("css selector", "button[type=submit]").click()
    alert = wait(browser, lambda d: d.switch_to.alert)
    assert alert.text == "Set tenant initech: weight 5, max_inflight 2, rate 0, burst 0?"
    alert.accept()
    done = wait(browser, lambda d: [p for p in css(d, "#flash") if p.text])[0]
    assert done.text == "Set tenant initech: weight 5, max inflight 2, rate 0, burst 0."
    assert rows(browser)["initech"][1:3] == ["5", "2"]  # the page shown again, as stored now
    [initech] = [t for t in q.tenants() if t.name == "initech"]
    assert (initech.weight, initech.max_inflight) == (5, 2)
    last = [row for row in q.audit() if row.action == "set_tenant"][-1]
    assert (last.reason, last.actor, last.detail["tenant"]) == ("bigger plan", "ops-ann", "initech")
    assert (last.detail["before"]["weight"], last.detail["after"]["weight"]) == (3, 5)


def test_an_edit_not_confirmed_sends_nothing(browser, served) -> None:
    q = served.queue
    before = (q.tenants(), q.audit())
    form = open_edit(browser, served, "globex")
    fill(form, weight="9", reason="maybe", actor="ops-bob")
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).dismiss()
    assert css(browser, "#tenant-form") and not css(browser, "#flash")
    assert (q.tenants(), q.audit()) == before


def test_a_refused_edit_shows_the_refusal_and_changes_nothing(browser, served) -> None:
    q = served.queue
    before = (q.tenants(), q.audit())
    form = open_edit(browser, served, "globex")
    fill(form, rate="5000", burst="1", reason="too fast", actor="ops-bob")
    form.find_element("css selector", "button[type=submit]").click()
    wait(browser, lambda d: d.switch_to.alert).accept()
    refusal = wait(browser, lambda d: [p for p in css(d, ".tenant-result p.error") if p.text])[0]
    assert refusal.text.startswith("Refused: burst: ")
    assert css(browser, "#tenant-form")  # still open, to correct
    assert (q.tenants(), q.audit()) == before


def test_tenants_are_paged_like_flows(browser, served, tmp_path_factory: pytest.TempPathFactory) -> None:
    path = tmp_path_factory.mktemp("console-many-tenants") / "many.db"
    with fairq.Queue(path) as q:
        for i in range(205):
            q.set_tenant(f"tenant-{i:03d}", weight=1 + i % 7)
    server = serve(path)
    try:
        open_page(browser, server, "#/tenants", "page-tenants")
        assert list(rows(browser)) == [f"tenant-{i:03d}" for i in range(200)]
        assert [a.text for a in css(browser, "#page-tenants .toolbar a")] == ["next page"]
        click(browser, "#page-tenants .toolbar a")
        wait(browser, lambda d: "tenant-204" in rows(d))
        assert list(rows(browser)) == [f"tenant-{i:03d}" for i in range(200, 205)]
        assert [a.text for a in css(browser, "#page-tenants .toolbar a")] == ["first page"]
    finally:
        server.shutdown()
        server.server_close()
        server.queue.close()


def test_a_read_only_server_offers_no_edit(browser, served) -> None:
    server = serve(Path(served.queue.path), read_only=True)
    try:
        open_page(browser, server, "#/tenants", "page-tenants")
        assert css(browser, "#mode")[0].text == "read-only"
        assert rows(browser) and not css(browser, "button.tenant-edit, #tenant-form")
    finally:
        server.shutdown()
        server.server_close()
        server.queue.close()


def test_a_phone_width_tenants_page_scrolls_only_inside_its_table(browser, served) -> None:
    browser.set_window_size(390, 844)
    try:
        open_page(browser, served, "#/tenants", "page-tenants")
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        browser.set_window_size(1280, 720)
