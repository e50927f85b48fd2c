"""The memory page used as a demanding user would: a few hundred memories,
paging past the end, filtering by category, undoing an archive, signing in
from a bookmarked page, exporting, a phone's width and a screen reader."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from memory import Category, Status
from tests.gateway.test_web import TOKEN, Site, cards, csrf_of, site  # noqa: F401  (site: the fixture)


async def _many(site: Site, n: int = 45) -> list[int]:
    cats = [Category.IDENTITY, Category.DECISION, Category.SOLUTION]
    return [await site.add("alice", f"fact number {i}", category=cats[i % 3]) for i in range(n)]


async def test_paging_says_how_many_and_a_page_past_the_end_leads_back(site: Site) -> None:
    await _many(site, 45)
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice", "offset": "20"})
        assert "21–40 of 45" in r.text and len(cards(r.text)) == 20
        r = await c.get("/memory", params={"user": "alice", "offset": "1000"})  # a stale link
        assert cards(r.text) == [] and "No more memories" in r.text
        assert "1001–1000" not in r.text  # no nonsense range
        last = re.search(r'href="([^"]*offset=40[^"]*)"', r.text)
        assert last, "no way back to the last page"
        r = await c.get(last.group(1).replace("&amp;", "&"))
        assert len(cards(r.text)) == 5 and "41–45 of 45" in r.text


async def test_the_list_filters_by_category_and_keeps_the_filter_while_paging(site: Site) -> None:
    await _many(site, 45)
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice", "category": "identity"})
        assert r.status_code == 200 and len(cards(r.text)) == 15
        assert all(int(x.split()[-1]) % 3 == 0 for x in cards(r.text))
        assert '<select name="category"' in r.text and '<option value="identity" selected>' in r.text
        r = await c.get("/memory", params={"user": "alice", "category": "decision", "status": "all"})
        assert len(cards(r.text)) == 15 and "1–15 of 15" not in r.text  # one page: no pager
        tabs = re.findall(r'<nav class="tabs".*?</nav>', r.text, re.S)[0]
        assert all("category=decision" in href for href in re.findall(r'href="([^"]+)"', tabs))
        r = await c.get("/memory", params={"user": "alice", "category": "credential"})
        assert cards(r.text) == [] and "No active memories in “credential”" in r.text
        r = await c.get("/memory", params={"user": "alice", "category": "nonsense"})
        assert r.status_code == 400 and "unknown category" in r.text
    await _many(site, 30)  # 75 in all: identity has 25, two pages
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice", "category": "identity"})
        older = re.search(r'rel="next" href="([^"]+)"', r.text)
        assert older and parse_qs(urlsplit(older.group(1).replace("&amp;", "&")).query)["category"] == ["identity"]


async def test_an_archive_can_be_undone_from_its_notice(site: Site) -> None:
    mid = await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        csrf = csrf_of((await c.get("/memory", params={"user": "alice"})).text)
        r = await c.post("/memory/archive", data={"csrf": csrf, "id": str(mid), "user": "alice", "back": "/memory?user=alice"},
                         follow_redirects=True)
        assert f"Memory m{mid} archived" in r.text and cards(r.text) == []
        undo = re.search(r'<form method="post" action="/memory/restore"[^>]*>(.*?)</form>', r.text.split('class="flash"')[1], re.S)
        assert undo and ">Undo<" in undo.group(1)
        fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', undo.group(1)))
        assert fields["id"] == str(mid) and fields["user"] == "alice"
        r = await c.post("/memory/restore", data=fields, follow_redirects=True)
        assert f"Memory m{mid} restored" in r.text and cards(r.text) == ["alice keeps bees"]
    assert (await site.engine.get(mid)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_signing_in_from_a_bookmarked_page_returns_to_it(site: Site) -> None:
    await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        r = await c.get("/memory", params={"user": "alice", "status": "archived"})
        assert r.status_code == 401
        back = re.search(r'name="back" value="([^"]*)"', r.text)
        assert back and back.group(1).replace("&amp;", "&") == "/memory?user=alice&status=archived"
        r = await c.post("/memory/login", data={"token": TOKEN, "back": back.group(1).replace("&amp;", "&")})
        assert r.status_code == 303 and r.headers["Location"] == "/memory?user=alice&status=archived"


@pytest.mark.parametrize("in_memory", [1 << 20, 100])  # 100 bytes: spooled through a temporary file
async def test_a_users_memories_can_be_exported_from_their_page(site: Site, in_memory: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.web._routes.EXPORT_IN_MEMORY", in_memory)
    await site.add("alice", "alice keeps bees")
    await site.add("alice", "Alice 喜欢喝绿茶")
    await site.add("bob", "bob's secret plan")
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice"})).text
        link = re.search(r'<a[^>]*href="(/memory/export\?[^"]+)"[^>]*download', page)
        assert link, "no export link on the user's page"
        r = await c.get(link.group(1).replace("&amp;", "&"))
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/markdown")
        assert 'attachment; filename="myclaw-memory-alice-' in r.headers["Content-Disposition"]
        assert "alice keeps bees" in r.text and "Alice 喜欢喝绿茶" in r.text and "bob" not in r.text
        assert int(r.headers["Content-Length"]) == len(r.content)
    async with site.client(bearer=False) as anon:
        assert (await anon.get("/memory/export", params={"user": "alice"})).status_code == 401


@pytest.mark.parametrize("user", ["alice", "_global"])
async def test_the_page_fits_a_phone_and_reads_well_with_a_screen_reader(site: Site, user: str) -> None:
    await site.add(user, "something to show")
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": user})).text
    assert '<meta name="viewport" content="width=device-width,initial-scale=1">' in page
    narrow = re.search(r"@media \(max-width: *\d+px\)\{(.*?)\}\n", page, re.S)
    assert narrow and ".layout{flex-direction:column}" in narrow.group(1)  # the user list above, not beside
    assert re.search(r'<a class="skip" href="#main">', page) and '<main id="main"' in page
    assert len(re.findall(r"<h1\b", page)) == 1 and "<h2>" in page
    for control in re.findall(r"<(?:input|select|textarea)\b[^>]*>", page):
        if 'type="hidden"' in control:
            continue
        # Each control has a name a screen reader can say: wrapped in a <label>, or aria-label.
        assert "aria-label=" in control or _labelled(page, control), control


def _labelled(page: str, control: str) -> bool:
    at = page.index(control)
    return page.rfind("<label", 0, at) > page.rfind("</label>", 0, at)
