"""``myclaw backup`` and ``myclaw restore`` (gateway/backup.py)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import click

from gateway.backup import BackupError, Manifest, backup, restore, returning_users, verify
from gateway.config import Paths

from . import main
from ._common import confirm, counted, data_lock, echo_json, json_option, load_cli_config, shares_data

RESTORING = "`myclaw restore` (putting a backup in place)"


def _summary(m: Manifest) -> str:
    files = ", ".join(f"{f.role} ({f.bytes / 1e6:.1f} MB, schema v{f.schema_version})" for f in m.files)
    files = files or "no data files"
    return f"{files}; {counted(m.workspace_files, 'workspace files')}; made {m.created_at} by myclaw {m.myclaw_version}"


@main.command("backup")
@click.argument("dest", required=False, type=click.Path(file_okay=False, path_type=Path))
@json_option
@shares_data
def backup_cmd(dest: Path | None, as_json: bool) -> None:
    """Copy every data file and the workspace into DEST (default:
    $MYCLAW_HOME/backups/<time>), safely while the gateway runs. The config
    (with its secrets) is not included. The folder is readable by you only:
    it holds everything people told the bot, and erasing a memory later does
    not reach it."""
    cfg = load_cli_config()
    paths = Paths.from_env()
    dest = dest or paths.home / "backups" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        manifest = backup(cfg, paths, dest)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        echo_json({"path": str(dest), **asdict(manifest)})
    else:
        click.echo(f"backed up to {dest}: {_summary(manifest)}")


@main.command("restore")
@click.argument("src", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Only check the backup (checksums, database integrity); change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def restore_cmd(src: Path, check: bool, yes: bool) -> None:
    """Put the backup in SRC in place of the current data. The current files
    are moved aside into data/before-restore-<time>/, not deleted. Stop the
    gateway (and `myclaw chat`) first."""
    cfg = load_cli_config()
    paths = Paths.from_env()
    try:
        manifest = verify(src)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{src}: ok: {_summary(manifest)}", err=not check)
    back = returning_users(cfg, paths, src, manifest)
    if back:  # before the question: an erasure request answered since is undone by this
        click.echo(f"restoring it brings back {_users(back)}", err=not check)
    if check:
        return
    with data_lock(exclusive=RESTORING):
        if not yes and not confirm(f"Replace the data in {paths.home} with this backup?"):
            raise click.ClickException("cancelled; nothing changed")
        try:
            aside = restore(cfg, paths, src)
        except BackupError as exc:
            raise click.ClickException(str(exc)) from None
    if any(aside.iterdir()):
        click.echo(f"restored from {src}; the files it replaced are in {aside}")
    else:  # a new home: nothing was there to move aside
        aside.rmdir()
        click.echo(f"restored from {src} (there was no data here to replace)")
    if back:
        # An erasure request answered since the backup is undone by it: said, with the fix.
        again = " / ".join(f"myclaw memory forget --user {u}" for u in back[:3]) + (" ..." if len(back) > 3 else "")
        click.echo(f"it brought back {_users(back)}; erase them again if they must be ({again}), or run "
                   "`myclaw memory merge-identities` for a merged handle")


def _users(owners: list[str]) -> str:
    n = len(owners)
    return (f"{n} user{'s' if n != 1 else ''} this home no longer has (erased or merged since it was made): "
            + ", ".join(owners))
