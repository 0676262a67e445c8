"""JSONL transcripts: the §3.2 format, robustness against torn and malformed lines, context rebuild."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from sessionmem.messages import Message, ToolCall, Usage
from sessionmem.session.stores.transcript import compaction_summary_text
from sessionmem.session.stores.transcript_folder import Transcript, read_entries, read_header, read_messages

ISO_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_new_file_starts_with_a_version_3_header(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    t = Transcript.open(path, "s1", cwd="/ws", session_key="agent:main:main")
    assert t.size_bytes() > 0
    header = lines(path)[0]
    assert header["type"] == "session"
    assert header["version"] == 3
    assert header["id"] == "s1"
    assert header["cwd"] == "/ws"
    assert header["sessionKey"] == "agent:main:main"
    assert ISO_RE.match(header["timestamp"])
    # Reopening does not write a second header.
    Transcript.open(path, "s1", cwd="/ws")
    assert len(lines(path)) == 1


def test_every_message_kind_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    t = Transcript.open(path, "s", cwd=tmp_path)
    call = ToolCall("call_1", "memory_search", {"query": "billing", "maxResults": 3})
    sent = [
        Message.user("what did we decide about billing?"),
        Message.assistant(
            "Let me look.", tool_calls=(call,), usage=Usage(1200, 30, cache_read=100, cache_write=5)
        ),
        Message.tool(call, "memory/2026-11-03.md#L1-L5: cutover on the 14th", is_error=False),
        Message.tool(ToolCall("call_2", "memory_get", {}), "no such file", is_error=True),
        Message.assistant("The cutover is on the 14th.", usage=Usage(1300, 9)),
    ]
    ids = [
        t.append_message(sent[0]),
        t.append_message(sent[1], provider="openai", model="gpt-4o-mini"),
        t.append_message(sent[2]),
        t.append_message(sent[3]),
        t.append_message(sent[4], provider="openai", model="gpt-4o-mini", stop_reason="stop"),
    ]
    assert len(set(ids)) == 5 and all(re.fullmatch(r"[0-9a-f]{8}", i) for i in ids)

    raw = lines(path)[1:]
    assert [r["parentId"] for r in raw] == [None, *ids[:-1]]
    assert all(ISO_RE.match(r["timestamp"]) for r in raw)
    user, assistant, tool = raw[0]["message"], raw[1]["message"], raw[2]["message"]
    assert user == {"role": "user", "content": sent[0].content, "timestamp": sent[0].timestamp}
    assert assistant["content"] == [
        {"type": "text", "text": "Let me look."},
        {
            "type": "toolCall",
            "id": "call_1",
            "name": "memory_search",
            "arguments": {"query": "billing", "maxResults": 3},
        },
    ]
    assert assistant["usage"] == {
        "input": 1200,
        "output": 30,
        "cacheRead": 100,
        "cacheWrite": 5,
        "totalTokens": 1335,
    }
    assert assistant["provider"] == "openai" and assistant["model"] == "gpt-4o-mini"
    assert assistant["stopReason"] == "toolUse"
    assert (
        tool["role"] == "toolResult"
        and tool["toolCallId"] == "call_1"
        and tool["toolName"] == "memory_search"
    )
    assert tool["content"] == [{"type": "text", "text": sent[2].content}] and tool["isError"] is False
    assert raw[3]["message"]["isError"] is True

    reread = Transcript.open(path, "s")
    assert [m for _, m in reread.context_messages()] == sent
    assert [e.id for e in reread.entries()] == ids
    assert reread.entries()[1].provider == "openai"
    assert reread.entries()[1].stop_reason == "toolUse"


def test_custom_entries_are_kept_but_stay_out_of_the_context(tmp_path: Path) -> None:
    t = Transcript.open(tmp_path / "s.jsonl", "s")
    t.append_message(Message.user("hi"))
    cid = t.append_custom("memory-flush", {"compactionCount": 2})
    entry = next(e for e in t.entries() if e.id == cid)
    assert entry.type == "custom"
    assert entry.data["customType"] == "memory-flush" and entry.data["data"] == {"compactionCount": 2}
    assert [m.content for m in t.messages()] == ["hi"]


def test_malformed_lines_and_a_torn_last_line_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    t = Transcript.open(path, "s")
    t.append_message(Message.user("one"))
    with path.open("ab") as f:
        f.write(b"not json at all\n")
        f.write(b"[1, 2, 3]\n")
        f.write(b'{"type":"message","id":"deadbeef"}\n')  # an entry without a message field
    t.append_message(Message.assistant("two"))
    with path.open("ab") as f:
        f.write(b'{"type":"message","id":"abcd1234","parentId":null,"message":{"role":"us')  # torn
    reread = Transcript.open(path, "s")
    assert [m.content for m in reread.messages()] == ["one", "two"]
    numbered = read_messages(path)
    assert [obj["message"]["role"] for _, obj in numbered] == ["user", "assistant"]
    assert [no for no, _ in numbered] == [2, 6]

    # The next append first ends the torn line, so both the fragment and the new line stay separate.
    reread.append_message(Message.user("three"))
    assert path.read_bytes().endswith(b"\n")
    assert [m.content for m in Transcript.open(path, "s").messages()] == ["one", "two", "three"]


def test_append_after_the_file_was_archived_starts_a_file_with_a_header(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    t = Transcript.open(path, "s", session_key="agent:main:main")
    t.append_message(Message.user("before"))
    path.rename(tmp_path / "s.jsonl.reset.2026-11-22T10-00-00.000Z")
    t.append_message(Message.user("after"))
    assert read_header(path)["sessionKey"] == "agent:main:main"  # type: ignore[index]
    assert [m.content for m in Transcript.open(path, "s").messages()] == ["after"]


def test_reader_of_a_missing_file_gets_nothing(tmp_path: Path) -> None:
    assert list(read_entries(tmp_path / "nope.jsonl")) == []
    assert read_header(tmp_path / "nope.jsonl") is None


def test_context_after_compaction_is_summary_then_kept_entries(tmp_path: Path) -> None:
    t = Transcript.open(tmp_path / "s.jsonl", "s")
    t.append_message(Message.user("old question"))
    t.append_message(Message.assistant("old answer"))
    kept = t.append_message(Message.user("recent question"))
    t.append_message(Message.assistant("recent answer"))
    comp = t.append_compaction("We talked about old things.", kept, tokens_before=5000, tokens_after=900)
    t.append_message(Message.user("after compaction"))

    ctx = t.context_messages()
    assert ctx[0][0] == comp
    assert ctx[0][1].role == "user"
    assert ctx[0][1].content == (
        "The conversation history before this point was compacted into the following summary:\n\n"
        "<summary>\nWe talked about old things.\n</summary>"
    )
    assert [m.content for _, m in ctx[1:]] == ["recent question", "recent answer", "after compaction"]
    raw = next(e for e in t.entries() if e.type == "compaction").data
    assert raw["firstKeptEntryId"] == kept and raw["tokensBefore"] == 5000 and raw["tokensAfter"] == 900

    # A second compaction wins; its kept window starts later.
    kept2 = t.append_message(Message.user("latest"))
    t.append_compaction("Second summary.", kept2, tokens_before=3000, tokens_after=400)
    ctx = t.context_messages()
    assert ctx[0][1].content == compaction_summary_text("Second summary.")
    assert [m.content for _, m in ctx[1:]] == ["latest"]


def test_compaction_that_keeps_nothing_leaves_only_the_summary_and_later_messages(tmp_path: Path) -> None:
    t = Transcript.open(tmp_path / "s.jsonl", "s")
    t.append_message(Message.user("a"))
    t.append_compaction("all of it", None, tokens_before=100)
    t.append_message(Message.user("b"))
    assert [m.content for m in t.messages()] == [compaction_summary_text("all of it"), "b"]


def _append_forever(path: str, ready: Any) -> None:
    t = Transcript.open(path, "killed")
    filler = "x" * 2000
    i = 0
    while True:
        t.append_message(Message.user(f"{i} {filler}"))
        i += 1
        if i == 50:
            ready.set()


@pytest.mark.timeout(60)
def test_writer_killed_mid_append_leaves_a_readable_transcript(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_append_forever, args=(str(path), ready))
    proc.start()
    assert ready.wait(20)
    time.sleep(0.05)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)

    raw_lines = path.read_bytes().split(b"\n")
    for line in raw_lines[:-1]:  # every newline-terminated line parses; only the tail may be torn
        orjson.loads(line)
    before = len(Transcript.open(path, "killed").messages())
    assert before >= 50

    t = Transcript.open(path, "killed")
    t.append_message(Message.user("after the crash"))
    after = Transcript.open(path, "killed").messages()
    assert len(after) == before + 1
    assert after[-1].content == "after the crash"
    assert all(m.content.split(" ", 1)[0] == str(i) for i, m in enumerate(after[:-1]))


def _append_n(path: str, tag: str, n: int) -> None:
    t = Transcript.open(path, "shared")
    for i in range(n):
        t.append_message(Message.user(f"{tag}-{i} " + "y" * 3000))


@pytest.mark.timeout(60)
def test_concurrent_writers_interleave_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    Transcript.open(path, "shared")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_n, args=(str(path), tag, 150)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    raw = path.read_bytes().splitlines()
    assert all(isinstance(orjson.loads(line), dict) for line in raw)
    contents = [m.content.split(" ", 1)[0] for m in Transcript.open(path, "shared").messages()]
    assert sorted(contents) == sorted([f"a-{i}" for i in range(150)] + [f"b-{i}" for i in range(150)])


def test_the_documented_example_reads_as_documented(tmp_path: Path) -> None:
    readme = Path(__file__).resolve().parents[2] / "transcripts" / "README.md"
    example = readme.read_text(encoding="utf-8").split("## A complete example")[1].split("```")[1]
    path = tmp_path / "demo-1.jsonl"
    path.write_text(example.strip() + "\n", encoding="utf-8")
    assert read_header(path)["sessionKey"] == "agent:main:main"  # type: ignore[index]
    ctx = Transcript.open(path, "demo-1").context_messages()
    assert ctx[0][1].content == compaction_summary_text(
        "The user asked about the billing cutover; it is on the 14th."
    )
    assert [(eid, m.content) for eid, m in ctx[1:]] == [("0a1b2c3d", "The cutover is on the 14th.")]
    assert ctx[1][1].usage is not None and ctx[1][1].usage.total_tokens == 1299


def test_growth_since_compaction_counts_only_bytes_after_the_latest_compaction(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    t = Transcript.open(path, "s1")
    t.append_message(Message.user("early " * 50))
    assert t.bytes_since_compaction() == t.size_bytes()  # no compaction yet: since the session start
    t.append_compaction("summary", None, 100, 10)
    assert t.bytes_since_compaction() == 0
    size_at_compaction = t.size_bytes()
    t.append_message(Message.user("later"))
    grown = t.size_bytes() - size_at_compaction
    assert grown > 0 and t.bytes_since_compaction() == grown
    # A new process reading the file finds the same offset.
    assert Transcript.open(path, "s1").bytes_since_compaction() == grown
    # The latest compaction counts, not the first.
    t.append_compaction("summary 2", None, 100, 10)
    t.append_message(Message.user("x"))
    reopened = Transcript.open(path, "s1")
    assert 0 < reopened.bytes_since_compaction() < grown + 100
    assert reopened.bytes_since_compaction() == t.bytes_since_compaction()
