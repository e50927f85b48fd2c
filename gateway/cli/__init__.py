"""``myclaw`` command line. Thin: each command group lives in its own module
and registers itself on :data:`main` when imported, which happens when the
command is asked for (:data:`_COMMANDS`, gateway/cli/_lazy.py)."""

from __future__ import annotations

from typing import Any

import click

from ._lazy import LazyGroup

__all__ = ["main"]

# Ctrl-C (SIGINT before a command installs its own handling) ends myclaw
# with this line and the shell's code for it, not a traceback or click's
# "Aborted!" with exit 1, which `myclaw gateway` uses for a failed start.
INTERRUPTED = "myclaw: interrupted"
INTERRUPTED_CODE = 130


# Each command's modules, imported only when that command runs, so that
# `myclaw cron list` does not pay for the memory or doctor commands' imports
# (docs/BENCHMARKS.md, "Start cost"). The summaries are what `myclaw --help`
# lists without importing any; tests/gateway/test_cli_main.py holds them to
# the commands' own help.
_COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "backup": (("backup_cmd",), "Copy every data file and the workspace into DEST (default: "
                                "$MYCLAW_HOME/backups/<time>), safely while the gateway runs."),
    "chat": (("gateway_cmd",), "Talk to myclaw in this terminal (needs only an LLM endpoint)."),
    "cron": (("cron_cmd",), "Scheduled jobs: a message run through the agent, the reply sent to a chat."),
    "doctor": (("doctor_cmd",), "Check the config, secrets, data files and endpoints, and say what is wrong."),
    "gateway": (("gateway_cmd",), "Run the gateway with every channel enabled in the config."),
    "memory": (("memory_cmd",), "Inspect and manage long-term memory."),  # a LazyGroup too
    "restore": (("backup_cmd",), "Put the backup in SRC in place of the current data."),
}


# The long-running commands: they take Ctrl-C even when started with
# SIGINT ignored (gateway_cmd._claim_sigint), from before their ~1 s import.
_CLAIM_SIGINT = frozenset({"gateway", "chat"})


class _Main(LazyGroup):
    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _CLAIM_SIGINT and cmd_name not in self.commands:
            import signal

            # As gateway_cmd._claim_sigint, before the import that registers
            # the command: a Ctrl-C during it was dropped (SIG_IGN) and the start went on.
            if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
                signal.signal(signal.SIGINT, signal.default_int_handler)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # resolving the command imports its modules: most of a start's time
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            ctx.exit(INTERRUPTED_CODE)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, from :data:`_COMMANDS` for those not loaded."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            # A stand-in made of the summary shortens it as the command's own help would be.
            cmd = self.commands.get(name) or click.Command(name, help=_COMMANDS[name][1])
            if not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_Main, lazy={name: modules for name, (modules, _) in _COMMANDS.items()},
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="myclaw")
def main() -> None:
    """myclaw: a chat gateway with long-term memory.

    The config is $MYCLAW_HOME/config.json (default ~/.myclaw/config.json):
    copy config.example.json there and fill it in, then `myclaw doctor`
    says what is still wrong.
    """
