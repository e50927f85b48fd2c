"""``myclaw`` command line. Thin: each command group lives in its own module
and registers itself on :data:`main` (see the imports at the bottom)."""

from __future__ import annotations

import sys
from typing import Any

import click

__all__ = ["main"]

# Ctrl-C (SIGINT before a command installs its own handling) ends myclaw
# with this line and the shell's code for it, not a traceback or click's
# "Aborted!" with exit 1, which `myclaw gateway` uses for a failed start.
INTERRUPTED = "myclaw: interrupted"
INTERRUPTED_CODE = 130


class _Main(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(INTERRUPTED, err=True)
            ctx.exit(INTERRUPTED_CODE)


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="myclaw")
def main() -> None:
    """myclaw: a chat gateway with long-term memory.

    The config is $MYCLAW_HOME/config.json (default ~/.myclaw/config.json):
    copy config.example.json there and fill it in, then `myclaw doctor`
    says what is still wrong.
    """


# Command groups register themselves on `main` when imported. This is most
# of a start's time (a second or two), so Ctrl-C most often lands here.
try:
    from . import memory_cmd  # noqa: E402,F401
    from . import memory_jobs_cmd, cron_cmd  # noqa: E402,F401  (write path: compress/flush/log, cron)
    from . import identity_cmd  # noqa: E402,F401  (memory merge-identities)
    from . import project_cmd  # noqa: E402,F401  (memory project-alias)
    from . import gateway_cmd  # noqa: E402,F401
    from . import backup_cmd  # noqa: E402,F401
    from . import doctor_cmd  # noqa: E402,F401
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    raise SystemExit(INTERRUPTED_CODE) from None
