"""Undo from the notice after an edit or an "archive all" (as after a
single archive): one click puts back what was there, and only that."""

from __future__ import annotations

import asyncio
import re

import httpx

from gateway.web._undo import ArchiveAllUndo, UndoStore
from memory import Category, Provenance, Source, Status
from memory.changelog import read_log
from tests.gateway.test_web import TOKEN, Site, cards, csrf_of, site  # noqa: F401  (site: the fixture)


async def _signed_in(c: httpx.AsyncClient) -> str:
    r = await c.post("/memory/login", data={"token": TOKEN})
    assert r.status_code == 303
    return csrf_of((await c.get("/memory", params={"user": "alice"})).text)


def _undo_form(html: str) -> dict[str, str]:
    """The Undo button's form inside the page's notice (on a card or at the top)."""
    notice = re.search(r'<div class="flash" role="status">(.*?)</div>', html, re.S)
    assert notice, "no notice on the page"
    form = re.search(r'<form method="post" action="/memory/undo"[^>]*>(.*?)</form>', notice.group(1), re.S)
    assert form and ">Undo<" in form.group(1), notice.group(1)
    return dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form.group(1)))


async def test_an_edit_can_be_undone_from_its_notice_with_the_entries_it_superseded(site: Site) -> None:
    fact = await site.add("alice", "Alice lives in Hangzhou", category=Category.IDENTITY, importance=0.6)
    entry = await site.add("alice", "Alice lives in Hangzhou", tier=1, category=Category.IDENTITY,
                           source=Source.COMPRESSION, provenance=Provenance(refs=("weekly", f"m:{fact}")))
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c)
        r = await asyncio.wait_for(c.post("/memory/edit", data={
            "csrf": csrf, "id": str(fact), "user": "alice", "content": "Alice moved to Shanghai", "tier": "2",
            "category": "decision", "importance": "0.9", "project": "", "topic": "", "back": "/memory?user=alice",
        }, follow_redirects=True), 10)
        assert r.status_code == 200 and "Alice moved to Shanghai" in cards(r.text)
        assert "Hangzhou" not in str(r.url)  # the old words are not carried in the address
        fields = _undo_form(r.text)
        r = await asyncio.wait_for(c.post("/memory/undo", data=fields, follow_redirects=True), 10)
        assert r.status_code == 200 and f"Edit of m{fact} undone" in r.text
        assert "Alice lives in Hangzhou" in cards(r.text)
        m, e = await site.engine.get(fact), await site.engine.get(entry)
        assert m is not None and (m.content, m.category, m.importance) == ("Alice lives in Hangzhou", Category.IDENTITY, 0.6)
        assert e is not None and (e.status, e.superseded_by) == (Status.ACTIVE, None)  # back in the profile
        # Used once: a second click (the back button, a double tap) changes nothing.
        r = await c.post("/memory/undo", data=fields)
        assert r.status_code == 409 and "nothing was changed" in r.text
    log = [x.action for x in reversed(await read_log(site.engine.db, owner="alice")) if x.job == "web"]
    assert log == ["edit", "supersede", "edit", "restore"]


async def test_an_edits_undo_does_not_overwrite_a_later_change(site: Site) -> None:
    fact = await site.add("alice", "Alice likes tea")
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c)
        edit = {"csrf": csrf, "id": str(fact), "user": "alice", "back": "/memory?user=alice"}
        r = await c.post("/memory/edit", data={**edit, "content": "Alice likes green tea"}, follow_redirects=True)
        fields = _undo_form(r.text)
        await c.post("/memory/edit", data={**edit, "content": "Alice likes oolong"})  # from the laptop, say
        r = await c.post("/memory/undo", data=fields)
        assert r.status_code == 409 and "changed since" in r.text
        r = await c.post("/memory/undo", data={**fields, "csrf": "0" * 32})
        assert r.status_code == 403
    assert (await site.engine.get(fact)).content == "Alice likes oolong"  # type: ignore[union-attr]


async def test_archive_all_can_be_undone_and_leaves_what_was_archived_before(site: Site) -> None:
    ids = [await site.add("alice", f"fact number {i}") for i in range(3)]
    earlier = await site.add("alice", "archived long ago")
    await site.engine.set_status(earlier, Status.ARCHIVED)
    bobs = await site.add("bob", "bob's fact")
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c)
        c.cookies.set("myclaw_lang", "zh")
        r = await c.post("/memory/archive-all", data={"csrf": csrf, "user": "alice", "confirm": "yes"}, follow_redirects=True)
        assert cards(r.text) == [] and ">撤销<" in r.text
        c.cookies.set("myclaw_lang", "en")
        r = await c.get(r.url)
        fields = _undo_form(r.text)
        r = await c.post("/memory/undo", data=fields, follow_redirects=True)
        assert r.status_code == 200 and "3 memories restored" in r.text
        assert sorted(cards(r.text)) == [f"fact number {i}" for i in range(3)]
    assert {(await site.engine.get(i)).status for i in ids} == {Status.ACTIVE}  # type: ignore[union-attr]
    assert (await site.engine.get(earlier)).status is Status.ARCHIVED  # type: ignore[union-attr]
    assert (await site.engine.get(bobs)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_an_unknown_or_expired_undo_says_so_and_changes_nothing(site: Site) -> None:
    mid = await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c)
        r = await c.post("/memory/undo", data={"csrf": csrf, "token": "no-such-undo", "back": "/memory?user=alice"})
        assert r.status_code == 409 and "expired or was used" in r.text
        assert 'href="/memory?user=alice"' in r.text
    assert (await site.engine.get(mid)).status is Status.ACTIVE  # type: ignore[union-attr]


def test_the_undo_store_forgets_after_its_time_and_keeps_a_bounded_number() -> None:
    now = [0.0]
    store = UndoStore(ttl=600, keep=3, clock=lambda: now[0])
    tokens = [store.put(ArchiveAllUndo("alice", (i,))) for i in range(4)]
    assert store.peek(tokens[0]) is None  # the oldest made room
    assert store.peek(tokens[3]) == ArchiveAllUndo("alice", (3,))
    now[0] = 601
    assert store.take(tokens[3]) is None
    fresh = store.put(ArchiveAllUndo("alice", (9,)))
    assert store.take(fresh) == ArchiveAllUndo("alice", (9,)) and store.take(fresh) is None


async def test_the_json_api_offers_an_undo_for_an_edit_and_an_unshare_with_the_same_checks(site: Site) -> None:
    """Undo was the HTML page's only: a script's edit (a redaction gone
    wrong, say) could not be taken back."""
    fact = await site.add("alice", "Alice lives in Hangzhou", importance=0.6)
    shared = await site.add("alice", "Alice's team standup is at 10", provenance=Provenance(shared=("telegram:-5",)))
    async with site.client() as c:
        r = await asyncio.wait_for(c.post("/memory/api/edit", json={"id": fact, "content": "Alice moved to Shanghai"}), 10)
        assert r.status_code == 200
        token = r.json()["undo"]
        assert token and "Hangzhou" not in token
        # Owner: another user's name is refused, and the undo is still there to be had.
        r = await c.post("/memory/api/undo", json={"token": token, "user": "bob"})
        assert r.status_code == 404 and "nothing was changed" in r.json()["error"]
        r = await c.post("/memory/api/undo", json={"token": token, "user": "alice"})
        assert r.status_code == 200, r.text
        assert set(r.json()) == {"undone", "memory"} and r.json()["undone"] == "edit"
        assert r.json()["memory"]["content"] == "Alice lives in Hangzhou"
        r = await c.post("/memory/api/undo", json={"token": token})
        assert r.status_code == 409 and "expired or was used already" in r.json()["error"]  # once only

        r = await c.post("/memory/api/unshare", json={"id": shared})
        assert r.json()["was"] == ["telegram:-5"]
        r = await c.post("/memory/api/undo", json={"token": r.json()["undo"]})
        assert r.status_code == 200 and r.json()["undone"] == "unshare"
        assert r.json()["memory"]["provenance"]["shared"] == ["telegram:-5"]
        # Nothing to undo (an edit that changed nothing, an unshare of a private fact): no token.
        assert (await c.post("/memory/api/unshare", json={"id": fact})).json()["undo"] is None
        for bad in ({}, {"token": 7}, {"token": "x", "id": 1}):
            assert (await c.post("/memory/api/undo", json=bad)).status_code in (400, 409)

    async with site.client(bearer=False) as anon:  # auth: no token, no undo
        r = await (anon.post("/memory/api/undo", json={"token": "x"}))
        assert r.status_code == 401
    async with site.client(bearer=False) as browser:  # a session's POST needs its CSRF token
        csrf = await _signed_in(browser)
        r = await browser.post("/memory/api/edit", json={"id": fact, "content": "Alice moved to Beijing"},
                               headers={"X-CSRF-Token": csrf})
        token = r.json()["undo"]
        assert (await browser.post("/memory/api/undo", json={"token": token})).status_code == 403
        r = await browser.post("/memory/api/undo", json={"token": token}, headers={"X-CSRF-Token": csrf})
        assert r.status_code == 200 and r.json()["memory"]["content"] == "Alice lives in Hangzhou"
    log = [x.action for x in reversed(await read_log(site.engine.db, owner="alice")) if x.job == "web"]
    assert log == ["edit", "edit", "unshare", "share", "edit", "edit"]
