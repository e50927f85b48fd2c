"""The memory page used as a demanding user would: a few hundred memories,
paging past the end, filtering by category, undoing an archive, signing in
from a bookmarked page, exporting, a phone's width and a screen reader."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from gateway.http import HttpServer
from gateway.web import mount_memory_page
from memory import Category, MemoryEngine, NewMemory, Status
from memory.retrieval import Retriever
from tests.gateway.test_web import BEARER, TOKEN, Site, cards, csrf_of, site  # noqa: F401  (site: the fixture)


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
        r = await c.post("/memory/login", data={"token": "a-wrong-token-typed-first", "back": back.group(1).replace("&amp;", "&")})
        assert r.status_code == 401 and 'name="back" value="/memory?user=alice&amp;status=archived"' in r.text  # kept on a retry
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


async def test_an_export_of_a_user_nothing_is_stored_about_is_refused_naming_the_near_one(site: Site) -> None:
    # It downloaded an empty Markdown file: a typo read as "nothing stored about them".
    await site.add("telegram:1001", "alice keeps bees")
    async with site.client() as c:
        r = await c.get("/memory/export", params={"user": "telgram:1001"})
        assert r.status_code == 404 and "Content-Disposition" not in r.headers
        assert r.headers["Content-Type"].startswith("text/html")
        assert ("nothing is stored about telgram:1001, so there is nothing to export "
                "(did you mean telegram:1001?)") in r.text
        r = await c.get("/memory/export", params={"user": "nobody"})
        assert r.status_code == 404 and "nothing is stored about nobody" in r.text and "did you mean" not in r.text
        r = await c.get("/memory/export", params={"user": "1001"})  # the id alone, without its channel
        assert r.status_code == 404 and "(did you mean telegram:1001?)" in r.text
        r = await c.get("/memory/export", params={"user": "telgram:1001"}, headers={"Accept-Language": "zh-CN"})
        assert "没有保存任何关于 telgram:1001 的内容，没有可导出的（要找的是不是 telegram:1001？）" in r.text
        r = await c.get("/memory/export", params={"user": "telegram:1001"})
        assert r.status_code == 200 and "alice keeps bees" in r.text
        assert (await c.get("/memory/export", params={"user": "_global"})).status_code == 200  # everyone's


@pytest.mark.parametrize("user", ["alice", "_global"])
async def test_the_page_fits_a_phone_and_reads_well_with_a_screen_reader(site: Site, user: str) -> None:
    await site.add(user, "something to show")
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": user})).text
        style = re.search(r'<link rel="stylesheet" href="([^"]+)">', page)
        assert style, "no stylesheet"
        css = (await c.get(style.group(1))).text
    assert '<meta name="viewport" content="width=device-width,initial-scale=1">' in page
    narrow = re.search(r"@media \(max-width: *\d+px\)\{(.*?)\}\n", css, re.S)
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


async def _signed_in(c: httpx.AsyncClient, site: Site, lang: str = "en") -> str:
    await c.post("/memory/login", data={"token": TOKEN})
    c.cookies.set("myclaw_lang", lang)
    return csrf_of((await c.get("/memory", params={"user": "alice"})).text)


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_a_refused_add_or_edit_gives_back_what_was_typed(site: Site, lang: str) -> None:
    """The error page had only a link to the overview: the words typed into
    the form were gone, and the way back led to another page."""
    mid = await site.add("alice", "alice keeps bees")
    back = "/memory?user=alice&offset=0&category=decision"
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c, site, lang)
        typed = {"csrf": csrf, "user": "alice", "content": "  ", "topic": "garden", "importance": "0.9", "back": back}
        r = await c.post("/memory/add", data=typed)
        assert r.status_code == 400
        assert ("content is empty" if lang == "en" else "内容为空") in r.text
        form = re.search(r'<form method="post" action="/memory/add"[^>]*>(.*?)</form>', r.text, re.S)
        assert form and 'value="garden"' in form.group(1) and 'value="0.90"' in form.group(1)
        assert f'href="{back.replace("&", "&amp;")}"' in r.text  # back to the page the form was on
        long_text = "a fact worth keeping " * 200  # over the 4000 characters a memory holds
        r = await c.post("/memory/edit", data={"csrf": csrf, "id": str(mid), "user": "alice", "content": long_text,
                                               "importance": "0.4", "back": back})
        assert r.status_code == 400 and ("4000" in r.text)
        form = re.search(r'<form method="post" action="/memory/edit"[^>]*>(.*?)</form>', r.text, re.S)
        assert form and long_text.strip() in form.group(1) and f'name="id" value="{mid}"' in form.group(1)
        r = await c.post("/memory/edit", data={"csrf": csrf, "id": "999999", "user": "alice", "content": "x", "back": back})
        assert r.status_code == 404 and ("no memory with id 999999" if lang == "en" else "没有编号为 999999 的记忆") in r.text
    assert [m.content for m in await site.engine.list_memories("alice")] == ["alice keeps bees"]  # nothing changed


async def test_an_archive_from_a_memorys_own_page_can_be_undone_there(site: Site) -> None:
    mid = await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c, site)
        r = await c.post("/memory/archive", data={"csrf": csrf, "id": str(mid), "user": "alice",
                                                  "back": f"/memory/item?id={mid}"}, follow_redirects=True)
        flash = r.text.split('class="flash"')[1].split("</div>")[0]
        assert f"Memory m{mid} archived" in flash and 'action="/memory/restore"' in flash and ">Undo<" in flash


async def test_chinese_errors_for_bad_links(site: Site) -> None:
    async with site.client() as c:
        zh = {"Accept-Language": "zh-CN"}
        r = await c.get("/memory", params={"user": "alice", "offset": "-1"}, headers=zh)
        assert r.status_code == 400 and "无法完成" in r.text and "offset 必须在 [0, ∞] 之内" in r.text
        r = await c.get("/memory/item", params={"id": "abc"}, headers=zh)
        assert r.status_code == 400 and "id 必须是整数" in r.text
        r = await c.get("/memory", params={"user": "alice", "status": "gone"}, headers=zh)
        assert r.status_code == 400 and "未知的状态" in r.text


@pytest.mark.parametrize(("lang", "words"), [("en", ("Archive", "Erase", "Details")), ("zh", ("归档", "删除", "详情"))])
async def test_each_cards_buttons_say_which_memory_they_act_on(site: Site, lang: str, words: tuple[str, ...]) -> None:
    """A screen reader's list of buttons read "Archive, Archive, Archive…":
    twenty of each on a page, none saying which memory."""
    ids = [await site.add("alice", f"fact number {i}") for i in range(3)]
    async with site.client() as c:
        c.cookies.set("myclaw_lang", lang)
        page = (await c.get("/memory", params={"user": "alice"})).text
    for mid in ids:
        card = re.search(rf'<article [^>]*id="m{mid}"[^>]*>(.*?)</article>', page, re.S)
        assert card
        names = re.findall(r'<(?:button|a)\b[^>]*aria-label="([^"]+)"', card.group(1))
        for word in words:
            assert any(word in n and f"m{mid}" in n for n in names), (word, names)


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_a_hostile_search_is_shown_as_text_in_both_languages(site: Site, lang: str) -> None:
    await site.add("alice", "alice keeps bees")
    hostile = '"><script>alert(1)</script> OR NEAR(a b) * ^ 绿茶 \x00'
    async with site.client() as c:
        c.cookies.set("myclaw_lang", lang)
        r = await c.get("/memory", params={"user": "alice", "q": hostile})
    assert r.status_code == 200 and "<script>alert(1)" not in r.text and "&lt;script&gt;alert(1)" in r.text


async def test_times_are_on_the_gateways_clock_and_say_which(engine: MemoryEngine) -> None:
    """Times were UTC and did not say so: an operator in Shanghai read 12:00
    for a fact saved at 20:00 their time."""
    from zoneinfo import ZoneInfo

    http = HttpServer("127.0.0.1", 0)
    mount_memory_page(http, engine, Retriever(engine), TOKEN, tz=ZoneInfo("Asia/Shanghai"))
    mid = (await engine.add(NewMemory(owner="alice", content="alice keeps bees"))).id  # 2026-03-01T12:00:00Z
    async with http, httpx.AsyncClient(base_url=http.url, headers=BEARER) as c:
        r = await c.get("/memory", params={"user": "alice"})
        assert "created 2026-03-01 20:00" in r.text and "Times are in Asia/Shanghai" in r.text
        r = await c.get("/memory/item", params={"id": mid}, headers={"Accept-Language": "zh"})
        assert "2026年3月1日 20:00" in r.text and "时间为 Asia/Shanghai 时间" in r.text


async def test_when_a_fact_was_said_is_on_the_gateways_clock_too(engine: MemoryEngine) -> None:
    """"said 2026-03-01T11:58:00Z – ..." stood raw, in UTC, beside "created
    2026-03-01 20:00" and "Times are in Asia/Shanghai". A span of days (a
    summary's, an import's) stays as its dates."""
    from zoneinfo import ZoneInfo

    from memory import Provenance

    http = HttpServer("127.0.0.1", 0)
    mount_memory_page(http, engine, Retriever(engine), TOKEN, tz=ZoneInfo("Asia/Shanghai"))
    said = Provenance(channel="telegram", chat_id="7", date_from="2026-03-01T11:58:00Z", date_to="2026-03-01T17:59:30Z")
    mid = (await engine.add(NewMemory(owner="alice", content="alice keeps bees", provenance=said))).id
    days = Provenance(channel="telegram", chat_id="7", date_from="2026-02-20", date_to="2026-02-21")
    await engine.add(NewMemory(owner="alice", content="alice sells honey", provenance=days))
    async with http, httpx.AsyncClient(base_url=http.url, headers=BEARER) as c:
        page = (await c.get("/memory", params={"user": "alice"})).text
        item = (await c.get("/memory/item", params={"id": mid})).text
        zh = (await c.get("/memory", params={"user": "alice"}, headers={"Accept-Language": "zh"})).text
    assert "said 2026-03-01 19:58 – 2026-03-02 01:59" in page and "said 2026-02-20 – 2026-02-21" in page
    assert "2026-03-01 19:58 – 2026-03-02 01:59" in item and "T11:58" not in item
    assert "说于 2026年3月1日 19:58 – 2026年3月2日 01:59" in zh


async def test_a_long_change_log_pages_back_to_its_first_entry(site: Site) -> None:
    """The log page showed the newest 200 entries and no way to older ones:
    a few hundred memories' history was cut off without a word."""
    from memory.changelog import write_log

    async with site.engine.db.transaction() as conn:
        for i in range(250):
            await write_log(conn, at="2026-03-01T12:00:00Z", job="cli", owner="alice", action="add", detail={"n": i})
    async with site.client() as c:
        seen: list[str] = []
        path: str | None = "/memory/log?user=alice"
        while path:
            r = await c.get(path)
            assert r.status_code == 200
            seen += re.findall(r"\{&quot;n&quot;: (\d+)\}", r.text)
            older = re.search(r'rel="next" href="([^"]+)"', r.text)
            path = older.group(1).replace("&amp;", "&") if older else None
        assert seen == [str(i) for i in range(249, -1, -1)]
        r = await c.get("/memory/log", params={"user": "alice", "before": "x"})
        assert r.status_code == 400


async def test_the_notice_of_an_edit_is_shown_on_the_card_the_page_scrolls_to(site: Site) -> None:
    """After saving a card low on page 2 the browser jumps to it (#m…), and
    the notice sat at the top of the page, out of sight."""
    ids = await _many(site, 45)
    target = ids[10]  # page 2 (newest first)
    back = "/memory?user=alice&offset=20"
    async with site.client(bearer=False) as c:
        csrf = await _signed_in(c, site)
        r = await c.post("/memory/edit", data={"csrf": csrf, "id": str(target), "user": "alice", "content": "fact ten, edited",
                                               "back": back})
        assert r.status_code == 303 and r.headers["Location"].endswith(f"#m{target}")
        r = await c.get(r.headers["Location"].split("#")[0])
        card = re.search(rf'<article [^>]*id="m{target}"[^>]*>(.*?)</article>', r.text, re.S)
        assert card and f"Memory m{target} saved." in card.group(1) and 'role="status"' in card.group(1)
        assert r.text.count(f"Memory m{target} saved.") == 1  # not twice


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_every_memory_holding_some_words_can_be_listed_not_only_the_best_few(site: Site, lang: str) -> None:
    """A search shows what the bot would recall: its best 30 or so. Someone
    cleaning up every memory about green tea among hundreds could not see
    the rest. The list now filters by the words a memory holds, paged."""
    for i in range(60):
        await site.add("alice", f"alice drinks green tea number {i}", category=Category.IDENTITY if i % 2 else Category.DECISION)
    await site.add("alice", "100% sure: a_b\\c")
    async with site.client() as c:
        c.cookies.set("myclaw_lang", lang)
        r = await c.get("/memory", params={"user": "alice", "q": "green tea"})
        assert 0 < len(cards(r.text)) < 60
        every = re.search(r'<a [^>]*href="(/memory\?[^"]*has=green\+tea[^"]*)"', r.text)
        assert every, "no way from the search to every memory holding its words"
        r = await c.get(every.group(1).replace("&amp;", "&"))
        assert len(cards(r.text)) == 20 and ("1–20 of 60" if lang == "en" else "共 60 条") in r.text
        assert 'name="has" value="green tea"' in r.text  # the filter shows what it filters by
        older = re.search(r'rel="next" href="([^"]+)"', r.text)
        assert older and "has=green+tea" in older.group(1)
        r = await c.get("/memory", params={"user": "alice", "has": "TEA NUMBER 4", "category": "decision"})
        assert sorted(cards(r.text)) == ["alice drinks green tea number 4"] + [f"alice drinks green tea number 4{i}" for i in (0, 2, 4, 6, 8)]
        for literal in ("100%", "a_b", "\\"):  # LIKE's wildcards and escape match as themselves
            r = await c.get("/memory", params={"user": "alice", "has": literal})
            assert cards(r.text) == ["100% sure: a_b\\c"], literal


async def test_the_api_lists_by_category_and_words_as_the_page_does(site: Site) -> None:
    await _many(site, 45)
    async with site.client() as c:
        r = await c.get("/memory/api/memories", params={"user": "alice", "category": "identity", "has": "NUMBER 1", "limit": "50"})
        assert r.status_code == 200
        assert sorted(m["content"] for m in r.json()["memories"]) == sorted(
            f"fact number {i}" for i in range(45) if i % 3 == 0 and str(i).startswith("1"))
        assert r.json()["total"] == len(r.json()["memories"])
        r = await c.get("/memory/api/memories", params={"user": "alice", "category": "nope"})
        assert r.status_code == 400 and "unknown category" in r.json()["error"]


async def test_an_export_of_a_user_named_in_chinese_is_named_after_them(site: Site) -> None:
    await site.add("张三", "张三养蜜蜂")
    async with site.client() as c:
        r = await c.get("/memory/export", params={"user": "张三"})
    assert r.status_code == 200 and "张三养蜜蜂" in r.text
    disposition = r.headers["Content-Disposition"]
    assert disposition.startswith('attachment; filename="myclaw-memory-user-')  # ASCII for old clients
    assert "filename*=UTF-8''myclaw-memory-%E5%BC%A0%E4%B8%89-" in disposition
