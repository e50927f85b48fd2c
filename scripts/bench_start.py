"""What one ``myclaw`` start costs: wall and CPU seconds of the commands an
operator types, and of a gateway start up to "gateway running"
(docs/BENCHMARKS.md, "Start cost").

Every run is a fresh interpreter (``python -c "from gateway.cli import
main; main()" ...`` from this checkout, as the tests spawn it) on a scratch
MYCLAW_HOME whose data files (and bytecode) were made by a first, unmeasured
run. The gateway runs against the loopback fakes (tests/fakes), Telegram
only and Telegram + Feishu (long connection); its CPU is read from /proc at
the "gateway running" line, then it is stopped with SIGTERM.

    .venv/bin/python scripts/bench_start.py [--runs 5] [--cases help cron memory doctor tg tg+feishu]
    .venv/bin/python scripts/bench_start.py --importtime tg   # the heaviest imports of one case

The figures are medians over ``--runs``; ``cal`` is the CPU seconds of a
pure-Python loop in this process (docs/BENCHMARKS.md), to compare runs
taken at different moments on the shared box.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MYCLAW = [sys.executable, "-c", "from gateway.cli import main; main()"]
CLI_CASES: dict[str, list[str]] = {
    "help": ["--help"],
    "cron": ["cron", "list"],
    "memory": ["memory", "list"],
    "doctor": ["doctor", "--offline"],
}
GATEWAY_CASES = ("tg", "tg+feishu")
_TICK = os.sysconf("SC_CLK_TCK")


def calibration() -> float:
    """CPU seconds of the reference pure-Python loop (docs/BENCHMARKS.md)."""
    t = time.process_time()
    s = 0
    for i in range(5_000_000):
        s += i
    return time.process_time() - t


def _env(home: Path) -> dict[str, str]:
    # Bytecode is kept (in the scratch folder, not the checkout), as an
    # installed myclaw has it: with PYTHONDONTWRITEBYTECODE set (as in some
    # dev shells) every start would compile the project's ~100 modules
    # from source again, about 0.5 s of CPU.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYCLAW_") and k != "PYTHONDONTWRITEBYTECODE"}
    env.update(MYCLAW_HOME=str(home), MYCLAW_LOG_LEVEL="INFO", PYTHONPYCACHEPREFIX=str(home.parent / "pycache"))
    return env


def _write_config(home: Path, doc: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps(doc), encoding="utf-8")


def run_cli(home: Path, args: Sequence[str], flags: Sequence[str] = ()) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of one ``myclaw args``, and its
    stderr; ``flags`` go to Python."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, *flags, *MYCLAW[1:], *args], cwd=ROOT, env=_env(home), capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"myclaw {shlex.join(args)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14, 15 of proc(5))


async def _gateway_once(home: Path, flags: Sequence[str] = ()) -> tuple[float, float, str]:
    """Wall and CPU seconds from spawning ``myclaw gateway`` to its "gateway
    running" line, and all it wrote on stderr; ``flags`` go to Python."""
    t = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *flags, *MYCLAW[1:], "gateway", cwd=ROOT, env=_env(home),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    said: list[bytes] = []
    try:
        assert proc.stderr is not None
        while True:
            line = await asyncio.wait_for(proc.stderr.readline(), 300)
            if not line:
                raise SystemExit("myclaw gateway ended before it ran:\n" + b"".join(said).decode(errors="replace")[-3000:])
            said.append(line)
            if b"gateway running" in line:
                wall = time.perf_counter() - t
                cpu = _proc_cpu(proc.pid)
                break
        proc.send_signal(signal.SIGTERM)
        # Drained while it stops: a full pipe would hold its last lines.
        said.append(await asyncio.wait_for(proc.stderr.read(), 60))
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return wall, cpu, b"".join(said).decode(errors="replace")


async def run_gateway_case(
    case: str, runs: int, scratch: Path, home: Path | None = None, flags: Sequence[str] = ()
) -> list[tuple[float, float, str]]:
    from tests.fakes.feishu_server import FakeFeishu
    from tests.fakes.openai_server import FakeOpenAI
    from tests.fakes.telegram_server import FakeTelegram

    async with FakeOpenAI(api_key="sk-bench-0123456789") as llm, FakeTelegram() as tg, FakeFeishu() as feishu:
        channels: dict[str, Any] = {"telegram": {"enabled": True, "token": tg.token, "baseUrl": tg.base_url, "pollTimeout": 1}}
        if case == "tg+feishu":
            channels["feishu"] = {"enabled": True, "appId": feishu.app_id, "appSecret": feishu.app_secret,
                                  "mode": "websocket", "domain": feishu.url}
        home = home or scratch / case
        _write_config(home, {"provider": {"baseUrl": llm.url, "apiKey": llm.api_key}, "channels": channels})
        await _gateway_once(home)  # makes the data files; not counted
        return [await _gateway_once(home, flags) for _ in range(runs)]


def _cli_home(scratch: Path) -> Path:
    """A home with the data files a gateway made, as an operator's commands find them."""
    home = scratch / "cli"
    if not (home / "config.json").exists():
        asyncio.run(run_gateway_case("tg", 0, scratch, home=home))
    return home


def run_cli_case(case: str, runs: int, scratch: Path) -> list[tuple[float, float, str]]:
    home = _cli_home(scratch)
    run_cli(home, CLI_CASES[case])  # warms the disk cache; not counted
    return [run_cli(home, CLI_CASES[case]) for _ in range(runs)]


def importtime(case: str, top: int) -> None:
    """``python -X importtime`` of one case: self time summed by top-level package."""
    with tempfile.TemporaryDirectory() as tmp:
        if case in CLI_CASES:
            home = _cli_home(Path(tmp))
            run_cli(home, CLI_CASES[case])  # its modules' bytecode
            stderr = run_cli(home, CLI_CASES[case], ["-X", "importtime"])[2]
        else:
            stderr = asyncio.run(run_gateway_case(case, 1, Path(tmp), flags=["-X", "importtime"]))[0][2]
    by_package: dict[str, int] = defaultdict(int)
    modules: dict[str, int] = defaultdict(int)
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line.removeprefix("import time:").split("|")
        name = name.strip()
        by_package[name.split(".")[0]] += int(self_us)
        modules[name.split(".")[0]] += 1
    total = sum(by_package.values())
    print(f"{case}: {sum(modules.values())} modules imported, {total / 1e6:.2f} s of import time (self, summed)")
    print(f"{'package':<24} {'modules':>8} {'self s':>8}")
    for name, us in sorted(by_package.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{name:<24} {modules[name]:>8} {us / 1e6:>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs per case (median reported)")
    parser.add_argument("--cases", nargs="+", default=[*CLI_CASES, *GATEWAY_CASES], choices=[*CLI_CASES, *GATEWAY_CASES])
    parser.add_argument("--importtime", metavar="CASE", choices=[*CLI_CASES, *GATEWAY_CASES],
                        help="instead: the heaviest imports of one case, by package (python -X importtime)")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    if args.importtime is not None:
        importtime(args.importtime, args.top)
        return
    print(f"cal {calibration():.2f} s; median of {args.runs} runs")
    print(f"{'case':<32} {'wall s':>8} {'CPU s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for case in args.cases:
            if case in CLI_CASES:
                results = run_cli_case(case, args.runs, scratch)
                label = "myclaw " + shlex.join(CLI_CASES[case])
            else:
                results = asyncio.run(run_gateway_case(case, args.runs, scratch))
                label = f"gateway to running ({case})"
            wall = statistics.median(r[0] for r in results)
            cpu = statistics.median(r[1] for r in results)
            print(f"{label:<32} {wall:>8.2f} {cpu:>8.2f}", flush=True)
    print(f"cal {calibration():.2f} s")


if __name__ == "__main__":
    main()
