"""The management API (/api/sessions, /api/memory/...) over a served agent, as an operator's script would
use it: the list, one session with its timeline, a delete that forgets the chat, a search with each
hit's scores, the memory files through memory_get's path rules; errors as JSON with 400 and 404; the
bearer token, or ?token= once and then a cookie."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from tests.support.inspect_app import FLUSH_FACT, KEY, ServedForTest, drive, make_app, served_agents

TOKEN = "inspector-test-token-0123456789"


@pytest.fixture
def agents(tmp_path: Path, workspace: Path) -> Iterator[ServedForTest]:
    (workspace / "MEMORY.md").write_text("# Long-term\n- The office is in Lisbon.\n", encoding="utf-8")
    with served_agents(tmp_path, workspace) as served:
        drive(served.runners["main"])
        served.runners["main"].open("agent:main:discord:group:7").run_turn_sync("hello group")
        yield served


@pytest.fixture
def client(agents: ServedForTest) -> Iterator[TestClient]:
    with TestClient(make_app(agents)) as client:
        yield client


def error_of(response: object, status: int) -> dict:
    assert response.status_code == status, response.text  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body["error"]) == {"message", "type"}
    return body["error"]


def test_sessions_list_and_show(client: TestClient, agents: ServedForTest) -> None:
    assert client.get("/api/agents").json() == {"agents": ["main"]}
    listed = client.get("/api/sessions").json()
    assert [s["sessionKey"] for s in listed["sessions"]] == ["agent:main:discord:group:7", KEY]
    assert listed["agentId"] == "main" and listed["total"] == 2
    assert [s["sessionKey"] for s in client.get("/api/sessions?q=telegram").json()["sessions"]] == [KEY]
    assert client.get("/api/sessions?limit=1&page=2").json()["sessions"][0]["sessionKey"] == KEY

    shown = client.get(f"/api/sessions/{KEY}").json()
    entry = agents.runners["main"].store.get(KEY)
    assert entry is not None
    assert shown["entry"]["compactionCount"] == entry.compaction_count >= 2
    assert shown["entry"]["memoryFlushCompactionCount"] == entry.memory_flush_compaction_count
    assert shown["thresholds"]["flushThreshold"] < shown["thresholds"]["compactionThreshold"]
    assert shown["timeline"]["turns"] == 12
    flushes = [m for m in shown["timeline"]["markers"] if m["kind"] == "flush"]
    assert len(flushes) == entry.memory_flush_compaction_count + 1 >= entry.compaction_count  # a cycle each
    assert flushes[0]["writes"][0]["text"] == FLUSH_FACT
    assert client.get("/api/sessions/telegram:direct:42?page=1&limit=3").json()["transcript"]["page"] == 1


def test_delete_forgets_the_chat(client: TestClient, agents: ServedForTest) -> None:
    transcript = Path(agents.runners["main"].store.get(KEY).session_file or "")
    assert transcript.is_file()
    deleted = client.delete(f"/api/sessions/{KEY}").json()
    assert deleted["deleted"] == KEY and KEY in deleted["sessionKeys"]
    assert not transcript.exists()
    error_of(client.get(f"/api/sessions/{KEY}"), 404)
    error_of(client.delete(f"/api/sessions/{KEY}"), 404)
    assert [s["sessionKey"] for s in client.get("/api/sessions").json()["sessions"]] == [
        "agent:main:discord:group:7"
    ]


def test_memory_search_shows_each_hits_scores(client: TestClient) -> None:
    found = client.get("/api/memory/search", params={"q": "Mochi cat"}).json()
    assert found["results"], found
    hit = found["results"][0]
    assert "Mochi" in hit["snippet"] and hit["path"].startswith("memory/")
    assert {"text", "bm25", "vector", "merged", "decay", "final"} <= set(hit["explain"])
    assert hit["explain"]["text"] > 0 and hit["explain"]["final"] == pytest.approx(hit["score"], abs=1e-6)
    error_of(client.get("/api/memory/search"), 400)
    error_of(client.get("/api/memory/search", params={"q": "x" * 5000}), 400)
    error_of(client.get("/api/memory/search", params={"q": "cat", "limit": "0"}), 400)


def test_memory_files_through_the_path_rules(client: TestClient, workspace: Path, tmp_path: Path) -> None:
    files = [f["path"] for f in client.get("/api/memory/files").json()["files"]]
    assert "MEMORY.md" in files and any(f.startswith("memory/") for f in files)
    got = client.get("/api/memory/files/MEMORY.md").json()
    assert got["path"] == "MEMORY.md" and "Lisbon" in got["text"]
    assert (
        client.get("/api/memory/files/MEMORY.md?from=2&lines=1").json()["text"]
        == "- The office is in Lisbon."
    )
    (tmp_path / "secret.md").write_text("TOP-SECRET-CONTENT", encoding="utf-8")
    (workspace / "memory" / "notes.txt").write_text("TOP-SECRET-CONTENT", encoding="utf-8")
    outside = quote(str(tmp_path / "secret.md"), safe="")  # an absolute path, its slashes escaped
    # dots escaped, as a client that does not tidy the address sends them (httpx would fold "..")
    for bad in (
        "memory/%2e%2e/%2e%2e/secret.md",
        "%2e%2e/secret.md",
        outside,
        "config.json",
        "memory/notes.txt",
    ):
        response = client.get(f"/api/memory/files/{bad}")
        error_of(response, 400)
        assert "TOP-SECRET-CONTENT" not in response.text
    error_of(client.get("/api/memory/files/memory/none.md"), 404)
    error_of(client.get("/api/memory/files/MEMORY.md?from=x"), 400)


def test_bad_requests_are_400_and_missing_things_404(client: TestClient) -> None:
    assert "agent" in error_of(client.get("/api/sessions?agent=nobody"), 404)["message"]
    assert "page" in error_of(client.get("/api/sessions?page=0"), 400)["message"]
    assert "limit" in error_of(client.get("/api/sessions?limit=100000"), 400)["message"]
    assert error_of(client.get("/api/sessions/agent:other:main"), 400)["type"] == "invalid_request_error"
    assert error_of(client.get("/api/sessions/" + "k" * 5000), 400)
    assert error_of(client.get("/api/sessions/telegram:direct:999"), 404)["type"] == "not_found_error"


def test_page_and_its_files_are_served(client: TestClient) -> None:
    page = client.get("/inspect")
    assert page.status_code == 200 and "sessionmem inspector" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert client.get("/inspect/static/inspector.js").status_code == 200
    assert client.get("/inspect/static/inspector.css").status_code == 200
    assert client.get("/inspect/static/../inspect_api.py").status_code == 404


def test_token_as_bearer_or_once_in_the_address_then_a_cookie(agents: ServedForTest) -> None:
    with TestClient(make_app(agents, [TOKEN]), follow_redirects=False) as client:
        assert client.get("/api/sessions").status_code == 401
        assert client.get("/inspect?token=wrong-token-wrong-token").status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/api/sessions", headers=bearer).status_code == 200

        opened = client.get(f"/inspect?token={TOKEN}&x=1")
        assert opened.status_code == 303 and opened.headers["location"] == "/inspect?x=1"
        cookie = opened.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert client.get("/inspect").status_code == 200  # the cookie now opens the page
        assert client.get("/api/sessions").status_code == 200  # and the API
        # a change relying on the cookie needs the page's own header (no other site can send it)
        assert client.delete(f"/api/sessions/{KEY}").status_code == 401
        assert client.delete(f"/api/sessions/{KEY}", headers={"X-Sessionmem-Request": "1"}).status_code == 200
        client.cookies.clear()
        assert client.get("/api/sessions").status_code == 401
