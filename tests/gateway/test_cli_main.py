"""The ``myclaw`` command itself, as a real process: Ctrl-C at any point
of a start ends it with one line and exit code 130, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A real SIGINT, sent by the process to itself at a chosen moment: while the
# command modules are imported (the slow part of a start), or once a
# command runs. A finder on sys.meta_path sees each import as it begins.
_INTERRUPT_AT = """
import os, signal, sys
# As from a terminal: a shell's background job (CI, a helper's run) starts
# with SIGINT ignored, and Python then keeps it ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
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


def _myclaw_interrupted(home: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
    env["MYCLAW_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-c", _INTERRUPT_AT, module, *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_ctrl_c_while_the_commands_load_is_one_line_and_exit_130(tmp_path: Path) -> None:
    r = _myclaw_interrupted(tmp_path, "gateway.cli.doctor_cmd", "gateway")
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
