"""Session keys, ids and the paths they map to."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessionmem.errors import UsageError
from sessionmem.memory.sync.transcript_names import is_archive_name
from sessionmem.session.stores import keys
from sessionmem.session.stores.sessions_json import SessionStore


def test_normalise_trims_and_lowercases() -> None:
    assert keys.normalize_key("  Agent:Main:MAIN \n") == "agent:main:main"


def test_default_key() -> None:
    assert keys.default_key("Ops") == "agent:ops:main"
    assert keys.default_key() == "agent:main:main"


@pytest.mark.parametrize(
    ("key", "agent", "chat", "mode"),
    [
        ("agent:main:main", "main", "direct", "full"),
        ("agent:ops:telegram:direct:12345", "ops", "direct", "full"),
        ("agent:main:discord:acct1:direct:u9", "main", "direct", "full"),
        ("agent:main:direct:alice", "main", "direct", "full"),
        ("agent:main:whatsapp:dm:+1555", "main", "direct", "full"),
        ("agent:main:discord:group:42", "main", "group", "full"),
        ("agent:main:slack:channel:c01", "main", "channel", "full"),
        ("agent:main:slack:channel:c01:thread:99", "main", "channel", "full"),
        ("agent:main:subagent:7f3a", "main", None, "minimal"),
        ("agent:main:cron:nightly", "main", None, "minimal"),
        ("hook:1234", None, None, "full"),
    ],
)
def test_parse_key(key: str, agent: str | None, chat: str | None, mode: str) -> None:
    parsed = keys.parse_key(key)
    assert parsed.agent_id == agent
    assert parsed.chat_type == chat
    assert parsed.prompt_mode == mode
    assert keys.chat_type(key) == chat
    assert keys.is_private(key) == (chat == "direct")


@pytest.mark.parametrize(
    ("key", "chat"),
    [
        ("12345-678@g.us", "group"),  # a WhatsApp group id
        ("agent:main:whatsapp:12345-678@g.us", "group"),
        ("agent:main:group:123", "group"),  # no channel part: still a group
        ("agent:main:group:direct:1", "group"),  # ambiguous: read the safe way
        ("agent:main:telegram:acct:group:9", "group"),
        ("discord:acc-1:guild-123:channel-456", None),  # a shape we do not know
        ("agent:main:recovered:s2", None),
        ("agent:main:work", None),
        ("agent:main:group", "group"),
        ("agent:main:a:b:c:direct:1", None),  # the direct marker too deep: not a known shape
        ("global", None),
    ],
)
def test_only_positively_direct_keys_are_private(key: str, chat: str | None) -> None:
    assert keys.chat_type(key) == chat
    assert not keys.is_private(key)


@pytest.mark.parametrize("bad", ["agent::broken", "agent:main", "agent:main:", "agent: :main"])
def test_malformed_agent_keys_get_a_clear_error(bad: str) -> None:
    with pytest.raises(UsageError, match=r"malformed session key .*expected agent:<agentId>:<rest>"):
        keys.parse_key(bad)
    with pytest.raises(UsageError, match="malformed session key"):
        keys.is_private(bad)


def test_main_is_the_main_session() -> None:
    assert keys.parse_key("agent:main:main").is_main
    # A thread of the main session is the main session, as the privacy rule counts it.
    assert keys.parse_key("agent:main:main:thread:7").is_main
    assert keys.parse_key("agent:main:main:thread:7").private
    assert not keys.parse_key("agent:main:telegram:direct:42").is_main
    assert keys.parse_key("hook:abc").is_hook


def test_empty_key_is_rejected() -> None:
    with pytest.raises(UsageError):
        keys.parse_key("   ")


def test_paths(tmp_path: Path) -> None:
    assert keys.sessions_dir(tmp_path, "main") == tmp_path / "agents" / "main" / "sessions"
    store = SessionStore.for_agent(tmp_path, "main")
    assert store.transcript_path("S-1.a_b") == tmp_path / "agents/main/sessions/S-1.a_b.jsonl"
    assert keys.store_path(tmp_path, "main") == tmp_path / "agents/main/sessions/sessions.json"


@pytest.mark.parametrize("bad", ["", "../etc", "a/b", "-lead", ".hidden", "x" * 129, "sp ace"])
def test_unsafe_session_ids_are_rejected(bad: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="invalid session id"):
        SessionStore.for_agent(tmp_path, "main").transcript_path(bad)


def test_unsafe_agent_ids_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="invalid agent id"):
        keys.sessions_dir(tmp_path, "../x")


def test_archive_names() -> None:
    assert is_archive_name("abc.jsonl.reset.2026-11-01T10-00-00.000Z")
    assert is_archive_name("abc.jsonl.deleted.2026-11-01T10-00-00.000Z")
    assert not is_archive_name("abc.jsonl")
