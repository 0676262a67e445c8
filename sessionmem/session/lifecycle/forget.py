"""Forgetting a person: everything sessionmem keeps of one chat, or of one peer on every channel, removed
(DESIGN 21; who counts as the person: :mod:`sessionmem.session.lifecycle.person`).

What goes:

1. the index's rows of their files, and of their chunks the cached vectors no one else's chunk shares
   (:meth:`MemoryIndex.erase <sessionmem.memory.index.MemoryIndex.erase>`), with no copy left readable in
   the database (free pages, keyword segments, the log: :mod:`sessionmem.memory.store.erase`);
2. their notes: each of their chats' folder ``memory/peers/<chat>/`` (the write tools' and the flush's
   files with ``memory.scope: peer``, the ``/new`` files always), named by
   :func:`sessionmem.privacy.chat_folder` and nothing else, and the earlier versions of its files under
   ``.memory-history/``;
3. their transcripts, live and archived, and their entries in the session store, whichever backend keeps
   them (:class:`~sessionmem.session.stores.backend.ErasableStore`).

What stays is listed, never edited: shared notes and other chats' transcripts that name them or hold
lines their sessions wrote (:mod:`sessionmem.memory.mentions`), and copies sessionmem kept aside when it
found a store or an index damaged (``*.corrupt-*``).

Safety:

- Every session key of theirs is held (the store's turn lock, as a turn holds it) while it is removed: a
  turn running at the same time ends first, with its flush and its ``/new`` file, and is removed with the
  rest; a turn asked for later finds no entry and starts a new session (``SessionState.resync``), so
  nothing removed comes back.
- The index's sync lock is held from its rows' removal until the files are gone, so no sync (here, in
  another process, on another host) indexes them again in between.
- Each step is whole or can be done again: the index's rows go in one transaction, each file by itself,
  sessions.json by an atomic rewrite, database rows in transactions. A process killed at any point
  leaves the index usable and the store whole; running ``forget`` again finds what is left and finishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from sessionmem.errors import UsageError
from sessionmem.memory.mentions import Mention, MentionFinder
from sessionmem.memory.session_memory import ForgettableMemory
from sessionmem.memory.store.erase import IndexErasure
from sessionmem.memory.sync.sources import NotMarkdownError, list_memory_files, read_markdown
from sessionmem.memory.tools.history import history_folder
from sessionmem.memory.tools.writing import WRITTEN_TEXT_ARGUMENT
from sessionmem.privacy import classify_key
from sessionmem.safefs import remove_tree_under
from sessionmem.session.lifecycle.person import Person, parse_person
from sessionmem.session.stores import keys
from sessionmem.session.stores.backend import (
    DEFAULT_TURN_LOCK_TIMEOUT_S,
    ErasableStore,
    KeptTranscript,
    SessionBackend,
)
from sessionmem.session.stores.transcript import message_from_dict

CORRUPT_MARK = ".corrupt-"  # copies kept aside by the stores and the index (``<file>.corrupt-<time>``)


@dataclass(frozen=True, slots=True)
class Places:
    """Where one agent keeps things: its session store, its workspace (and extra paths), its index."""

    store: SessionBackend
    workspace: Path
    memory_index: ForgettableMemory | None = None  # a MemoryIndex, or None (then no index is touched)
    extra_paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ForgetPlan:
    """Everything of one person, as found now."""

    person: Person
    session_keys: tuple[str, ...]
    transcripts: tuple[KeptTranscript, ...]
    folders: tuple[str, ...]  # memory/peers/<chat>, workspace-relative
    notes: tuple[str, ...]  # the files in those folders
    history: tuple[str, ...]  # their earlier versions under .memory-history/
    audiences: tuple[str, ...]  # the index's labels of their chats (privacy: peer:<folder>)
    index_paths: tuple[str, ...]  # their files as the index names them


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What ``forget`` removed (with ``dry_run``: would remove), and what it leaves for the owner."""

    who: str
    dry_run: bool
    session_keys: tuple[str, ...] = ()
    transcripts: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    history: tuple[str, ...] = ()
    index: IndexErasure | None = None  # None: no index was given
    mentions: tuple[Mention, ...] = ()
    kept_aside: tuple[str, ...] = ()
    issues: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        """Whether anything of them was kept."""
        index = self.index
        return bool(
            self.session_keys
            or self.transcripts
            or self.notes
            or self.history
            or (index is not None and (index.paths or index.chunks or index.cache_entries))
        )

    def to_json(self) -> dict[str, Any]:
        index = self.index
        return {
            "who": self.who,
            "dryRun": self.dry_run,
            "found": self.found,
            "sessionKeys": list(self.session_keys),
            "transcripts": list(self.transcripts),
            "folders": list(self.folders),
            "notes": list(self.notes),
            "history": list(self.history),
            "index": None
            if index is None
            else {
                "files": list(index.paths),
                "chunks": index.chunks,
                "cacheEntries": index.cache_entries,
                "scrubbed": list(index.done),
            },
            "mentions": [m.to_json() for m in self.mentions],
            "keptAside": list(self.kept_aside),
            "issues": list(self.issues),
        }


# ---------------------------------------------------------------------------- finding


def erasable(store: SessionBackend) -> ErasableStore:
    """``store`` as an :class:`ErasableStore`, or a :class:`UsageError` naming what it lacks."""
    if not isinstance(store, ErasableStore):
        raise UsageError(
            f"{type(store).__name__} cannot forget anyone: a session store needs kept_transcripts(), "
            "transcript_lines() and erase() (sessionmem.session.stores.backend.ErasableStore)"
        )
    return store


def plan_forget(person: Person, places: Places) -> ForgetPlan:
    """Find everything of ``person`` (reads only)."""
    store = erasable(places.store)
    entries = {key: entry for key, entry in places.store.all().items() if person.owns(key)}
    their_ids = {entry.session_id for entry in entries.values()}
    transcripts = tuple(
        kept
        for kept in store.kept_transcripts()
        if (kept.session_key is not None and person.owns(kept.session_key))
        or (kept.session_id is not None and kept.session_id in their_ids)
    )
    named = {keys.normalize_key(kept.session_key) for kept in transcripts if kept.session_key}
    session_keys = sorted({*entries, *named})
    session_keys = [key for key in session_keys if person.owns(key)]
    shapes = [classify_key(key) for key in ([person.key] if person.key else []) + session_keys]
    folders = tuple(dict.fromkeys(shape.folder for shape in shapes))
    notes = tuple(
        path for folder in folders for path in remove_tree_under(places.workspace, folder, dry_run=True)
    )
    history = tuple(
        path
        for folder in folders
        for path in remove_tree_under(places.workspace, history_folder(folder), dry_run=True)
    )
    files = [f"sessions/{kept.name}" for kept in transcripts]  # files, or rows the index reads as such
    return ForgetPlan(
        person,
        tuple(session_keys),
        transcripts,
        folders,
        notes,
        history,
        tuple(dict.fromkeys(shape.label for shape in shapes)),
        tuple(dict.fromkeys([*notes, *files])),
    )


def find_mentions(plan: ForgetPlan, places: Places, names: Sequence[str]) -> tuple[Mention, ...]:
    """The shared notes and other chats' transcripts that still name them or hold lines they wrote."""
    store = erasable(places.store)
    finder = MentionFinder([*plan.person.ids, *names], written_lines(store, plan.transcripts))
    if not finder:
        return ()
    found: list[Mention] = []
    removed = tuple(folder + "/" for folder in plan.folders)
    for item in list_memory_files(places.workspace, places.extra_paths):
        if item.rel_path.startswith(removed):
            continue
        try:
            text = read_markdown(item.abs_path, item.rel_path).text
        except (OSError, NotMarkdownError):
            continue
        mention = finder.scan(item.rel_path, text.splitlines())
        if mention is not None:
            found.append(mention)
    theirs = {(kept.name, kept.session_id) for kept in plan.transcripts}
    for kept in store.kept_transcripts():
        if (kept.name, kept.session_id) in theirs:
            continue
        lines = (said_in(line) for line in store.transcript_lines(kept))
        mention = finder.scan(transcript_label(kept), lines)
        if mention is not None:
            found.append(mention)
    return tuple(found)


def said_in(line: bytes) -> str:
    """What a transcript line says: a message's text and its tool calls' arguments, a summary; not the
    ids, times and keys around them (a peer id ``42`` would be found in every ``…:42:…`` time)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(obj, dict):
        return ""
    if obj.get("type") == "compaction":
        return str(obj.get("summary") or "")
    message = message_from_dict(obj.get("message")) if obj.get("type") == "message" else None
    if message is None:
        return ""
    said = [message.content]
    said += [str(v) for call in message.tool_calls for v in call.arguments.values() if isinstance(v, str)]
    return "\n".join(said)


def written_lines(store: ErasableStore, transcripts: Sequence[KeptTranscript]) -> set[str]:
    """The lines their sessions wrote with the memory write tools (from the calls in their transcripts)."""
    out: set[str] = set()
    for kept in transcripts:
        for line in store.transcript_lines(kept):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(obj, dict) or obj.get("type") != "message":
                continue
            message = message_from_dict(obj.get("message"))
            for call in message.tool_calls if message is not None else ():
                text = call.arguments.get(WRITTEN_TEXT_ARGUMENT.get(call.name, ""))
                if isinstance(text, str):
                    out.update(text.splitlines())
    return out


def transcript_label(kept: KeptTranscript) -> str:
    """How a transcript is named in a report: ``sessions/<file>`` (as the index names it), or its session."""
    return f"sessions/{kept.name}" if kept.path is not None else f"session {kept.session_id or kept.name}"


def kept_aside(places: Places) -> tuple[str, ...]:
    """Copies of damaged stores and indexes kept aside (``*.corrupt-*``): they may hold the person."""
    folders: dict[Path, str] = {}
    sessions_dir = places.store.sessions_dir
    if sessions_dir is not None:
        folders[Path(sessions_dir)] = ""
    index_path = places.memory_index.path if places.memory_index is not None else None
    if isinstance(index_path, Path):
        folders.setdefault(index_path.parent, index_path.name)
    found: list[str] = []
    for folder, prefix in folders.items():
        with contextlib.suppress(OSError), os.scandir(folder) as items:
            found.extend(
                item.path for item in items if CORRUPT_MARK in item.name and item.name.startswith(prefix)
            )
    return tuple(sorted(found))


# ---------------------------------------------------------------------------- removing


def _index_lock(places: Places) -> Any:
    index = places.memory_index
    return index.sync_lock() if index is not None else contextlib.nullcontext()


def _erase_locked(person: Person, places: Places, held: frozenset[str]) -> ForgetReport | set[str]:
    """Under the index's sync lock: find everything again and remove it, in order (the index, the notes,
    the store). Returns the session keys to hold first when one of theirs is not held yet."""
    with _index_lock(places):
        plan = plan_forget(person, places)
        if not set(plan.session_keys) <= held:
            return set(plan.session_keys)
        index = places.memory_index
        erased = index.erase(plan.audiences, plan.index_paths) if index is not None else None
        for folder in plan.folders:
            remove_tree_under(places.workspace, folder)
            remove_tree_under(places.workspace, history_folder(folder))
        issues = erasable(places.store).erase(plan.session_keys, plan.transcripts)
    return _report(plan, erased, dry_run=False, issues=[*(erased.issues if erased else ()), *issues])


def _report(
    plan: ForgetPlan, index: IndexErasure | None, *, dry_run: bool, issues: Sequence[str] = ()
) -> ForgetReport:
    return ForgetReport(
        who=plan.person.describe(),
        dry_run=dry_run,
        session_keys=plan.session_keys,
        transcripts=tuple(transcript_label(kept) for kept in plan.transcripts),
        folders=tuple(folder for folder in plan.folders if _held_anything(folder, plan)),
        notes=plan.notes,
        history=plan.history,
        index=index,
        issues=tuple(issues),
    )


TakeLocks = Callable[[set[str]], Awaitable[frozenset[str]]]


def _held_anything(folder: str, plan: ForgetPlan) -> bool:
    """Whether a folder of theirs held notes or earlier versions (a chat that wrote none has none)."""
    inside = (folder + "/", history_folder(folder) + "/")
    return any(path.startswith(inside) for path in (*plan.notes, *plan.history))


@contextlib.asynccontextmanager
async def _held(store: SessionBackend, timeout_s: float) -> AsyncIterator[TakeLocks]:
    """Turn locks taken as their keys are found (``await take(keys)``: the keys held so far), all
    released on exit. Sorted, so two forgets of overlapping people take them in one order."""
    async with contextlib.AsyncExitStack() as stack:
        taken: set[str] = set()

        async def take(keys: set[str]) -> frozenset[str]:
            for key in sorted(keys - taken):
                await stack.enter_async_context(store.turn_lock(key, timeout_s=timeout_s))
                taken.add(key)
            return frozenset(taken)

        yield take


async def forget(
    who: str,
    *,
    store: SessionBackend,
    workspace: Path | str,
    agent_id: str,
    memory_index: ForgettableMemory | None = None,
    extra_paths: Sequence[str] = (),
    names: Sequence[str] = (),
    dry_run: bool = False,
    lock_timeout_s: float = DEFAULT_TURN_LOCK_TIMEOUT_S,
) -> ForgetReport:
    """Remove everything of ``who`` (a session key, or a peer id: :mod:`sessionmem.session.lifecycle.person`)
    that ``store``, ``workspace`` and ``memory_index`` keep (see the module docstring); with ``dry_run``, only
    say what would go. ``names`` (a person's names, as the owner knows them) and their id are looked for in
    what stays, which the report lists. Raises :class:`~sessionmem.errors.UsageError` for a malformed ``who``,
    :class:`~sessionmem.errors.TurnLockTimeout` when one of their sessions stays busy longer than
    ``lock_timeout_s``. Running it again after a crash finishes the job."""
    person = parse_person(who, agent_id)
    MentionFinder(names)  # bad names are refused before anything is done
    places = Places(
        store, Path(os.path.abspath(Path(workspace).expanduser())), memory_index, tuple(extra_paths)
    )
    erasable(store)
    async with _held(store, lock_timeout_s) as take:
        held: frozenset[str] = frozenset()
        plan = await asyncio.to_thread(plan_forget, person, places)
        if not dry_run:  # hold their sessions: a turn running now ends first, none starts
            held = await take(set(plan.session_keys))
            plan = await asyncio.to_thread(plan_forget, person, places)
        mentions = await asyncio.to_thread(find_mentions, plan, places, names)
        aside = await asyncio.to_thread(kept_aside, places)
        if dry_run:
            index = memory_index
            erased = (
                await asyncio.to_thread(index.erase, plan.audiences, plan.index_paths, dry_run=True)
                if index is not None
                else None
            )
            report = _report(plan, erased, dry_run=True)
        else:
            while True:
                outcome = await asyncio.to_thread(_erase_locked, person, places, held)
                if isinstance(outcome, ForgetReport):
                    report = outcome
                    break
                held = await take(outcome)  # a session of theirs started meanwhile: hold it too
    return dataclasses.replace(report, mentions=mentions, kept_aside=aside)


def forget_sync(who: str, **options: Any) -> ForgetReport:
    """Blocking :func:`forget` (not from inside a running event loop)."""
    return asyncio.run(forget(who, **options))
