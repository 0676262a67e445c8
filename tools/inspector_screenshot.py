"""Take docs/inspector.png, the README's picture of the inspector: a session driven through flushes and
compactions with the scripted model (the test kit's), served on 127.0.0.1, opened in Debian's chromium
headless, a flush marker clicked.

    .venv/bin/python tools/inspector_screenshot.py [docs/inspector.png]

Needs the test extra (selenium), chromium and chromium-driver; keyword-only search (no model needed).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the inspector tests' support: the same served agents and browser

from tests.support.browser import browser_problem, chromium, wait_for  # noqa: E402
from tests.support.inspect_app import KEY, drive, make_app, served_agents, serving  # noqa: E402


def main(target: Path) -> None:
    problem = browser_problem()
    if problem is not None:
        raise SystemExit(problem)
    from selenium.webdriver.common.by import By

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        workspace = tmp / "workspace"
        (workspace / "memory").mkdir(parents=True)
        with served_agents(tmp, workspace) as agents:
            runner = agents.runners["main"]
            drive(runner, turns=24, words=180)
            for peer in ("ana", "ben"):
                runner.open(f"agent:main:telegram:direct:{peer}").run_turn_sync("hello")
            with serving(make_app(agents)) as base, chromium(1280, 1280) as driver:
                driver.get(f"{base}/inspect#/session/{KEY}")
                wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart circle.point"))
                driver.find_elements(By.CSS_SELECTOR, "#chart g.marker-flush")[1].click()
                wait_for(driver, lambda d: d.find_element(By.ID, "marker-detail").is_displayed())
                target.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(target))
    print(f"wrote {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "inspector.png")
