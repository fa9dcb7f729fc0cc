"""The console's browser tests: one headless Chromium (from the OS packages, driven by
selenium through the OS chromedriver) per test session, and one served queue per module
holding the screenshot script's data set (docs/console_screenshots.py).

Without Chromium, chromedriver or selenium these tests skip saying how to run them; with
CI=true in the environment they fail instead, so CI cannot pass without running them."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from helpers import load_file

ROOT = Path(__file__).resolve().parent.parent.parent
HOW = ("install them with `apt-get install chromium chromium-driver` and "
       "`pip install -e '.[test]'` (selenium), then run `python3 -m pytest tests/console`")


def _script() -> ModuleType:
    """The screenshot script (docs/console_screenshots.py): its data set, server and browser."""
    return load_file(ROOT / "docs" / "console_screenshots.py", "console_screenshots")


shots = _script()


def missing() -> list[str]:
    """What the browser tests need and this machine lacks."""
    lacking = [path for path in (shots.CHROMIUM, shots.CHROMEDRIVER) if not shutil.which(path)]
    if importlib.util.find_spec("selenium") is None:
        lacking.append("the selenium package")
    return lacking


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    lacking = missing()
    if lacking:
        message = f"the console's browser tests need {', '.join(lacking)}: {HOW}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    driver = shots.browser(str(tmp_path_factory.mktemp("chromium-profile")))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
