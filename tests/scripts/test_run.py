"""scripts/run and scripts/test: the venv's install runs when the
dependencies may have changed, not at every start. The scripts run for
real (bash) in a copy of the repository's layout whose ``.venv/bin``
records what it was asked to do."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.scripts._load import SCRIPTS

# Stands in for the venv's python and myclaw: logs its arguments, succeeds.
_RECORDER = '#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "$(dirname "$0")/../calls.log"\n'


def _repo(tmp_path: Path, script: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPTS / script, repo / "scripts" / script)
    (repo / "pyproject.toml").write_text('[project]\nname = "myclaw"\n', encoding="utf-8")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "myclaw"):
        (bin_dir / name).write_text(_RECORDER, encoding="utf-8")
        (bin_dir / name).chmod(stat.S_IRWXU)
    return repo


def _run(repo: Path, script: str, *args: str) -> list[str]:
    log = repo / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    r = subprocess.run([str(repo / "scripts" / script), *args], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PYTHON": "false"})
    assert r.returncode == 0, r.stderr
    return log.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize(("script", "runs"), [("run", "myclaw gateway --help"), ("test", "python -m pytest -k x")])
def test_the_install_runs_again_only_when_pyproject_changes(tmp_path: Path, script: str, runs: str) -> None:
    repo = _repo(tmp_path, script)
    args = runs.split()[-1:] if script == "run" else ["-k", "x"]
    installs = [c for c in _run(repo, script, *args) if "pip install" in c]
    assert len(installs) == 2  # pip itself, then myclaw
    # A restart with nothing changed goes straight to the command: no pip (seconds, and PyPI) on every start.
    assert _run(repo, script, *args) == [runs]
    pyproject = repo / "pyproject.toml"
    pyproject.write_text('[project]\nname = "myclaw"\ndependencies = ["httpx"]\n', encoding="utf-8")  # a pull
    assert [c for c in _run(repo, script, *args) if "pip install" in c] == installs
    assert _run(repo, script, *args) == [runs]


def test_a_failed_install_is_tried_again_at_the_next_start(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "run")
    python = repo / ".venv" / "bin" / "python"
    python.write_text(_RECORDER + 'case "$*" in *"-e ."*) echo "no network" >&2; exit 1;; esac\n', encoding="utf-8")
    r = subprocess.run([str(repo / "scripts" / "run")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "no network" in r.stderr and "installing dependencies failed" in r.stderr
    python.write_text(_RECORDER, encoding="utf-8")
    assert len([c for c in _run(repo, "run") if "pip install" in c]) == 2


def test_run_becomes_the_gateway_so_a_signal_sent_to_it_reaches_myclaw(tmp_path: Path) -> None:
    # A supervisor signals the pid it started: a bash left waiting in between
    # would take SIGINT/SIGTERM itself (or ignore it, as a background job).
    repo = _repo(tmp_path, "run")
    _run(repo, "run")  # the install, done once
    myclaw = repo / ".venv" / "bin" / "myclaw"
    myclaw.write_text('#!/usr/bin/env bash\necho "myclaw pid $$"\n', encoding="utf-8")
    with subprocess.Popen([str(repo / "scripts" / "run"), "--log-level", "info"], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHON": "false"}) as proc:
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out == f"myclaw pid {proc.pid}\n"
