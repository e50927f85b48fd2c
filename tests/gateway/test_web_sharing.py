"""The memory page and a member's facts shared with groups (``/share``,
memory/sharing.py): a card says where one is shared, and the page can take
it back (Unshare, through the page's action form) and undo that."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx

from memory import Category, ManualClock, MemoryEngine, NewMemory, Provenance
from memory.changelog import read_log
from memory.retrieval import Retriever
from tests.gateway.test_web import TOKEN, Site, site  # noqa: F401  (site: the fixture)
from tests.gateway.test_web_undo import _undo_form
from tests.gateway.webform import parse

GROUP = ("telegram", "-100123")


async def _signed_in(c: httpx.AsyncClient) -> None:
    r = await c.post("/memory/login", data={"token": TOKEN})
    assert r.status_code == 303


def _card(html: str, memory_id: int) -> str:
    found = re.search(rf'<article [^>]*id="m{memory_id}".*?</article>', html, re.S)
    assert found, f"no card m{memory_id}"
    return found.group(0)


async def _group_reads(site: Site, text: str) -> bool:
    hits = await Retriever(site.engine).retrieve("alice", text, private=False, chat=GROUP)
    return any(text in h.content for h in hits)


async def test_a_card_says_where_a_fact_is_shared_in_each_language(site: Site) -> None:
    everywhere = await site.add("alice", "alice is vegetarian", provenance=Provenance(shared=("*",)))
    one = await site.add("alice", "alice leads the hiking club", provenance=Provenance(shared=("telegram:-100123",)))
    private = await site.add("alice", "alice sees a cardiologist")
    # Never read in a group whatever the row says (memory/scope.py): never shown as shared.
    secret = await site.add("alice", "alice's wifi password is hunter2", category=Category.CREDENTIAL,
                            provenance=Provenance(shared=("*",)))
    profile = await site.add("alice", "alice is a nurse", tier=1, provenance=Provenance(shared=("*",)))
    async with site.client(bearer=False) as c:
        await _signed_in(c)
        html = (await asyncio.wait_for(c.get("/memory", params={"user": "alice"}), 10)).text
        assert "Shared with all groups" in _card(html, everywhere)
        assert "Shared with group telegram:-100123" in _card(html, one)
        for mid in (private, secret, profile):
            assert "Shared with" not in _card(html, mid) and "Unshare" not in _card(html, mid)
        for lang, every, group, button in (("zh", "在所有群聊中共享", "在群 telegram:-100123 中共享", "取消共享"),
                                           ("zh-Hant", "在所有群聊中共享", "在群 telegram:-100123 中共享", "取消共享")):
            c.cookies.set("myclaw_lang", lang)
            html = (await asyncio.wait_for(c.get("/memory", params={"user": "alice"}), 10)).text
            assert every in _card(html, everywhere) and button in _card(html, everywhere)
            assert group in _card(html, one)
            assert "共享" not in _card(html, secret)


async def test_unshare_from_the_page_takes_it_back_from_every_group_and_undo_puts_it_back(site: Site) -> None:
    mid = await site.add("alice", "alice is vegetarian", provenance=Provenance(shared=("*",)))
    assert await _group_reads(site, "alice is vegetarian")
    async with site.client(bearer=False) as c:
        await _signed_in(c)
        page = parse((await c.get("/memory", params={"user": "alice"})).text)
        method, action, fields = page.submit(page.button(f"Unshare m{mid}"))  # a click, JavaScript off
        assert (method, action) == ("post", "/memory/unshare") and ("id", str(mid)) in fields
        r = await asyncio.wait_for(c.post(action, data=dict(fields), follow_redirects=True), 10)
        assert r.status_code == 200 and f"Memory m{mid} is no longer shared with groups" in r.text
        assert "Shared with" not in _card(r.text, mid)
        m = await site.engine.get(mid)
        assert m is not None and m.provenance.shared == () and m.content == "alice is vegetarian"
        assert not await _group_reads(site, "alice is vegetarian")

        r = await asyncio.wait_for(c.post("/memory/undo", data=_undo_form(r.text), follow_redirects=True), 10)
        assert r.status_code == 200 and f"Memory m{mid} is shared again" in r.text
        assert "Shared with all groups" in _card(r.text, mid)
    m = await site.engine.get(mid)
    assert m is not None and m.provenance.shared == ("*",)
    assert await _group_reads(site, "alice is vegetarian")
    log = [(x.action, x.memory_id) for x in reversed(await read_log(site.engine.db, owner="alice")) if x.job == "web"]
    assert log == [("unshare", mid), ("share", mid)]


async def test_unshare_refuses_a_stale_page_a_foreign_form_and_an_undo_over_a_later_share(site: Site) -> None:
    mid = await site.add("alice", "alice is vegetarian", provenance=Provenance(shared=("*",)))
    bobs = await site.add("bob", "bob plays chess", provenance=Provenance(shared=("*",)))
    async with site.client(bearer=False) as c:
        await _signed_in(c)
        page = parse((await c.get("/memory", params={"user": "alice"})).text)
        method, action, fields = page.submit(page.button(f"Unshare m{mid}"))
        form = dict(fields)
        # Bob's id on Alice's page (a stale or hand-made form): not found, nothing changed.
        r = await c.post(action, data={**form, "id": str(bobs)})
        assert r.status_code == 404
        r = await c.post(action, data={**form, "csrf": "0" * 32})
        assert r.status_code == 403
        assert (await site.engine.get(mid)).provenance.shared == ("*",)  # type: ignore[union-attr]
        assert (await site.engine.get(bobs)).provenance.shared == ("*",)  # type: ignore[union-attr]

        r = await c.post(action, data=form, follow_redirects=True)
        undo = _undo_form(r.text)
        # Shared again in one group since (/share in that group): the undo would overwrite it.
        m = await site.engine.get(mid)
        assert m is not None
        from dataclasses import replace

        await site.engine.db.write("UPDATE memories SET provenance = ? WHERE id = ?",
                                   (replace(m.provenance, shared=("telegram:-100123",)).to_json(), mid))
        r = await c.post("/memory/undo", data=undo)
        assert r.status_code == 409 and "nothing was changed" in r.text
    assert (await site.engine.get(mid)).provenance.shared == ("telegram:-100123",)  # type: ignore[union-attr]


async def test_the_api_unshares_too(site: Site) -> None:
    mid = await site.add("alice", "alice is vegetarian", provenance=Provenance(shared=("*", "telegram:-100123")))
    secret = await site.add("alice", "alice's pin is 1234", category=Category.CREDENTIAL)
    async with site.client() as c:
        r = await c.post("/memory/api/unshare", json={"id": mid, "user": "alice"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["memory"]["provenance"].get("shared", []) == [] and body["was"] == ["*", "telegram:-100123"]
        r = await c.post("/memory/api/unshare", json={"id": secret, "user": "bob"})
        assert r.status_code == 404
    assert (await site.engine.get(mid)).provenance.shared == ()  # type: ignore[union-attr]


async def test_a_card_names_a_group_by_the_title_the_gateway_saw(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """A group's title as last seen (gateway/chattitles.py) names it on the
    card, where it is shared and where the fact was said; a group never
    seen under a title keeps its id."""
    from gateway.chattitles import ChatTitles
    from gateway.http import HttpServer
    from gateway.sessions import SessionStore
    from gateway.web import mount_memory_page
    from tests.gateway.test_web import TOKEN as token

    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        await titles.seen("telegram", "-100123", "Hiking <club>", at="2026-03-01T12:00:00Z")
        said = await engine.add(NewMemory(owner="alice", content="alice leads the hikes", provenance=Provenance(
            channel="telegram", chat_id="-100123", group=True, shared=("telegram:-100123", "telegram:-100999"))))
        http = HttpServer("127.0.0.1", 0)
        web = mount_memory_page(http, engine, Retriever(engine), token)
        web.titles = titles
        await http.start()
        try:
            async with httpx.AsyncClient(base_url=http.url, timeout=10, follow_redirects=False) as c:
                await _signed_in(c)
                for path, params in (("/memory", {"user": "alice"}), ("/memory/item", {"id": str(said.id)})):
                    html = (await asyncio.wait_for(c.get(path, params=params), 10)).text
                    card = _card(html, said.id)
                    assert "Shared with group Hiking &lt;club&gt;, telegram:-100999" in card, path
                    assert "Hiking &lt;club&gt; (-100123)" in card, path
                doc = (await asyncio.wait_for(c.get("/memory/export", params={"user": "alice"}), 10)).text
                assert "shared with Hiking <club> and telegram:-100999)_" in doc
        finally:
            await http.stop()


async def test_a_shared_cards_group_with_its_own_newer_fact_is_named_on_the_card(
    engine: MemoryEngine, tmp_path: Path, clock: ManualClock
) -> None:
    """Where a group reads its own newer fact instead of a shared one
    (``provenance.replaced_in``, memory/scope.py), the card says so, the
    group by its title, as /share does; once that fact is erased, no more."""
    from gateway.chattitles import ChatTitles
    from gateway.http import HttpServer
    from gateway.sessions import SessionStore
    from gateway.web import mount_memory_page
    from tests.gateway.test_web import TOKEN as token

    acme = await engine.add(NewMemory(owner="alice", content="Alice works at Acme",
                                      provenance=Provenance(channel="telegram", chat_id="7")))
    globex = await engine.add(NewMemory(owner="alice", content="Alice works at Globex",
                                        provenance=Provenance(channel="telegram", chat_id="-1", group=True)))
    await engine.db.write("UPDATE memories SET provenance = ? WHERE id = ?", (Provenance(
        channel="telegram", chat_id="7", shared=("*",),
        replaced_in=(("telegram:-1", globex.id), ("telegram:-2", 99999))).to_json(), acme.id))
    async with await SessionStore.open(tmp_path / "g.db", clock) as store:
        titles = ChatTitles(store.db)
        await titles.seen("telegram", "-1", "Work <crew>", at="2026-03-01T12:00:00Z")
        http = HttpServer("127.0.0.1", 0)
        web = mount_memory_page(http, engine, Retriever(engine), token)
        web.titles = titles
        await http.start()
        try:
            async with httpx.AsyncClient(base_url=http.url, timeout=10, follow_redirects=False) as c:
                await _signed_in(c)
                for path, params in (("/memory", {"user": "alice"}), ("/memory/item", {"id": str(acme.id)})):
                    card = _card((await asyncio.wait_for(c.get(path, params=params), 10)).text, acme.id)
                    assert f"In Work &lt;crew&gt; m{globex.id} is used instead" in card, path
                    assert "telegram:-2" not in card and "99999" not in card, path  # that fact is gone
                await engine.delete(globex.id)
                card = _card((await asyncio.wait_for(c.get("/memory", params={"user": "alice"}), 10)).text, acme.id)
                assert "is used instead" not in card
        finally:
            await http.stop()
