"""Debian's chromium, headless, driven through chromium-driver by selenium (the inspector's browser test
and ``tools/inspector_screenshot.py``). Missing parts skip the test, except under CI=true where they fail:
``.ci/run`` installs them."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def browser_problem() -> str | None:
    """Why the browser cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        return "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)"
    return None


def require_browser() -> None:
    problem = browser_problem()
    if problem is None:
        return
    if IN_CI:
        pytest.fail(problem)
    pytest.skip(problem)


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 1600) -> Iterator[Any]:
    """A headless chromium window of ``width`` x ``height``, closed on the way out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or "chromedriver"), options=options
    )
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: Any, condition: Any, timeout: float = 60) -> Any:
    """Wait until ``condition(driver)`` is truthy (the page fetches and draws asynchronously)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)
