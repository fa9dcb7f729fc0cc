"""The console's Overview leads with claimable now and blocked flows, and ready events
behind blocked heads are not shown in the healthy colour (real Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from test_console_pages import css, open_page, quarantine, shots


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, browser: Any) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("console-counts") / "shop.db"
    server = shots.serve(path, shots.populate(path))
    try:
        yield server
    finally:
        server.shutdown()


def cards(browser: Any) -> list[tuple[str, str, str]]:
    """(label, number, number's class) of each Overview card, in order."""
    return [(c.find_element("css selector", ".label").text, c.find_element("css selector", ".n").text,
             c.find_element("css selector", ".n").get_attribute("class")) for c in css(browser, ".card")]


def test_the_overview_shows_claimable_now_and_blocked_flows_first(browser, served) -> None:
    q = served.queue
    quarantine(q, {"poison-1": ("counts-flow", {"sku": None}, "invalid_payload: sku is missing")})
    q.enqueue("behind-1", {}, flow="counts-flow")
    stats = q.stats()
    assert stats.blocked_flows >= 1 and stats.counts["ready"] >= 1
    open_page(browser, served, "#/overview", "page-overview")
    shown = cards(browser)
    assert [label for label, _, _ in shown[:2]] == ["claimable now", "blocked flows"]
    assert shown[0][1] == str(q.stats().claimable_now) and shown[1][1] == str(q.stats().blocked_flows)
    assert "state-quarantined" in shown[1][2]  # blocked flows stand out
    [ready] = [card for card in shown if card[0].startswith("ready")]
    assert ready[0] == "ready (some behind blocked heads)" and "state-ready" not in ready[2]
