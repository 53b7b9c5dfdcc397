"""A real browser for the UI's tests: Debian's chromium through chromium-driver
(selenium), the helpers that read what a person sees on a live page, `trainmaster ui` run
against a cluster, and the screenshots docs/ui.md shows."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.operator.kit import wait_for

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
needs_browser = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium "
    "chromium-driver)")


@contextlib.contextmanager
def serving_ui(kubeconfig: Path, log: Path) -> Iterator[str]:
    """`trainmaster ui --port 0` on ``kubeconfig``; yields its URL (no trailing /)."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trainmaster", "ui", "--kubeconfig", str(kubeconfig),
             "--port", "0"], stderr=out)
    try:
        found = wait_for(lambda: re.search(r"serving (http://\S+)", log.read_text()),
                         "trainmaster ui to listen", timeout=600)
        yield found.group(1).rstrip("/")
    finally:
        proc.terminate()
        proc.wait(10)
        print(log.read_text())  # the server's warnings, shown when the test fails


@pytest.fixture()
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def text(driver: Any, css: str) -> str:
    """The element's text; found again when a live update swapped it out meanwhile."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(20):
        try:
            return str(driver.find_element(By.CSS_SELECTOR, css).text)
        except StaleElementReferenceException:
            time.sleep(0.05)
        except NoSuchElementException:
            body = driver.find_element(By.TAG_NAME, "body").text
            raise AssertionError(f"no {css} on {driver.current_url}: {body[:2000]}") from None
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def shot(driver: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def live(driver: Any, css: str, want: str, timeout: float = 10.0) -> float:
    """Seconds until ``css``'s text contains ``want`` on the open page (no reload)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            if want in text(driver, css):
                return time.monotonic() - started
        except Exception:  # the fragment is being swapped in
            pass
        time.sleep(0.1)
    raise AssertionError(f"{css} never showed {want!r}: {text(driver, 'main')[:500]}")


