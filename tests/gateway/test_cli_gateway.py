"""``myclaw gateway`` and ``myclaw chat`` as an operator runs them: a real
process, a real config file under a temporary MYCLAW_HOME, the fake LLM.
A mistake gets a message naming what to change and an exit code, never a
traceback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Literal

import pytest
from click.testing import CliRunner

from gateway.cli import main
from tests.fakes.openai_server import FakeOpenAI, Reply, said
from tests.procs import START, finished, killed, with_sigint

REPO = Path(__file__).resolve().parents[2]


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_")}
    env.update({"MYCLAW_HOME": str(home), **extra})
    return env


async def _myclaw(home: Path, *args: str, stdin: str = "", **env: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "from gateway.cli import main; main()", *args,
        cwd=REPO, env=_env(home, **env),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await finished(proc, stdin.encode())
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def test_an_unknown_log_level_is_a_usage_error_naming_the_choices() -> None:
    for command in ("gateway", "chat"):
        r = CliRunner().invoke(main, [command, "--log-level", "verbose"])
        assert r.exit_code == 2, r.output
        assert "Invalid value for '--log-level': 'verbose' is not one of" in r.output
        assert "'debug', 'info', 'warning', 'error'" in r.output


async def test_a_log_level_in_lower_case_is_taken(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    code, out, err = await _myclaw(
        tmp_path, "chat", "--user", "ada", "--log-level", "debug", stdin="hello\n",
        MYCLAW_PROVIDER_BASE_URL=fake_llm.url, MYCLAW_PROVIDER_API_KEY=fake_llm.api_key or "",
    )
    assert code == 0, err
    assert out.splitlines() == ["myclaw> re: hello"]
    assert "message handled" in err  # DEBUG: the per-message timings


async def test_a_run_without_vector_recall_never_loads_numpy(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    # numpy is a good part of a start's imports; only hybrid recall (memory.embedding) uses it.
    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    code = "import sys\nfrom gateway.cli import main\ntry:\n    main()\nfinally:\n    print('numpy loaded:', 'numpy' in sys.modules, file=sys.stderr)"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, "chat", "--user", "ada",
        cwd=REPO, env=_env(tmp_path, MYCLAW_PROVIDER_BASE_URL=fake_llm.url, MYCLAW_PROVIDER_API_KEY=fake_llm.api_key or ""),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await finished(proc, b"hello\n")
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == ["myclaw> re: hello"]
    assert err.decode().splitlines()[-1] == "numpy loaded: False"


async def test_a_port_already_in_use_is_named_with_its_setting_and_exits_2(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    with socket.socket() as taken:  # another gateway, or anything else, on the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        doc = {
            "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
            "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop", "baseUrl": "http://127.0.0.1:9/bot"}},
            "gateway": {"port": port, "admin": {"enabled": True, "token": "admin-token-0123456789abcdef"}},
        }
        (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        code, _, err = await _myclaw(tmp_path, "gateway")
    assert code == 2, err
    assert f"cannot listen on 127.0.0.1:{port} (gateway.host / gateway.port)" in err
    assert "the port is taken; change gateway.port, or stop what uses it (another myclaw gateway?)" in err
    assert "Traceback" not in err


async def test_a_gateway_host_not_of_this_machine_is_named_as_such(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    doc = {
        "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop", "baseUrl": "http://127.0.0.1:9/bot"}},
        "gateway": {"host": "192.0.2.7", "port": 0, "admin": {"enabled": True, "token": "admin-token-0123456789abcdef"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = await _myclaw(tmp_path, "gateway")
    assert code == 2, err
    assert "cannot listen on 192.0.2.7:0 (gateway.host / gateway.port): 192.0.2.7 is not an address of this machine" in err
    assert "set gateway.host to one of its addresses (127.0.0.1, or 0.0.0.0 for all)" in err
    assert "another myclaw gateway" not in err  # not what is wrong here
    assert "Traceback" not in err


async def test_sigterm_is_acknowledged_and_the_stop_logged(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    import signal

    from tests.fakes.telegram_server import FakeTelegram

    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    async with FakeTelegram() as tg:
        doc = {
            "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
            "channels": {"telegram": {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}},
            "gateway": {"port": 0, "admin": {"enabled": True, "token": "admin-token-0123456789abcdef"}},
        }
        (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from gateway.cli import main; main()", "gateway",
            cwd=REPO, env=_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            tg.push_text(42, 42, "hello")
            await tg.wait_sent(1, timeout=START)  # takes in the process's start
            assert tg.texts(42) == ["re: hello"]
            # A reply can go out before start-up is over (the cron's catch-up
            # comes last); a SIGTERM then cuts the start, logged as such.
            assert proc.stderr is not None
            head = b""
            while b'"gateway running"' not in head:
                line = await asyncio.wait_for(proc.stderr.readline(), 30)
                assert line, head.decode()
                head += line
            proc.send_signal(signal.SIGTERM)
            _, err = await finished(proc, bound=30)  # the stop alone
        finally:
            await killed(proc)
    text = head.decode() + err.decode()
    assert proc.returncode == 0, text
    assert "SIGTERM received: stopping after the messages already taken are answered" in text
    assert "gateway stopped" in text.rstrip().splitlines()[-1]  # the last line: it is over
    assert '"telegram channel stopped"' in text  # each channel says it closed, as Feishu's does
    assert tg.token not in text and (fake_llm.api_key or "") not in text
    # the start says what runs, where and which: an operator with two homes, or after an upgrade
    # The memory page is announced once it listens, on the port it got.
    lines = head.decode().splitlines()
    [page] = [i for i, x in enumerate(lines) if '"memory page enabled"' in x]
    assert any('"http server listening"' in x for x in lines[:page]) and json.loads(lines[page])["port"] > 0
    [running] = [json.loads(x) for x in head.decode().splitlines() if '"gateway running"' in x]
    assert running["channels"] == ["telegram"] and running["home"] == str(tmp_path)
    assert running["pid"] == proc.pid and running["version"] == version("myclaw")


async def _one_message_then_sigterm(home: Path, fake_llm: FakeOpenAI, *args: str, **env: str) -> tuple[int, str]:
    """``myclaw gateway`` answers one Telegram message and is stopped: its exit code and stderr."""
    home.mkdir(exist_ok=True)
    import signal

    from tests.fakes.telegram_server import FakeTelegram

    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    async with FakeTelegram() as tg:
        doc = {
            "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
            "channels": {"telegram": {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}},
        }
        (home / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from gateway.cli import main; main()", "gateway", *args,
            cwd=REPO, env=_env(home, **env), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            tg.push_text(42, 42, "hello")
            await tg.wait_sent(1, timeout=START)  # takes in the process's start
            proc.send_signal(signal.SIGTERM)
            _, err = await finished(proc, bound=30)  # the stop alone
        finally:
            await killed(proc)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_the_gateway_takes_its_log_level_from_myclaw_log_level_and_the_flag_wins(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    # README: MYCLAW_LOG_LEVEL sets every command's level; --log-level, where there is one, wins.
    code, err = await _one_message_then_sigterm(tmp_path / "a", fake_llm, MYCLAW_LOG_LEVEL="debug")
    assert code == 0, err
    assert "message handled" in err  # DEBUG: the per-message timings
    code, err = await _one_message_then_sigterm(tmp_path / "b", fake_llm, "--log-level", "info", MYCLAW_LOG_LEVEL="DEBUG")
    assert code == 0, err
    assert "message handled" not in err and "gateway stopped" in err
    code, err = await _one_message_then_sigterm(tmp_path / "c", fake_llm, MYCLAW_LOG_LEVEL="WARNING")
    assert code == 0, err
    assert "gateway stopped" not in err  # INFO is below WARNING


async def test_an_unknown_myclaw_log_level_is_named_before_anything_is_made(tmp_path: Path) -> None:
    for command in ("gateway", "chat"):
        code, out, err = await _myclaw(tmp_path, command, MYCLAW_LOG_LEVEL="verbose")
        assert code == 2 and out == "", err
        assert "MYCLAW_LOG_LEVEL: unknown level 'verbose' (use DEBUG, INFO, WARNING, ERROR)" in err
        assert list(tmp_path.iterdir()) == []


async def test_a_misspelt_setting_in_the_environment_is_named_before_anything_else(tmp_path: Path) -> None:
    code, out, err = await _myclaw(tmp_path, "gateway", MYCLAW_TELEGRAM_TOKN="123:secret-token-abcdef")
    assert code == 2 and "no config file" in err and out == ""
    assert "MYCLAW_TELEGRAM_TOKN (did you mean MYCLAW_TELEGRAM_TOKEN?) is not a myclaw setting" in err
    assert "secret-token-abcdef" not in err  # the name, never the value


async def test_a_data_file_that_is_not_a_database_is_named_and_left_as_it_was(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    doc = {
        "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop", "baseUrl": "http://127.0.0.1:9/bot"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("memory.db", "gateway.db"):
        broken = data / name
        broken.write_bytes(b"this is not a database, but it may be someone's only copy" * 100)
        code, _, err = await _myclaw(tmp_path, "gateway")
        assert code == 1, err
        assert f"myclaw: {broken}: cannot open it as a myclaw database (file is not a database)" in err
        assert "Traceback" not in err
        assert broken.read_bytes() == b"this is not a database, but it may be someone's only copy" * 100
        broken.unlink()


async def test_a_data_folder_that_cannot_be_made_is_named_with_what_to_do(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    # A file where the data folder goes stands for any folder that cannot be
    # made or written (running as root, permissions alone would not stop it).
    doc = {
        "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop", "baseUrl": "http://127.0.0.1:9/bot"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "data").write_text("not a folder", encoding="utf-8")
    for command in ("gateway", "chat"):
        code, _, err = await _myclaw(tmp_path, command, stdin="hello\n")
        assert code == 1, err
        assert f"myclaw: {tmp_path / 'data'}: cannot use it as the data folder" in err
        assert "MYCLAW_HOME" in err
        assert "Traceback" not in err
        assert (tmp_path / "data").read_text(encoding="utf-8") == "not a folder"


async def test_no_channel_enabled_exits_2_before_making_any_data_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"channels": {"telegram": {"enabled": False}}}), encoding="utf-8")
    code, _, err = await _myclaw(tmp_path, "gateway")
    assert code == 2, err
    assert "myclaw: no channel is enabled: set channels.telegram.enabled or channels.feishu.enabled" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # no data folder left behind


async def test_a_credential_left_as_the_examples_placeholder_stops_the_start_naming_it(
        tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    # An operator copies config.example.json and enables Telegram, but fills
    # in nothing: every reply would fail with the provider's 401, so say so now.
    (tmp_path / "config.json").write_text((REPO / "config.example.json").read_text(encoding="utf-8"), encoding="utf-8")
    code, _, err = await _myclaw(tmp_path, "gateway", MYCLAW_TELEGRAM_ENABLED="true")
    assert code == 2, err
    assert err.splitlines() == [
        "myclaw: still the placeholders from config.example.json: put the real values in their place",
        "  provider.apiKey (or MYCLAW_PROVIDER_API_KEY)",
        "  channels.telegram.token (or MYCLAW_TELEGRAM_TOKEN)",
        '  channels.telegram.allowFrom: "your_username", "123456789" -> your users\' Telegram ids or usernames'
        ' (a sender not listed is logged with their sender_id; [] lets anyone in)',
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    # `myclaw chat` runs no channel: only the model's key counts; once given
    # (the memory model uses the same provider), it answers.
    code, _, err = await _myclaw(tmp_path, "chat", "--user", "ada")
    assert code == 2, err
    assert "provider.apiKey (or MYCLAW_PROVIDER_API_KEY)" in err and "telegram" not in err
    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    code, out, err = await _myclaw(tmp_path, "chat", "--user", "ada", stdin="hello\n",
                                   MYCLAW_PROVIDER_BASE_URL=fake_llm.url, MYCLAW_PROVIDER_API_KEY=fake_llm.api_key or "")
    assert code == 0, err
    assert out.splitlines() == ["myclaw> re: hello"]


async def test_an_enabled_channel_without_its_credentials_exits_2_naming_them(tmp_path: Path) -> None:
    # Feishu enabled with its appId but no appSecret: the start opened every
    # data file, logged JSON errors and exited 1, as if Feishu had refused it.
    doc = {"provider": {"apiKey": "sk-real-key-123"}, "channels": {
        "telegram": {"enabled": True}, "feishu": {"enabled": True, "appId": "cli_a1b2c3"}}}
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = await _myclaw(tmp_path, "gateway")
    assert code == 2, err
    assert err.splitlines() == [
        "myclaw: not set, and the channel cannot run without it:",
        "  channels.telegram.token (or MYCLAW_TELEGRAM_TOKEN)",
        "  channels.feishu.appSecret (or MYCLAW_FEISHU_APP_SECRET)",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]  # nothing made before saying so


async def test_every_file_a_run_makes_in_the_data_folder_is_owner_only(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    # The usual umask (022) would leave a file others can read; the lock files included.
    import stat

    fake_llm.responder = lambda body: Reply(content="re: " + said(body))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import os; os.umask(0o022); from gateway.cli import main; main()",
        "chat", "--user", "ada", cwd=REPO,
        env=_env(tmp_path, MYCLAW_PROVIDER_BASE_URL=fake_llm.url, MYCLAW_PROVIDER_API_KEY=fake_llm.api_key or ""),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await finished(proc, b"hello\n")
    assert proc.returncode == 0, err.decode()
    made = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "data").iterdir() if p.is_file()}
    assert "myclaw.lock" in made
    assert {n: m for n, m in made.items() if m != 0o600} == {}


@pytest.mark.parametrize("command", ["gateway", "chat"])
async def test_ctrl_c_while_the_command_imports_ends_it_when_sigint_came_ignored(tmp_path: Path, command: str) -> None:
    """Started with SIGINT ignored (a script's background job), the command
    took Ctrl-C only once its module had imported (~1 s): one during the
    import was dropped and the start went on. It ends the process now, as
    with SIGINT at its default. ``-X importtime`` says when the command's
    module is importing (gateway.timezones: gateway_cmd imports it, the
    entry point does not)."""
    import signal

    proc = await asyncio.create_subprocess_exec(
        *with_sigint("ignored", sys.executable, "-X", "importtime", "-c", "from gateway.cli import main; main()",
                     command),
        cwd=REPO, env=_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    seen: list[str] = []
    try:
        async def until_importing() -> None:
            assert proc.stderr is not None
            while line := (await proc.stderr.readline()).decode():
                seen.append(line)
                if line.rstrip().endswith("gateway.timezones"):
                    return
            raise AssertionError("".join(seen))

        await asyncio.wait_for(until_importing(), START)
        proc.send_signal(signal.SIGINT)
        _, rest = await finished(proc, bound=60)
    finally:
        await killed(proc)
    text = "".join(seen) + rest.decode()
    assert proc.returncode == 130, text[-2000:]
    assert "myclaw: interrupted" in text and "Traceback" not in text


@pytest.mark.parametrize(("sig", "code", "sigint"), [
    ("SIGINT", 130, "default"),
    ("SIGINT", 130, "ignored"),  # started by a script's background job: its own handlers still take Ctrl-C
    ("SIGTERM", 0, "default"),
])
async def test_ctrl_c_during_start_up_stops_it_and_closes_what_it_opened(
    tmp_path: Path, fake_llm: FakeOpenAI, sig: str, code: int, sigint: Literal["default", "ignored"]
) -> None:
    """Telegram unreachable: start() waits for it (channels.telegram's
    start-up wait) and Ctrl-C was logged but ignored until then."""
    import signal

    from gateway.datalock import running_pid

    with socket.socket() as s:  # a port nothing listens on: every getMe is refused
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    doc = {
        "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
        "gateway": {"port": 0, "admin": {"enabled": True, "token": "admin-token-0123456789abcdef"}},
        "channels": {"telegram": {"enabled": True, "token": "123:unreachable-token-abc",
                                  "baseUrl": f"http://127.0.0.1:{dead}/bot"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    proc = await asyncio.create_subprocess_exec(
        *with_sigint(sigint, sys.executable, "-c", "from gateway.cli import main; main()", "gateway"),
        cwd=REPO, env=_env(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        async def until_telegram_is_tried() -> None:
            assert proc.stderr is not None
            while line := (await proc.stderr.readline()).decode():
                seen.append(line)
                if "Telegram getMe failed; retrying" in line:
                    return
            raise AssertionError("".join(seen))

        await asyncio.wait_for(until_telegram_is_tried(), START)  # takes in the process's start
        proc.send_signal(getattr(signal, sig))
        _, rest = await finished(proc, bound=30)  # the stop alone
    finally:
        await killed(proc)
    text = "".join(seen) + rest.decode()
    assert proc.returncode == code, text
    assert f"{sig} received during start-up: stopping" in text
    assert "still trying in the background" not in text and "channel started" not in text  # the start was cut
    assert "http server stopped" in text  # what it opened is closed
    assert "gateway stopped" in text.rstrip().splitlines()[-1]
    assert "Traceback" not in text and "unreachable-token" not in text
    data = tmp_path / "data"
    assert running_pid(data) is None
    assert sorted(p.name for p in data.iterdir() if p.name.endswith("-wal")) == []  # databases closed, not cut off


async def test_a_gateway_whose_only_channel_is_refused_never_says_it_is_running(tmp_path: Path,
                                                                               fake_llm: FakeOpenAI) -> None:
    """A rejected bot token (a newcomer's copy-paste slip): exit 1, the
    refusal named, and no "gateway running" line in between to mislead a
    supervisor or an operator reading the log."""
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeTelegram() as tg:
        doc = {
            "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
            "channels": {"telegram": {"enabled": True, "token": "123456789:" + "x" * 35, "baseUrl": tg.base_url}},
        }
        (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        code, out, err = await _myclaw(tmp_path, "gateway")
    assert code == 1, err
    assert "Telegram rejected the bot token" in err and "no channel is running; stopping" in err
    assert '"gateway running"' not in err, err


async def test_a_gateway_that_never_started_says_so_not_that_it_stopped(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """Refused (another gateway holds the home's lock) or its port taken:
    the log says it was not started and why, never "gateway stopped", and
    the memory page is announced only once it listens."""
    from gateway.datalock import GatewayLock

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        doc = {
            "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
            "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop", "baseUrl": "http://127.0.0.1:9/bot"}},
            "gateway": {"port": port, "admin": {"enabled": True, "token": "admin-token-0123456789abcdef"}},
        }
        (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
        code, _, err = await _myclaw(tmp_path, "gateway")
    assert code == 2, err
    assert "gateway not started: cannot listen on" in err
    assert "gateway stopped" not in err and "memory page enabled" not in err

    lock = GatewayLock(tmp_path / "data")  # the first gateway, as far as the second can tell
    lock.acquire()
    try:
        code, _, err = await _myclaw(tmp_path, "gateway")
    finally:
        lock.release()
    assert code == 1, err
    assert "gateway not started: another gateway is running on" in err
    assert "gateway stopped" not in err


async def test_a_start_that_fails_as_a_stop_comes_says_it_was_not_started_only(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """A stop signal set while the start fails (a supervisor's SIGTERM as
    the start is refused): one line, the true one, "gateway not started"
    with why; never "gateway stopped" after it, as if it had run."""
    from structlog.testing import capture_logs

    from gateway.app import StorageError
    from gateway.cli.gateway_cmd import run_gateway
    from gateway.config import Paths, load_config
    from gateway.datalock import GatewayLock

    doc = {
        "provider": {"baseUrl": fake_llm.url, "apiKey": fake_llm.api_key},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop", "baseUrl": "http://127.0.0.1:9/bot"}},
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    paths = Paths(tmp_path)
    cfg = load_config(paths.config_file, {})
    lock = GatewayLock(paths.data_dir)  # another gateway holds the home: the start is refused at once
    lock.acquire()
    stop = asyncio.Event()
    stop.set()  # and a stop came as it was: both done in the start's first step, the refusal raised
    try:
        with capture_logs() as logs, pytest.raises(StorageError):
            await run_gateway(cfg, paths, stop=stop)
    finally:
        lock.release()
    said = [e["event"] for e in logs if e.get("component") == "gateway" and "gateway " in e["event"]]
    assert len(said) == 1 and said[0].startswith("gateway not started: another gateway is running on"), said
