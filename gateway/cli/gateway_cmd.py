"""``myclaw gateway`` (all configured channels) and ``myclaw chat`` (this
terminal). Exit codes: 0 stopped normally, 1 the gateway could not keep
running (no channel left), 2 bad configuration, 130 the gateway's start-up
cut short by Ctrl-C."""

from __future__ import annotations

import asyncio
import functools
import getpass
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

import click
import structlog

from gateway.config import Config, ConfigError, Paths, load_config
from gateway.credentials import config_secrets
from gateway.logging import configure_logging

from . import main

__all__ = ["chat", "gateway", "run_chat", "run_gateway"]

# A typo ("--log-level verbose") is a usage error, not a traceback from logging.
LOG_LEVEL = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False)


class _Stop:
    """SIGINT / SIGTERM set ``event``, once, and say what happens next;
    ``signal`` remembers the first (Ctrl-C during start-up exits 130)."""

    def __init__(self, event: asyncio.Event) -> None:
        self.event = event
        self.signal: signal.Signals | None = None
        self.starting = False

    def __call__(self, sig: signal.Signals) -> None:
        # Shutdown answers what was already taken first, which can take a
        # few seconds: say so, or Ctrl-C looks ignored.
        if not self.event.is_set():
            self.signal = sig
            structlog.get_logger(component="gateway").info(
                f"{sig.name} received during start-up: stopping" if self.starting
                else f"{sig.name} received: stopping after the messages already taken are answered"
            )
        self.event.set()


def _claim_sigint() -> None:
    """Ctrl-C raises KeyboardInterrupt from here on, even in a process
    started with SIGINT ignored (a script's background job, some
    supervisors): Python keeps that, so a Ctrl-C early in the start was
    dropped while one after :func:`_install_signals` stopped it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _install_signals(stop: asyncio.Event) -> _Stop:
    loop = asyncio.get_running_loop()
    handler = _Stop(stop)
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handler, sig)
        except (NotImplementedError, RuntimeError):  # not the main thread / not POSIX
            pass
    return handler


async def _open_and_start(app: Any) -> None:
    await app.open()
    await app.start()


async def _start_unless_stopped(app: Any, stop: asyncio.Event) -> bool:
    """Open and start ``app``; False when ``stop`` is set first. Then the
    start-up is cancelled where it is (a channel still connecting, say) and
    the caller's ``app.close()`` closes what it opened; a write under way
    rolls back (every write is one transaction)."""
    startup = asyncio.create_task(_open_and_start(app), name="gateway-start")
    stopper = asyncio.create_task(stop.wait(), name="stop-signal")
    try:
        await asyncio.wait({startup, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
        if not startup.done():
            startup.cancel()
            await asyncio.wait({startup})  # not `await startup`: our own cancellation must stay ours
    if startup.cancelled():
        return False
    startup.result()  # the start's own error (ConfigError, StorageError...), even if a stop came too
    return not stop.is_set()


async def run_gateway(
    cfg: Config, paths: Paths, *, stop: asyncio.Event | None = None, tune_runtime: bool = False
) -> int:
    """``tune_runtime``: apply :func:`gateway.runtime.tune_runtime` once
    started (``myclaw gateway`` does; it changes process-wide settings).
    SIGINT / SIGTERM (or ``stop``) during start-up cut it short: exit 130
    for Ctrl-C, as when it comes before the gateway code runs, else 0."""
    from gateway.app import App

    from . import INTERRUPTED_CODE

    from gateway.app import StorageError
    from memory.errorlog import error_fields

    stop = stop or asyncio.Event()
    signals = _install_signals(stop)
    app = App(cfg, paths)
    log = structlog.get_logger(component="gateway")
    started = refused = False
    try:
        signals.starting = True
        try:
            started = await _start_unless_stopped(app, stop)
        except (ConfigError, StorageError) as exc:  # operator's words (another gateway, a taken port)
            refused = True
            log.error(f"gateway not started: {exc}")
            raise
        except Exception as exc:
            refused = True
            log.error("gateway not started", **error_fields(exc))  # a bug's text may quote a message
            raise
        signals.starting = False
        if not started:
            return INTERRUPTED_CODE if signals.signal is signal.SIGINT else 0
        if tune_runtime:
            from gateway.runtime import tune_runtime as tune

            tune()
        # Replies may go out before this (once channels are up): this line
        # says start-up is over, a stop from here on is a normal one.
        # What runs, where and which build: an operator with two homes, or after an upgrade.
        from gateway.backup import myclaw_version

        if app.channels:  # none: app.wait() says so and exits 1; "running" would mislead
            structlog.get_logger(component="gateway").info(
                "gateway running", channels=sorted(app.channels), home=str(paths.home), pid=os.getpid(),
                version=myclaw_version())
        return await app.wait(stop)
    finally:
        await app.close()
        # A start cut short by a stop stopped too; one refused never ran,
        # even with a stop set as it failed (its line said so already).
        if started or (stop.is_set() and not refused):
            log.info("gateway stopped")


async def run_chat(cfg: Config, paths: Paths, *, user: str) -> int:
    from channels.terminal import TerminalChannel
    from gateway.app import App

    stop = asyncio.Event()
    _install_signals(stop)
    app = App(cfg, paths, config_channels=False)
    terminal = TerminalChannel(app.bus, sender_id=user, exports=paths.exports_dir)
    app.add_channel(terminal)
    try:
        await app.open()
        await app.start()
        closed = asyncio.create_task(terminal.wait_closed())
        closed.add_done_callback(lambda _: stop.set())
        code = await app.wait(stop)
        closed.cancel()
        return code
    finally:
        await app.close()


def _setup_logging(cfg: Config, level: str) -> None:
    configure_logging(level=level, secrets=config_secrets(cfg))
    # aiosqlite logs every statement with its parameters at DEBUG: message
    # text would end up in the log, and it drowns the per-message timings.
    logging.getLogger("aiosqlite").setLevel(max(logging.INFO, logging.getLogger().level))


def _level(flag: str | None, default: str) -> str:
    """--log-level, else MYCLAW_LOG_LEVEL (as every other command reads it),
    else the command's default."""
    import os

    from ._common import LOG_LEVELS

    if flag is not None:
        return flag.upper()
    raw = os.environ.get("MYCLAW_LOG_LEVEL")
    if raw is None:
        return default
    if raw.strip().upper() not in LOG_LEVELS:
        click.echo(f"myclaw: MYCLAW_LOG_LEVEL: unknown level {raw!r} (use {', '.join(LOG_LEVELS)})", err=True)
        sys.exit(2)
    return raw.strip().upper()


def _load(require: bool, *, channels: bool) -> tuple[Config, Paths]:
    """The config, or exit 2 saying what is wrong; ``channels``: the
    enabled channels will run (their credentials count)."""
    from gateway.credentials import missing_in_use, placeholders_in_use

    from ._common import warn_unknown_env

    warn_unknown_env()
    try:
        cfg = load_config(require=require)
    except ConfigError as exc:
        click.echo(f"myclaw: {exc}", err=True)
        sys.exit(2)
    if left := placeholders_in_use(cfg, channels=channels):
        # Every reply would fail with the provider's 401, or the channel not connect.
        click.echo("myclaw: still the placeholders from config.example.json: put the real values in their place\n  "
                   + "\n  ".join(left), err=True)
        sys.exit(2)
    if channels and (missing := missing_in_use(cfg)):
        # Said now, plainly: not after opening every data file, as if the platform had refused the channel.
        click.echo("myclaw: not set, and the channel cannot run without it:\n  " + "\n  ".join(missing), err=True)
        sys.exit(2)
    return cfg, Paths.from_env()


def _run(start: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """``asyncio.run(start())``, its errors as exit codes. The coroutine is
    made only once the gateway's modules are imported, which a Ctrl-C can
    cut short (not to leave it never awaited)."""
    from gateway.app import StorageError

    try:
        return asyncio.run(start())
    except ConfigError as exc:
        click.echo(f"myclaw: {exc}", err=True)
        return 2
    except StorageError as exc:
        click.echo(f"myclaw: {exc}", err=True)
        return 1


@main.command()
@click.option("--log-level", type=LOG_LEVEL, default=None,
              help="DEBUG shows per-message timings.  [default: MYCLAW_LOG_LEVEL, else INFO]")
def gateway(log_level: str | None) -> None:
    """Run the gateway with every channel enabled in the config.

    Exit code 2: bad configuration (named); 1: no channel could keep running,
    a data file could not be opened, or another gateway runs on this
    MYCLAW_HOME; 130: Ctrl-C during start-up. Ctrl-C or SIGTERM once it
    runs stops it cleanly (exit 0).
    """
    _claim_sigint()
    level = _level(log_level, "INFO")
    cfg, paths = _load(require=True, channels=True)
    _setup_logging(cfg, level)
    feishu = cfg.channels.feishu
    if feishu.enabled and feishu.mode == "websocket":
        # Seconds of imports, here rather than on the running loop (or in a
        # thread, where a busy loop made them take minutes).
        from channels.feishu.longconn import preload_sdk

        preload_sdk()
    sys.exit(_run(functools.partial(run_gateway, cfg, paths, tune_runtime=True)))


@main.command()
@click.option("--user", default=None, help="Sender id in the terminal channel (default: your login name).")
@click.option("--log-level", type=LOG_LEVEL, default=None, help="[default: MYCLAW_LOG_LEVEL, else WARNING]")
def chat(user: str | None, log_level: str | None) -> None:
    """Talk to myclaw in this terminal (needs only an LLM endpoint).

    Memory is shared with other channels through memory.identities, e.g.
    {"alice": ["terminal:alice", "telegram:777"]}.
    """
    _claim_sigint()
    level = _level(log_level, "WARNING")
    cfg, paths = _load(require=False, channels=False)
    _setup_logging(cfg, level)
    sys.exit(_run(functools.partial(run_chat, cfg, paths, user=user or getpass.getuser())))
