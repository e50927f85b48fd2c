"""``myclaw`` command line. Thin: each command group lives in its own module
and registers itself on :data:`main` (see the imports at the bottom)."""

from __future__ import annotations

import click

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="myclaw")
def main() -> None:
    """myclaw: a chat gateway with long-term memory."""


# Command groups register themselves on `main` when imported.
from . import memory_cmd  # noqa: E402,F401
from . import memory_jobs_cmd, cron_cmd  # noqa: E402,F401  (write path: compress/flush/log, cron)
from . import identity_cmd  # noqa: E402,F401  (memory merge-identities)
from . import gateway_cmd  # noqa: E402,F401
from . import backup_cmd  # noqa: E402,F401
from . import doctor_cmd  # noqa: E402,F401
