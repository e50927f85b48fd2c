"""The ``myclaw`` command itself, as a real process: Ctrl-C at any point
of a start ends it with one line and exit code 130, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest

from tests.procs import with_sigint

REPO = Path(__file__).resolve().parents[2]

# A real SIGINT, sent by the process to itself at a chosen moment: while the
# command modules are imported (the slow part of a start), or once a
# command runs. A finder on sys.meta_path sees each import as it begins.
_INTERRUPT_AT = """
import os, signal, sys
at = sys.argv.pop(1)
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == at:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
from gateway.cli import main
main(prog_name="myclaw")
"""


def _myclaw_interrupted(
    home: Path, module: str, *args: str, sigint: Literal["default", "ignored"] = "default"
) -> subprocess.CompletedProcess[str]:
    """``sigint``: as it starts; by default as from a terminal (a shell's
    background job, as the suite may be, starts with SIGINT ignored)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
    env["MYCLAW_HOME"] = str(home)
    return subprocess.run(
        with_sigint(sigint, sys.executable, "-c", _INTERRUPT_AT, module, *args),
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_ctrl_c_while_the_commands_load_is_one_line_and_exit_130(tmp_path: Path) -> None:
    r = _myclaw_interrupted(tmp_path, "gateway.cli.gateway_cmd", "gateway")
    assert r.returncode == 130, r.stderr
    assert r.stderr == "myclaw: interrupted\n"
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_ctrl_c_as_a_command_starts_is_one_line_and_exit_130(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"channels": {"telegram": {"enabled": true, "token": "1:x"}}}', "utf-8")
    # gateway.app is imported when `myclaw gateway` begins to start the gateway.
    r = _myclaw_interrupted(tmp_path, "gateway.app", "gateway")
    assert r.returncode == 130, r.stderr
    assert r.stderr == "myclaw: interrupted\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


@pytest.mark.parametrize("command", ["gateway", "chat"])
def test_ctrl_c_as_a_command_starts_stops_it_even_if_it_was_started_with_sigint_ignored(
    tmp_path: Path, command: str
) -> None:
    """A gateway started by a script's background job or some supervisors
    ignored Ctrl-C until its own handlers were in, seconds into the start
    (Python keeps an inherited SIG_IGN), then honoured it: whether a stop
    took depended on when it came."""
    (tmp_path / "config.json").write_text('{"channels": {"telegram": {"enabled": true, "token": "1:x"}}}', "utf-8")
    r = _myclaw_interrupted(tmp_path, "gateway.app", command, sigint="ignored")
    assert r.returncode == 130, r.stderr
    assert r.stderr == "myclaw: interrupted\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


def test_an_unknown_command_names_itself_and_exits_2(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-c", "from gateway.cli import main; main(prog_name='myclaw')", "frobnicate"],
        cwd=REPO, env={**os.environ, "MYCLAW_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert r.returncode == 2
    assert "No such command 'frobnicate'" in r.stderr
    assert "Try 'myclaw --help' for help." in r.stderr


def test_the_help_says_where_the_config_is_and_what_the_exit_codes_mean() -> None:
    # A new operator's first look: where the file goes, how to check a
    # setup, and what `myclaw gateway`'s exit code says.
    from click.testing import CliRunner

    from gateway.cli import main

    top = " ".join(CliRunner().invoke(main, ["--help"]).output.split())
    assert "$MYCLAW_HOME/config.json (default ~/.myclaw/config.json)" in top
    assert "config.example.json" in top and "myclaw doctor" in top
    gateway = " ".join(CliRunner().invoke(main, ["gateway", "--help"]).output.split())
    assert "Exit code 2: bad configuration" in gateway
    assert "1: no channel could keep running" in gateway


# `myclaw --help` printed twice in one process: before any command's module
# is loaded (from gateway.cli._COMMANDS), then with all of them loaded.
_HELP_LAZY_THEN_LOADED = """
from gateway.cli import _COMMANDS, main
for load in (False, True):
    if load:
        for name in _COMMANDS:
            main.get_command(None, name)
    try:
        main(["--help"], prog_name="myclaw", terminal_width=400, max_content_width=400)
    except SystemExit:
        pass
    print("----")
"""


def test_the_help_lists_every_command_as_its_own_help_says_without_loading_them() -> None:
    r = subprocess.run([sys.executable, "-c", _HELP_LAZY_THEN_LOADED], cwd=REPO, capture_output=True, text=True,
                       timeout=60, check=True)
    lazy, loaded, _ = r.stdout.split("----\n")
    assert lazy == loaded  # a summary in _COMMANDS that drifted from its command's help shows here
    assert "  memory   Inspect and manage long-term memory.\n" in lazy


# The modules a command leaves loaded, of those that make a start slow.
_LOADED_BY = """
import sys
from gateway.cli import main
try:
    main(sys.argv[1:], prog_name="myclaw")
except SystemExit:
    pass
heavy = ("memory", "memory.engine", "memory.compression", "numpy", "gateway.app")
print("loaded:", *sorted(m for m in sys.modules if m.startswith("gateway.cli.") and m.endswith("_cmd") or m in heavy),
      file=sys.stderr)
"""


def _loaded_by(home: Path, *args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
    env["MYCLAW_HOME"] = str(home)
    r = subprocess.run([sys.executable, "-c", _LOADED_BY, *args], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=60, check=True)
    return set(r.stderr.splitlines()[-1].split()[1:])  # the last line, after "loaded:"


def test_a_command_loads_its_own_modules_not_every_commands(tmp_path: Path) -> None:
    # Each start pays for what it imports (docs/BENCHMARKS.md, "Start cost").
    assert _loaded_by(tmp_path, "--help") == set()
    cron = _loaded_by(tmp_path, "cron", "list")
    assert "gateway.cli.cron_cmd" in cron and "memory" in cron
    assert not cron & {"gateway.cli.memory_cmd", "gateway.cli.doctor_cmd", "gateway.cli.gateway_cmd", "gateway.app",
                       "memory.compression", "numpy"}  # nor the write path's modules
    # Nor the engine (its tokenizers, httpx, the redaction patterns): a
    # submodule (memory.clock) no longer imports it with the package.
    assert "memory.engine" not in cron
    memory = _loaded_by(tmp_path, "memory", "list")
    assert "gateway.cli.memory_cmd" in memory
    assert not memory & {"gateway.cli.cron_cmd", "gateway.cli.memory_files_cmd", "gateway.cli.memory_jobs_cmd", "numpy"}
    listed = _loaded_by(tmp_path, "memory", "--help")  # lists every memory command: their modules are loaded
    assert {"gateway.cli.memory_files_cmd", "gateway.cli.memory_jobs_cmd", "gateway.cli.identity_cmd",
            "gateway.cli.project_cmd"} <= listed


# Every command module of gateway/cli loaded: what the groups then hold
# against what they name before (their own commands and their lazy tables).
_REACHABLE = """
import importlib, pkgutil
import gateway.cli
from gateway.cli import main
memory = main.get_command(None, "memory")
before = {"main": set(main.lazy) | set(main.commands), "memory": set(memory.lazy) | set(memory.commands)}
for module in pkgutil.iter_modules(gateway.cli.__path__):
    importlib.import_module("gateway.cli." + module.name)
after = {"main": set(main.commands), "memory": set(memory.commands)}
print(before == after, sorted(after["main"] ^ before["main"]), sorted(after["memory"] ^ before["memory"]))
"""


def test_every_command_is_found_by_name_without_loading_its_module_first() -> None:
    # A command added to a module but not to its group's table would be
    # "No such command" (and missing from --help) until something loads it.
    r = subprocess.run([sys.executable, "-c", _REACHABLE], cwd=REPO, capture_output=True, text=True, timeout=60,
                       check=True)
    assert r.stdout.strip() == "True [] []"


def test_doctor_offline_loads_neither_the_gateway_nor_numpy(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"channels": {"telegram": {"enabled": true, "token": "1:x"}}}', "utf-8")
    assert "numpy" not in _loaded_by(tmp_path, "memory", "add", "--user", "ada", "likes green tea")  # memory.db made
    doctor = _loaded_by(tmp_path, "doctor", "--offline")  # its checks of memory.db (the vectors') included
    assert "gateway.cli.doctor_cmd" in doctor and not doctor & {"gateway.app", "numpy"}
