"""``sessionmem chat``: talk to an agent through the session runner, one stdin line per message.

The model is a real provider through litellm (``--model openai/gpt-4o-mini``; API keys are read by
litellm from the environment as usual, or given with ``--api-key``; ``--api-base`` points at any
OpenAI-compatible server). The agent's memory index is opened so the model has ``memory_search`` and
``memory_get``. The runner does the rest: token projection, the silent flush, compaction, the
transcript and sessions.json.

Commands typed as messages: ``/new`` and ``/reset`` (or ``session.resetTriggers``; the session-memory
hook saves the conversation first), ``/compact [focus]``, ``/status``, and ``/quit`` (or end of input).

Output: replies on stdout (streamed as the model writes them when stdout is a terminal; a NO_REPLY
answer shows nothing); notes about flushes, compactions and new sessions on stderr. With
``--json``, one JSON object per line on stdout for every event, named by its ``event`` field as in
``demo --json`` and ``replay --json`` (``turn`` with the reply, ``flush``, ``compaction``, ``new``,
``memory_write``, ``tool_call``, ..., each with ``sessionKey`` and ``sessionId``: keys in camelCase, as in
every JSON output), plus ``status`` and ``command`` objects for /status and the other commands, and
``error`` for a failed turn (the chat goes on).

Exit status: 0 when every message was answered; 1 when any turn failed (a model call that failed, a
store that refused), after the chat ends, with ``N of M messages failed`` on stderr, so a script
piping messages in can tell.

Examples::

    sessionmem chat --model openai/gpt-4o-mini
    printf 'hello\\n/status\\n/new\\n' | sessionmem chat --model openai/gpt-4o-mini --json
    sessionmem chat --model openai/llama3 --api-base http://127.0.0.1:8080/v1 --api-key none
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

import click

from sessionmem.cli import output
from sessionmem.errors import SessionMemError
from sessionmem.session.turn.events import event_record

if TYPE_CHECKING:
    from sessionmem.session.runner import Session
    from sessionmem.session.turn.events import Event

QUIT_COMMANDS = frozenset({"/quit", "/exit"})


# ---------------------------------------------------------------------------- formatting (pure)


def event_note(event: Event) -> str | None:
    """A one-line human note for events worth telling about on stderr, else None."""
    kind = event.kind
    data = event_record(event)
    if kind == "flush":
        failed = f" failed: {data['error']}" if data.get("error") else ""
        return f"· memory flush ({data.get('path')}){failed}"
    if kind == "compaction":
        return (
            f"· compacted ({data.get('tokensBefore', 0):,} → {data.get('tokensAfter', 0):,} tokens, "
            f"count {data.get('compactionCount')})"
        )
    if kind == "compaction_failed":
        return f"· compaction failed: {data.get('error')}"
    if kind == "new":
        saved = f", saved {data['memoryFile']}" if data.get("memoryFile") else ""
        return f"· new session {data.get('sessionId')} ({data.get('reason')}{saved})"
    if kind == "memory_write":
        return f"· memory {data.get('mode')}: {data.get('path')}"
    if kind == "tool_call":
        return f"· tool {data.get('name')}{' (error)' if data.get('isError') else ''}"
    if kind == "hook_error":
        return f"· {data.get('error')}"  # "hook 'name' failed on compaction:after: ..." (hooks.py)
    return None


# ---------------------------------------------------------------------------- the loop


class ChatPrinter:
    """Where the chat writes: replies and JSON lines on stdout, notes on stderr. With ``stream`` (a
    terminal, not --json) the reply is printed piece by piece as the model writes it."""

    def __init__(self, as_json: bool, stream: bool = False) -> None:
        self.as_json = as_json
        self.stream = stream and not as_json
        self.streamed = False  # this turn's reply was (partly) printed already

    def partial(self, text: str) -> None:
        click.echo(text, nl=False)
        sys.stdout.flush()
        self.streamed = True

    def end_stream(self) -> bool:
        """Close a streamed reply with its newline; True when something was streamed."""
        streamed, self.streamed = self.streamed, False
        if streamed:
            click.echo()
        return streamed

    def on_event(self, event: Event) -> None:
        if self.as_json:
            output.echo_line_json(event_record(event))
            return
        note = event_note(event)
        if note is not None:
            output.echo_err(note)

    def reply(self, text: str | None) -> None:
        if not self.as_json and text:
            click.echo(text)

    def command(self, session: Session, name: str, reply: str | None) -> None:
        if not self.as_json:
            self.reply(reply)
            return
        if name == "status":
            output.echo_line_json({"event": "status", **session.status().to_json()})
            return
        output.echo_line_json({"event": "command", "command": name, "reply": reply})

    def error(self, exc: BaseException) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if self.as_json:
            output.echo_line_json({"event": "error", "error": message})
        else:
            output.echo_err(f"error: {message}")


@dataclasses.dataclass
class ChatTally:
    """How a chat went: messages sent (commands included) and turns that failed."""

    sent: int = 0
    failed: int = 0


async def chat_loop(
    session: Session,
    read_line: Callable[[], str],
    printer: ChatPrinter,
    *,
    prompt: Callable[[], None] | None = None,
) -> ChatTally:
    """Run turns for each line until ``/quit`` or end of input; returns how many were sent and failed.

    ``read_line`` blocks (stdin), so it runs in a thread; one event loop serves the whole chat, so
    litellm's async clients stay bound to a live loop.
    """
    tally = ChatTally()
    while True:
        if prompt is not None:
            prompt()
        line = await asyncio.to_thread(read_line)
        if not line:  # end of input
            return tally
        text = line.strip()
        if not text:
            continue
        if text.lower() in QUIT_COMMANDS:
            return tally
        tally.sent += 1
        try:
            result = await session.run_turn(text, on_partial=printer.partial if printer.stream else None)
        except SessionMemError as exc:  # a failed turn is reported; the chat goes on
            printer.end_stream()
            printer.error(exc)
            tally.failed += 1
            continue
        if result.command is not None:
            printer.command(session, result.command, result.reply)
        elif not printer.end_stream() or result.stopped:  # a tool-loop stop note was not streamed
            printer.reply(result.reply)


# ---------------------------------------------------------------------------- the command


@click.command()
@click.option("--model", "model_name", metavar="MODEL", help="litellm model, e.g. openai/gpt-4o-mini.")
@click.option("--session", "session_key", metavar="KEY", help="Session key. Default: agent:<agentId>:main.")
@click.option("--api-base", metavar="URL", help="Base URL of the provider (an OpenAI-compatible server).")
@click.option("--api-key", metavar="KEY", help="API key. Default: what litellm finds in the environment.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per event, one per line.")
@click.pass_context
def chat(
    ctx: click.Context,
    model_name: str | None,
    session_key: str | None,
    api_base: str | None,
    api_key: str | None,
    as_json: bool,
) -> None:
    """Chat with the agent; one message per line on stdin.

    \b
    In the chat: /new, /reset, /compact [focus], /status, /quit.
    Examples:
      sessionmem chat --model openai/gpt-4o-mini
      printf 'hello\\n/status\\n' | sessionmem chat --model openai/gpt-4o-mini --json
    """
    app = output.resolved(ctx)
    name = model_name or app.agent.model
    if not name:
        raise click.UsageError(
            "No model: pass --model (e.g. openai/gpt-4o-mini) or set agents.defaults.model."
        )

    from sessionmem.model.litellm import LiteLLMModel

    model = LiteLLMModel(name, api_base=api_base, api_key=api_key)
    quiet_litellm()
    printer = ChatPrinter(as_json, stream=_isatty(sys.stdout))
    stdin = sys.stdin
    interactive = _isatty(stdin)

    def without_memory(exc: SessionMemError) -> None:
        printer.error(exc)
        output.echo_err("warning: memory index unavailable; chatting without memory_search")

    async def run() -> ChatTally:
        from sessionmem.assembly import open_runner

        async with open_runner(
            app, model, on_event=printer.on_event, on_index_error=without_memory, command_source="cli"
        ) as runner:
            session = runner.open(session_key)
            if interactive and not as_json:
                output.echo_err(f"sessionmem chat · {session.key} · {name} · /status /compact /new /quit")
            prompt = (lambda: click.echo("> ", nl=False, err=True)) if interactive and not as_json else None
            return await chat_loop(session, stdin.readline, printer, prompt=prompt)

    tally = asyncio.run(run())
    if tally.failed:  # the chat went on; the exit status still says a turn failed
        raise output.CommandFailed(f"{tally.failed} of {tally.sent} messages failed")


def quiet_litellm() -> None:
    """litellm prints a "Give Feedback / Get Help" banner on stdout when a call fails, which would
    corrupt --json output and the chat transcript; errors are reported by the chat itself."""
    from sessionmem.tokens import configure_litellm_environment

    configure_litellm_environment()
    import litellm

    litellm.suppress_debug_info = True


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
