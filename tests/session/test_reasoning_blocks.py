"""Reasoning blocks in a reply (``<think>…</think>`` and its spellings): never shown to the user, and a
``NO_REPLY`` after one is silence, as OpenClaw does (its reply text is stripped of reasoning tags before
the silent-reply rules apply; cases from its ``reasoning-tags`` tests). Pure, then through the runner,
streamed and not, with the scripted model and with litellm against the loopback server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessionmem import tokens
from sessionmem.errors import ModelError
from sessionmem.model.litellm import LiteLLMModel
from sessionmem.model.noreply import PartialReleaser, deliverable_reply
from sessionmem.model.reasoning import strip_reasoning
from sessionmem.model.scripted import ScriptedModel
from tests.scenarios.harness import make_runner, small_config, transcript_lines
from tests.support.openai_server import text_reply

BIG = small_config(window=100_000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, this is a normal message.", "Hello, this is a normal message."),
        ("Hello <think>internal reasoning</think> world!", "Hello  world!"),
        ("Before <thinking>some thought</thinking> after", "Before  after"),
        ("A <thought>hmm</thought> B", "A  B"),
        ("X <antthinking>internal</antthinking> Y", "X  Y"),
        ("<mm:think>internal reasoning</mm:think>Visible answer.", "Visible answer."),
        ("leaked preamble</mm:think>Real answer.", "Real answer."),
        ("<think>first</think>A<think>second</think>B", "AB"),
        ("Use the tag like this:\n```\n<think>reasoning</think>\n```\nThat's it!", None),
        ("The `<think>` tag is used for reasoning. Don't forget the closing `</think>` tag.", None),
        ("Example:\n~~~\n<think>reasoning</think>\n~~~\nDone!", None),
        ("<think>hidden</think>Visible text with `<think>` example.", "Visible text with `<think>` example."),
        (
            "```\n<think>code</think>\n```\n<think>real hidden</think>visible",
            "```\n<think>code</think>\n```\nvisible",
        ),
        ("Start `unclosed <think>hidden</think> end", "Start `unclosed  end"),
        ("Here is how to use <think tags in your code", None),
        ("Internal reasoning </think> final answer", "final answer"),
        (
            "You can start with <think and then close with </think>",
            "You can start with <think and then close with",
        ),
        ("A < think >content< /think > B", "A  B"),
        ("<think>outer <think>inner</think> still outer</think>visible", "visible"),
        ("A <THINK>hidden</THINK> <Thinking>also hidden</Thinking> B", "A   B"),
        ("A <think id='test' class=\"foo\">hidden</think> B", "A  B"),
        ("Before <think>unclosed content after", "Before"),
        ("<think>Answer after malformed opening tag", "Answer after malformed opening tag"),
        ("<think>hidden reasoning only</think>", ""),
        ("Before<think/>After", "BeforeAfter"),
        ("Keep<think>hidden<thinking/>still hidden</think>Tail", "KeepTail"),
        ("A<final>1</final>B<final>2</final>C", "A1B2C"),
        ("  <think>x</think>  result  <think>y</think>  ", "result"),
        ("", ""),
    ],
)
def test_reasoning_blocks_are_stripped_as_openclaw_strips_them(text: str, expected: str | None) -> None:
    assert strip_reasoning(text) == (text if expected is None else expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>The user said thanks; nothing to add.</think>NO_REPLY", None),
        ("<think>\nnothing to add\n</think>\n\nNO_REPLY\n", None),
        ("<thinking>quiet</thinking> no_reply", None),
        ('<think>x</think>{"action":"NO_REPLY"}', None),
        ("<think>they asked the time</think>It is noon.", "It is noon."),
        ("<think>short</think>It is noon.\n\nNO_REPLY", "It is noon."),
        (
            "Use `<think>` tags like this: `<think>…</think>`.",
            "Use `<think>` tags like this: `<think>…</think>`.",
        ),
    ],
)
def test_what_the_user_receives_after_a_reasoning_block(text: str, expected: str | None) -> None:
    assert deliverable_reply(text) == expected


@pytest.mark.parametrize(
    "pieces",
    [
        ["<thi", "nk>The user", " is greeting.</th", "ink>Hel", "lo!"],
        ["<think>plan: answer briefly</think>", "Hello", "!"],
        ["Hello", " <think>", "should I add more?", "</think>", "!"],
        ["<think>", "silence is best", "</think>", "NO_", "REPLY"],
    ],
)
def test_a_streamed_reply_never_shows_the_reasoning(pieces: list[str]) -> None:
    releaser = PartialReleaser()
    shown = [releaser.feed(piece) for piece in pieces]
    final = deliverable_reply("".join(pieces))
    shown.append(releaser.finish(final))
    text = "".join(shown)
    assert "think" not in text and "greeting" not in text and "plan" not in text and "silence" not in text
    assert text == (final or "")


def hello_then_silence(session: Any, hello: str, *, streamed: bool) -> None:
    """Two turns: a greeting answered ``hello`` after a reasoning block, then a thanks answered by a
    reasoning block and NO_REPLY; what is streamed (when ``streamed``) adds up to what is delivered."""
    pieces: list[str] = []
    on_partial = pieces.append if streamed else None
    assert session.run_turn_sync("hi", on_partial=on_partial).reply == hello
    assert session.run_turn_sync("thanks", on_partial=on_partial).reply is None
    assert "".join(pieces) == (hello if streamed else "")


@pytest.mark.parametrize("chunk", [0, 1, 4])
def test_a_turn_after_a_reasoning_block(tmp_path: Path, workspace: Path, chunk: int) -> None:
    answers = ["<think>They say hi.</think>Hello!", "<think>Only thanks; stay quiet.</think>NO_REPLY"]
    model = ScriptedModel(answers, stream_chunk_chars=chunk or 3)
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    session = runner.open()
    hello_then_silence(session, "Hello!", streamed=bool(chunk))
    said = [
        line["message"] for line in transcript_lines(session.transcript.path) if line.get("type") == "message"
    ]
    assert "<think>They say hi.</think>" in str(said[1]["content"])  # the transcript keeps what was said


def test_a_reply_of_reasoning_alone_is_an_empty_answer(tmp_path: Path, workspace: Path) -> None:
    runner, _ = make_runner(ScriptedModel(["<think>hmm, what to say</think>"]), tmp_path, workspace, BIG)
    with pytest.raises(ModelError, match="no visible text"):
        runner.open().run_turn_sync("hi")


@pytest.mark.parametrize("streamed", [False, True])
def test_through_litellm(tmp_path: Path, workspace: Path, openai_server: Any, streamed: bool) -> None:
    openai_server.chat.push(text_reply("<think>The user greets me.</think>\n\nHello there."))
    openai_server.chat.push(text_reply("<think>Just thanks; nothing to say.</think>\nNO_REPLY"))
    tokens.configure_litellm_environment()
    model = LiteLLMModel(
        "openai/test-model", api_base=openai_server.base_url, api_key="sk-test", num_retries=0
    )
    runner, _ = make_runner(model, tmp_path, workspace, BIG)
    hello_then_silence(runner.open(), "Hello there.", streamed=streamed)
