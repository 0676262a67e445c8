"""NO_REPLY rules, with the reference's own cases (§15 items 20-22) and OpenClaw's current ones (the
token in any case, glued to the reply, as a JSON envelope; HEARTBEAT_OK in heartbeat runs; a configured
token), pure and through the runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.config import Config
from sessionmem.errors import ConfigError
from sessionmem.model.noreply import (
    HEARTBEAT_TOKEN,
    PartialReleaser,
    deliverable_reply,
    is_silent,
    is_silent_prefix,
    silent_tokens,
    strip_leading_silent_token,
    strip_silent_token,
)
from sessionmem.model.scripted import ScriptedModel
from tests.scenarios.harness import make_runner, small_config


@pytest.mark.parametrize(
    "text",
    [
        "NO_REPLY",
        "  NO_REPLY  ",
        "\nNO_REPLY\n",
        "no_reply",
        "  No_RePlY  ",
        '{"action":"NO_REPLY"}',
        ' { "action" : "no_reply" } ',
    ],
)
def test_exact_token_in_any_case_or_its_json_envelope_is_silent(text: str) -> None:
    assert is_silent(text)
    assert deliverable_reply(text) is None


@pytest.mark.parametrize(
    "text",
    ['{"action":"NO_REPLY","note":"example"}', '{"action":"reply"}', '["NO_REPLY"]', '{"action": 1}'],
)
def test_other_json_is_delivered_as_written(text: str) -> None:
    assert not is_silent(text)
    assert deliverable_reply(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO_REPLYThe user is saying hello", "The user is saying hello"),
        ("no_replyThe user is saying", "The user is saying"),
        ("No_RePlYThe user is saying", "The user is saying"),
        ("NO_REPLY -- nope", "NO_REPLY -- nope"),
        ("NO_REPLY: explanation", "NO_REPLY: explanation"),
        ("NO_REPLY—note", "NO_REPLY—note"),
    ],
)
def test_a_token_glued_to_the_reply_is_dropped_and_the_rest_delivered(text: str, expected: str) -> None:
    assert strip_leading_silent_token(text) == expected
    assert deliverable_reply(text) == expected


def test_heartbeat_ok_is_silent_only_in_heartbeat_runs_and_the_token_is_configurable() -> None:
    beat = silent_tokens(heartbeat=True)
    assert deliverable_reply("HEARTBEAT_OK", beat) is None
    assert deliverable_reply("Checked inbox. HEARTBEAT_OK", beat) == "Checked inbox."
    assert deliverable_reply("HEARTBEAT_OK") == "HEARTBEAT_OK"  # an ordinary turn delivers it
    assert deliverable_reply("skip", silent_tokens("SKIP")) is None
    assert deliverable_reply("NO_REPLY", silent_tokens("SKIP")) == "NO_REPLY"


@pytest.mark.parametrize(
    "text",
    [None, "", "Here is the answer.\n\nNO_REPLY", "NO_REPLY but here is more", "Please NO_REPLY to this"],
)
def test_token_mixed_with_text_is_not_silent(text: str | None) -> None:
    assert not is_silent(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Done.\n\nNO_REPLY", "Done."),
        ("NO_REPLY 👍", "NO_REPLY 👍"),
        ("😄 NO_REPLY", "😄"),
        ("interject.NO_REPLY", "interject.NO_REPLY"),
        ("NO_REPLY ok NO_REPLY", "NO_REPLY ok"),
        ("**NO_REPLY", ""),
        ("reasoning**NO_REPLY", "reasoning"),
    ],
)
def test_strip_trailing_token(text: str, expected: str) -> None:
    assert strip_silent_token(text) == expected


@pytest.mark.parametrize("text", ["NO", "NO_", "NO_RE", "NO_REPLY", "  NO_RE"])
def test_streaming_prefixes_are_held_back(text: str) -> None:
    assert is_silent_prefix(text)


@pytest.mark.parametrize("text", ["N", "No", "no", "Hello", "NO_X", "NO_REPLY more", "NO-", "", None])
def test_ordinary_partials_are_released(text: str | None) -> None:
    assert not is_silent_prefix(text)


def test_heartbeat_prefix_needs_the_underscore() -> None:
    assert not is_silent_prefix("HEARTBEAT", HEARTBEAT_TOKEN)
    assert is_silent_prefix("HEARTBEAT_", HEARTBEAT_TOKEN)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NO_REPLY", None),
        (" NO_REPLY\n", None),
        ("**NO_REPLY", None),
        ("Saved.\nNO_REPLY", "Saved."),
        ("Hi", "Hi"),
    ],
)
def test_what_the_user_receives(text: str, expected: str | None) -> None:
    assert deliverable_reply(text) == expected


def _released(pieces: list[str]) -> list[str]:
    releaser = PartialReleaser()
    shown = [releaser.feed(p) for p in pieces]
    shown.append(releaser.finish(deliverable_reply("".join(pieces))))
    return [s for s in shown if s]


@pytest.mark.parametrize(
    ("pieces", "shown"),
    [
        (["N", "O_", "REP", "LY"], []),  # never a piece of an exact NO_REPLY, not even "N"
        ([" NO_REPLY", "\n"], []),
        (["NO", "pe, sorry"], ["NOpe, sorry"]),
        (["Hel", "lo th", "ere"], ["Hel", "lo th", "ere"]),
        (["Done.", "\n\nNO", "_REP", "LY"], ["Done."]),  # a trailing token is dropped from the reply
        (["  Hi", " NO", " way"], ["Hi", " NO way"]),  # held while it might be the trailing token
        (["NO_REPLY", " but here"], ["NO_REPLY but here"]),
        (["No", " thanks"], ["No thanks"]),  # held while it may be "no_reply"
        (["n", "o_re", "ply"], []),
        (['{"act', 'ion":"NO_', 'REPLY"}'], []),
        (['{"a": ', "1}"], ['{"a": 1}']),
        (["NO_REP", "LYThe us", "er"], ["The us", "er"]),
    ],
)
def test_partial_releaser_holds_back_what_may_still_be_the_token(pieces: list[str], shown: list[str]) -> None:
    released = _released(pieces)
    assert released == shown
    assert "".join(released) == (deliverable_reply("".join(pieces)) or "")


def test_partial_releaser_holds_back_heartbeat_ok_in_heartbeat_runs() -> None:
    releaser = PartialReleaser(silent_tokens(heartbeat=True))
    shown = [releaser.feed(p) for p in ["HEART", "BEAT", "_OK"]]
    assert shown == ["", "", ""]
    assert releaser.finish(deliverable_reply("HEARTBEAT_OK", releaser.tokens)) == ""


# ---------------------------------------------------------------------------- through the runner


@pytest.mark.parametrize(
    ("answer", "delivered"),
    [
        ("no_reply", None),
        ('{"action":"NO_REPLY"}', None),
        ("NO_REPLYThe user is saying hello", "The user is saying hello"),
        ("HEARTBEAT_OK", "HEARTBEAT_OK"),
    ],
)
def test_what_a_user_receives_from_a_turn(
    tmp_path: Path, workspace: Path, answer: str, delivered: str | None
) -> None:
    runner, _ = make_runner(
        ScriptedModel([answer, answer]), tmp_path, workspace, small_config(window=100_000)
    )
    session = runner.open()
    assert session.run_turn_sync("hello").reply == delivered
    pieces: list[str] = []
    assert session.run_turn_sync("again", on_partial=pieces.append).reply == delivered
    assert "".join(pieces) == (delivered or "")


def test_a_heartbeat_run_takes_heartbeat_ok_as_silence(tmp_path: Path, workspace: Path) -> None:
    model = ScriptedModel(["HEARTBEAT_OK", "Inbox checked. HEARTBEAT_OK"])
    runner, _ = make_runner(model, tmp_path, workspace, small_config(window=100_000), heartbeat=True)
    session = runner.open()
    assert session.run_turn_sync("heartbeat").reply is None
    assert session.run_turn_sync("heartbeat").reply == "Inbox checked."


def test_a_configured_silent_token_is_silence_and_is_what_the_prompt_teaches(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(["SKIP", "NO_REPLY"])
    config = small_config(window=100_000, silentReplyToken="SKIP")
    runner, _ = make_runner(model, tmp_path, workspace, config)
    session = runner.open()
    assert session.run_turn_sync("hello").reply is None
    assert session.run_turn_sync("hello").reply == "NO_REPLY"
    system = model.calls[0].messages[0].content
    assert "respond with ONLY: SKIP" in system and "NO_REPLY" not in system
    with pytest.raises(ConfigError, match="silentReplyToken"):
        Config.from_dict({"agents": {"defaults": {"silentReplyToken": "two words"}}})
