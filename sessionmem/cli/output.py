"""Shared plumbing for commands: resolved context, error translation, JSON, progress bars.

Formatting of records into lines lives in pure functions (``format_*``) so tests can check the
text without running a command; ``echo_*`` helpers do the writing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sessionmem.cli.root import Context, GlobalOptions, resolve
from sessionmem.errors import ConfigError, SessionMemError

if TYPE_CHECKING:
    from collections.abc import Sequence

Progress = Callable[[int, int], None]

EXIT_FAILURE = 1
EXIT_CONFIG = 2  # same as click's usage errors: the invocation or its configuration is wrong


class CommandFailed(click.ClickException):
    """A domain error, shown as ``Error: <message>`` on stderr with a chosen exit status."""


class ConfigFailed(CommandFailed):
    exit_code = EXIT_CONFIG


@contextmanager
def translate_errors() -> Iterator[None]:
    """Expected errors become a message and an exit status, never a traceback."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigFailed(str(exc)) from exc
    except SessionMemError as exc:
        raise CommandFailed(str(exc)) from exc
    except BrokenPipeError:
        # Trigger: `sessionmem memory search x | head -1`. Why: the reader left; that is not our
        # failure. Outcome: quiet exit, with stdout pointed at devnull so the interpreter's final
        # flush does not print a second error.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_FAILURE)


def resolved(ctx: click.Context) -> Context:
    """The composition root's :class:`Context` for this invocation (resolved once, then cached)."""
    root = ctx.find_root()
    cached = root.meta.get("sessionmem.context")
    if isinstance(cached, Context):
        return cached
    options = root.obj if isinstance(root.obj, GlobalOptions) else GlobalOptions()
    context = resolve(options)
    root.meta["sessionmem.context"] = context
    return context


# ---------------------------------------------------------------------------- JSON


def _default(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    from dataclasses import asdict, is_dataclass

    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def to_json_text(value: Any, *, indent: int | None = None) -> str:
    """JSON text of records (dataclasses, ``to_json()`` objects, dates, paths), UTF-8 as is."""
    return json.dumps(value, ensure_ascii=False, default=_default, indent=indent)


def echo_json(value: Any, *, indent: int | None = 2) -> None:
    click.echo(to_json_text(value, indent=indent))


def echo_line_json(value: Any) -> None:
    """One JSON object on one line, flushed, for line-by-line pipelines."""
    sys.stdout.write(to_json_text(value) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------- progress


@contextmanager
def progress_bar(description: str, *, enabled: bool | None = None) -> Iterator[Progress | None]:
    """A ``progress(done, total)`` callback drawing a tqdm bar on stderr, or ``None``.

    The bar is drawn only when stderr is a terminal (``enabled=None``), so logs and pipes get
    nothing but the final summary. tqdm is imported only when a bar is drawn.
    """
    if enabled is None:
        enabled = _stderr_is_tty()
    if not enabled:
        yield None
        return
    from tqdm import tqdm

    bar = tqdm(total=0, desc=description, unit="file", file=sys.stderr, leave=False, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def echo_err(message: str) -> None:
    click.echo(message, err=True)


def format_lines(lines: Sequence[str]) -> str:
    return "\n".join(lines)
