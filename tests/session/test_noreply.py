"""NO_REPLY rules, with the reference's own cases (§15 items 20-22)."""

from __future__ import annotations

import pytest

from sessionmem.session.noreply import (
    HEARTBEAT_TOKEN,
    PartialReleaser,
    deliverable_reply,
    is_silent,
    is_silent_prefix,
    strip_silent_token,
)


@pytest.mark.parametrize("text", ["NO_REPLY", "  NO_REPLY  ", "\nNO_REPLY\n"])
def test_exact_token_is_silent(text: str) -> None:
    assert is_silent(text)


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
        (["No", " thanks"], ["No", " thanks"]),
    ],
)
def test_partial_releaser_holds_back_what_may_still_be_the_token(pieces: list[str], shown: list[str]) -> None:
    released = _released(pieces)
    assert released == shown
    assert "".join(released) == (deliverable_reply("".join(pieces)) or "")
