"""The official ``openai`` client against ``sessionmem serve``'s app (uvicorn on 127.0.0.1), whose agents'
upstream is the loopback OpenAI-compatible server: replies, streams, sessions, and every error a client
can meet, as the client raises it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.server.gateway_support import (
    GATEWAY_KEY,
    RunningGateway,
    agent_context,
    keyword_config,
    running_gateway,
)
from tests.support.openai_server import OpenAIServer, delay, rate_limit, server_error, text_reply


@pytest.fixture
def gateway(tmp_path: Path, openai_server: OpenAIServer) -> Iterator[RunningGateway]:
    with running_gateway([agent_context(tmp_path, keyword_config())], openai_server) as running:
        yield running


@pytest.fixture
def client(gateway: RunningGateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=GATEWAY_KEY, max_retries=0)


def store(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "state" / "agents" / "main" / "sessions" / "sessions.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_plain_reply_with_usage_in_the_main_session(
    client: openai.OpenAI, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    reply = client.chat.completions.create(
        model="main",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}],
    )
    assert reply.choices[0].message.content == "echo: hello there"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None and reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens
    assert reply.model == "main"
    [request] = openai_server.chat.requests
    assert request.body["model"] == "test-model"  # the agent's configured model is the upstream
    assert {"memory_search", "memory_get"} <= {t["function"]["name"] for t in request.body["tools"]}
    assert "agent:main:main" in store(tmp_path)


def test_a_client_resending_the_whole_history_sends_each_message_once(
    client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    first = client.chat.completions.create(
        model="sessionmem/main", messages=[{"role": "user", "content": "one"}]
    )
    history = [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": first.choices[0].message.content},
        {"role": "user", "content": "two"},
    ]
    second = client.chat.completions.create(model="sessionmem/main", messages=history)
    assert second.choices[0].message.content == "echo: two"
    sent = [m["content"] for m in openai_server.chat.requests[-1].body["messages"] if m["role"] == "user"]
    assert sent.count("one") == 1 and sent[-1] == "two"  # the gateway's session, not the client's copy


def test_streamed_reply_ends_with_usage_and_done(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="main",
        messages=[{"role": "user", "content": "stream this reply please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: stream this reply please"
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish[-1].choices[0].finish_reason == "stop" and finish[-1].usage is not None
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1


def test_no_reply_never_reaches_the_client(client: openai.OpenAI, openai_server: OpenAIServer) -> None:
    openai_server.chat.push(text_reply("NO_REPLY"), text_reply("NO_REPLY"))
    plain = client.chat.completions.create(model="main", messages=[{"role": "user", "content": "ok"}])
    assert plain.choices[0].message.content == ""
    streamed = client.chat.completions.create(
        model="main", messages=[{"role": "user", "content": "ok"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == ""


def test_two_sessions_at_once_by_user(
    client: openai.OpenAI, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    openai_server.chat.handler = lambda body: delay(0.3, text_reply("hi " + body["messages"][-1]["content"]))

    def ask(user: str) -> str:
        reply = client.chat.completions.create(
            model="main", user=user, messages=[{"role": "user", "content": f"I am {user}"}]
        )
        return str(reply.choices[0].message.content)

    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(ask, ["alice", "bob"]))
    assert replies == ["hi I am alice", "hi I am bob"]
    keys = store(tmp_path)
    assert {"agent:main:openai:direct:alice", "agent:main:openai:direct:bob"} <= set(keys)
    assert (
        keys["agent:main:openai:direct:alice"]["sessionId"]
        != keys["agent:main:openai:direct:bob"]["sessionId"]
    )


def test_the_session_key_header_picks_the_session(
    gateway: RunningGateway, client: openai.OpenAI, tmp_path: Path
) -> None:
    response = client.chat.completions.with_raw_response.create(
        model="main",
        messages=[{"role": "user", "content": "hi"}],
        extra_headers={"X-Session-Key": "agent:main:telegram:direct:42"},
    )
    assert response.headers["x-session-key"] == "agent:main:telegram:direct:42"
    assert "agent:main:telegram:direct:42" in store(tmp_path)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        client.chat.completions.create(
            model="main",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"X-Session-Key": "agent:work:telegram:direct:42"},
        )
    assert "belongs to agent 'work'" in str(refused.value)


def test_the_same_app_serves_the_inspector_and_its_api_behind_the_token(
    gateway: RunningGateway, client: openai.OpenAI
) -> None:
    client.chat.completions.create(model="main", user="carol", messages=[{"role": "user", "content": "hi"}])
    auth = {"authorization": f"Bearer {GATEWAY_KEY}"}
    listed = httpx.get(f"{gateway.url}/api/sessions", params={"agent": "main"}, headers=auth)
    assert listed.status_code == 200, listed.text
    assert "agent:main:openai:direct:carol" in listed.text
    shown = httpx.get(f"{gateway.url}/api/sessions/agent:main:openai:direct:carol", headers=auth)
    assert shown.status_code == 200 and len(shown.json()["timeline"]["points"]) == 1
    assert httpx.get(f"{gateway.url}/inspect", headers=auth).status_code == 200
    assert httpx.get(f"{gateway.url}/api/sessions").status_code == 401
    assert httpx.get(f"{gateway.url}/inspect").status_code == 401


def test_a_wrong_or_missing_token_is_401(gateway: RunningGateway) -> None:
    for key in ("sk-wrong", ""):
        client = openai.OpenAI(base_url=gateway.base_url, api_key=key or "none", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as refused:
            client.chat.completions.create(model="main", messages=[{"role": "user", "content": "hi"}])
        assert "API key" in str(refused.value)
    assert httpx.get(f"{gateway.base_url}/models").status_code == 401


def test_an_unknown_agent_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="nobody", messages=[{"role": "user", "content": "hi"}])
    assert "no agent 'nobody'" in str(refused.value) and refused.value.code == "model_not_found"


def test_models_lists_the_agents(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["sessionmem/main", "main"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "main"}, "'messages' must be a non-empty array"),
        ({"model": "main", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "main", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "main", "messages": [{"role": "assistant", "content": "x"}]}, "no new user message"),
        ({"model": "main", "messages": [{"role": "user", "content": "x"}], "user": "a:b"}, "'user' cannot"),
        ({"model": 3, "messages": [{"role": "user", "content": "x"}]}, "'model' must name an agent"),
    ],
)
def test_a_malformed_request_is_400_naming_the_problem(
    gateway: RunningGateway, body: dict[str, Any], says: str, openai_server: OpenAIServer
) -> None:
    response = httpx.post(
        f"{gateway.base_url}/chat/completions", json=body, headers={"authorization": f"Bearer {GATEWAY_KEY}"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert says in error["message"] and error["type"] == "invalid_request_error"
    assert openai_server.chat.requests == []


def test_a_body_that_is_not_json_or_too_large_is_refused(gateway: RunningGateway) -> None:
    url, auth = f"{gateway.base_url}/chat/completions", {"authorization": f"Bearer {GATEWAY_KEY}"}
    broken = httpx.post(
        url, content=b'{"model": "main", "mess', headers={**auth, "content-type": "application/json"}
    )
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]
    huge = httpx.post(
        url, content=b"x" * (9 * 1024 * 1024), headers={**auth, "content-type": "application/json"}
    )
    assert huge.status_code == 413 and "over 8,388,608 bytes" in huge.json()["error"]["message"]
    form = httpx.post(url, content=b"{}", headers={**auth, "content-type": "text/plain"})
    assert form.status_code == 415


def test_upstream_rate_limit_and_outage_reach_the_client_as_such(
    client: openai.OpenAI, openai_server: OpenAIServer
) -> None:
    openai_server.chat.push(rate_limit())
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="main", messages=[{"role": "user", "content": "hi"}])
    openai_server.chat.push(server_error(503))
    with pytest.raises(openai.InternalServerError) as unavailable:
        client.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    assert unavailable.value.status_code == 503 and unavailable.value.code == "upstream_unavailable"
    # the failed turns kept the messages: the next turn sends them with the new one
    assert client.chat.completions.create(
        model="main", messages=[{"role": "user", "content": "again"}]
    ).choices


def test_an_upstream_timeout_is_504(tmp_path: Path, openai_server: OpenAIServer) -> None:
    with running_gateway([agent_context(tmp_path, keyword_config())], openai_server, timeout=0.5) as running:
        client = openai.OpenAI(base_url=running.base_url, api_key=GATEWAY_KEY, max_retries=0)
        openai_server.chat.push(delay(3.0, text_reply("late")))
        with pytest.raises(openai.APIStatusError) as timed_out:
            client.chat.completions.create(model="main", messages=[{"role": "user", "content": "hi"}])
    assert timed_out.value.status_code == 504 and timed_out.value.code == "upstream_timeout"


def test_an_idle_connection_outlives_the_clients_own_keep_alive(gateway: RunningGateway) -> None:
    # Trigger: the official openai client (httpx) keeps an idle connection 5 s, and uvicorn's default
    # keep-alive closes it after 5 s. Why: a request sent on it as the server closes it is lost
    # (ReadError or "Server disconnected"; bench_serve dropped 9 of 3,212). Outcome: the gateway keeps
    # idle connections well past any client's expiry, so the client is the one that closes them.
    auth = {"authorization": f"Bearer {GATEWAY_KEY}"}
    limits = httpx.Limits(keepalive_expiry=None)  # never expires on the client side: the server decides
    with httpx.Client(base_url=gateway.base_url, headers=auth, limits=limits) as http:

        def connection() -> Any:
            response = http.get("/models")
            assert response.status_code == 200
            return response.extensions["network_stream"].get_extra_info("client_addr")

        first = connection()
        time.sleep(6.0)  # past uvicorn's default keep-alive (5 s) and httpx's expiry (5 s)
        assert connection() == first  # the same connection: the server kept it open
