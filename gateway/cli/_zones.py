"""Each user's ``/timezone`` for a command run beside (or without) the
gateway: read once from gateway.db, read only, never from a running
gateway. What a hand-run flush or compression dates, and what search's
"yesterday" reads, then lands on the day the gateway itself would give it
(their zone, the zones they left, the gateway's old ones for those with
none: :meth:`memory.engine.MemoryEngine.lived`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import tzinfo
from typing import Protocol

import click

from gateway.config import Config, Paths
from memory.clock import ZoneOf

__all__ = ["CliZones", "user_zones"]


class _Dated(Protocol):
    zone_of: ZoneOf | None


@dataclass(frozen=True)
class CliZones:
    theirs: Mapping[str, tzinfo]  # owner -> the zone they set
    default: tzinfo  # gateway.timezone

    async def zone_of(self, owner: str) -> tzinfo | None:
        """:class:`gateway.timezones.UserTimezones.get`'s answer, from the snapshot."""
        return self.theirs.get(owner)

    def calendar(self, owner: str) -> tzinfo:
        """Their zone, else the gateway's."""
        return self.theirs.get(owner, self.default)

    def attach(self, *parts: _Dated) -> None:
        """Give ``parts`` (the engine, an extraction service, a compressor)
        this lookup, as the App gives them the gateway's."""
        for part in parts:
            part.zone_of = self.zone_of


def user_zones(cfg: Config) -> CliZones:
    """The users' zones (gateway.db, read only) and gateway.timezone; the
    gateway's alone for everyone, with a warning naming the file, when
    gateway.db cannot be read: the command matters more."""
    from gateway.timezones import parse_timezone, read_zones

    path = Paths.from_env().gateway_db()
    try:
        theirs = read_zones(path)
    except sqlite3.DatabaseError as exc:
        click.echo(f"warning: user time zones not read from {path} ({exc}): the gateway's is used", err=True)
        theirs = {}
    return CliZones(theirs, parse_timezone(cfg.gateway.timezone))
