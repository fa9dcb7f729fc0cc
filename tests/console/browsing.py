"""Steady steps for the console's browser tests: a page shown with its refresh paused
before it can redraw under the test, waits that look a redrawn element up again, and
reads and clicks done in one step of the page (no element handle kept across a redraw)."""

from __future__ import annotations

from typing import Any

from helpers import ROOT, load_file

# The screenshot script (docs/console_screenshots.py): its server and token.
shots = load_file(ROOT / "docs" / "console_screenshots.py", "console_screenshots")

TIMEOUT = 20  # seconds; only to stop a hung test


def wait(driver: Any, condition: Any) -> Any:
    """`condition`'s first truthy answer; an element redrawn meanwhile is looked up again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, TIMEOUT, ignored_exceptions=[StaleElementReferenceException]).until(condition)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, selector)


def open_page(driver: Any, server: Any, fragment: str, marker: str) -> None:
    """Show `fragment` of the console (signing in if the tab has no token yet), with refresh
    paused before the page can redraw itself under the test."""
    url = server.url + "/ui/" + fragment
    if driver.current_url.startswith(server.url):  # the page shown now is not the one awaited
        driver.execute_script("for (const s of document.querySelectorAll('main > section')) s.dataset.old = '1';"
                              "sessionStorage.setItem('fairq.paused', '1');")
    fresh = f"#{marker}:not([data-old])"
    if driver.current_url == url:
        driver.refresh()  # the same address again: no hashchange, so load it anew
    else:
        driver.get(url)
    wait(driver, lambda d: css(d, fresh) or css(d, "#token-form"))
    driver.execute_script("sessionStorage.setItem('fairq.paused', '1'); showPaused();")
    if css(driver, "#token-form"):
        css(driver, "#token-form input[name=token]")[0].send_keys(shots.TOKEN)
        css(driver, "#token-form button")[0].click()
        wait(driver, lambda d: css(d, fresh))
    assert css(driver, "#refresh-toggle")[0].text == "Resume refresh"


def click(driver: Any, selector: str) -> None:
    """Click the last element `selector` finds, in the page itself (no stale element)."""
    assert driver.execute_script("const all = document.querySelectorAll(arguments[0]);"
                                 "if (!all.length) return false; all[all.length - 1].click(); return true;", selector)


def text(driver: Any, selector: str) -> str | None:
    """The shown text of the first element `selector` finds (None: there is none), read in
    one step of the page."""
    found: str | None = driver.execute_script(
        "const node = document.querySelector(arguments[0]); return node ? node.innerText : null;", selector)
    return found


def accept_confirm(driver: Any) -> str:
    """Accept the confirm dialog the last click opened; its question."""
    from selenium.webdriver.support import expected_conditions
    alert = wait(driver, expected_conditions.alert_is_present())
    question: str = alert.text
    alert.accept()
    return question
