"""60 turns through the gateway in one session on a small window: a silent flush before every
compaction (read back from the session store), and the fact the flush wrote found from a later session
through the agent's memory_search."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from pathlib import Path
from typing import Any

import openai

from sessionmem.config import merge
from sessionmem.testing import small_window_config
from tests.server.gateway_support import (
    FLUSH_MARKER,
    GATEWAY_KEY,
    UPSTREAM_MODEL,
    after_last_user,
    agent_context,
    flushing_upstream,
    last_user,
    running_gateway,
)
from tests.support.openai_server import OpenAIServer, text_reply, tool_call_reply

FACT = "- The deploy codeword is BLUE-HERON-7."
QUESTION = "What was the deploy codeword?"
SUMMARY_SYSTEM = "You are a context summarization assistant."


def entry(tmp_path: Path, key: str) -> dict[str, Any]:
    path = tmp_path / "state" / "agents" / "main" / "sessions" / "sessions.json"
    return dict(json.loads(path.read_text(encoding="utf-8"))[key])


def kind(body: dict[str, Any]) -> str:
    """What an upstream request is for: a flush starting, a compaction's summary, or else a turn."""
    system = str((body.get("messages") or [{}])[0].get("content") or "")
    if system.startswith(SUMMARY_SYSTEM):
        return "summary"
    if FLUSH_MARKER in last_user(body) and not after_last_user(body):
        return "flush"
    return "turn"


def upstream(body: dict[str, Any]) -> Any:
    """Flushes write FACT; a summary is short; the question is answered through memory_search; the rest
    echoes."""
    if kind(body) == "summary":
        return text_reply("## Goal\nShip the release.\n## Progress\nPlanned the tests and the rollout.")
    flushed = flushing_upstream(FACT)(body)
    if flushed is not None:
        return flushed
    if QUESTION in last_user(body):
        results = [m for m in after_last_user(body) if m.get("role") == "tool"]
        if not results:
            return tool_call_reply([("memory_search", {"query": "deploy codeword"})])
        return text_reply(f"From memory: {results[-1]['content']}")
    return None


def test_sixty_turns_flush_before_every_compaction_and_a_later_session_finds_the_fact(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    config = merge(small_window_config(3000), {"agents": {"defaults": {"model": UPSTREAM_MODEL}}})
    openai_server.chat.handler = upstream
    with running_gateway([agent_context(tmp_path, config)], openai_server) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=GATEWAY_KEY, max_retries=0)
        history: list[dict[str, str]] = []
        compactions = 0
        for turn in range(60):
            text = f"Turn {turn}: " + "we planned the release, the tests and the rollout. " * 6
            text = text.strip()
            history.append({"role": "user", "content": text})
            reply = client.chat.completions.create(model="main", messages=history)  # the whole history
            assert reply.choices[0].message.content == f"echo: {text}"
            assert "NO_REPLY" not in reply.choices[0].message.content
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
            now = entry(tmp_path, "agent:main:main")
            if now["compactionCount"] > compactions:  # the cycle this turn compacted was flushed
                assert now["memoryFlushCompactionCount"] >= now["compactionCount"] - 1
                compactions = now["compactionCount"]
        assert compactions >= 3
        # and upstream saw it so: a flush (its write) between any two summaries, and before the first
        kinds = [kind(r.body) for r in openai_server.chat.requests]
        summaries = [at for at, k in enumerate(kinds) if k == "summary"]
        assert len(summaries) == compactions
        for start, end in zip([-1, *summaries], summaries, strict=False):
            assert "flush" in kinds[start + 1 : end]

        daily = list((tmp_path / "workspace-main" / "memory").glob("????-??-??.md"))
        assert len(daily) >= 1 and FACT in daily[0].read_text(encoding="utf-8")

        later = client.chat.completions.create(
            model="main", user="later-visitor", messages=[{"role": "user", "content": QUESTION}]
        )
    answer = str(later.choices[0].message.content)
    assert "BLUE-HERON-7" in answer and daily[0].name in answer


def test_the_response_goes_out_before_the_flush_it_made_due(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    config = merge(small_window_config(3000), {"agents": {"defaults": {"model": UPSTREAM_MODEL}}})
    flush_asked, flush_free = threading.Event(), threading.Event()

    def held_upstream(body: dict[str, Any]) -> Any:
        if kind(body) == "flush":
            flush_asked.set()
            flush_free.wait(30)  # the flush's model call is held until the test lets it go
        return upstream(body)

    openai_server.chat.handler = held_upstream
    with running_gateway([agent_context(tmp_path, config)], openai_server) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key=GATEWAY_KEY, max_retries=0, timeout=10)
        history: list[dict[str, str]] = []
        for turn in range(30):
            text = f"Turn {turn}: " + "we planned the release, the tests and the rollout. " * 6
            history.append({"role": "user", "content": text.strip()})
            # A response that waited for the held flush would time out here.
            reply = client.chat.completions.create(model="main", messages=history)
            history.append({"role": "assistant", "content": str(reply.choices[0].message.content)})
            if flush_asked.wait(3):
                break
        assert flush_asked.is_set(), "no turn reached the flush threshold"
        # The turn that made the flush due has its response; its flush is still out. Another session
        # is served meanwhile.
        other = client.chat.completions.create(
            model="main", user="someone-else", messages=[{"role": "user", "content": "hello"}]
        )
        assert other.choices[0].message.content == "echo: hello"
        # The same session's next request is sent upstream at once, but answered after the flush.
        history.append({"role": "user", "content": "and now?"})
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            after = pool.submit(client.chat.completions.create, model="main", messages=history)
            deadline = time.monotonic() + 5
            while not any(last_user(r.body) == "and now?" for r in openai_server.chat.requests):
                assert time.monotonic() < deadline, "the next request's model call waited for the flush"
                time.sleep(0.01)
            time.sleep(0.05)
            assert not after.done()  # its messages are written after the flush's
            flush_free.set()
            assert after.result(10).choices[0].message.content == "echo: and now?"
    kinds = [kind(r.body) for r in openai_server.chat.requests]
    assert "flush" in kinds
    (early,) = [r.body for r in openai_server.chat.requests if last_user(r.body) == "and now?"]
    # made on the conversation as it stood at the reply: the flush's prompt is not in it
    assert not any(FLUSH_MARKER in str(m.get("content")) for m in early["messages"])
