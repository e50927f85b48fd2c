"""``myclaw memory project-alias``: the operator names a renamed project."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner, Result

from gateway.cli import main
from memory import MemoryEngine
from memory.retrieval import Retriever


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, ["memory", *args])


def ok(*args: str) -> Result:
    r = cli(*args)
    assert r.exit_code == 0, r.output
    return r


def test_an_alias_set_by_hand_links_the_old_facts_to_the_new_name(home: Path) -> None:
    ok("add", "atlas stores its data in Postgres", "--user", "alice", "--project", "atlas")
    ok("add", "webshop stores its data in MySQL", "--user", "alice", "--project", "webshop")
    said = ok("project-alias", "atlas", "Orion", "--user", "alice").stdout
    assert said == "alice: atlas is now called orion; filed its 1 memory under orion\n"
    said = ok("project-alias", "nimbus", "cirrus", "--user", "bob").stdout  # bob has no nimbus facts
    assert said == "bob: nimbus is now called cirrus; nothing was filed under nimbus yet; new facts of it go under cirrus\n"
    table = ok("project-alias").stdout.splitlines()
    assert table[0].split() == ["USER", "ALIAS", "PROJECT", "SOURCE", "SINCE"]
    assert [ln.split()[:4] for ln in table[1:]] == [["alice", "atlas", "orion", "manual"],
                                                    ["bob", "nimbus", "cirrus", "manual"]]
    rows = json.loads(ok("project-alias", "--user", "alice", "--json").stdout)
    assert [(r["owner"], r["alias"], r["project"]) for r in rows] == [("alice", "atlas", "orion")]

    async def recall() -> str:
        async with await MemoryEngine.open(home / "data" / "memory.db") as e:
            return (await Retriever(e).retrieve("alice", "where does orion store its data?"))[0].content

    assert asyncio.run(recall()) == "atlas stores its data in Postgres"
    log = json.loads(ok("log", "--action", "alias", "--json").stdout)
    assert [(e["owner"], e["detail"]) for e in log] == [("bob", {"from": "nimbus", "to": "cirrus"}),
                                                                   ("alice", {"from": "atlas", "to": "orion"})]

    # Bad input: a clear error, nothing changed.
    for args, says in ((("atlas", "ATLAS"), "renamed to itself"), (("atlas", "!!"), "not a project name")):
        r = cli("project-alias", *args, "--user", "alice")
        assert r.exit_code != 0 and says in r.output, r.output
    r = cli("project-alias", "atlas", "orion")
    assert r.exit_code != 0 and "--user" in r.output
    said = ok("project-alias", "atlas", "--remove", "--user", "alice").stdout
    assert "alice: atlas is no longer an alias; filed the 1 memory the rename moved under it again" in said
    r = cli("project-alias", "atlas", "--remove", "--user", "alice")
    assert r.exit_code != 0 and "no project alias 'atlas' for alice" in r.output
