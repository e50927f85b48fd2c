"""Command groups whose commands load when asked for."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click

__all__ = ["LazyGroup"]


class LazyGroup(click.Group):
    """A group whose commands are registered by modules of this package
    imported only once one of their commands is asked for: a start pays for
    the command it runs, not for all of them (docs/BENCHMARKS.md, "Start
    cost"). ``lazy`` maps a command's name to the modules that register it;
    listing the commands (``--help``) imports them all."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, ...]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.lazy, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            for module in self.lazy[cmd_name]:
                importlib.import_module(f"{__package__}.{module}")  # registers its commands on the group
        return self.commands.get(cmd_name)
