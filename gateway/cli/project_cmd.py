"""``myclaw memory project-alias``: a renamed project's old name, by hand.

The extraction model learns a rename the user states ("we renamed atlas to
orion"); this sets, lists and removes one (memory/projects.py): the old
name's facts are then filed under the new name. Logged as ``alias``
(``unalias``) under the ``cli`` job.
"""

from __future__ import annotations

from pathlib import Path

import click

from memory.changelog import write_log

from ._common import shares_data, db_option, echo_json, json_option, load_cli_config, open_engine, render_table, resolve_db, resolve_user, run
from .memory_cmd import JOB, memory, user_option


@memory.command("project-alias")
@click.argument("old", required=False)
@click.argument("new", required=False)
@user_option
@click.option("--remove", is_flag=True, help="Drop the alias OLD.")
@json_option
@db_option
@shares_data
def project_alias(old: str | None, new: str | None, user: str | None, remove: bool, as_json: bool) -> None:
    """OLD NEW: the user's project OLD is now called NEW (its facts are
    filed under NEW). No names: list the aliases. OLD --remove: drop one."""
    cfg = load_cli_config()
    owner = resolve_user(user, cfg)
    path = resolve_db(cfg)
    if old is None:
        run(_list(path, owner, as_json))
        return
    if owner is None:
        raise click.UsageError("--user is required to set or remove an alias (whose project it is)")
    if remove:
        if new is not None:
            raise click.UsageError("--remove takes the alias alone: project-alias OLD --remove")
        run(_remove(path, owner, old))
    elif new is None:
        raise click.UsageError("give the old name and the new one: project-alias atlas orion --user alice")
    else:
        run(_set(path, owner, old, new))


async def _set(path: Path, owner: str, old: str, new: str) -> None:
    async with open_engine(path, create=True) as engine:
        try:
            async with engine.db.transaction() as conn:
                done = await engine.set_project_alias(owner, old, new, source="manual", conn=conn)
                await write_log(conn, at=engine.now(), job=JOB, owner=owner, action="alias",
                                detail={"from": done.old, "to": done.new})
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
    moved = (f"filed its {done.moved} {'memory' if done.moved == 1 else 'memories'} under {done.new}" if done.moved
             else f"nothing was filed under {done.old} yet; new facts of it go under {done.new}")
    click.echo(f"{owner}: {done.old} is now called {done.new}; {moved}")


async def _remove(path: Path, owner: str, alias: str) -> None:
    async with open_engine(path) as engine:
        async with engine.db.transaction() as conn:
            gone = await engine.remove_project_alias(owner, alias, conn=conn)
            if gone is None:
                raise click.ClickException(f"no project alias {alias!r} for {owner}")
            await write_log(conn, at=engine.now(), job=JOB, owner=owner, action="unalias",
                            detail={"alias": alias, "moved": gone.moved})
    click.echo(f"{owner}: {alias} is no longer an alias"
               + (f"; filed the {gone.moved} {'memory' if gone.moved == 1 else 'memories'} the rename moved "
                  "under it again" if gone.moved else ""))


async def _list(path: Path, owner: str | None, as_json: bool) -> None:
    async with open_engine(path) as engine:
        sql = "SELECT owner, alias, project, source, created_at FROM project_aliases"
        rows = await engine.db.fetchall(sql + (" WHERE owner = ?" if owner else "") + " ORDER BY owner, alias",
                                        (owner,) if owner else ())
    if as_json:
        echo_json([dict(r) for r in rows])
    elif not rows:
        click.echo("no project aliases")
    else:
        click.echo(render_table(["USER", "ALIAS", "PROJECT", "SOURCE", "SINCE"], [tuple(r) for r in rows]))
