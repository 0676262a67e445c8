"""The inspector in a real browser (Debian's chromium, headless): opened once with ?token=, it finds
the session by its key, draws a point per turn and a marker per flush and compaction against the two
threshold lines, shows what a flush wrote and what a summary kept on a click, sets flush turns and
summaries apart in the transcript, and runs a memory search showing each hit's scores. Screenshots go to
the test's folder."""

from __future__ import annotations

from pathlib import Path

from sessionmem.session.stores.transcript_folder import read_entries
from tests.support.browser import chromium, require_browser, wait_for
from tests.support.inspect_app import FLUSH_FACT, KEY, TURNS, drive, make_app, served_agents, serving

TOKEN = "inspector-browser-token-0123456789"


def test_inspector_in_chromium(tmp_path: Path, workspace: Path, gguf_model: Path) -> None:
    require_browser()
    from selenium.webdriver.common.by import By

    search = {"provider": "local", "local": {"modelPath": str(gguf_model)}}
    with served_agents(tmp_path, workspace, memory_search=search) as agents:
        runner = agents.runners["main"]
        drive(runner)
        for n in range(3):
            runner.open(f"agent:main:discord:group:{n}").run_turn_sync("hello group")
        entry = runner.store.get(KEY)
        assert entry is not None and entry.compaction_count >= 2
        lines = [obj for _, obj in read_entries(entry.session_file or "")]
        summaries = [obj["summary"] for obj in lines if obj.get("type") == "compaction"]

        with serving(make_app(agents, [TOKEN])) as base, chromium() as driver:
            driver.get(f"{base}/inspect?token={TOKEN}")
            rows = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "tr.session-row"))
            assert len(rows) == 4
            driver.find_element(By.ID, "filter").send_keys("telegram")
            wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.session-row")) == 1)
            driver.find_element(By.LINK_TEXT, KEY).click()

            points = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#chart circle.point"))
            assert len(points) == TURNS
            flushes = driver.find_elements(By.CSS_SELECTOR, "#chart g.marker-flush")
            compactions = driver.find_elements(By.CSS_SELECTOR, "#chart g.marker-compaction")
            assert len(compactions) == len(summaries) == entry.compaction_count
            # each cycle flushed once before it compacted (the current one too when its flush came after
            # the last reply: replies first)
            assert len(flushes) == entry.memory_flush_compaction_count + 1 >= entry.compaction_count
            assert driver.find_elements(By.CSS_SELECTOR, "#chart line.flush-line")
            assert driver.find_elements(By.CSS_SELECTOR, "#chart line.compaction-line")
            assert driver.find_element(By.ID, "session-key").text == KEY

            flushes[0].click()
            detail = driver.find_element(By.ID, "marker-detail")
            wait_for(driver, lambda d: detail.is_displayed())
            assert FLUSH_FACT in detail.text and "(saved)" in detail.text
            compactions[0].click()
            wait_for(driver, lambda d: summaries[0].splitlines()[0] in detail.text)

            transcript = driver.find_element(By.ID, "transcript")
            assert transcript.find_elements(By.CSS_SELECTOR, "li.entry-flush")
            assert transcript.find_elements(By.CSS_SELECTOR, "li.entry-compaction")
            driver.save_screenshot(str(tmp_path / "inspector-session.png"))

            driver.find_element(By.ID, "nav-memory").click()
            box = wait_for(driver, lambda d: d.find_element(By.ID, "search-q"))
            box.send_keys("what is the cat called")
            driver.find_element(By.CSS_SELECTOR, "#search-form button").click()
            hits = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "li.hit"))
            assert "Mochi" in hits[0].text
            headers = [th.text for th in hits[0].find_elements(By.CSS_SELECTOR, "table.scores th")]
            assert {"score", "text", "vector", "merged", "final"} <= set(headers)
            cells = [td.text for td in hits[0].find_elements(By.CSS_SELECTOR, "table.scores td")]
            assert float(cells[headers.index("final")]) > 0
            assert driver.find_elements(By.CSS_SELECTOR, "#files a.file-link")
            driver.save_screenshot(str(tmp_path / "inspector-search.png"))
    assert (tmp_path / "inspector-session.png").stat().st_size > 10_000
