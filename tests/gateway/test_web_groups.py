"""The memory page and groups' own notes (memory/groupnotes.py): a group
owner is listed as a group, apart from the users, never offered as a
person, and its memory is erased from the page with one confirmed action."""

from __future__ import annotations

import asyncio
from pathlib import Path
from html import unescape
from urllib.parse import quote

import httpx

from memory import MemoryEngine, NewMemory, Provenance
from memory.groupnotes import group_owner
from tests.gateway.test_web import Site, login, site  # noqa: F401  (site: the fixture)
from tests.gateway.webform import parse

FAMILY = ("telegram", "-100123")
OWNER = group_owner(*FAMILY)


async def _seed(engine: MemoryEngine) -> None:
    await engine.add(NewMemory(owner=OWNER, content="Dad is booking the hotel for the lake trip", provenance=Provenance(
        channel=FAMILY[0], chat_id=FAMILY[1], group=True, speakers=("telegram:11",), said_by=("Dad",))))
    await engine.add_event(OWNER, "2026-02-28", "Dad books the hotel", channel=FAMILY[0], chat_id=FAMILY[1],
                           provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1], group=True,
                                                 speakers=("telegram:11",)))
    await engine.add(NewMemory(owner="alice", content="alice likes lakes"))


async def test_a_group_is_listed_as_a_group_never_as_a_user_and_its_memory_is_erased_from_the_page(site: Site) -> None:
    await _seed(site.engine)
    async with site.client(bearer=False) as c:
        await login(c)
        html = (await asyncio.wait_for(c.get("/memory", params={"user": "alice"}), 10)).text
        users, _, groups = html.partition('aria-label="groups"')
        assert "alice" in users and OWNER not in users  # not among the people
        assert "telegram:-100123" in groups and "1 note" in groups and "style=" not in groups  # CSP: no inline style
        # A person's views refuse it: no list, export, add or erase-all as if it were one.
        for path in ("/memory", "/memory/export", "/memory/erase-all"):
            r = await c.get(path, params={"user": OWNER})
            assert r.status_code == 400 and "is a group" in r.text, (path, r.status_code)
        [note] = await site.engine.list_memories(OWNER)
        for path in ("/memory/item", "/memory/edit", "/memory/erase"):  # nor one of its notes by its id
            r = await c.get(path, params={"id": note.id})
            assert r.status_code == 400 and "is a group" in r.text, (path, r.status_code)
        async with site.client() as api:
            users_api = (await api.get("/memory/api/users")).text
            groups_api = (await api.get("/memory/api/groups")).text
        assert OWNER not in users_api and "alice" in users_api
        assert '"group": "telegram:-100123"' in groups_api and '"notes": 1' in groups_api

        # The group's own action: a confirmation, then its notes and days go; alice's stay.
        page = parse((await c.get(f"/memory/forget-group?group={quote('telegram:-100123')}")).text)
        method, action, fields = page.submit(page.button("Erase this group's memory"))
        assert (method, action) == ("post", "/memory/forget-group")
        r = await asyncio.wait_for(c.post(action, data=dict(fields), follow_redirects=True), 10)
        assert r.status_code == 200 and "2 rows of the group's memory erased" in unescape(r.text)
        assert 'aria-label="groups"' not in r.text
    for table in ("memories", "daily_events"):
        row = await site.engine.db.fetchone(f"SELECT COUNT(*) FROM {table} WHERE owner = ?", (OWNER,))
        assert row is not None and row[0] == 0
    assert [m.content for m in await site.engine.list_memories("alice")] == ["alice likes lakes"]


async def test_a_group_is_named_by_its_title_on_every_page(engine: MemoryEngine, tmp_path: Path) -> None:
    from gateway.chattitles import ChatTitles
    from gateway.http import HttpServer
    from gateway.sessions import SessionStore
    from gateway.web import mount_memory_page
    from memory.retrieval import Retriever
    from tests.gateway.test_web import TOKEN

    await _seed(engine)
    async with await SessionStore.open(tmp_path / "gateway.db") as store:
        titles = ChatTitles(store.db)
        await titles.seen(FAMILY[0], FAMILY[1], "Family", at="2026-03-01T12:00:00Z")
        http = HttpServer("127.0.0.1", 0)
        page = mount_memory_page(http, engine, Retriever(engine), TOKEN)
        page.titles = titles
        await http.start()
        try:
            async with httpx.AsyncClient(base_url=http.url, timeout=10) as c:
                await login(c)
                for params in ({}, {"user": "alice"}):  # the start page, and a user's (which names its groups too)
                    html = (await c.get("/memory", params=params)).text
                    groups = html.partition('aria-label="groups"')[2]
                    assert "Family" in groups, params
                confirm = (await c.get("/memory/forget-group", params={"group": "telegram:-100123"})).text
                assert "Erase the memory of the group Family for good?" in unescape(confirm)
                c.cookies.set("myclaw_lang", "zh")
                confirm = (await c.get("/memory/forget-group", params={"group": "telegram:-100123"})).text
                assert "永久删除群聊 Family 的记忆？" in confirm
        finally:
            await http.stop()
