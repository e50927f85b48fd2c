"""The memory page and groups' own notes (memory/groupnotes.py): a group
owner is listed as a group, apart from the users, never offered as a
person, and its memory is erased from the page with one confirmed action."""

from __future__ import annotations

import asyncio
from pathlib import Path
from html import unescape
from urllib.parse import quote

import httpx
from structlog.testing import capture_logs

from memory import MemoryEngine, NewMemory, Provenance, Status
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


async def _notes(engine: MemoryEngine) -> tuple[int, int]:
    hotel = await engine.add(NewMemory(owner=OWNER, content="Dad is booking the hotel for the lake trip",
                                       provenance=Provenance(channel=FAMILY[0], chat_id=FAMILY[1], group=True,
                                                             speakers=("telegram:11",), said_by=("Dad",))))
    cake = await engine.add(NewMemory(owner=OWNER, content="Mom brings the cake", provenance=Provenance(
        channel=FAMILY[0], chat_id=FAMILY[1], group=True, speakers=("telegram:12",), said_by=("Mom",))))
    return hotel.id, cake.id


async def _log(engine: MemoryEngine, memory_id: int) -> list[tuple[str, str, str, str]]:
    rows = await engine.db.fetchall("SELECT job, owner, action, detail FROM memory_log WHERE memory_id = ? ORDER BY id",
                                    (memory_id,))
    return [tuple(r) for r in rows]


async def test_one_group_note_is_edited_from_the_groups_page_logged_without_its_words(site: Site) -> None:
    hotel, cake = await _notes(site.engine)
    alice = await site.add("alice", "alice likes lakes")
    async with site.client(bearer=False) as c:
        await login(c)
        # The picker leads to the group's own page, its notes listed with who said them.
        start = parse((await c.get("/memory")).text)
        [link] = [a["href"] for a, _ in start.links if a.get("title") == "telegram:-100123"]
        assert link == f"/memory/group?group={quote('telegram:-100123', safe='')}"
        group_page = (await c.get(link)).text
        assert "Dad is booking the hotel" in group_page and "said by Dad" in group_page and "said by Mom" in group_page
        form_url = parse(group_page).link(f"Edit m{hotel}")
        page = parse((await c.get(unescape(form_url))).text)
        method, action, fields = page.submit(page.button("Save"))
        assert (method, action) == ("post", "/memory/group-note/edit")
        typed = {k: "Dad booked the hotel by the lake" if k == "content" else v for k, v in fields}
        with capture_logs() as logs:
            r = await asyncio.wait_for(c.post(action, data=typed, follow_redirects=True), 10)
        assert r.status_code == 200 and f"The group's note m{hotel} saved." in unescape(r.text)
        assert "Dad booked the hotel by the lake" in r.text
        # A stale or forged form: the wrong CSRF token changes nothing; a person's memory is not a group note.
        bad = {**typed, "csrf": "x", "content": "forged"}
        assert (await c.post(action, data=bad)).status_code == 403
        elsewhere = {**typed, "id": str(alice), "content": "forged"}
        r = await c.post(action, data=elsewhere)
        assert r.status_code == 404 and f"no note m{alice} of the group telegram:-100123" in unescape(r.text)
        other = {**typed, "group": "telegram:-100999", "content": "forged"}
        assert (await c.post(action, data=other)).status_code == 404
    note = await site.engine.get(hotel)
    assert note is not None and note.content == "Dad booked the hotel by the lake"
    assert note.provenance.said_by == ("Dad",) and note.owner == OWNER  # who said it stays
    assert [m.content for m in await site.engine.list_memories("alice")] == ["alice likes lakes"]
    [(job, owner, action, detail)] = await _log(site.engine, hotel)
    assert (job, owner, action) == ("web", OWNER, "edit") and "hotel" not in detail and "content" in detail
    # The log names the group by its tag, never its chat id.
    assert [e for e in logs if e["event"] == "memory page: group note edited"]
    assert not [e for e in logs if "-100123" in repr(e)]
    assert (await site.engine.get(cake)) is not None


async def test_one_group_note_is_erased_after_a_confirmation_its_older_version_with_it(site: Site) -> None:
    hotel, cake = await _notes(site.engine)
    older = await site.engine.add(NewMemory(owner=OWNER, content="Dad might book the hotel", provenance=Provenance(
        channel=FAMILY[0], chat_id=FAMILY[1], group=True, speakers=("telegram:11",), said_by=("Dad",))))
    await site.engine.set_status(older.id, Status.SUPERSEDED, superseded_by=hotel)
    async with site.client(bearer=False) as c:
        await login(c)
        group_page = parse((await c.get(f"/memory/group?group={quote('telegram:-100123')}")).text)
        confirm = (await c.get(unescape(group_page.link(f"Erase… m{hotel}")))).text
        assert f"Erase the group's note m{hotel} for good?" in unescape(confirm) and "1 older version" in confirm
        assert (await site.engine.get(hotel)) is not None  # a link never erases
        page = parse(confirm)
        method, action, fields = page.submit(page.button("Erase for good"))
        assert (method, action) == ("post", "/memory/group-note/erase")
        assert (await c.post(action, data={**dict(fields), "csrf": "x"})).status_code == 403
        assert (await site.engine.get(hotel)) is not None
        with capture_logs() as logs:
            r = await asyncio.wait_for(c.post(action, data=dict(fields), follow_redirects=True), 10)
        assert r.status_code == 200 and f"The group's note m{hotel} erased for good." in unescape(r.text)
        assert "Mom brings the cake" in r.text and "booking the hotel" not in r.text
        # Erased already: said so, nothing else touched.
        again = await c.post(action, data=dict(fields))
        assert again.status_code == 404
    assert await site.engine.get(hotel) is None and await site.engine.get(older.id) is None
    assert (await site.engine.get(cake)) is not None
    assert [(j, o, a) for j, o, a, _ in await _log(site.engine, hotel)] == [("web", OWNER, "erase")]
    assert not [e for e in logs if "-100123" in repr(e)]
    assert b"booking the hotel" not in site.engine.db.path.read_bytes()
