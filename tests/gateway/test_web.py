"""The memory page (gateway.web) through a real HttpServer on 127.0.0.1,
a real SQLite file and real HTTP requests."""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from channels.base import BaseChannel
from gateway.app import App, ChannelSpec, config_secrets
from gateway.bus import MessageBus, OutboundMessage
from gateway.config import Config, ConfigError, Paths, load_config
from gateway.http import HttpServer
from gateway.web import AdminAuth, MemoryAdmin, mount_memory_page
from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance, Source, Status
from memory.changelog import read_log, write_log
from memory.retrieval import Retriever
from tests.disk import on_disk
from tests.gateway.lineage import buffered, ids_of, lineage
from tests.fakes.openai_server import FakeOpenAI

TOKEN = "admin-token-0123456789abcdef"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Site:
    http: HttpServer
    engine: MemoryEngine

    @property
    def url(self) -> str:
        return self.http.url

    def client(self, *, bearer: bool = True) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=BEARER if bearer else {}, timeout=10, follow_redirects=False)

    async def add(self, owner: str, content: str, **kw: Any) -> int:
        return (await self.engine.add(NewMemory(owner=owner, content=content, **kw))).id


@pytest.fixture
async def site(engine: MemoryEngine) -> AsyncIterator[Site]:
    http = HttpServer("127.0.0.1", 0)
    mount_memory_page(http, engine, Retriever(engine), TOKEN)
    await http.start()
    try:
        yield Site(http, engine)
    finally:
        await http.stop()


def cards(html: str) -> list[str]:
    """The memory texts shown as cards, in page order (still HTML-escaped)."""
    return re.findall(r'<p class="content">(.*?)</p>', html, re.S)


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


async def login(c: httpx.AsyncClient) -> str:
    """Sign in with the form; returns the CSRF token of the session."""
    r = await c.post("/memory/login", data={"token": TOKEN})
    assert r.status_code == 303, r.text
    r = await c.get("/memory", params={"user": "alice"})
    assert r.status_code == 200
    return csrf_of(r.text)


def test_public_names() -> None:
    import gateway.web

    assert gateway.web.__all__ == ["AdminAuth", "AdminError", "AdminStore", "MemoryAdmin", "MemoryWeb", "mount_memory_page"]


# -- auth --------------------------------------------------------------------------


async def test_every_route_needs_the_token_and_refusals_are_logged_without_it(site: Site) -> None:
    await site.add("alice", "alice likes green tea")
    async with site.client(bearer=False) as anon:
        with capture_logs() as logs:
            r = await anon.get("/memory", params={"user": "alice"})
            assert r.status_code == 401
            assert 'action="/memory/login"' in r.text and "green tea" not in r.text
            r = await anon.get("/memory", params={"user": "alice"}, headers={"Authorization": "Bearer wrong-token-but-long-enough"})
            assert r.status_code == 401 and "green tea" not in r.text
            r = await anon.get("/memory/api/memories", params={"user": "alice"})
            assert r.status_code == 401 and "error" in r.json()
            r = await anon.post("/memory/api/add", json={"user": "alice", "content": "x"})
            assert r.status_code == 401
            r = await anon.post("/memory/add", data={"user": "alice", "content": "x"})
            assert r.status_code == 401
            r = await anon.post("/memory/login", data={"token": "not-the-admin-token-at-all"})
            assert r.status_code == 401 and "Wrong token" in r.text
            r = await anon.get("/memory", headers={"Cookie": "myclaw_admin=1.abc.forged"})
            assert r.status_code == 401
        refused = [e for e in logs if e["event"] == "memory page: request refused"]
        assert len(refused) == 7
        assert {e["reason"] for e in refused} >= {"no credentials", "wrong bearer token", "wrong token at login", "invalid or expired session"}
        dumped = json.dumps(logs, default=str)
        assert "wrong-token-but-long-enough" not in dumped and "not-the-admin-token-at-all" not in dumped
        assert TOKEN not in dumped
    assert len(await site.engine.list_memories("alice")) == 1  # nothing was added
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice"})
        assert r.status_code == 200 and "alice likes green tea" in r.text
        assert "nonce-" in r.headers["Content-Security-Policy"] and r.headers["X-Frame-Options"] == "DENY"
        assert (await c.get("/memory/api/memories", params={"user": "alice"})).status_code == 200


async def test_login_sets_a_strict_httponly_session_cookie(site: Site) -> None:
    async with site.client(bearer=False) as c:
        r = await c.post("/memory/login", data={"token": TOKEN})
        assert r.status_code == 303 and r.headers["Location"] == "/memory"
        cookie = r.headers["Set-Cookie"]
        assert "myclaw_admin=" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "Path=/memory" in cookie and TOKEN not in cookie
        assert (await c.get("/memory")).status_code == 200
        csrf = csrf_of((await c.get("/memory")).text)
        r = await c.post("/memory/logout", data={"csrf": csrf})
        assert r.status_code == 303
        assert (await c.get("/memory")).status_code == 401


async def test_signing_out_ends_the_session_on_the_server_too(site: Site) -> None:
    """Sign-out only deleted the cookie: a copy of it (stolen, or kept by a
    shared machine) went on working for up to 12 hours."""
    async with site.client(bearer=False) as c, site.client(bearer=False) as other:
        await login(other)  # another browser's session is not affected
        csrf = await login(c)
        stolen = c.cookies["myclaw_admin"]
        r = await c.post("/memory/logout", data={"csrf": csrf})
        assert r.status_code == 303
        with capture_logs() as logs:
            async with httpx.AsyncClient(base_url=site.url, cookies={"myclaw_admin": stolen}) as thief:
                assert (await thief.get("/memory")).status_code == 401
                assert (await thief.get("/memory/api/users")).status_code == 401
                r = await thief.post("/memory/add", data={"csrf": csrf, "user": "alice", "content": "planted"})
                assert r.status_code == 401
        assert [e["reason"] for e in logs if e["event"] == "memory page: request refused"] == ["invalid or expired session"] * 3
        assert (await other.get("/memory")).status_code == 200
    assert await site.engine.list_memories("alice") == []


async def test_sessions_without_a_store_do_not_outlive_the_process_and_stay_bounded() -> None:
    """Without a store (gateway.db, attached by the App), a session this
    process did not issue is refused: the safe direction."""
    now = [1_000_000.0]
    auth = AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0], max_sessions=3)
    s = await auth.new_session()
    assert not AdminAuth(TOKEN, clock=lambda: now[0]).session_ok(s)  # the same token, another process
    sessions = [await auth.new_session() for _ in range(3)]
    assert not auth.session_ok(s) and all(auth.session_ok(x) for x in sessions)  # the oldest made room
    await auth.end_session(sessions[0])
    await auth.end_session(sessions[0])  # twice, or a forged one, is harmless
    await auth.end_session("1.forged.value")
    assert [auth.session_ok(x) for x in sessions] == [False, True, True]
    now[0] += 61
    await auth.new_session()
    assert len(auth._sessions) == 1  # expired ones are dropped as new ones come


async def test_stored_sessions_keep_only_a_keyed_hash_and_expire_and_stay_bounded(tmp_path: Path) -> None:
    from gateway.sessions import SessionStore
    from gateway.web import AdminStore

    now = [1_000_000.0]
    async with await SessionStore.open(tmp_path / "gateway.db") as store:
        auth = AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0], max_sessions=2)
        await auth.attach(AdminStore(store.db))
        first, second, third = [await auth.new_session() for _ in range(3)]  # the first made room
        rows = await store.db.fetchall("SELECT id_hash, expires_at FROM admin_sessions")
        assert len(rows) == 2 and all(r[1] == 1_000_060 for r in rows)
        assert not any(part in str(r[0]) for r in rows for part in third.split("."))
        again = AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0])  # the next process
        await again.attach(AdminStore(store.db))
        assert [again.session_ok(x) for x in (first, second, third)] == [False, True, True]
        rotated = AdminAuth(TOKEN + "-rotated", session_ttl=60, clock=lambda: now[0])
        await rotated.attach(AdminStore(store.db))
        assert not rotated.session_ok(third)  # a new token ends every session
        await again.end_session(second)
        now[0] += 30
        later = AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0])
        await later.attach(AdminStore(store.db))
        assert [later.session_ok(x) for x in (second, third)] == [False, True]
        now[0] += 31
        await AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0]).attach(AdminStore(store.db))
        assert await store.db.fetchall("SELECT * FROM admin_sessions") == []  # expired rows go


async def test_sessions_expire_and_die_with_a_token_change() -> None:
    now = [1_000_000.0]
    auth = AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0])
    s = await auth.new_session()
    assert auth.session_ok(s)
    assert not auth.session_ok(s[:-1] + ("0" if s[-1] != "0" else "1"))
    assert not AdminAuth(TOKEN + "-rotated", clock=lambda: now[0]).session_ok(s)
    now[0] += 61
    assert not auth.session_ok(s)
    with pytest.raises(ValueError):
        AdminAuth("short")


async def test_posts_from_a_session_need_its_csrf_token(site: Site) -> None:
    async with site.client(bearer=False) as c:
        csrf = await login(c)
        form = {"user": "alice", "content": "alice drinks oat milk"}
        r = await c.post("/memory/add", data=form)
        assert r.status_code == 403
        r = await c.post("/memory/add", data={**form, "csrf": "0" * 32})
        assert r.status_code == 403
        r = await c.post("/memory/add", data={**form, "csrf": csrf}, headers={"Origin": "https://evil.example"})
        assert r.status_code == 403
        assert await site.engine.list_memories("alice") == []
        same_origin = {"Origin": site.url}  # what a browser sends with the page's own form
        r = await c.post("/memory/add", data={**form, "csrf": csrf}, headers=same_origin)
        assert r.status_code == 303
        assert [m.content for m in await site.engine.list_memories("alice")] == ["alice drinks oat milk"]
        # the API from a browser session: X-CSRF-Token header
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "alice cycles to work"})
        assert r.status_code == 403
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "alice cycles to work"}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 201
    # Bearer requests need no CSRF token (a browser never sends that header by itself)
    async with site.client() as c:
        r = await c.post("/memory/add", data={"user": "alice", "content": "alice plays go"})
        assert r.status_code == 303
    assert len(await site.engine.list_memories("alice")) == 3


async def test_redirect_after_post_stays_on_the_page(site: Site) -> None:
    async with site.client() as c:
        for back in ("//evil.example/x", "https://evil.example/memory", "/memoryx", "/\\evil"):
            r = await c.post("/memory/add", data={"user": "alice", "content": f"fact {back}", "back": back})
            assert r.status_code == 303
            assert r.headers["Location"].startswith("/memory?user=alice"), back
        mid = (await site.engine.list_memories("alice"))[0].id
        r = await c.post("/memory/archive", data={"id": mid, "user": "alice", "back": "/memory?user=alice&q=fact"})
        assert r.headers["Location"] == f"/memory?user=alice&q=fact&done=archived&n={mid}"
        r = await c.get(r.headers["Location"])
        assert f"Memory m{mid} archived" in r.text


# -- the page ------------------------------------------------------------------------


async def test_page_round_trip_add_edit_archive_restore_erase(site: Site) -> None:
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice"})
        assert "alice has no memories yet" in r.text  # empty state
        r = await c.post(
            "/memory/add",
            data={"user": "alice", "content": "Alice's cat is called Miso", "tier": "1", "category": "", "importance": "0.9",
                  "project": "", "topic": "pets"},
        )
        assert r.status_code == 303
        [m] = await site.engine.list_memories("alice")
        assert (m.content, m.tier, m.category, m.importance, m.topic, m.source) == (
            "Alice's cat is called Miso", 1, Category.IDENTITY, 0.9, "pets", Source.MANUAL
        )
        assert m.provenance.channel == "web"
        page = (await c.get(r.headers["Location"])).text
        assert "Alice&#x27;s cat is called Miso" in page and "Added by hand" in page and f"Memory m{m.id} added" in page
        # the same text again is not stored twice
        r = await c.post("/memory/add", data={"user": "alice", "content": "alice's cat is called miso"})
        assert "done=exists" in r.headers["Location"] and len(await site.engine.list_memories("alice")) == 1

        r = await c.post(
            "/memory/edit",
            data={"id": m.id, "user": "alice", "content": "Alice's cat is called Mochi", "tier": "1", "category": "identity",
                  "importance": "0.8", "project": "", "topic": "pets"},
        )
        assert r.status_code == 303
        m2 = await site.engine.get(m.id)
        assert m2 is not None and (m2.content, m2.importance) == ("Alice's cat is called Mochi", 0.8)
        # a bad value changes nothing and says why
        r = await c.post("/memory/edit", data={"id": m.id, "user": "alice", "importance": "7"})
        assert r.status_code == 400 and "importance must be within [0, 1]" in r.text
        # another user's id with this user's name: not found, unchanged
        bob = await site.add("bob", "bob's secret")
        r = await c.post("/memory/edit", data={"id": bob, "user": "alice", "content": "hijacked"})
        assert r.status_code == 404 and (await site.engine.get(bob)).content == "bob's secret"  # type: ignore[union-attr]

        r = await c.post("/memory/archive", data={"id": m.id, "user": "alice"})
        assert r.status_code == 303 and (await site.engine.get(m.id)).status is Status.ARCHIVED  # type: ignore[union-attr]
        assert "Mochi" not in (await c.get("/memory", params={"user": "alice"})).text
        assert "Mochi" in (await c.get("/memory", params={"user": "alice", "status": "archived"})).text
        assert cards((await c.get("/memory", params={"user": "alice", "q": "cat Mochi"})).text) == []  # archived: not recalled
        r = await c.post("/memory/restore", data={"id": m.id, "user": "alice"})
        assert (await site.engine.get(m.id)).status is Status.ACTIVE  # type: ignore[union-attr]
        assert cards((await c.get("/memory", params={"user": "alice", "q": "cat Mochi"})).text) == ["Alice&#x27;s cat is called Mochi"]

        r = await c.post("/memory/erase", data={"id": m.id, "user": "alice"})  # first: a confirmation page
        assert r.status_code == 200 and "Erase memory" in r.text and 'name="confirm" value="yes"' in r.text
        assert "No older version of it and no Core Memory entry built on it" in r.text and 'name="cascade"' not in r.text
        assert await site.engine.get(m.id) is not None
        r = await c.post("/memory/erase", data={"id": m.id, "user": "alice", "confirm": "yes", "back": f"/memory/item?id={m.id}"})
        assert r.status_code == 303 and r.headers["Location"].startswith("/memory?user=alice")
        assert await site.engine.get(m.id) is None
        folder = Path(site.engine.db.path).parent  # the erased words left the files, not only the tables
        assert on_disk(folder, "Mochi") == 0

        # every change is in the change log, without the memory's text
        entries = await read_log(site.engine.db, owner="alice")
        assert [x.action for x in reversed(entries)] == ["add", "edit", "archive", "restore", "erase"]
        assert all(x.job == "web" and "Mochi" not in x.detail for x in entries)
        page = (await c.get("/memory/log", params={"user": "alice"})).text
        assert "erase" in page and "restore" in page


async def test_erase_with_history_takes_older_versions_and_core_memory_entries(site: Site) -> None:
    f = await lineage(site.engine)
    async with site.client() as c:
        r = await c.post("/memory/erase", data={"id": f.home, "user": "alice"})  # the confirmation lists what goes
        assert r.status_code == 200
        page = r.text
        assert "3 older versions of this fact" in page and "2 Core Memory entries built on it" in page
        for mid in (*f.versions, *f.entries):
            assert f'href="/memory/item?id={mid}&amp;user=alice">m{mid}</a>' in page
        assert "Berlin-Kreuzberg" in page and "Lives in Munich" in page
        assert "Linked records that stay either way" in page and f">e{f.event}</a> 2026-03-01" in page
        assert 'href="/memory?user=alice&amp;q=Alice+told+the+bot+about+her+move"' in page  # a link to find the event
        found = (await c.get("/memory", params={"user": "alice", "q": "Alice told the bot about her move"})).text
        assert "Matching events (tier 3)" in found and "<b>2026-03-01</b> Alice told the bot about her move" in found
        assert "Drinks green tea" not in page and f"m{f.stays[0]}<" not in page
        assert 'name="cascade" value="yes"' in page and "(6 rows)" in page and "Erase this row only" in page
        assert await ids_of(site.engine, "alice") == {f.home, *f.versions, *f.entries, *f.stays}  # nothing erased yet

        r = await c.post("/memory/erase", data={"id": f.home, "user": "alice", "confirm": "yes", "cascade": "yes",
                                                "back": f"/memory/item?id={f.home}"})
        assert r.status_code == 303 and "done=erased_cascade" in r.headers["Location"]
        assert "with its older versions and the Core Memory entries" in (await c.get(r.headers["Location"])).text
    assert await ids_of(site.engine, "alice") == set(f.stays)
    assert await ids_of(site.engine, "bob") == set(f.bobs)  # the same words, another user: untouched
    assert [e.id for e in await site.engine.events("alice")] == [f.event]  # named, kept
    erased = [x for x in await read_log(site.engine.db, owner="alice") if x.action == "erase"]
    assert sorted(x.memory_id for x in erased if x.memory_id is not None) == sorted([f.home, *f.versions, *f.entries])
    assert all(x.job == "web" for x in erased)
    assert {x.memory_id: json.loads(x.detail) if x.detail else {} for x in erased}[f.versions[0]] == {"with": [f.home]}
    assert on_disk(Path(site.engine.db.path).parent, "Kreuzberg") == 0  # the versions' words left the files


async def test_erase_this_row_only_stays_the_default(site: Site) -> None:
    f = await lineage(site.engine)
    async with site.client() as c:
        r = await c.post("/memory/erase", data={"id": f.home, "user": "alice", "confirm": "yes"})
        assert r.status_code == 303 and "done=erased&" in r.headers["Location"]
        assert await ids_of(site.engine, "alice") == {*f.versions, *f.entries, *f.stays}
        r = await c.post("/memory/api/erase", json={"id": f.versions[0], "user": "alice"})
        assert r.status_code == 200 and r.json()["cascade"] is False and r.json()["erased_ids"] == [f.versions[0]]
    erased = [x.memory_id for x in await read_log(site.engine.db, owner="alice") if x.action == "erase"]
    assert erased == [f.versions[0], f.home]


async def test_api_erase_cascade_lists_what_went_and_what_stays(site: Site) -> None:
    f = await lineage(site.engine)
    async with site.client() as c:
        r = await c.post("/memory/api/erase", json={"id": f.home, "user": "alice", "cascade": "yes"})
        assert r.status_code == 400 and "cascade must be true or false" in r.json()["error"]
        r = await c.post("/memory/api/erase", json={"id": f.home, "user": "bob", "cascade": True})
        assert r.status_code == 404  # another user's name: nothing erased
        assert await ids_of(site.engine, "alice") == {f.home, *f.versions, *f.entries, *f.stays}
        r = await c.post("/memory/api/erase", json={"id": f.home, "user": "alice", "cascade": True})
        assert r.status_code == 200
        body = r.json()
    assert body["erased"] is True and body["cascade"] is True and body["memory"]["id"] == f.home
    assert [m["id"] for m in body["versions"]] == f.versions and [m["id"] for m in body["entries"]] == f.entries
    assert body["erased_ids"] == sorted([f.home, *f.versions, *f.entries])
    assert [k["ref"] for k in body["kept"]] == [f"e{f.event}"]
    assert await ids_of(site.engine, "alice") == set(f.stays) and await ids_of(site.engine, "bob") == set(f.bobs)
    # The waiting line that said it goes too, or extraction would write it again; bob's stays.
    assert body["buffered_lines"] == 1
    assert await buffered(site.engine, "alice") == ["what's the weather?"]
    assert await buffered(site.engine, "bob") == [f.said]
    erased = [x.memory_id for x in await read_log(site.engine.db, owner="alice") if x.action == "erase"]
    assert sorted(erased) == body["erased_ids"]  # type: ignore[type-var]


async def test_search_ranks_the_right_memory_first_like_the_bot(site: Site) -> None:
    for text in [
        "alice deploys the blog with docker compose",
        "alice prefers espresso over filter coffee",
        "alice's dentist appointment is on friday",
        "alice uses postgres for the side project",
    ]:
        await site.add("alice", text)
    await site.add("_global", "the office coffee machine is on floor 3")
    await site.add("bob", "bob hates coffee")
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice", "q": "what coffee does alice like?"})
        assert r.status_code == 200
        contents = cards(r.text)
        assert contents[0] == "alice prefers espresso over filter coffee"
        assert "the office coffee machine is on floor 3" in contents  # _global: what the bot would recall
        assert "shared: _global" in r.text and "bob hates coffee" not in r.text
        api = (await c.get("/memory/api/search", params={"user": "alice", "q": "what coffee does alice like?"})).json()
    expected = await Retriever(site.engine).retrieve("alice", "what coffee does alice like?", limit=20)
    assert [x["memory"]["id"] for x in api["memories"]] == [h.id for h in expected]


async def test_a_user_page_shows_only_that_users_memories(site: Site) -> None:
    await site.add("alice", "alice lives in Berlin")
    await site.add("bob", "bob lives in Shenzhen")
    await site.add("telegram:777", "unmapped sender likes jazz")
    async with site.client() as c:
        overview = (await c.get("/memory")).text
        for name in ("_global", "alice", "bob", "telegram:777"):
            assert f">{name}</span>" in overview  # the picker lists every owner
        assert "Berlin" not in overview and "Shenzhen" not in overview
        for user, mine, theirs in [("alice", "Berlin", "Shenzhen"), ("bob", "Shenzhen", "Berlin")]:
            for params in ({"user": user}, {"user": user, "status": "all"}, {"user": user, "q": "where does she live"}):
                page = (await c.get("/memory", params=params)).text
                assert theirs not in page, params
            assert mine in (await c.get("/memory", params={"user": user})).text
            api = (await c.get("/memory/api/memories", params={"user": user, "status": "all"})).json()
            assert [m["owner"] for m in api["memories"]] == [user]
            found = (await c.get("/memory/api/search", params={"user": user, "q": "lives in"})).json()
            assert {x["memory"]["owner"] for x in found["memories"]} == {user}
        users = (await c.get("/memory/api/users")).json()["users"]
        assert {u["user"]: u["active"] for u in users} == {"_global": 0, "alice": 1, "bob": 1, "telegram:777": 1}


async def test_a_user_page_and_its_export_name_that_users_renamed_projects(site: Site) -> None:
    """The memory page showed facts under orion with nothing saying that
    alice's atlas is orion now, nor how to read an old note about atlas."""
    await site.add("alice", "atlas stores its data in Postgres", project="atlas")
    await site.engine.set_project_alias("alice", "atlas", "orion", source="user")
    await site.engine.set_project_alias("bob", "nimbus", "<b>cirrus</b>", source="user")  # slugged: never HTML
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice"})).text
        assert "Renamed projects" in page and "atlas → orion" in page and "nimbus" not in page
        assert "orion / _general" in page  # the card's project: the current name
        assert "Renamed projects" not in (await c.get("/memory", params={"user": "carol"})).text
        md = (await c.get("/memory/export", params={"user": "alice"})).text
        assert "Renamed projects: atlas → orion" in md and "project orion" in md
        bob = (await c.get("/memory", params={"user": "bob"})).text
        assert "nimbus → b-cirrus-b" in bob and "<b>cirrus" not in bob


async def test_memory_text_is_escaped_everywhere(site: Site) -> None:
    payload = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    mid = await site.add("alice", payload, project="<b>proj</b>", provenance=Provenance(channel="<i>tg</i>", chat_id='"><svg>'))
    evil_user = '"><script>alert(3)</script>'
    await site.add(evil_user, "owner name is hostile")
    async with site.client() as c:
        pages = [
            (await c.get("/memory", params={"user": "alice"})).text,
            (await c.get("/memory", params={"user": "alice", "q": "alert script"})).text,
            (await c.get("/memory", params={"user": "alice", "q": "<script>alert(4)</script>"})).text,
            (await c.get("/memory/item", params={"id": mid})).text,
            (await c.post("/memory/erase", data={"id": mid, "user": "alice"})).text,
            (await c.get("/memory", params={"user": evil_user})).text,
            (await c.get("/memory")).text,
        ]
    for page in pages:
        assert "<script>alert" not in page and "<img src=x" not in page and "<svg>" not in page and "<b>proj" not in page
        assert page.count("<script") == 1  # only the page's own, nonced script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in pages[0]
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in pages[2]
    assert "&quot;&gt;&lt;script&gt;alert(3)&lt;/script&gt;" in pages[5]


async def test_clear_all_needs_two_confirmations_and_erase_all_the_typed_name(site: Site) -> None:
    a = [await site.add("alice", f"alice fact {i}") for i in range(3)]
    keep = await site.add("bob", "bob fact")
    async with site.client() as c:
        r = await c.post("/memory/archive-all", data={"user": "alice"})
        assert r.status_code == 200 and "Archive all 3 active memories of alice?" in r.text
        assert len(await site.engine.list_memories("alice")) == 3
        r = await c.post("/memory/archive-all", data={"user": "alice", "confirm": "yes"})
        assert r.status_code == 303 and "done=archived_all&n=3" in r.headers["Location"]
        assert await site.engine.list_memories("alice") == []
        assert len(await site.engine.list_memories("alice", status=Status.ARCHIVED)) == 3
        assert "alice has no memories yet" in (await c.get("/memory", params={"user": "alice"})).text

        r = await c.post("/memory/erase-all", data={"user": "alice"})
        assert r.status_code == 200 and "Type the user name" in r.text
        # An operator answering a deletion request is told this is not everything.
        assert "myclaw memory forget --user" in r.text
        r = await c.post("/memory/erase-all", data={"user": "alice", "confirm": "yes", "typed": "alic"})
        assert r.status_code == 400 and "does not match" in r.text
        assert len(await site.engine.list_memories("alice", status=None)) == 3
        r = await c.post("/memory/erase-all", data={"user": "alice", "confirm": "yes", "typed": "alice"})
        assert r.status_code == 303
    assert await site.engine.list_memories("alice", status=None) == []
    assert await site.engine.get_many(a) == {}
    assert (await site.engine.get(keep)) is not None


async def test_counts_read_as_a_person_writes_them_and_an_empty_user_has_nothing_to_clear(site: Site) -> None:
    only = await site.add("alice", "alice keeps bees")
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice", "q": "bees"})).text
        assert "1 memory the bot would recall for “bees”" in page
        assert "erase all 1 memory of <b>alice</b>" in page
        r = await c.post("/memory/archive-all", data={"user": "alice"})
        assert "Archive the 1 active memory of alice?" in r.text
        r = await c.post("/memory/archive-all", data={"user": "alice", "confirm": "yes"})
        assert r.status_code == 303
        r = await c.get(r.headers["Location"])
        assert 'class="flash" role="status">1 memory archived.<' in r.text
        r = await c.post("/memory/erase-all", data={"user": "alice"})
        assert "Erase all 1 memory of alice for good?" in r.text
        r = await c.post("/memory/erase-all", data={"user": "alice", "confirm": "yes", "typed": "alice"})
        assert r.status_code == 303 and (await site.engine.get(only)) is None
        page = (await c.get("/memory", params={"user": "alice"})).text
        assert "alice has no memories yet" in page
        assert "Clear this user's memories" not in page  # no "erase all 0 memories" offered


async def test_superseded_chain_and_its_log_are_shown(site: Site) -> None:
    old = await site.add("alice", "alice works at Acme")
    new = await site.add("alice", "alice works at Globex")
    async with site.engine.db.transaction() as conn:
        await site.engine.set_status(old, Status.SUPERSEDED, superseded_by=new, conn=conn)
        await write_log(conn, at=site.engine.now(), job="extraction", owner="alice", action="supersede", memory_id=new,
                        detail={"old": old, "reason": "changed jobs"})
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice"})).text
        assert "Globex" in page and f"Replaced <a href=\"/memory/item?id={old}&amp;user=alice\">m{old}</a>" in page
        detail = (await c.get("/memory/item", params={"id": new})).text
        assert "This fact replaced" in detail and "alice works at Acme" in detail and "changed jobs" in detail
        older = (await c.get("/memory/item", params={"id": old})).text
        assert "Replaced by" in older and "Superseded by" in older and "Globex" in older
        sup = (await c.get("/memory", params={"user": "alice", "status": "superseded"})).text
        assert "Acme" in sup and "Globex" not in sup
        api = (await c.get("/memory/api/memory", params={"id": new})).json()
        assert [m["id"] for m in api["replaced"]] == [old] and api["log"][0]["action"] == "supersede"


async def test_list_is_newest_first_and_paginated_with_stats(site: Site, clock: ManualClock) -> None:
    for i in range(25):
        await site.add("alice", f"numbered fact {i:02d}", source=Source.EXTRACTION if i % 2 else Source.MANUAL,
                       tier=1 if i < 5 else 2)
    await site.add("alice", "migrated fact", source=Source.MIGRATION)
    async with site.client() as c:
        p1 = (await c.get("/memory", params={"user": "alice"})).text
        assert cards(p1) == ["migrated fact", *(f"numbered fact {i:02d}" for i in range(24, 5, -1))]
        assert "offset=20" in p1 and "Older" in p1
        p2 = (await c.get("/memory", params={"user": "alice", "offset": 20})).text
        assert cards(p2) == [f"numbered fact {i:02d}" for i in range(5, -1, -1)]
        assert "Newer" in p2
        stats = (await c.get("/memory/api/stats", params={"user": "alice"})).json()
        assert stats["total"] == 26 and stats["by_tier"] == {"1": 5, "2": 21}
        assert stats["by_source"] == {"extraction": 12, "manual": 13, "migration": 1}
        assert re.search(r"<b>12</b><span>Auto-extracted</span>", p1) and re.search(r"<b>13</b><span>By hand</span>", p1)
        api = (await c.get("/memory/api/memories", params={"user": "alice", "limit": 10, "offset": 20})).json()
        assert len(api["memories"]) == 6 and api["next_offset"] is None


# -- the JSON API ---------------------------------------------------------------------


async def test_api_refuses_content_longer_than_a_memory_holds_instead_of_cutting_it(site: Site) -> None:
    mid = await site.add("alice", "alice likes tea")
    async with site.client() as c:
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "x" * 4001})
        assert r.status_code == 400 and r.json()["error"] == "content is 4001 characters; a memory holds at most 4000"
        r = await c.post("/memory/api/edit", json={"id": mid, "user": "alice", "content": "y" * 5000})
        assert r.status_code == 400 and "5000 characters" in r.json()["error"]
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "z" * 4000})
        assert r.status_code == 201
    assert sorted(len(m.content) for m in await site.engine.list_memories()) == [15, 4000]


async def test_api_refuses_a_misspelt_field_instead_of_acting_on_a_default(site: Site) -> None:
    mid = await site.add("alice", "alice's door code is 4711")
    async with site.client() as c:
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "alice likes tea", "importnce": 0.9})
        assert r.status_code == 400
        assert r.json()["error"] == ("unknown field 'importnce' (this endpoint takes user, content, category, "
                                     "importance, tier, project, topic, search_terms)")
        r = await c.post("/memory/api/erase", json={"id": mid, "user": "alice", "cascde": True})
        assert r.status_code == 400 and r.json()["error"].startswith("unknown field 'cascde'")
        r = await c.post("/memory/api/archive", json={"id": mid, "status": "archived"})
        assert r.status_code == 400 and "takes id, user" in r.json()["error"]
    assert [m.content for m in await site.engine.list_memories(status=None)] == ["alice's door code is 4711"]  # nothing done
    assert (await site.engine.get(mid)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_api_round_trip(site: Site) -> None:
    async with site.client() as c:
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "alice's flight is on March 3", "importance": 0.6})
        assert r.status_code == 201
        m = r.json()["memory"]
        assert (m["owner"], m["source"], m["category"], m["importance"]) == ("alice", "manual", "decision", 0.6)
        mid = m["id"]
        # The change log says what was added, as it does for what extraction adds.
        [added] = (await c.get("/memory/api/log", params={"user": "alice"})).json()["log"]
        assert (added["action"], added["detail"]) == ("add", "alice's flight is on March 3")
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "alice's flight is on March 3"})
        assert r.status_code == 200 and r.json() == {"added": False, "memory": m}
        assert (await c.post("/memory/api/add", json={"user": "alice", "content": "  "})).status_code == 400
        assert (await c.post("/memory/api/add", content=b"not json")).status_code == 400
        assert (await c.post("/memory/api/add", json=["x"])).status_code == 400

        r = await c.post("/memory/api/edit", json={"id": mid, "content": "alice's flight moved to March 5", "category": "event", "tier": 2})
        assert r.status_code == 200 and r.json()["memory"]["content"] == "alice's flight moved to March 5"
        assert (await site.engine.get(mid)).category is Category.EVENT  # type: ignore[union-attr]
        assert (await c.post("/memory/api/edit", json={"id": mid, "category": "gossip"})).status_code == 400
        assert (await c.post("/memory/api/edit", json={"id": mid})).status_code == 400
        assert (await c.post("/memory/api/edit", json={"id": 999, "content": "x"})).status_code == 404
        assert (await c.post("/memory/api/edit", json={"id": mid, "user": "bob", "content": "x"})).status_code == 404

        got = (await c.get("/memory/api/memory", params={"id": mid})).json()
        assert got["memory"]["content"] == "alice's flight moved to March 5" and got["log"][0]["action"] == "edit"
        found = (await c.get("/memory/api/search", params={"user": "alice", "q": "when is the flight"})).json()
        assert found["memories"][0]["memory"]["id"] == mid
        assert (await c.get("/memory/api/search", params={"user": "alice"})).status_code == 400

        r = await c.post("/memory/api/archive", json={"id": mid, "user": "alice"})
        assert r.json()["memory"]["status"] == "archived"
        assert (await c.get("/memory/api/search", params={"user": "alice", "q": "flight"})).json()["memories"] == []
        listed = (await c.get("/memory/api/memories", params={"user": "alice", "status": "archived"})).json()
        assert [x["id"] for x in listed["memories"]] == [mid]
        assert (await c.get("/memory/api/memories", params={"user": "alice", "status": "gone"})).status_code == 400
        r = await c.post("/memory/api/restore", json={"id": mid})
        assert r.json()["memory"]["status"] == "active"
        r = await c.post("/memory/api/erase", json={"id": mid})
        assert r.status_code == 200 and r.json()["erased"] is True
        assert await site.engine.get(mid) is None
        assert (await c.get("/memory/api/memory", params={"id": mid})).status_code == 404
        log = (await c.get("/memory/api/log", params={"user": "alice"})).json()["log"]
        assert [x["action"] for x in log] == ["erase", "restore", "archive", "edit", "add"]
        assert "March" not in json.dumps(log)  # the erased words leave the log too
        stats = (await c.get("/memory/api/stats", params={"user": "alice"})).json()
        assert stats["total"] == 0 and stats["user"] == "alice"
        assert (await c.get("/memory/api/stats")).status_code == 400


# -- config and wiring ------------------------------------------------------------------


@pytest.mark.parametrize("admin", [{"enabled": True}, {"enabled": True, "token": "too-short"}, {"enabled": True, "token": " " * 20}])
def test_admin_needs_a_long_token_when_enabled(tmp_path: Path, admin: dict[str, Any]) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"gateway": {"admin": admin}}), encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "c.json", env={})
    assert "gateway.admin.token" in str(err.value) and "16 characters" in str(err.value)
    assert "too-short" not in str(err.value)


def test_admin_token_from_env_is_a_redacted_secret(tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "none.json", env={"MYCLAW_ADMIN_ENABLED": "true", "MYCLAW_ADMIN_TOKEN": TOKEN})
    assert cfg.gateway.admin.enabled and cfg.gateway.admin.token.get_secret_value() == TOKEN
    assert TOKEN not in repr(cfg) and TOKEN in config_secrets(cfg)
    assert load_config(tmp_path / "none.json", env={}).gateway.admin.enabled is False  # off by default


class QuietChannel(BaseChannel):
    """A channel that needs no HTTP server (like Telegram's long polling)."""

    name = "quiet"

    def __init__(self, config: Any, bus: MessageBus, **kw: Any) -> None:
        super().__init__(bus, config.allow_from)
        assert "http" not in kw

    async def start(self) -> None:
        pass

    async def stop(self, timeout: float | None = None) -> None:
        pass

    async def send(self, msg: OutboundMessage) -> None:
        pass


QUIET = ChannelSpec("quiet", __name__, "QuietChannel", lambda c: c.channels.telegram)


def _app_config(tmp_path: Path, fake: FakeOpenAI, **extra: Any) -> tuple[Config, Paths]:
    doc: dict[str, Any] = {
        "provider": {"baseUrl": fake.url, "apiKey": fake.api_key, "maxRetries": 0, "timeout": "5s"},
        "channels": {"telegram": {"enabled": True, "token": "123:abcdefghijklmnop"}},
        "gateway": {"port": 0, "admin": {"enabled": True, "token": TOKEN}},
        **extra,
    }
    (tmp_path / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    return load_config(tmp_path / "config.json", env={}, require=True), Paths(tmp_path)


async def test_the_app_serves_the_page_when_only_admin_needs_http(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI) -> None:
    gateway = {"port": 0, "admin": {"enabled": True, "token": TOKEN}, "trustedProxies": ["127.0.0.1"]}
    cfg, paths = _app_config(tmp_path, fake_llm, gateway=gateway)
    app = App(cfg, paths, clock=clock, channel_specs=[QUIET])
    try:
        await app.open()
        assert app.backend is not None
        await app.backend.engine.add(NewMemory(owner="alice", content="alice keeps bees"))  # type: ignore[attr-defined]
        await app.start()
        assert list(app.channels) == ["quiet"] and app.http is not None
        assert app.http.host == "127.0.0.1"  # gateway.host
        assert app.http.trusted_proxies == ("127.0.0.1/32",)  # gateway.trustedProxies
        async with httpx.AsyncClient(base_url=app.http.url, timeout=10) as c:
            assert (await c.get("/healthz")).status_code == 200
            assert (await c.get("/memory", params={"user": "alice"})).status_code == 401
            r = await c.get("/memory", params={"user": "alice", "q": "bees"}, headers=BEARER)
            assert r.status_code == 200 and cards(r.text) == ["alice keeps bees"]
    finally:
        await app.close()


async def test_a_cascade_erase_on_the_gateways_page_reaches_the_conversation_history(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    cfg, paths = _app_config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[QUIET])
    try:
        await app.open()
        await app.start()
        assert app.backend is not None and app.sessions is not None and app.http is not None
        f = await lineage(app.backend.engine)  # type: ignore[attr-defined]
        for owner, role, text in [("alice", "user", f.said), ("alice", "assistant", "Noted."),
                                  ("bob", "user", f.said)]:
            await app.sessions.append(f"quiet:{owner}", channel="quiet", chat_id=owner, role=role, content=text, owner=owner)
        async with httpx.AsyncClient(base_url=app.http.url, timeout=10, headers=BEARER) as c:
            r = await c.post("/memory/api/erase", json={"id": f.home, "user": "alice", "cascade": True})
        assert r.status_code == 200 and r.json()["history_lines"] == 1 and r.json()["buffered_lines"] == 1
        # The next prompt's history no longer shows it; bob's own line, the same words, stays.
        assert [m.content for m in await app.sessions.window("quiet:alice")] == ["Noted."]
        assert [m.content for m in await app.sessions.window("quiet:bob")] == [f.said]
    finally:
        await app.close()


async def test_a_cascade_erase_on_the_running_gateways_page_leaves_no_trace_in_the_history_file(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """While the gateway runs, gateway.db and its WAL are open: the deleted
    history rows' old pages stay in the WAL (and the main file) until the
    file is rewritten, unless the erasure compacts it."""
    cfg, paths = _app_config(tmp_path, fake_llm)
    app = App(cfg, paths, clock=clock, channel_specs=[QUIET])
    try:
        await app.open()
        await app.start()
        assert app.backend is not None and app.sessions is not None and app.http is not None
        code = await app.backend.engine.add(NewMemory(owner="alice", content="Alice's locker code is zqxjkv4711"))  # type: ignore[attr-defined]
        for i in range(30):  # a chat with some history, the code said in the middle of it
            text = "my locker code? Alice's locker code is zqxjkv4711" if i == 15 else f"an ordinary line {i}"
            await app.sessions.append("quiet:alice", channel="quiet", chat_id="alice", role="user", content=text, owner="alice")
        await app.sessions.flush()
        assert on_disk(paths.data_dir, "zqxjkv4711") > 0
        async with httpx.AsyncClient(base_url=app.http.url, timeout=10, headers=BEARER) as c:
            r = await c.post("/memory/api/erase", json={"id": code.id, "user": "alice", "cascade": True})
        assert r.status_code == 200 and r.json()["history_lines"] == 1
        assert on_disk(paths.data_dir, "zqxjkv4711") == 0  # gateway still running
        assert len(await app.sessions.window("quiet:alice")) == app.sessions.window_size  # the rest stays
    finally:
        await app.close()


@pytest.mark.parametrize("case", ["admin off", "memory off", "myclaw chat"])
async def test_no_page_without_admin_and_memory(tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI, case: str) -> None:
    extra: dict[str, Any] = {}
    if case == "admin off":
        extra["gateway"] = {"port": 0}
    elif case == "memory off":
        extra["memory"] = {"enabled": False}
    cfg, paths = _app_config(tmp_path, fake_llm, **extra)
    app = App(cfg, paths, clock=clock, channel_specs=[QUIET], config_channels=case != "myclaw chat")
    if case == "myclaw chat":
        app.add_channel(QuietChannel(cfg.channels.telegram, app.bus))
    try:
        with capture_logs() as logs:
            await app.open()
            await app.start()
        assert app.http is None
        assert any("memory page is not served" in x["event"] for x in logs) == (case == "memory off")
    finally:
        await app.close()


async def test_too_many_wrong_tokens_from_one_address_are_refused_for_a_while(site: Site) -> None:
    async with site.client(bearer=False) as anon, site.client() as admin:
        for _ in range(10):
            r = await anon.get("/memory/api/users", headers={"Authorization": "Bearer wrong-token-but-long-enough"})
            assert r.status_code == 401
        r = await admin.get("/memory/api/users")  # even the right token waits: it is the same address
        assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0 and "too many wrong tokens" in r.json()["error"]
        r = await anon.post("/memory/login", data={"token": TOKEN})
        assert r.status_code == 429
        for r in (r, await anon.get("/memory/api/users")):  # a page's 429 and the API's
            assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Frame-Options"] == "DENY"
            assert r.headers["Cache-Control"] == "no-store" and r.headers["Referrer-Policy"] == "no-referrer"
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
            assert r.headers["Server"] == "myclaw"



async def test_spoofed_forwarded_addresses_do_not_escape_the_lockout_without_a_trusted_proxy(site: Site) -> None:
    async with site.client(bearer=False) as anon:
        for i in range(10):
            r = await anon.get("/memory/api/users", headers={"Authorization": "Bearer wrong-token-but-long-enough",
                                                            "X-Forwarded-For": f"203.0.113.{i}"})
            assert r.status_code == 401
        r = await anon.get("/memory/api/users", headers={**BEARER, "X-Forwarded-For": "198.51.100.7"})
        assert r.status_code == 429


@pytest.fixture
async def proxied_site(engine: MemoryEngine) -> AsyncIterator[Site]:
    """The page behind a reverse proxy on the same host (gateway.trustedProxies)."""
    http = HttpServer("127.0.0.1", 0, trusted_proxies=["127.0.0.1"])
    mount_memory_page(http, engine, Retriever(engine), TOKEN)
    async with http:
        yield Site(http, engine)


async def test_behind_a_trusted_proxy_one_clients_wrong_tokens_lock_out_that_client_only(proxied_site: Site) -> None:
    """Every request reached the page from the proxy's 127.0.0.1: ten wrong
    tokens from anyone locked the operator out, for as long as they kept on."""
    wrong = {"Authorization": "Bearer wrong-token-but-long-enough"}
    async with proxied_site.client(bearer=False) as c:
        with capture_logs() as logs:
            for _ in range(10):
                r = await c.get("/memory/api/users", headers={**wrong, "X-Forwarded-For": "1.2.3.4, 203.0.113.9"})
                assert r.status_code == 401
        assert {e["remote"] for e in logs if e["event"] == "memory page: request refused"} == {"203.0.113.9"}
        r = await c.get("/memory/api/users", headers={**BEARER, "X-Forwarded-For": "203.0.113.9"})
        assert r.status_code == 429
        # What the attacker writes on the left changes nothing: the proxy appends the peer it saw.
        r = await c.get("/memory/api/users", headers={**BEARER, "X-Forwarded-For": "198.51.100.7, 203.0.113.9"})
        assert r.status_code == 429
        r = await c.get("/memory/api/users", headers={**BEARER, "X-Forwarded-For": "198.51.100.7"})
        assert r.status_code == 200  # the operator, elsewhere, is let in
        r = await c.post("/memory/login", data={"token": TOKEN}, headers={"X-Forwarded-For": "198.51.100.7"})
        assert r.status_code == 303


async def test_a_login_posted_from_another_site_is_refused_and_locks_no_one_out(site: Site) -> None:
    """A page elsewhere can make the operator's browser post wrong tokens to
    /memory/login; counted as failures, ten of them locked the operator's
    own address (and their scripts' Bearer calls) out for five minutes."""
    async with site.client(bearer=False) as c:
        for _ in range(12):
            r = await c.post("/memory/login", data={"token": "guessed-by-another-site-0000"},
                             headers={"Origin": "http://evil.example"})
            assert r.status_code == 403
        r = await c.post("/memory/login", data={"token": TOKEN}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and "Set-Cookie" not in r.headers  # nor does it sign anyone in
        r = await c.post("/memory/login", data={"token": TOKEN}, headers={"Origin": site.url})
        assert r.status_code == 303 and "myclaw_admin=" in r.headers["Set-Cookie"]


async def test_forwarded_host_and_proto_count_only_from_a_trusted_proxy(site: Site, proxied_site: Site) -> None:
    """Anyone could send X-Forwarded-Host to pass the Origin check as another
    site, or X-Forwarded-Proto to decide the cookie's Secure flag."""
    proxy = {"Origin": "https://memory.example", "X-Forwarded-Host": "memory.example", "X-Forwarded-Proto": "https"}
    async with site.client(bearer=False) as c:  # no trusted proxy: the headers are anyone's
        r = await c.post("/memory/login", data={"token": TOKEN}, headers=proxy)
        assert r.status_code == 403 and "Set-Cookie" not in r.headers
        r = await c.post("/memory/login", data={"token": TOKEN}, headers={"X-Forwarded-Proto": "https"})
        assert r.status_code == 303 and "secure" not in r.headers["Set-Cookie"].lower()
    async with proxied_site.client(bearer=False) as c:  # from the listed proxy: what it says is so
        r = await c.post("/memory/login", data={"token": TOKEN}, headers=proxy)
        assert r.status_code == 303 and "secure" in r.headers["Set-Cookie"].lower()
        r = await c.post("/memory/login", data={"token": TOKEN},
                         headers={**proxy, "Origin": "http://evil.example"})
        assert r.status_code == 403
        # A chain: the right-most value, the one our own proxy wrote, counts.
        r = await c.post("/memory/login", data={"token": TOKEN},
                         headers={**proxy, "X-Forwarded-Host": "evil.example, memory.example",
                                  "X-Forwarded-Proto": "https, http"})
        assert r.status_code == 303 and "secure" not in r.headers["Set-Cookie"].lower()


async def test_api_json_nested_too_deep_is_a_400_not_a_500(site: Site) -> None:
    async with site.client() as c:
        r = await c.post("/memory/api/add", content=b"[" * 100_000 + b"]" * 100_000,
                         headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["error"]


@pytest.mark.parametrize("tier", [b"Infinity", b"1.5", b"true"])
async def test_an_api_tier_that_is_not_1_or_2_is_a_400_and_changes_nothing(site: Site, tier: bytes) -> None:
    """JSON ``Infinity`` made int() raise OverflowError (a 500); 1.5 and true
    were taken as tier 1."""
    mid = await site.add("alice", "alice likes tea", tier=2)
    async with site.client() as c:
        for path, fields in [("/memory/api/edit", b'"id": %d, ' % mid), ("/memory/api/add", b'"content": "alice likes cocoa", ')]:
            body = b'{' + fields + b'"user": "alice", "tier": ' + tier + b'}'
            r = await c.post(path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400 and "tier must be 1 or 2" in r.json()["error"], (path, r.text)
    assert [(m.content, m.tier) for m in await site.engine.list_memories("alice")] == [("alice likes tea", 2)]

def test_failed_attempts_expire_and_stay_bounded() -> None:
    from gateway.web._auth import FailedAttempts

    now = [1000.0]
    attempts = FailedAttempts(limit=3, window=60.0, clock=lambda: now[0], max_clients=2)
    for _ in range(3):
        assert attempts.retry_after("1.2.3.4") == 0.0
        attempts.failed("1.2.3.4")
    assert attempts.retry_after("1.2.3.4") == 60.0
    assert attempts.retry_after("5.6.7.8") == 0.0  # other addresses are not affected
    now[0] += 30
    assert attempts.retry_after("1.2.3.4") == 30.0
    now[0] += 30
    assert attempts.retry_after("1.2.3.4") == 0.0  # the oldest failure aged out
    attempts.failed("a")
    attempts.failed("b")
    attempts.failed("c")  # bounded: the least recently failing address is forgotten
    assert len(attempts._failures) == 2 and "a" not in attempts._failures


async def test_the_detail_page_shows_the_words_a_memory_was_drawn_from(site: Site) -> None:
    mid = await site.add("alice", "Alice trains in a combat sport", source_text="I do <kickboxing> twice a week")
    bare = await site.add("alice", "Alice likes tea")
    async with site.client() as c:
        detail = (await c.get("/memory/item", params={"id": mid})).text
        assert "Drawn from" in detail and "I do &lt;kickboxing&gt; twice a week" in detail
        assert "Drawn from" not in (await c.get("/memory/item", params={"id": bare})).text
        listing = (await c.get("/memory", params={"user": "alice"})).text
        assert "kickboxing" not in listing  # the list shows the facts themselves


async def test_the_detail_page_shows_the_words_a_memory_is_found_by_apart_from_it(site: Site) -> None:
    mid = await site.add("alice", "We picked Postgres over MySQL", search_terms=("数据库", "<database>"))
    async with site.client() as c:
        detail = (await c.get("/memory/item", params={"id": mid})).text
        assert "Found by" in detail and "数据库, &lt;database&gt;" in detail
        listing = (await c.get("/memory", params={"user": "alice"})).text
        assert "数据库" not in listing and "We picked Postgres over MySQL" in listing


async def test_search_terms_are_added_shown_in_the_edit_form_and_edited(site: Site) -> None:
    """The page and the API take a fact's search terms (memory/cues.py) as
    the CLI's ``--terms`` does; a Chinese question then finds an English fact."""
    async with site.client() as c:
        r = await c.post("/memory/add", data={"user": "alice", "content": "We picked Postgres over MySQL",
                                               "search_terms": "数据库, database"})
        assert r.status_code == 303
        [m] = await site.engine.list_memories("alice")
        assert m.search_terms == ("数据库", "database")
        [hit] = await Retriever(site.engine).retrieve("alice", "数据库我们最后选了什么？")
        assert hit.id == m.id
        form = (await c.get("/memory/edit", params={"id": m.id})).text
        assert 'name="search_terms" value="数据库, database"' in form
        r = await c.post("/memory/edit", data={"id": m.id, "user": "alice", "content": m.content,
                                                "search_terms": "选型\nPostgres"})
        assert r.status_code == 303
        assert (await site.engine.get(m.id)).search_terms == ("选型", "Postgres")  # type: ignore[union-attr]
        r = await c.post("/memory/api/edit", json={"id": m.id, "user": "alice", "search_terms": ["db", "数据库"]})
        assert r.status_code == 200, r.text
        assert r.json()["memory"]["search_terms"] == ["db", "数据库"]
        r = await c.post("/memory/api/undo", json={"token": r.json()["undo"], "user": "alice"})
        assert r.status_code == 200, r.text
        assert (await site.engine.get(m.id)).search_terms == ("选型", "Postgres")  # type: ignore[union-attr]
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "Prefers tea", "search_terms": "茶"})
        assert r.status_code == 201 and r.json()["memory"]["search_terms"] == ["茶"]


async def test_bad_search_terms_on_the_page_say_why_and_change_nothing(site: Site) -> None:
    key = "sk-proj-AbCdEf0123456789xyz"
    mid = await site.add("alice", "We picked Postgres", search_terms=("db",))
    async with site.client() as c:
        for terms, why in ((f"db, {key}", "a key&#x27;s or password&#x27;s shape"), ("x" * 41, "at most 40"),
                           ([1, 2], "a list of strings")):
            r = await c.post("/memory/api/edit", json={"id": mid, "user": "alice", "search_terms": terms})
            assert r.status_code == 400 and key not in r.text, r.text
            assert html.unescape(why) in r.json()["error"]
            if isinstance(terms, str):
                r = await c.post("/memory/edit", data={"id": mid, "user": "alice", "search_terms": terms})
                # Said why; what was typed is kept in the form to be corrected (nothing lost).
                assert r.status_code == 400 and why in r.text and f'name="search_terms" value="{html.escape(terms)}"' in r.text
        r = await c.post("/memory/add", data={"user": "alice", "content": "wifi password is Sunny-Day-42",
                                               "category": "credential", "search_terms": "wifi"})
        assert r.status_code == 400 and "found by its own words only" in r.text
    assert [(m.id, m.search_terms) for m in await site.engine.list_memories("alice")] == [(mid, ("db",))]


async def test_an_id_or_offset_too_large_for_sqlite_is_a_400_not_a_500(site: Site) -> None:
    mid = await site.add("alice", "alice likes tea")
    huge = "9" * 25
    async with site.client() as c:
        r = await c.get("/memory/api/memories", params={"user": "alice", "offset": huge})
        assert r.status_code == 400 and "offset must be within" in r.json()["error"]
        r = await c.get("/memory/api/memory", params={"id": huge})
        assert r.status_code == 400 and "id must be within" in r.json()["error"]
        r = await c.post("/memory/api/archive", json={"id": int(huge), "user": "alice"})
        assert r.status_code == 400
        r = await c.post("/memory/api/archive", json={"id": True, "user": "alice"})
        assert r.status_code == 400 and "must be an integer" in r.json()["error"]
        r = await c.post("/memory/api/archive", json={"id": 1e300, "user": "alice"})
        assert r.status_code == 400
        r = await c.get("/memory/item", params={"id": huge})
        assert r.status_code == 400 and "id must be within" in r.text
    assert (await site.engine.get(mid)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_editing_a_fact_supersedes_the_core_memory_entries_built_on_it(site: Site) -> None:
    """An edited fact's old words left in Core Memory would be stated as
    current in every prompt until the next weekly refresh."""
    fact = await site.add("alice", "Alice lives in Hangzhou", category=Category.IDENTITY)
    other = await site.add("alice", "Alice works at Ant Group", category=Category.IDENTITY)
    built = await site.add("alice", "Alice lives in Hangzhou and works at Ant Group", tier=1, category=Category.IDENTITY,
                           source=Source.COMPRESSION, provenance=Provenance(refs=("weekly", f"m:{fact}", f"m:{other}")))
    apart = await site.add("alice", "Alice works at Ant Group", tier=1, category=Category.IDENTITY,
                           source=Source.COMPRESSION, provenance=Provenance(refs=("weekly", f"m:{other}")))
    bobs = await site.add("bob", "Bob lives in Hangzhou", tier=1, provenance=Provenance(refs=("weekly", f"m:{fact}")))
    async with site.client() as c:
        # Not the words: the entries stay.
        r = await c.post("/memory/api/edit", json={"id": fact, "user": "alice", "importance": 0.9})
        assert r.status_code == 200 and r.json()["entries_superseded"] == []
        assert f"- [m{built} · 2026-03-01] Alice lives in Hangzhou" in await site.engine.profile_markdown("alice", ids=True)

        r = await c.post("/memory/api/edit", json={"id": fact, "user": "alice", "content": "Alice moved to Shanghai"})
        assert r.status_code == 200
        assert r.json()["memory"]["content"] == "Alice moved to Shanghai" and r.json()["entries_superseded"] == [built]
    entry = await site.engine.get(built)
    assert entry is not None and (entry.status, entry.superseded_by) == (Status.SUPERSEDED, fact)
    profile = await site.engine.profile_markdown("alice", ids=True)
    assert "Hangzhou" not in profile and f"[m{apart} · 2026-03-01] Alice works at Ant Group" in profile
    assert (await site.engine.get(bobs)).status is Status.ACTIVE  # type: ignore[union-attr]  # another user's row
    [logged] = [x for x in await read_log(site.engine.db, owner="alice") if x.action == "supersede"]
    assert (logged.job, logged.memory_id) == ("web", built)

    # The page's form does the same, and says so.
    again = await site.add("alice", "Alice runs every morning", tier=1, source=Source.COMPRESSION,
                           provenance=Provenance(refs=("weekly", f"m:{other}")))
    async with site.client() as c:
        r = await c.post("/memory/edit", data={"id": other, "user": "alice", "content": "Alice works at Alibaba Cloud",
                                               "tier": "2", "category": "identity", "importance": "0.5",
                                               "project": "", "topic": ""})
        assert r.status_code == 303 and "done=edited_entries" in r.headers["Location"]
        page = (await c.get(r.headers["Location"])).text
        assert f"Memory m{other} saved. The Core Memory entries built on its old words are superseded" in page
    assert {(await site.engine.get(i)).status for i in (apart, again)} == {Status.SUPERSEDED}  # type: ignore[union-attr]


async def test_a_card_says_where_a_memory_came_from_in_words_and_links_what_it_was_built_on(site: Site) -> None:
    fact = await site.add("alice", "Alice lives in Hangzhou", provenance=Provenance(channel="telegram", chat_id="100"))
    built = await site.add("alice", "Alice lives in Hangzhou (profile)", tier=1, source=Source.COMPRESSION,
                           provenance=Provenance(refs=("weekly", f"m:{fact}", "buf:7"), date_from="2026-02-02",
                                                 date_to="2026-02-15"))
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice"})).text
    assert "from a chat on Telegram · chat 100" in page
    card = page[page.index(f'id="m{built}"'):]
    card = card[:card.index("</article>")]
    assert f'weekly summary of 1 note, 2026-02-02 to 2026-02-15 · built on <a href="/memory/item?id={fact}' in card
    assert f"m:{fact}" not in card and "buf:7" not in card and "weekly," not in card


async def test_lines_set_aside_can_be_tried_again_from_the_page(site: Site) -> None:
    """The "Set aside" tile offers what `myclaw memory retry-set-aside`
    does: the mark is cleared (that user's only), logged, and said."""
    from memory.service import SqliteMemory
    from tests.memory._writepath import turns

    await SqliteMemory(site.engine).buffer(turns("alice", ("a very long story", "ok")) + turns("bob", ("another", "ok")))
    await site.engine.db.write("UPDATE extraction_buffer SET set_aside_at = '2026-11-20T00:00:00Z'")
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice"})).text
        assert "Set aside" in page and 'action="/memory/retry-set-aside"' in page
        r = await c.post("/memory/retry-set-aside", data={"user": "alice"})
        assert r.status_code == 303 and "done=retried_set_aside&n=2" in r.headers["Location"]
        after = (await c.get(r.headers["Location"])).text
        assert "2 set-aside lines will be tried again at the next extraction run." in after
        assert 'action="/memory/retry-set-aside"' not in after
    rows = await site.engine.db.fetchall("SELECT owner, set_aside_at FROM extraction_buffer ORDER BY id")
    assert {(o, s is None) for o, s in rows} == {("alice", True), ("bob", False)}
    [entry] = await read_log(site.engine.db, actions=["retry-set-aside"])
    assert entry.owner == "alice" and entry.job == "web"


async def test_a_signed_in_session_survives_a_gateway_restart_and_sign_out_still_ends_it(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """Sessions lived in memory: every restart (an upgrade, a crash) signed
    everyone out. They live in gateway.db now, as a keyed hash only: the
    file alone gives no usable cookie."""
    gateway = {"port": 0, "admin": {"enabled": True, "token": TOKEN}, "trustedProxies": ["127.0.0.1"]}
    cfg, paths = _app_config(tmp_path, fake_llm, gateway=gateway)
    scanner = {"Authorization": "Bearer wrong-token-but-long-enough", "X-Forwarded-For": "203.0.113.9"}

    async def started() -> App:
        app = App(cfg, paths, clock=clock, channel_specs=[QUIET])
        await app.open()
        await app.start()
        return app

    app = await started()
    try:
        assert app.http is not None
        async with httpx.AsyncClient(base_url=app.http.url, timeout=10) as c:
            csrf = await login(c)
            cookie = c.cookies["myclaw_admin"]
            for _ in range(10):  # a scanner from another address is locked out
                assert (await c.get("/memory/api/users", headers=scanner)).status_code == 401
            assert (await c.get("/memory/api/users", headers=scanner)).status_code == 429
    finally:
        await app.close()
    issued, nonce, mac = cookie.split(".")
    assert on_disk(paths.data_dir, nonce) == 0 and on_disk(paths.data_dir, mac) == 0 and on_disk(paths.data_dir, cookie) == 0

    app = await started()
    try:
        assert app.http is not None
        async with httpx.AsyncClient(base_url=app.http.url, timeout=10, cookies={"myclaw_admin": cookie}) as c:
            r = await c.get("/memory", params={"user": "alice"})
            assert r.status_code == 200 and csrf_of(r.text) == csrf  # the same session, its forms still good
            r = await c.get("/memory/api/users", headers={**BEARER, "X-Forwarded-For": "203.0.113.9"})
            assert r.status_code == 429  # a restart does not let the scanner try again at once
            r = await c.post("/memory/add", data={"csrf": csrf, "user": "alice", "content": "alice keeps bees"})
            assert r.status_code == 303
            r = await c.post("/memory/logout", data={"csrf": csrf})
            assert r.status_code == 303
    finally:
        await app.close()

    app = await started()
    try:
        assert app.http is not None
        async with httpx.AsyncClient(base_url=app.http.url, timeout=10, cookies={"myclaw_admin": cookie}) as thief:
            assert (await thief.get("/memory")).status_code == 401  # signed out stays signed out
    finally:
        await app.close()


async def test_what_changes_a_memorys_words_tells_the_vectorizer(engine: MemoryEngine) -> None:
    """Hybrid recall embeds a page's add, reworded edit or restore at once
    (the gateway wires ``on_written`` to the vectorizer's wake); a change of
    importance or an archive leaves the words as they were."""
    told: list[str] = []
    admin = MemoryAdmin(engine, on_written=told.append)
    m, added = await admin.add("alice", {"content": "alice keeps bees"})
    assert added and told == ["alice"]
    await admin.add("alice", {"content": "alice keeps bees"})  # the same words: nothing new
    await admin.edit(m.id, "alice", {"importance": "0.9"})
    await admin.archive(m.id, "alice")
    assert told == ["alice"]
    await admin.restore(m.id, "alice")
    await admin.edit(m.id, "alice", {"content": "alice keeps two hives of bees"})
    assert told == ["alice"] * 3


async def test_an_erase_with_its_history_takes_an_imported_facts_memory_md_line(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """A fact imported from the user's MEMORY.md (memory was off once): the
    page's "erase it with its history" takes its line there too, bytes and
    all, as /forget does; "this row only" takes the row only."""
    from memory.filestore import FileMemory

    files = FileMemory(tmp_path / "ws", clock)
    for line in ("Locker code QUOKKA7731", "Likes green tea"):
        await files.remember("alice", line, provenance=Provenance())
    code, tea = [await engine.add(NewMemory(owner="alice", content=c, tier=1, source=Source.MIGRATION,
                                            provenance=Provenance(refs=("users/alice/MEMORY.md",))))
                 for c in ("Locker code QUOKKA7731", "Likes green tea")]
    admin = MemoryAdmin(engine, files=files)
    await admin.erase(tea.id, "alice")
    await admin.erase(code.id, "alice", cascade=True)
    assert on_disk(files.user_dir("alice"), "QUOKKA7731") == 0
    assert "Likes green tea" in (files.user_dir("alice") / "MEMORY.md").read_text(encoding="utf-8")


async def test_the_export_covers_the_person_with_every_handle_the_identity_map_gives_them(engine: MemoryEngine) -> None:
    """memory.identities makes telegram:777 and alice one person, and
    telegram:777 stored rows before the mapping: the page's export of alice
    held alice's rows only (telegram:777's were exported one handle at a
    time), unlike /export and `myclaw memory export --user`. Now both,
    the handle's under its own heading saying so; the handle's own export
    is the person's; another user's rows never come along."""
    from memory.identity import IdentityMap

    http = HttpServer("127.0.0.1", 0)
    mount_memory_page(http, engine, Retriever(engine), TOKEN, identities=IdentityMap({"alice": ["telegram:777"]}))
    await engine.add(NewMemory(owner="telegram:777", content="Alice's blood type is AB"))
    await engine.add(NewMemory(owner="alice", content="Alice drinks tea"))
    await engine.add(NewMemory(owner="bob", content="Bob keeps bees"))
    async with http:
        async with httpx.AsyncClient(base_url=http.url, headers=BEARER, timeout=10) as c:
            for who in ("alice", "telegram:777"):
                r = await c.get("/memory/export", params={"user": who})
                assert r.status_code == 200, r.text
                md = r.text
                assert "Alice drinks tea" in md and "Alice's blood type is AB" in md and "bees" not in md, md
                assert "## telegram:777" in md and "before memory.identities mapped it to alice" in md, md
                assert md.index("## alice") < md.index("## telegram:777")
                assert "myclaw-memory-alice-" in r.headers["Content-Disposition"]


async def test_the_gateways_memory_page_exports_with_its_configs_identity_map(
    tmp_path: Path, clock: ManualClock, fake_llm: FakeOpenAI
) -> None:
    """The App hands memory.identities to the page it serves: an export of
    alice there holds what telegram:777 stored before it was mapped to her."""
    cfg, paths = _app_config(tmp_path, fake_llm, memory={"identities": {"alice": ["telegram:777"]}})
    app = App(cfg, paths, clock=clock, channel_specs=[QUIET])
    try:
        await app.open()
        assert app.backend is not None
        engine = app.backend.engine  # type: ignore[attr-defined]
        await engine.add(NewMemory(owner="telegram:777", content="Alice's blood type is AB"))  # before the mapping
        await engine.add(NewMemory(owner="alice", content="Alice drinks tea"))
        await app.start()
        assert app.http is not None
        async with httpx.AsyncClient(base_url=app.http.url, headers=BEARER, timeout=10) as c:
            md = (await c.get("/memory/export", params={"user": "alice"})).text
        assert "Alice drinks tea" in md and "Alice's blood type is AB" in md and "## telegram:777" in md, md
    finally:
        await app.close()


async def test_search_reads_time_words_on_the_users_calendar(engine: MemoryEngine, clock: ManualClock) -> None:
    """The page's search reads "昨天" as the bot's recall does: on the user's
    own calendar (their /timezone), else the gateway's (gateway.timezone),
    not UTC's. At 17:00 UTC it is already tomorrow in Shanghai."""
    from zoneinfo import ZoneInfo

    clock.set("2026-03-01T17:00:00Z")  # 2026-03-02 01:00 in Shanghai
    await engine.add_event("alice", "2026-03-01", "讨论了把博客迁移到 Hugo")  # yesterday in Shanghai
    await engine.add_event("alice", "2026-02-28", "计划周末去香山爬山")  # yesterday in UTC
    await engine.add_event("bob", "2026-02-28", "聊了跑步")

    async def found(web_tz: Any, user: str, zones: dict[str, Any] | None = None) -> list[str]:
        http = HttpServer("127.0.0.1", 0)
        page = mount_memory_page(http, engine, Retriever(engine), TOKEN, tz=web_tz)
        if zones is not None:
            async def zone_of(owner: str) -> Any:
                return zones.get(owner)

            page.admin.zone_of = zone_of
        await http.start()
        try:
            async with Site(http, engine).client() as c:
                r = await c.get("/memory/api/search", params={"user": user, "q": "昨天聊了什么"})
                return [e["content"] for e in r.json()["events"]]
        finally:
            await http.stop()

    shanghai = ZoneInfo("Asia/Shanghai")
    assert await found(ZoneInfo("UTC"), "alice") == ["计划周末去香山爬山"]  # a gateway on UTC, no zone of hers
    assert (await found(shanghai, "alice"))[0] == "讨论了把博客迁移到 Hugo"  # the gateway's
    assert (await found(ZoneInfo("UTC"), "alice", {"alice": shanghai}))[0] == "讨论了把博客迁移到 Hugo"  # her own
    assert await found(ZoneInfo("UTC"), "bob", {"alice": shanghai}) == ["聊了跑步"]  # bob's is the gateway's
