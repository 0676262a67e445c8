"""Who is who (DESIGN decision 21): a person's folder name is a function of their chat alone, injective,
and the visibility rule labels a path with that same function, so two people never share a folder and a
person can always read what they wrote. Pure string logic: every id a channel could send is tried.
"""

from __future__ import annotations

import random
import unicodedata

import pytest

from sessionmem.errors import UsageError
from sessionmem.privacy import (
    canonical_key,
    chat_folder,
    chat_folder_name,
    chat_label,
    classify_key,
    home_for,
    markdown_label,
    reader_visibility,
)
from sessionmem.session.stores import keys

JOSE_NFC = unicodedata.normalize("NFC", "josé")
JOSE_NFD = unicodedata.normalize("NFD", "josé")
KELVIN = "\u212a"  # KELVIN SIGN: str.lower() makes it a plain "k"

# Ids a channel may send, each a different person (matrix ids are kept exactly as written).
HOSTILE_PEERS = [
    "alice",
    "Alice",
    "ALICE",
    f"{KELVIN}ate",
    "kate",
    "Kate",
    JOSE_NFC,
    JOSE_NFD,
    "JOSÉ",
    "a/b",
    "a%2fb",
    "a%2Fb",
    "a~b",
    "a:b",
    "a\\b",
    "..",
    ".hidden",
    "%41lice",
    "~",
    "%",
    "%%",
    "🙂",
    "İstanbul",
    "istanbul",
    "\ud800",  # a lone surrogate
    "x" * 300,
    "x" * 299 + "y",
    "alice:thread:evil",
    "alice:topic:1",
    "alice:THREAD:evil",
]


def direct(peer: str, channel: str = "matrix") -> str:
    return f"agent:main:{channel}:direct:{peer}"


@pytest.mark.parametrize("peer", HOSTILE_PEERS)
def test_a_person_can_always_read_their_own_folder(peer: str) -> None:
    for key in (direct(peer), direct(peer, "telegram"), f"agent:main:discord:group:{peer}"):
        shape = classify_key(key)
        folder = chat_folder(key)
        for rel in (f"{folder}/MEMORY.md", home_for(key, "peer").daily_log("2026-11-10")):
            assert markdown_label(rel) == chat_label(key) == shape.label, (key, rel)
            assert reader_visibility(key, "peer").allows(markdown_label(rel))
        # A case-insensitive file system lets a path spell the folder in capitals: still theirs.
        assert markdown_label(f"{folder.upper()}/x.md") == chat_label(key)
        # Names are plain lower-case ASCII: every file system keeps them apart.
        name = chat_folder_name(shape.chat)
        assert name.isascii() and name == name.lower() and "/" not in name and not name.startswith(".")
        assert len(name) <= 120


def test_distinct_people_never_share_a_folder_nor_a_label() -> None:
    people = {canonical_key(direct(peer)) for peer in HOSTILE_PEERS}
    assert len(people) == len(HOSTILE_PEERS)  # the store keeps them apart too
    names = {chat_folder_name(classify_key(key).chat).casefold() for key in people}
    labels = {chat_label(key) for key in people}
    assert len(names) == len(labels) == len(people)


def test_random_ids_map_one_to_one_onto_folders() -> None:
    alphabet = "aAbB:~%/\\.-_@+=é\u0301" + KELVIN + "İı🙂 \t"
    rng = random.Random(21)
    chats = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(4000)}
    chats |= {"x" * 120 + "".join(rng.choice(alphabet) for _ in range(20)) for _ in range(500)}
    folders: dict[str, str] = {}
    for chat in chats:
        name = chat_folder_name(chat)
        assert name == name.casefold() and name.isascii()
        assert folders.setdefault(name, chat) == chat, (chat, folders[name])
        assert markdown_label(f"memory/peers/{name}/MEMORY.md") == "peer:" + name


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("  Agent:Main:MAIN \n", "agent:main:main"),
        ("AGENT:Ops:Telegram:DIRECT:42", "agent:ops:telegram:direct:42"),
        # Channels whose ids ignore case (or have one case): their ASCII letters are lowered.
        ("agent:main:telegram:direct:JohnDoe", "agent:main:telegram:direct:johndoe"),
        ("agent:main:slack:T01:direct:U024BE7LH", "agent:main:slack:t01:direct:u024be7lh"),
        ("agent:main:Slack:Channel:C01:thread:1712.5", "agent:main:slack:channel:c01:thread:1712.5"),
        # ... but only ASCII letters: the Kelvin sign is not a "k".
        (f"agent:main:slack:direct:{KELVIN}ATE", f"agent:main:slack:direct:{KELVIN}ate"),
        # Every other channel keeps an id as written, and a thread's id too.
        ("agent:main:Matrix:DIRECT:@Alice:example.org", "agent:main:matrix:direct:@Alice:example.org"),
        ("agent:main:direct:Alice:THREAD:X", "agent:main:direct:Alice:THREAD:X"),
        ("agent:main:webchat:direct:ALICE", "agent:main:webchat:direct:ALICE"),
        ("agent:main:Cron:Nightly", "agent:main:cron:Nightly"),
        ("Hook:ABC", "hook:ABC"),
    ],
)
def test_case_is_folded_only_where_the_channel_folds_it(given: str, canonical: str) -> None:
    assert keys.normalize_key(given) == canonical_key(given) == canonical
    assert canonical_key(canonical) == canonical  # idempotent


def test_a_thread_or_topic_is_a_chat_of_its_own() -> None:
    alice = "agent:main:matrix:direct:alice"
    for thread in (f"{alice}:thread:evil", f"{alice}:topic:1"):
        shape = classify_key(thread)
        assert shape.private and shape.chat_type == "direct"  # a thread of a direct chat is direct
        assert chat_folder(thread) != chat_folder(alice)
        assert not reader_visibility(thread, "peer").allows(chat_label(alice))
        assert not reader_visibility(alice, "peer").allows(chat_label(thread))


@pytest.mark.parametrize(
    ("key", "chat_type"),
    [
        ("agent:main:discord:direct:1:thread:group:5", "group"),
        ("agent:main:slack:direct:u1:topic:channel", "channel"),
        ("agent:main:telegram:direct:42:topic:Group", "group"),
        ("agent:main:main:thread:group:1", "group"),
        ("agent:main:whatsapp:direct:+1555:thread:123-456@g.us", "group"),
    ],
)
def test_a_group_or_channel_marker_anywhere_makes_a_key_shared(key: str, chat_type: str) -> None:
    shape = classify_key(key)
    assert shape.chat_type == chat_type and not shape.private
    assert reader_visibility(key, "agent").labels == frozenset({"shared", shape.label})


def test_a_key_is_bounded() -> None:
    with pytest.raises(UsageError, match=r"session key is too long \(5,000 characters; at most 1,024\)"):
        classify_key("agent:main:telegram:direct:" + "9" * 4973)


def test_a_runner_takes_a_bare_key_as_its_own_agents_and_refuses_another_agents() -> None:
    assert keys.agent_session_key("alpha") == "agent:alpha:main"
    assert keys.agent_session_key("alpha", "main") == "agent:alpha:main"
    assert keys.agent_session_key("alpha", "Telegram:Direct:42") == "agent:alpha:telegram:direct:42"
    assert keys.agent_session_key("alpha", "hook:ABC") == "agent:alpha:hook:ABC"
    assert keys.agent_session_key("Alpha", "agent:ALPHA:main") == "agent:alpha:main"
    with pytest.raises(UsageError) as refused:
        keys.agent_session_key("alpha", "agent:beta:telegram:direct:42")
    assert "belongs to agent 'beta'" in str(refused.value) and "agent 'alpha'" in str(refused.value)
    with pytest.raises(UsageError, match="session key is empty"):
        keys.agent_session_key("alpha", "  ")
