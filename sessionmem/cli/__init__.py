"""The ``sessionmem`` command: a click group whose subcommands load lazily.

``sessionmem --help`` and ``sessionmem memory search`` must start fast (a cold FTS-only search no
slower than qmd's, see bench/bench_cli.py), so this module imports only click: the composition root
(the config models, pydantic) is imported when a command runs, and a subcommand's module when that
subcommand runs, never for ``--help``.

Adding a command (e.g. ``chat``):

1. Create ``sessionmem/cli/chat.py`` defining a click command or group named ``chat``. Import heavy
   things (litellm, llama_cpp, numpy, watchdog) inside the function body, not at module level.
2. Add one line to :data:`COMMANDS` below: ``"chat": ("sessionmem.cli.chat:chat", "One-line help.")``.
   ``chat``, ``demo`` and ``replay`` are listed already and appear as soon as their module exists.
3. Inside the command, get the resolved configuration with :func:`sessionmem.cli.output.resolved`::

       @click.command()
       @click.pass_context
       def chat(ctx: click.Context) -> None:
           app = resolved(ctx)  # sessionmem.context.Context: config, agent, workspace, state_dir, env

   Raise ``sessionmem.errors`` exceptions freely: the group turns ``ConfigError`` into exit status 2
   and any other ``SessionMemError`` into exit status 1, with the message on stderr, no traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

import click

__all__ = ["COMMANDS", "LazyGroup", "cli", "main"]

# name -> ("module:attribute", short help shown by `sessionmem --help` without importing the module)
COMMANDS: dict[str, tuple[str, str]] = {
    "memory": ("sessionmem.cli.memory:memory", "Index, search and read the agent's Markdown memory."),
    "chat": ("sessionmem.cli.chat:chat", "Chat with an agent through the session runner."),
    "demo": ("sessionmem.cli.demo:demo", "Run a scripted demonstration conversation."),
    "replay": ("sessionmem.cli.replay:replay", "Replay a recorded transcript through the runner."),
    "sessions": (
        "sessionmem.cli.sessions:sessions",
        "List, show, delete sessions; move them between store backends.",
    ),
    "mcp": ("sessionmem.cli.mcp:mcp", "Serve the agent's memory over MCP (stdio, or --http PORT)."),
    "serve": ("sessionmem.cli.serve:serve", "Serve the agents over an OpenAI-compatible API (the gateway)."),
    "forget": ("sessionmem.cli.forget:forget", "Remove everything the agent keeps of a chat or a person."),
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when the subcommand is invoked.

    Entries of :data:`COMMANDS` whose module is not present are left out, so a command can be
    listed before its module lands. Domain errors are turned into clean exits here, once.
    """

    def __init__(self, *args: Any, lazy_commands: dict[str, tuple[str, str]] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})

    def _available(self, name: str) -> bool:
        module = self.lazy_commands[name][0].partition(":")[0]
        try:
            return importlib.util.find_spec(module) is not None
        except ImportError:
            return False

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy = [name for name in self.lazy_commands if self._available(name)]
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self.lazy_commands or not self._available(cmd_name):
            return command
        target = self.lazy_commands[cmd_name][0]
        module_name, _, attribute = target.partition(":")
        loaded = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(loaded, click.Command):
            raise TypeError(f"{target} is not a click command")
        return loaded

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Help lists lazy commands from their registered short help, without importing them."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.lazy_commands:
                rows.append((name, self.lazy_commands[name][1]))
                continue
            command = super().get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from sessionmem.cli.output import translate_errors

        with translate_errors():
            return super().invoke(ctx)


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_file",
    metavar="FILE",
    help="Config file (JSON or JSON5). Default: $SESSIONMEM_CONFIG, "
    "else <state-dir>/config.json5|json if present.",
)
@click.option(
    "--state-dir",
    metavar="DIR",
    help="State folder: index, sessions, default workspace. Default: $SESSIONMEM_STATE_DIR or ~/.sessionmem.",
)
@click.option(
    "--workspace",
    metavar="DIR",
    help="Markdown workspace (MEMORY.md, memory/). Default: the agent's configured workspace, "
    "else <state-dir>/workspace.",
)
@click.option("--agent", "agent_id", metavar="ID", help="Agent id. Default: main.")
@click.version_option(package_name="sessionmem", prog_name="sessionmem")
@click.pass_context
def cli(
    ctx: click.Context,
    config_file: str | None,
    state_dir: str | None,
    workspace: str | None,
    agent_id: str | None,
) -> None:
    """sessionmem: agent sessions with persistent, searchable Markdown memory.

    \b
    Examples:
      sessionmem memory index
      sessionmem memory search "billing cutover" --max-results 3
      sessionmem --config agent.json5 --agent work memory status --deep
    """
    # Nothing is read here: the config is resolved when a command asks for it, so
    # `sessionmem --config broken.json memory search --help` still shows help. The composition root
    # (and with it the config models and pydantic) is imported here, not at the top, so
    # `sessionmem --help` costs click and nothing more.
    from sessionmem.context import GlobalOptions

    ctx.obj = GlobalOptions(config=config_file, state_dir=state_dir, workspace=workspace, agent=agent_id)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``sessionmem = "sessionmem.cli:main"``)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="sessionmem")
