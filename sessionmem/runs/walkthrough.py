"""A scripted demonstration: a long conversation crosses the flush and compaction thresholds, ``/new``
archives it, and a new session recalls an early fact through ``memory_search``.

Everything real except the model: the session runner, its gate, transcripts and sessions.json, the
session-memory hook, the Markdown files and the SQLite memory index (FTS-only unless a local embedding
model is configured). The model is a :class:`~sessionmem.model.scripted.ScriptedModel` whose responder
behaves like a careful assistant (:class:`DemoAgent`): it answers the user from a script, on the silent
flush appends the durable facts stated so far to the daily log and replies ``NO_REPLY``, on compaction
returns a structured summary, names the archived session ``japan-trip``, and in the new session answers
a question about an early fact by calling ``memory_search`` and quoting the hit.

:func:`run_demo` reports what happened as plain dict records (``{"event": "turn", ...}``), in display
order: a turn's preflight flush/compaction, its tool calls, the turn, then the memory work after its
reply (``memory_work_start``, the flush or the compaction, ``memory_work_end``).
The CLI prints them as JSON lines or as a timeline (``sessionmem.cli.demo``).

Every token figure is the session's projection (:meth:`~sessionmem.session.runner.Session.projection`),
the measure the flush and compaction thresholds are checked against: a turn's ``tokens`` (at the end of
the turn, before a compaction it triggers), a flush's ``tokens`` (what the flush decision saw), and a
compaction's ``tokens_before`` / ``tokens_after``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sessionmem.config import Config, MemorySearchConfig
from sessionmem.messages import Message, ToolCall
from sessionmem.model.base import ModelRequest
from sessionmem.model.scripted import NO_REPLY, ScriptedModel, flush_aware, flush_write_target
from sessionmem.runs.common import Record, RecordSink, small_window_config
from sessionmem.safefs import make_private_dirs
from sessionmem.session.turn.events import Event, event_record

CONTEXT_WINDOW = 3000
RESERVE_TOKENS = 900  # compaction at 2,100 projected tokens
SOFT_THRESHOLD = 300  # the silent flush at 1,800
KEEP_RECENT_TOKENS = 600
SLUG = "japan-trip"
RECALL_QUESTION = (
    "Booking dinner in Kyoto tonight: what was Tomás allergic to again? I want to tell the restaurant."
)
RECALL_QUERY = "Tomás allergy"
RECALL_FACT = "peanut"  # the hit and the answer must contain it


@dataclass(frozen=True, slots=True)
class Line:
    """One scripted exchange: the user's message, the assistant's reply, the durable facts it states."""

    user: str
    reply: str
    facts: tuple[str, ...] = ()  # "- ..." lines a careful assistant would keep in memory


SCRIPT: tuple[Line, ...] = (
    Line(
        "Hi! I'm Maya. My partner Tomás and I want to plan a trip to Japan this autumn. Before we start: "
        "I'm vegetarian (no fish either, but eggs and dairy are fine), please use metric units and Celsius, "
        "and give times in Europe/Berlin unless it's a local time in Japan.",
        "Nice to meet you, Maya! Noted for the whole trip: vegetarian with no fish (bonito dashi, the usual "
        "soup stock, counts as fish, so I'll look for kombu-based kitchens), eggs and dairy fine; metric and "
        "Celsius; Berlin time unless it's a local time in Japan. What do you have so far: dates, budget, "
        "the cities you're curious about?",
        (
            "- Maya is vegetarian, no fish (bonito dashi counts); eggs and dairy are fine",
            "- Units: metric and Celsius; times in Europe/Berlin unless local Japan time",
        ),
    ),
    Line(
        "One more important thing: Tomás has a severe peanut allergy and always carries an EpiPen. And we "
        "prefer trains over domestic flights whenever the train is under about five hours.",
        "Understood, that matters most: Tomás has a severe peanut allergy (EpiPen), so I'll flag peanut oil, "
        "goma-style dressings that are sometimes cut with peanut, and satay sauces at every restaurant, and "
        "prepare an allergy card in Japanese. Trains over flights under ~5 h, which in Japan means the "
        "Shinkansen almost everywhere on Honshu.",
        (
            "- Tomás has a severe peanut allergy and carries an EpiPen",
            "- Prefer trains over domestic flights when the train takes under ~5 hours",
        ),
    ),
    Line(
        "Dates: we fly out of Berlin on 9 October and back on 23 October. Budget about 6,000 EUR for the two "
        "of us, flights included.",
        "Two weeks, 9–23 October, 6,000 EUR for two including flights. That works if flights stay under "
        "1,800 EUR, hotels average 120–150 EUR a night, and we keep about 60 EUR a day each for food and "
        "local transport. I'd book flights first: October is high season for autumn colours.",
        ("- Decision: trip dates 9–23 October; budget about 6,000 EUR for two, flights included",),
    ),
    Line(
        "Which cities would you suggest for a first trip?",
        "A classic first loop: Tokyo (4 nights), Kanazawa (2), Kyoto (4, with Nara as a day trip) and Osaka "
        "(3), flying home from Kansai. Every leg is by train, none longer than three hours, and you avoid "
        "backtracking to Tokyo at the end.",
    ),
    Line(
        "Kanazawa sounds lovely, what is there besides the garden?",
        "Kenroku-en is the highlight, but there is also the Higashi Chaya geisha district with its tea "
        "houses, the 21st Century Museum, Omicho market for a breakfast of grilled vegetables and "
        "tamagoyaki, and gold-leaf workshops where you can decorate a chopstick box. Two nights is right.",
    ),
    Line(
        "Let's go with that loop. Tokyo first, then Kanazawa, Kyoto, Osaka.",
        "Done: Tokyo → Kanazawa (Hokuriku Shinkansen, 2.5 h) → Kyoto (Thunderbird and Shinkansen, 2 h) → "
        "Osaka (15 minutes), flying home from Kansai. I'll book the hotels in that order once the flights "
        "are fixed.",
        ("- Decision: route Tokyo (4) → Kanazawa (2) → Kyoto (4, Nara day trip) → Osaka (3), home from KIX",),
    ),
    Line(
        "What will the weather be like in mid October?",
        "Pleasant: Tokyo around 19 °C by day and 13 °C at night, Kanazawa a bit cooler and wetter, Kyoto and "
        "Osaka a little warmer. Typhoon season is mostly over by then, but pack a light rain jacket and "
        "layers for the evenings.",
    ),
    Line(
        "Is a Japan Rail Pass worth it for this route?",
        "For this loop, no: since the 2023 price rise a 14-day pass costs more than your single tickets "
        "(roughly 330 EUR each against about 250 EUR). Buy single Shinkansen tickets as you go; an IC card "
        "such as Suica covers the city trains.",
    ),
    Line(
        "Which flights look best from Berlin?",
        "Lufthansa via Munich into Haneda is the most convenient: LH 714 leaves Munich at 21:55 Berlin time "
        "and lands at 17:30 local time the next day. Back, Kansai to Frankfurt with a Berlin connection. "
        "Both are around 850 EUR per person in economy right now.",
    ),
    Line(
        "Book that Lufthansa option, economy, two seats next to each other.",
        "Booked: LH 714 via Munich on 9 October, and KIX → FRA → BER on 23 October, seats 32A and 32B on "
        "both long legs. I added a peanut-free meal request for Tomás and vegetarian meals for you.",
        ("- Decision: flights booked, LH 714 BER→MUC→HND on 9 Oct; KIX→FRA→BER on 23 Oct; seats 32A/32B",),
    ),
    Line(
        "Where should we stay in Tokyo? Something quiet, not Shinjuku.",
        "Try Yanaka or Kuramae: quiet old neighbourhoods with temples, small galleries and good coffee, and "
        "easy train access to the centre. Hotel Graphy Nezu and Nui Hostel's private rooms are both in "
        "budget, around 130 EUR a night.",
    ),
    Line(
        "Book the Graphy Nezu for the four Tokyo nights.",
        "Booked Hotel Graphy Nezu, 10–14 October, a double room with breakfast, 520 EUR in total. It is a "
        "five-minute walk from Nezu station on the Chiyoda line.",
        ("- Decision: Tokyo hotel Graphy Nezu, 10–14 Oct",),
    ),
    Line(
        "Any vegetarian restaurants in Tokyo you'd recommend?",
        "Ain Soph Journey in Shinjuku, T's TanTan at Tokyo Station for vegan ramen, and shojin ryori (temple "
        "cooking) at Bon in Ryusen. I'd still show the allergy card for Tomás when booking each of them.",
    ),
    Line(
        "For Kyoto we'd love a ryokan, one night at least.",
        "Hanaya Ryokan near the Kamo river does a vegetarian kaiseki on request and has a private bath you "
        "can book by the hour; the other three nights a simple hotel near Shijo would keep the budget in "
        "line.",
    ),
    Line(
        "Let's do one night at Hanaya and three at a hotel near Shijo.",
        "Booked Hanaya Ryokan on 16 October with the vegetarian kaiseki (no peanut, noted twice), and Hotel "
        "Resol Kyoto Shijo Muromachi for 17–20 October.",
        ("- Decision: Kyoto: Hanaya Ryokan 16 Oct (vegetarian kaiseki), Hotel Resol Shijo 17–20 Oct",),
    ),
    Line(
        "What day trip to Nara would you plan?",
        "Take the Kintetsu line from Kyoto (about 45 minutes), walk Nara Park and Todai-ji in the morning "
        "before the tour groups, have lunch at a tofu restaurant, see Isuien garden in the afternoon, and be "
        "back in Kyoto before dinner.",
    ),
    Line(
        "How much have we committed so far?",
        "About 3,800 EUR: flights 1,700, Tokyo 520, Kyoto 1,050, plus the Kanazawa deposit. That leaves "
        "roughly 2,200 EUR for Osaka, trains and food, which is comfortable.",
    ),
    Line(
        "Kanazawa hotel please, something near the station.",
        "Booked Hotel Intergate Kanazawa for 14–16 October, a ten-minute walk from the station, with a "
        "lounge that serves free coffee in the evenings.",
        ("- Decision: Kanazawa hotel Intergate, 14–16 Oct",),
    ),
    Line(
        "And Osaka for the last three nights?",
        "Cross Hotel Osaka in Namba, 20–23 October; the Nankai train to Kansai airport leaves from Namba, so "
        "the last morning is easy.",
        ("- Decision: Osaka hotel Cross Hotel Namba, 20–23 Oct",),
    ),
    Line(
        "Any tips for trains with luggage?",
        "Use the luggage forwarding service (takkyubin) between hotels for about 2,000 yen a bag; on the "
        "Tokaido Shinkansen, bags over 160 cm need a reserved oversized-luggage seat.",
    ),
    Line(
        "Great, I think that's the whole plan for now. Thanks!",
        "You're welcome, Maya! Everything is booked except the Shinkansen tickets, which go on sale a month "
        "ahead. Enjoy the planning.",
    ),
)


# ---------------------------------------------------------------------------- the scripted assistant


class DemoAgent:
    """The scripted model's responder: it acts on each request as a careful assistant would."""

    def __init__(self, script: Iterable[Line] = SCRIPT) -> None:
        self.script = tuple(script)
        self._by_user = {line.user: line for line in self.script}
        self.saved: list[str] = []  # fact lines already appended to memory by a flush
        self.turn_calls = 0  # "turn" requests seen; the driver reads it to tell before from after
        self._route = flush_aware(self.turn, flush=self.flush, summary=self.summary, slug=SLUG)

    def __call__(self, request: ModelRequest) -> Any:
        """:func:`~sessionmem.model.scripted.flush_aware` routes by purpose: the flush, the summary and the
        ``/new`` file's name here, the user's turns to :meth:`turn`."""
        return self._route(request)

    def turn(self, request: ModelRequest) -> Any:
        self.turn_calls += 1
        return self.answer(request)

    def facts_in(self, messages: Iterable[Message]) -> list[str]:
        """The durable facts stated in ``messages`` (scripted user turns, or a previous summary)."""
        found: list[str] = []
        for message in messages:
            line = self._by_user.get(message.content) if message.role == "user" else None
            candidates = line.facts if line is not None else ()
            if not candidates and message.role == "user":  # a previous compaction summary
                candidates = tuple(f for line in self.script for f in line.facts if f in message.content)
            found.extend(f for f in candidates if f not in found)
        return found

    def flush(self, request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool":  # the write went through: stay silent
            return NO_REPLY
        new = [f for f in self.facts_in(request.messages) if f not in self.saved]
        target = flush_write_target(request)
        if not new or target is None:
            return NO_REPLY
        heading = [] if self.saved else ["## Japan trip with Tomás"]
        self.saved.extend(new)
        content = "\n".join([*heading, *new]) + "\n"
        return ToolCall(f"flush-{len(self.saved)}", "write", {"path": target, "content": content})

    def summary(self, request: ModelRequest) -> str:
        facts = self.facts_in(request.messages)
        prefs = [f for f in facts if not f.startswith("- Decision:")]
        decisions = [f.replace("Decision: ", "") for f in facts if f.startswith("- Decision:")]
        last = next((m.content for m in reversed(request.messages) if m.role == "user"), "")
        return "\n".join(
            [
                "## Goal",
                "Plan Maya and Tomás's two-week trip to Japan in October.",
                "## Preferences",
                *(prefs or ["- (none stated)"]),
                "## Decisions",
                *(decisions or ["- (none yet)"]),
                "## Open TODOs",
                "- Shinkansen tickets (sale opens a month ahead)",
                "## Last topic",
                last[:160],
            ]
        )

    def answer(self, request: ModelRequest) -> Any:
        last = request.messages[-1]
        if last.role == "tool" and last.tool_name == "memory_search":
            return recall_answer(last.content)
        if last.role == "user" and last.content == RECALL_QUESTION:
            return ToolCall("recall-1", "memory_search", {"query": RECALL_QUERY})
        line = self._by_user.get(last.content) if last.role == "user" else None
        return line.reply if line is not None else "Noted."


def recall_answer(tool_result: str) -> str:
    """The final answer built from a memory_search result: quote the matching line and cite it."""
    try:
        results = json.loads(tool_result).get("results", [])
    except (ValueError, AttributeError):
        results = []
    for hit in results:
        for text in str(hit.get("snippet", "")).splitlines():
            if RECALL_FACT in text.lower():
                where = f"{hit['path']}#L{hit['startLine']}-L{hit['endLine']}"
                fact = text.strip().lstrip("- ").rstrip(".")
                return (
                    f"From my notes ({where}): {fact}. Please tell the restaurant: no peanuts or peanut oil."
                )
    return "I checked my notes but found nothing about an allergy."


# ---------------------------------------------------------------------------- configuration


def demo_config(memory_search: MemorySearchConfig | None = None, timezone: str | None = None) -> Config:
    """Defaults with a 3,000-token window: the flush at 1,800 projected tokens, compaction at 2,100
    (about turn 13 and turn 14 of the script, and /new after turn 21 flushes the second cycle).

    Daily logs are not preloaded into the system prompt, so the new session can only know the early
    fact by searching memory.
    """
    return small_window_config(
        CONTEXT_WINDOW,
        reserve_tokens=RESERVE_TOKENS,
        keep_recent_tokens=KEEP_RECENT_TOKENS,
        soft_threshold_tokens=SOFT_THRESHOLD,
        memory_search=memory_search,
        timezone=timezone,
    )


# ---------------------------------------------------------------------------- the run


@dataclass
class DemoReport:
    workspace: Path
    state_dir: Path
    recalled: bool = False
    answer: str = ""
    hit: Record | None = None
    flushes: int = 0
    compactions: int = 0
    memory_files: list[str] = field(default_factory=list)


def run_demo(
    workspace: Path,
    state_dir: Path,
    *,
    emit: RecordSink,
    memory_search: MemorySearchConfig | None = None,
    selection: Any = None,
    timezone: str | None = None,
) -> DemoReport:
    """Run the whole scenario in ``workspace`` (memory files) and ``state_dir`` (sessions, index)."""
    return asyncio.run(_run(workspace, state_dir, emit, memory_search, selection, timezone))


async def _run(
    workspace: Path,
    state_dir: Path,
    emit: RecordSink,
    memory_search: MemorySearchConfig | None,
    selection: Any,
    timezone: str | None,
) -> DemoReport:
    from sessionmem.memory.index import MemoryIndex
    from sessionmem.session.runner import SessionRunner
    from sessionmem.session.turn.flush import compaction_threshold, flush_threshold

    config = demo_config(memory_search, timezone)
    agent_cfg = config.for_agent("main")
    make_private_dirs(workspace / "memory")
    agent = DemoAgent()
    model = ScriptedModel(responder=agent, name="scripted-demo")
    report = DemoReport(workspace, state_dir)
    index = MemoryIndex.open(  # the run writes every note itself: no watcher thread needed
        "main", workspace, agent_cfg.memory_search, state_dir=state_dir, selection=selection, watch=False
    )
    try:
        driver = _Driver(agent, emit, report)
        runner = SessionRunner(
            model,
            config=config,
            workspace=workspace,
            state_dir=state_dir,
            on_event=driver.on_event,
            memory_index=index,
            command_source="demo",
        )
        session = runner.open()
        driver.session = session
        driver.thresholds = (
            flush_threshold(session.context_window, agent_cfg.compaction),
            compaction_threshold(session.context_window, agent_cfg.compaction),
        )
        emit(
            {
                "event": "start",
                "workspace": str(workspace),
                "stateDir": str(state_dir),
                "model": model.name,
                "memoryMode": index.status().mode,
                "contextWindow": session.context_window,
                "flushThreshold": driver.thresholds[0],
                "compactionThreshold": driver.thresholds[1],
                "sessionId": session.entry.session_id,
            }
        )
        for line in agent.script:
            await driver.turn(line.user)
        await driver.command("/new")
        index.sync(reason="session-start")  # what on_session_start would do, awaited for a steady demo
        await driver.turn(RECALL_QUESTION)
    finally:
        index.close()
    report.memory_files = sorted(
        p.relative_to(workspace).as_posix() for p in (workspace / "memory").rglob("*.md")
    )
    emit(
        {
            "event": "done",
            "recalled": report.recalled,
            "answer": report.answer,
            "hit": report.hit,
            "flushes": report.flushes,
            "compactions": report.compactions,
            "memoryFiles": report.memory_files,
        }
    )
    return report


class _Driver:
    """Runs turns and turns the runner's events into records, in display order (see module docstring)."""

    def __init__(self, agent: DemoAgent, emit: RecordSink, report: DemoReport) -> None:
        self.agent = agent
        self.emit = emit
        self.report = report
        self.session: Any = None
        self.thresholds = (0, 0)
        self.session_no = 1
        self.turn_no = 0
        self._calls_at_start = 0
        self._before: list[Record] = []
        self._during: list[Record] = []
        self._after: list[Record] = []
        self._last_write: str = ""

    # -- events -> records

    def on_event(self, event: Event) -> None:
        record = self._record(event)
        if record is None:
            return
        if self.agent.turn_calls == self._calls_at_start:
            self._before.append(record)
        elif record["event"] == "memory_search":
            self._during.append(record)
        else:
            self._after.append(record)

    def _record(self, event: Event) -> Record | None:
        data = event_record(event, without=("timestamp",))
        kind = data.pop("event")
        if kind == "tool_call":
            if data["name"] in ("write", "memory_append_daily", "memory_write"):
                args = data["arguments"]
                self._last_write = str(args.get("content") or args.get("text") or "")
            if data["name"] != "memory_search":
                return None
            return self._search_record(data)
        if kind == "turn":
            return None  # the driver emits its own turn record, with the token figure
        if kind == "memory_write":
            lines = self._last_write.splitlines() if data["mode"] != "create" else []
            self._last_write = ""
            return {"event": "memory_write", **data, "lines": lines}
        if kind == "flush":
            self.report.flushes += 1
        elif kind == "compaction":
            self.report.compactions += 1
        elif kind == "new":
            for name in ("memoryFile", "archivedPath"):
                if data.get(name):
                    data[name] = _relative(Path(data[name]), self.report.workspace, self.report.state_dir)
        return {"event": kind, **data}

    def _search_record(self, data: Record) -> Record:
        full = next((m.content for _, m in reversed(self.session.context) if m.role == "tool"), "")
        try:
            payload = json.loads(full)
        except ValueError:
            payload = {}
        if not isinstance(payload, dict):
            payload = {}
        if data.get("isError") and not payload.get("error"):
            payload["error"] = full[:300]
        hits = [
            {
                "path": r.get("path"),
                "startLine": r.get("startLine"),
                "endLine": r.get("endLine"),
                "score": r.get("score"),
                "snippet": r.get("snippet"),
            }
            for r in payload.get("results", [])
        ]
        return {
            "event": "memory_search",
            "query": data["arguments"].get("query", ""),
            "mode": payload.get("mode"),
            "results": hits,
            "error": payload.get("error"),
        }

    # -- turns

    def _start(self) -> None:
        self._calls_at_start = self.agent.turn_calls
        self._before, self._during, self._after = [], [], []

    def _flush_records(self, *groups: list[Record]) -> None:
        for group in groups:
            for record in group:
                self.emit(record)

    async def turn(self, text: str) -> None:
        self._start()
        result = await self.session.run_turn(text)
        tokens = self.session.projection().tokens  # at the end of the turn, before its memory work
        await self.session.wait_idle()  # the flush or compaction after the reply, shown after the turn
        self.turn_no += 1
        turn = {
            "event": "turn",
            "session": self.session_no,
            "turn": self.turn_no,
            "user": text,
            "reply": result.reply,
            "tokens": tokens,
            "flushThreshold": self.thresholds[0],
            "compactionThreshold": self.thresholds[1],
            "contextWindow": self.session.context_window,
        }
        self._flush_records(self._before, self._during, [turn], self._after)
        if text == RECALL_QUESTION:
            self._check_recall(result.reply or "")

    async def command(self, text: str) -> None:
        self._start()
        await self.session.run_turn(text)
        await self.session.wait_idle()
        self._flush_records(self._before, self._during, self._after)
        self.session_no += 1
        self.turn_no = 0

    def _check_recall(self, answer: str) -> None:
        searches = [r for r in self._during if r["event"] == "memory_search"]
        hit = next(
            (
                h
                for s in searches
                for h in s["results"]
                if RECALL_FACT in str(h.get("snippet", "")).lower()
                and str(h.get("path", "")).startswith("memory/")
            ),
            None,
        )
        self.report.hit = hit
        self.report.answer = answer
        self.report.recalled = hit is not None and RECALL_FACT in answer.lower()


def _relative(path: Path, *roots: Path) -> str:
    for root in roots:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            continue
    return str(path)
