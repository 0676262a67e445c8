"""The one compaction gate (DESIGN 1, 2), which drives the turn: the user's model turn, the silent flush
turn and the compaction.

A user turn (:func:`drive_turn`): :func:`preflight` (the memory work the context's size makes due,
:func:`memory_work_at`: at the compaction threshold compact through the gate, else at the flush threshold
run the flush), then the model turn (:func:`model_turn_with_room`). The work the turn itself made due runs
after its reply (:mod:`~sessionmem.session.turn.after_reply`, replies first), through the same
:func:`memory_work_at` and :func:`do_memory_work`; preflight then finds nothing due, unless the new message
itself crosses a threshold or the session arrives past one (after a crash). A turn suspended on the
caller's own tools goes on with :func:`resume_turn` (:mod:`~sessionmem.session.turn.client_calls`): the
model turn, no preflight, since no new user turn began. Every threshold is read from the window's budget
kept on the session's state (``state.budget``, computed once for the window in use, again only when the
provider states a smaller one).

The model turn (:mod:`~sessionmem.session.turn.model_turn`) reports a context overflow instead of raising
it; the gate makes room and lets the turn go on, at most :data:`MAX_ROOM_ATTEMPTS` times per model call:
the first compaction keeps at most a quarter of the context verbatim, the second nothing (see
:func:`plan_for`). An overflow after that, or with nothing left to compact (the prompt alone is over the
window), or with compaction off, is raised, the user's message kept unless it alone does not fit.

Every path that compacts calls :func:`compact_through_gate`: the threshold after a turn, the preflight
before one, provider context-overflow recovery, manual ``/compact``, and (flush only) the rotations
``/new``, ``/reset``, daily and idle, whose archiving the caller does. The gate runs the flush first when
the current compaction cycle has none, and records the flush against the cycle it *started* in, so a
compaction that happens during the flush (its own call overflowed) does not skip the next cycle's flush.

A flush counts for its cycle once its turn has ended (DESIGN 16), never before: the transcript records
it (the flush's messages carry its cycle, and its last answer ends it), then the store
(``memoryFlushCompactionCount``, :func:`record_flush`). A process killed in mid-flush has recorded
nothing, so the flush runs again. A flush whose model call failed is caught, reported in its ``flush``
event (``error``), and then counts for its cycle too: the user's turn goes on, and a broken flush is not
retried before every turn of the cycle (each retry would add a failing call to every turn). Only the
store records such a flush; reconciliation keeps it (:func:`~sessionmem.session.stores.recovery.reconciled`).

A flush whose note could not be written (one of its writes refused: by the file system, a full disk; as
unsafe; as not the session's to write; the tool told the model so, naming the file) does not count: the
model did its part, but the note exists nowhere, and only running the flush again can save it. Its
messages after the failure are marked ``writeFailed`` in the transcript, so reconciliation does not count
it either; the store is not updated; its ``flush`` event carries the error. It runs again at the next turn
over the flush threshold (one flush call per turn while the disk stays full, writing the note as soon as
there is space), and again before the compaction that closes its cycle, which then goes ahead: the summary
keeps the gist and the transcript the conversation.

Several runners and processes on one session key are serialised by the store's turn lock, which the
runner holds around every turn and reloads the session's state under (:meth:`SessionState.resync`), so
the decisions here, taken against ``state.entry``, are taken against the store's word. The store is
written only through its seam (:mod:`sessionmem.session.stores.backend`), and its counts are set to the values
the transcript shows, so a reconciliation by another process never makes them count twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sessionmem.errors import ContextWindowExceeded
from sessionmem.messages import Message
from sessionmem.model.routing import model_for
from sessionmem.session.stores.entry import SessionEntry, compaction_figures
from sessionmem.session.stores.transcript import compaction_summary_text
from sessionmem.session.turn.announce import before_compaction, emit
from sessionmem.session.turn.compaction import CompactionFailed, CompactionPlan, plan_compaction, summarize
from sessionmem.session.turn.events import (
    CompactionEvent,
    CompactionFailedEvent,
    CompactionResult,
    FlushEvent,
    FlushSkippedEvent,
)
from sessionmem.session.turn.flush import cycle_flushed, flush_prompts, guard_reason, should_flush
from sessionmem.session.turn.model_turn import (
    ModelTurn,
    Overflow,
    abandon_model_turn,
    advance_model_turn,
    start_model_turn,
)
from sessionmem.session.turn.state import SessionState, TurnKind
from sessionmem.session.turn.streaming import PartialCallback
from sessionmem.tokens import count_tokens
from sessionmem.tools.client import ClientTool

CompactionReason = Literal["threshold", "overflow", "manual", "new", "reset", "daily", "idle"]
ROTATION_REASONS = ("new", "reset", "daily", "idle")
MAX_ROOM_ATTEMPTS = 2  # compactions per model call after an overflow: keep a quarter, then keep nothing

log = logging.getLogger(__name__)


async def drive_turn(
    state: SessionState,
    prompt: Message,
    on_partial: PartialCallback | None = None,
    client_tools: dict[str, ClientTool] | None = None,
    *,
    answered: ModelTurn | None = None,
) -> ModelTurn:
    """One user turn of ``prompt`` through the gate: flush or compact before it when due, then the model
    turn (making room when it overflows). With ``client_tools`` the turn may end suspended on the caller's
    tool calls (``turn.client_calls``; :func:`resume_turn` goes on). What the turn made due is run after
    its reply by the caller (:func:`~sessionmem.session.turn.after_reply.run_memory_work`).

    ``answered``: the model turn of ``prompt`` whose first call was answered while the last reply's memory
    work ran (:mod:`~sessionmem.session.turn.early_call`, its answer in ``ready``): no preflight, since
    that call was made on a context under the compaction threshold; the turn goes on from its answer."""
    if answered is not None:
        return await resume_turn(state, answered)
    await preflight(state, prompt)
    turn = start_model_turn(state, prompt, kind="turn", on_partial=on_partial, client_tools=client_tools)
    return await resume_turn(state, turn)


async def resume_turn(state: SessionState, turn: ModelTurn) -> ModelTurn:
    """The model turn (making room when it overflows): how :func:`drive_turn` ends, and how a turn
    suspended on the caller's tools goes on (``turn`` starts from the context, the tool results in it; no
    preflight, no new user turn began)."""
    return await advance_with_room(state, turn)


async def model_turn_with_room(
    state: SessionState,
    prompt: Message,
    *,
    kind: TurnKind,
    system_extra: str = "",
    on_partial: PartialCallback | None = None,
) -> ModelTurn:
    """Run a model turn (an ordinary one, or the flush); each time its model call overflows the window,
    compact through the gate and let it go on (see the module docstring)."""
    turn = start_model_turn(state, prompt, kind=kind, system_extra=system_extra, on_partial=on_partial)
    return await advance_with_room(state, turn)


async def advance_with_room(state: SessionState, turn: ModelTurn) -> ModelTurn:
    """Advance ``turn`` until it ends, making room each time its model call overflows the window."""
    while (overflow := await advance_model_turn(state, turn)) is not None:
        try:
            await make_room(state, turn, overflow)
        except Exception:
            abandon_model_turn(state, turn)
            raise
    return turn


async def make_room(state: SessionState, turn: ModelTurn, overflow: Overflow) -> None:
    """Compact so that ``turn``'s overflowed model call fits; raise what says why it cannot."""
    exc = overflow.error
    if not state.runner.agent.compaction.enabled:
        raise exc
    if turn.rooms_made >= MAX_ROOM_ATTEMPTS:
        turn.prompt_unfit = True
        raise ContextWindowExceeded(
            "the prompt does not fit the model's context window even with the whole conversation compacted "
            f"into its summary: {exc}",
            status_code=exc.status_code,
        ) from exc
    # In a flush, state.flushing keeps the gate from starting a second flush: it goes straight to compacting.
    result = await compact_through_gate(state, "overflow", attempt=turn.rooms_made + 1)
    if result.error == "nothing to compact":
        turn.prompt_unfit = True
        raise ContextWindowExceeded(
            f"the message does not fit the model's context window, and nothing is left to compact: {exc}",
            status_code=exc.status_code,
        ) from exc
    if not result.ok:
        raise ContextWindowExceeded(
            f"context window exceeded and compaction failed ({result.error}): {exc}",
            status_code=exc.status_code,
        ) from exc
    turn.made_room()


@dataclass(frozen=True, slots=True)
class MemoryWork:
    """What the context's size makes due (:func:`memory_work_at`): a ``compaction`` through the gate (which
    flushes first when the cycle has had no flush), a ``flush``, or a flush a guardrail forbids
    (``flush_skipped``), with the reason, at a projection of ``tokens``."""

    what: Literal["compaction", "flush", "flush_skipped"]
    reason: str
    tokens: int


def memory_work_at(state: SessionState, projected: int, *, compact: bool = True) -> MemoryWork | None:
    """The memory work due at a projected prompt of ``projected`` tokens: at the compaction threshold a
    compaction (unless this run may not compact: heartbeats; or ``compact`` is False), else at the flush
    threshold (or after enough transcript growth) the flush of this cycle, if it has had none."""
    budget = state.budget
    if compact and state.may_compact() and projected >= budget.compaction_threshold > 0:
        return MemoryWork("compaction", "threshold", projected)
    decision = should_flush(
        projected,
        budget.context_window,
        state.runner.agent.compaction,
        state.entry.to_json_dict(),
        state.transcript.bytes_since_compaction(),
        budget=budget,
        **state.guards(),
    )
    if decision.skipped:
        return MemoryWork("flush_skipped", decision.reason, projected)
    if decision.run:
        return MemoryWork("flush", decision.reason, projected)
    return None


async def do_memory_work(state: SessionState, work: MemoryWork) -> None:
    """Run ``work``: the compaction through the gate, the flush, or report the skipped flush."""
    if work.what == "compaction":
        await compact_through_gate(state, "threshold")
    elif work.what == "flush":
        await run_flush(state, work.reason, work.tokens)
    else:
        await emit(state, FlushSkippedEvent(session_key=state.key, reason=work.reason))


async def preflight(state: SessionState, pending: Message) -> None:
    """Before a user turn, with its message projected: the memory work due now (:func:`memory_work_at`).
    Usually none: the turn before did it after its reply."""
    work = memory_work_at(state, state.projection([pending]).tokens)
    if work is not None:
        await do_memory_work(state, work)


async def flush_if_unflushed(state: SessionState, reason: str) -> bool:
    """Run the silent flush unless this compaction cycle already had one (or one is running now: a
    compaction the flush's own overflow asked for), the flush is disabled, or a guardrail forbids it
    (reported as a ``flush_skipped`` event). True when a flush ran."""
    flush_cfg = state.runner.agent.compaction.memory_flush
    if not flush_cfg.enabled or state.flushing is not None:
        return False
    if cycle_flushed(state.entry.to_json_dict()):
        return False
    guard = guard_reason(**state.guards())
    if guard is not None:
        await emit(state, FlushSkippedEvent(session_key=state.key, reason=f"{guard} (before {reason})"))
        return False
    return await run_flush(state, f"before {reason} compaction")


async def compact_through_gate(
    state: SessionState, reason: CompactionReason, instructions: str | None = None, *, attempt: int = 1
) -> CompactionResult:
    """The one way to compact (DESIGN 1): flush first if this cycle is unflushed, then summarise.

    For rotations (new/reset/daily/idle) the caller archives the transcript itself; the gate only flushes.
    A compaction that already happened during the flush (the flush overflowed) is not repeated for
    threshold/overflow reasons. ``attempt`` counts the overflow recoveries of one model call (see
    :func:`plan_for`): the second keeps nothing verbatim.
    """
    before = state.compactions  # this session's own compactions: others' show in the store, not here
    if reason not in ROTATION_REASONS and plan_for(state, reason, attempt) is None:
        # Trigger: /compact (or an overflow) with a context that all fits in the kept recent part.
        # Why: a flush now would use up the cycle's one flush while nothing is summarised away, and
        # the cycle's later turns would then be compacted unsaved. Outcome: neither flush nor compaction.
        return CompactionResult(False, reason, error="nothing to compact")
    flushed = await flush_if_unflushed(state, reason)
    if reason in ROTATION_REASONS:
        return CompactionResult(True, reason, error="rotation is done by the caller", flushed=flushed)
    if reason != "manual" and state.compactions > before:
        return CompactionResult(True, reason, flushed=flushed)
    result = await compact_now(state, reason, instructions, attempt=attempt)
    return CompactionResult(
        result.ok, reason, result.tokens_before, result.tokens_after, result.error, flushed
    )


def record_flush(state: SessionState, cycle: int, started_at: int) -> None:
    """Record in the store that the flush of ``cycle`` (started at ``started_at``, ms) has ended."""
    session_id = state.entry.session_id

    def record(current: SessionEntry | None) -> SessionEntry | None:
        entry = current if current is not None else state.entry
        if entry.session_id != session_id:
            return None
        return entry.touched(memory_flush_compaction_count=cycle, memory_flush_at=started_at)

    stored = state.runner.store.update(state.key, record)
    if stored is not None and stored.session_id == session_id:
        state.entry = stored


async def run_flush(state: SessionState, reason: str, tokens: int | None = None) -> bool:
    """The silent flush turn; recorded against the cycle it starts in (DESIGN 2) once it has ended
    (DESIGN 16; see the module docstring). Returns True (it ran)."""
    if tokens is None:
        tokens = state.projection().tokens
    cycle = state.entry.compaction_count
    agent = state.runner.agent
    folder = state.tools.home.daily_folder  # memory/, or the session's own folder (memory.scope peer)
    prompts = flush_prompts(agent.compaction.memory_flush, _utc_now(), agent.user_timezone, folder=folder)
    prompt = Message.user(prompts.prompt)
    state.tools.flush_target = prompts.relative_path
    state.tools.flush_write_failures = []
    state.flushing = cycle  # its messages carry the cycle; the gate starts no second flush meanwhile
    writes_before = state.tools.writes
    error = None
    try:
        await model_turn_with_room(state, prompt, kind="flush", system_extra=prompts.system_prompt)
    except Exception as exc:  # a failed flush must not cost the user their turn
        error = f"{type(exc).__name__}: {exc}"
    finally:
        state.tools.flush_target = None
        state.flushing = None
    if state.tools.writes > writes_before:
        await state.tools.sync_index("memory-flush")
    unsaved = state.tools.flush_write_failures
    if unsaved:  # the note is not on disk: the flush does not count (see the module docstring)
        error = f"the flush's note was not saved ({unsaved[-1]}); the flush runs again"
    else:
        record_flush(state, cycle, prompt.timestamp)
    await emit(
        state,
        FlushEvent(
            session_key=state.key,
            reason=reason,
            path=prompts.relative_path,
            compaction_count=cycle,
            tokens=tokens,
            error=error,
        ),
    )
    return True


async def compact_now(
    state: SessionState, reason: str, instructions: str | None, *, attempt: int = 1
) -> CompactionResult:
    """Summarise now (no flush: callers go through the gate); a failed summary changes nothing."""
    plan = plan_for(state, reason, attempt)
    if plan is None:
        return CompactionResult(False, reason, error="nothing to compact")
    await before_compaction(state, reason)  # the compaction:before hook
    try:
        summary = await _summary(state, plan, instructions, state.budget.reserve)
    except CompactionFailed as exc:
        await emit(state, CompactionFailedEvent(session_key=state.key, reason=reason, error=str(exc)))
        return CompactionResult(False, reason, error=str(exc))
    # Both figures are the session's projection (SessionState.projection), the measure the thresholds, the
    # turns' figures and /status use. Before: what reached the threshold (the reported usage when fresh,
    # so tool schemas included). After: what the projection will count once the context is replaced (no
    # fresh usage then): the refreshed system prompt (it may now show the daily log the flush just
    # wrote), the summary, the kept messages and the tool schemas.
    tokens_before = state.projection().tokens
    system_prompt = state.tools.system_prompt()
    summary_message = Message.user(compaction_summary_text(summary))
    tokens_after = (
        count_tokens(system_prompt)
        + state.counter.count(summary_message)
        + state.counter.count_all(plan.kept)
        + state.schema_tokens()
    )
    counted = state.entry.compaction_count + 1  # the compaction entries the transcript now holds
    state.transcript.append_compaction(  # the reason kept: the inspector marks overflows apart
        summary, plan.first_kept_entry_id, tokens_before, tokens_after, details={"reason": reason}
    )
    state.reload_context()
    state.system_prompt = system_prompt
    state.compactions += 1

    def count_it(current: SessionEntry | None) -> SessionEntry:
        # Trigger: another process reconciled the store with the transcript between our append and this
        # update (it opened the session meanwhile). Why: adding one to the stored count would then count
        # this compaction twice. Outcome: the count is set to what the transcript shows, never lowered.
        entry = current if current is not None else state.entry
        count = max(entry.compaction_count, counted)
        return entry.touched(compaction_count=count, **compaction_figures(tokens_after))

    stored = state.runner.store.update(state.key, count_it)
    assert stored is not None
    state.entry = stored
    count = stored.compaction_count
    await state.tools.after_compaction(state.transcript.path)
    await emit(
        state,
        CompactionEvent(
            session_key=state.key,
            reason=reason,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            compaction_count=count,
            first_kept_entry_id=plan.first_kept_entry_id,
        ),
    )
    return CompactionResult(True, reason, tokens_before, tokens_after)


async def _summary(
    state: SessionState, plan: CompactionPlan, instructions: str | None, reserve_tokens: int
) -> str:
    """The summary from ``compaction.model`` when one is configured, else from the agent's model.

    Trigger: the configured compaction model fails (down, no key, a smaller window). Why: a compaction
    that fails leaves the session growing until it overflows. Outcome: the agent's model summarises
    instead (as OpenClaw does); the failure of both is reported.
    """
    main = state.runner.model
    model = model_for(main, state.runner.agent, "compaction")
    try:
        return await summarize(model, plan, instructions=instructions, reserve_tokens=reserve_tokens)
    except CompactionFailed as exc:
        if model is main:
            raise
        log.warning("compaction model %s failed (%s); summarising with %s", model.name, exc, main.name)
        try:
            return await summarize(main, plan, instructions=instructions, reserve_tokens=reserve_tokens)
        except CompactionFailed as again:
            raise CompactionFailed(f"{model.name}: {exc}; then {main.name}: {again}") from again


def plan_for(state: SessionState, reason: str, attempt: int = 1) -> CompactionPlan | None:
    """What a compaction would summarise now (None: nothing to summarise).

    Ordinarily the newest ``keepRecentTokens`` stay verbatim, at most half of what fits under the
    compaction threshold (the window's budget, ``state.budget``).

    Trigger: a provider context overflow. Why: the model's real window may be smaller than the configured
    one, even smaller than what compaction would keep, and a single tool result may fill it; keeping the
    usual part would leave the prompt as large as before ("nothing to compact" on every turn).
    Outcome: the first recovery keeps at most a quarter of the context verbatim; the second, or the first
    when no cut is possible, folds everything into the summary (tool results are truncated there).
    """
    budget = state.budget
    if reason != "overflow":
        return plan_compaction(state.context, state.counter, budget.keep_recent)
    if attempt <= 1:
        quarter = max(1, state.counter.count_all(state.context) // 4)
        plan = plan_compaction(state.context, state.counter, min(budget.keep_recent, quarter))
        if plan is not None:
            return plan
    return plan_compaction(state.context, state.counter, 0)


def _utc_now() -> datetime:
    return datetime.now(UTC)
