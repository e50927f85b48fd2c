"""``myclaw memory ...``: inspect and manage stored memories."""

from __future__ import annotations

import click

from . import main


@main.group()
def memory() -> None:
    """Inspect and manage long-term memory."""
