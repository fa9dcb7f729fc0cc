"""Regenerate the console screenshots in docs/console/ (one PNG per page).

Builds a queue with the last half hour of a small shop's traffic (populate(),
which the browser tests in tests/console/ use too), serves it with the
console on a loopback port, and photographs each page in headless Chromium
at 1280x720 (and the Flows page at a phone's width too).

    python3 docs/console_screenshots.py            # needs chromium, chromedriver, selenium
    python3 docs/console_screenshots.py --data shop.db && fairq ui --db shop.db   # the data set only

Run from a checkout (it imports fairq from src/).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import fairq  # noqa: E402
from fairq.http.server import Server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "console-demo-token"
FLOWS = ["tenant-acme", "tenant-globex", "tenant-initech", "tenant-umbrella", "tenant-hooli", "tenant-stark"]
BAD = {  # event ids that fail, and why
    "order-0041": "unknown sku 'XL-42'",
    "order-0130": "card declined: insufficient funds",
    "order-0213": "address service timed out after 30 s",
    "order-0290": "unknown sku 'XL-42'",
}


def populate(path: Path, *, minutes: int = 30, per_minute: int = 12) -> list[tuple[float, int, int]]:
    """A queue at `path` with `minutes` of traffic ending now: acks, quarantines, a held
    lease, a backing-off head, a delayed one, weights and schedules. Returns the
    (time, claimed total, acked total) samples a server would have taken each minute."""
    backoff = fairq.Backoff(base=30, factor=2, cap=300, jitter=False)
    start = time.time() - minutes * 60
    samples = []
    with fairq.Queue(path, lease_seconds=60, max_attempts=3, backoff=backoff, synchronous="normal") as q:
        q.set_weight("tenant-acme", 3)
        q.schedules.add("nightly-report", cron="0 3 * * *", tz="Europe/Berlin", body={"report": "sales"},
                        start=start)
        q.schedules.add("heartbeat", every=60, start=start, misfire="skip", grace=5, flow="heartbeat")
        q.schedules.add("weekly-cleanup", cron="0 4 * * 1", body={"keep_days": 30}, start=start)
        q.schedules.pause("weekly-cleanup")
        n = 0
        for minute in range(minutes):
            at = start + minute * 60
            load = per_minute + (minute * 7) % 9  # an uneven load
            batch = []
            for _ in range(load):
                n += 1
                batch.append((f"order-{n:04d}", {"sku": f"SKU-{n % 17}", "qty": 1 + n % 3, "cents": 995 + n % 40 * 250},
                              FLOWS[n % len(FLOWS)]))
            q.enqueue_many([{"event_id": e, "body": b, "flow": f} for e, b, f in batch], now=at)
            if minute % 4 != 3:  # some minutes nothing ticks: the heartbeat misfires
                q.tick(now=at + 0.1)
            for round in range(40):  # a claim takes one head per flow: several rounds drain the minute
                leases = q.claim_many(load, owner=f"worker-{round % 3 + 1}", now=at + 0.2 + round * 0.05)
                if not leases:
                    break
                q.settle_many([(lease, "fail", BAD[lease.event_id]) if lease.event_id in BAD else (lease, "ack")
                               for lease in leases], now=at + 0.22 + round * 0.05)
            stats = q.stats(now=at + 59)
            samples.append((at + 59, stats.totals["claimed"], stats.totals["acked"]))
        end = start + minutes * 60
        held = q.enqueue("order-9001", {"sku": "SKU-3", "qty": 2, "cents": 2490}, flow="tenant-globex", now=end - 20)
        q.enqueue("order-9002", {"sku": "SKU-5", "qty": 1, "cents": 995}, flow="tenant-globex", now=end - 20)
        q.enqueue("order-9003", {"sku": "SKU-8", "qty": 1, "cents": 1495}, flow="tenant-hooli", now=end - 19)
        q.enqueue("order-9004", {"sku": "SKU-9", "qty": 4, "cents": 3980}, flow="tenant-stark", now=end - 19,
                  delay=900)
        for lease in q.claim_many(10, owner="worker-2", now=end - 15):
            if lease.event_id == held.event_id:
                continue  # still being worked on
            q.retry(lease, "payment gateway answered 503", now=end - 14)
    return samples


def serve(path: Path, samples: list[tuple[float, int, int]], **kw: Any) -> Server:
    """A console server for `path` on a free loopback port, its rates filled from `samples`."""
    server = Server(fairq.Queue(path), token=TOKEN, port=0, sample_seconds=3600, **kw)
    for sample in samples:
        server.rates.record(*sample)  # type: ignore[union-attr]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def browser(user_data_dir: str, width: int = 1280, height: int = 720) -> Any:
    """Headless Chromium from the OS packages, driven through the OS chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={user_data_dir}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def sign_in(driver: Any, url: str, token: str = TOKEN) -> None:
    """Open the console and give it the token once, as an operator would."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/ui/#/overview")
    field = WebDriverWait(driver, 20).until(lambda d: d.find_element(By.NAME, "token"))
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#token-form button").click()
    WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "page-overview"))


PAGES = [("overview", "#/overview?slo=0.5", "page-overview"), ("flows", "#/flows", "page-flows"),
         ("quarantine", "#/quarantine", "page-quarantine"), ("event", "#/event/order-0130", "page-event"),
         ("schedules", "#/schedules", "page-schedules")]


def main(argv: list[str]) -> None:
    if argv[:1] == ["--data"] and len(argv) == 2:
        populate(Path(argv[1]))
        print("wrote", argv[1], "- now: fairq ui --db", argv[1])
        return
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out = ROOT / "docs" / "console"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "shop.db"
        server = serve(path, populate(path))
        driver = browser(str(Path(tmp) / "chromium"))
        try:
            sign_in(driver, server.url)
            driver.find_element(By.ID, "refresh-toggle").click()  # pause: the pictures hold still
            for name, fragment, marker in PAGES:
                driver.get(server.url + "/ui/" + fragment)
                WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, marker))
                driver.save_screenshot(str(out / f"{name}.png"))
                print("wrote", out / f"{name}.png")
            driver.set_window_size(390, 844)
            driver.get(server.url + "/ui/#/flows")
            WebDriverWait(driver, 20).until(lambda d: d.find_elements(By.ID, "page-flows"))
            driver.save_screenshot(str(out / "flows-phone.png"))
            print("wrote", out / "flows-phone.png")
        finally:
            driver.quit()
            server.shutdown()
            server.server_close()
            server.queue.close()


if __name__ == "__main__":
    main(sys.argv[1:])
