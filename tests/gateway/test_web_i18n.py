"""The memory page in the user's language (gateway/web/_i18n.py): Chinese
by the browser's Accept-Language or the page's switch, English otherwise."""

from __future__ import annotations

import re
import string

import httpx
import pytest

from gateway.web._i18n import CATALOGUE, Words, pick_lang
from memory import Category, Status
from tests.gateway.test_web import BEARER, TOKEN, Site, cards, csrf_of, site  # noqa: F401  (site: the fixture)

ZH = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
# Labels of the English page that must not be left on the Chinese one.
ENGLISH_LABELS = ["Active", "Archived", "Superseded", "Search", "Edit", "Archive", "Erase", "Details", "Added by hand",
                  "Change log", "Sign out", "created ", "Total", "Content", "Category", "Importance", "Users",
                  "profile (tier 1)", "knowledge (tier 2)", "memories", "Save", "Cancel"]


def visible_text(html: str) -> str:
    """What a reader sees and hears: text, titles, placeholders and labels,
    without the style, the script, the memories' own words and the tags."""
    html = re.sub(r"<(style|script)\b.*?</\1>", " ", html, flags=re.S)
    html = re.sub(r'<p class="content">.*?</p>', " ", html, flags=re.S)
    attrs = " ".join(re.findall(r'(?:title|placeholder|aria-label)="([^"]*)"', html))
    return re.sub(r"<[^>]+>", " ", html) + " " + attrs


@pytest.mark.parametrize(
    ("header", "chosen", "lang"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "", "zh"),
        ("zh-Hans", "", "zh"),
        ("zh-TW", "", "zh-Hant"),  # Taiwan, Hong Kong and Macau read Traditional characters
        ("zh-HK", "", "zh-Hant"),
        ("zh-mo", "", "zh-Hant"),
        ("zh-Hant-TW", "", "zh-Hant"),
        ("zh-Hans-HK", "", "zh"),  # the script said outright wins over the region
        ("zh-SG", "", "zh"),
        ("zh-CN;q=0.5,zh-TW;q=0.8,en;q=0.6", "", "zh-Hant"),  # by weight
        ("zh-TW;q=0.5,zh-CN;q=0.8", "", "zh"),
        ("en;q=0.9,zh-HK", "", "zh-Hant"),
        ("zh-TW", "zh", "zh"),  # the switch wins
        ("en", "zh-Hant", "zh-Hant"),
        ("en-US,en;q=0.9,zh-CN;q=0.8", "", "en"),
        ("ja,zh;q=0.8", "", "zh"),  # Japanese is not Chinese; its reader's next choice is
        ("fr-FR,de", "", "en"),
        ("en;q=0.2,zh;q=0.5", "", "zh"),  # by weight, not by order
        ("zh;q=0", "", "en"),
        ("", "", "en"),
        (";;,q=,zh;q=abc", "", "en"),  # garbage is English, not an error
        ("zh-CN", "en", "en"),  # the switch wins
        ("en", "zh", "zh"),
        ("zh-CN", "fr", "zh"),  # an unknown choice is ignored
    ],
)
def test_the_language_is_the_switchs_else_the_browsers_else_english(header: str, chosen: str, lang: str) -> None:
    assert pick_lang(header, chosen) == lang


def test_every_string_has_both_languages_with_the_same_fields() -> None:
    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
    for key, (en, zh) in CATALOGUE.items():
        assert en.strip() and zh.strip(), key
        assert fields(zh) <= fields(en), key  # Chinese may leave out an English plural's words
    for c in Category:
        assert f"cat_{c.value}" in CATALOGUE  # every category has its Chinese name


def test_counts_and_dates_read_naturally_in_both() -> None:
    en, zh = Words("en"), Words("zh")
    assert [en.count("memory", n) for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert [zh.count("memory", n) for n in (1, 2)] == ["1 条记忆", "2 条记忆"]
    assert en.when("2026-03-01T09:05:00Z") == "2026-03-01 09:05"
    assert zh.when("2026-03-01T09:05:00Z") == "2026年3月1日 09:05"
    assert zh.when("") == "-" and zh.when("garbage-that-is-long") == "garbage-that-is-"


async def test_a_chinese_browser_gets_the_users_memories_with_chinese_labels(site: Site) -> None:
    await site.add("alice", "Alice 喜欢喝绿茶")
    await site.add("alice", "Alice works at Globex", tier=1)
    archived = await site.add("alice", "old fact")
    await site.engine.set_status(archived, Status.ARCHIVED)
    async with site.client(bearer=False) as c:
        r = await c.get("/memory", params={"user": "alice"}, headers=ZH)
        assert r.status_code == 401 and '<html lang="zh-Hans">' in r.text and "管理员令牌" in r.text
        assert "Admin token" not in r.text
        r = await c.post("/memory/login", data={"token": "wrong-token-0000000000"}, headers=ZH)
        assert r.status_code == 401 and "令牌不对" in r.text
    async with site.client() as c:
        r = await c.get("/memory", params={"user": "alice"}, headers=ZH)
        assert r.status_code == 200 and '<html lang="zh-Hans">' in r.text
        page = r.text
        assert sorted(cards(page)) == ["Alice works at Globex", "Alice 喜欢喝绿茶"]
        for label in ("有效 (2)", "已归档 (1)", "旧版本 (0)", "全部 (3)", "搜索", "编辑", "归档", "删除…", "详情",
                      "手动添加", "个人档案（第 1 层）", "知识（第 2 层）", "变更日志", "创建于 2026年3月1日 12:00",
                      "+ 添加记忆", "用户", "总计"):
            assert label in page, label
        text = visible_text(page)
        left = [w for w in ENGLISH_LABELS if re.search(rf"\b{re.escape(w)}\b", text)]
        assert left == [], left
        r = await c.get("/memory", params={"user": "alice", "q": "绿茶"}, headers=ZH)
        assert cards(r.text)[0] == "Alice 喜欢喝绿茶" and "机器人对“绿茶”会回想起" in r.text
        r = await c.get("/memory/item", params={"id": archived}, headers=ZH)
        assert "来源" in r.text and "所属用户" in r.text and "已归档" in r.text and "恢复" in r.text
        r = await c.get("/memory/log", params={"user": "alice"}, headers=ZH)
        assert "变更日志：alice" in r.text
        r = await c.get("/memory", params={"user": "alice"})  # no Accept-Language: English
        assert '<html lang="en">' in r.text and "Active (2)" in r.text


async def test_the_switch_keeps_the_chosen_language_whatever_the_browser_asks(site: Site) -> None:
    await site.add("alice", "alice keeps bees")
    async with site.client() as c:
        page = (await c.get("/memory", params={"user": "alice"}, headers=ZH)).text
        switch = re.search(r'href="(/memory/lang\?[^"]+)"[^>]*>English<', page)
        assert switch, "no switch to English on the Chinese page"
        r = await c.get(switch.group(1).replace("&amp;", "&"), headers=ZH)
        assert r.status_code == 303 and r.headers["Location"] == "/memory?user=alice"  # back where the user was
        assert "myclaw_lang=en" in r.headers["Set-Cookie"] and "Path=/memory" in r.headers["Set-Cookie"]
        r = await c.get("/memory", params={"user": "alice"}, headers=ZH)
        assert '<html lang="en">' in r.text and "Active (1)" in r.text and ">简体中文<" in r.text and ">繁體中文<" in r.text
        r = await c.get("/memory/lang", params={"set": "zh", "back": "https://evil.example/"})
        assert r.headers["Location"] == "/memory"  # no open redirect
        r = await c.get("/memory", params={"user": "alice"})
        assert '<html lang="zh-Hans">' in r.text
        assert (await c.get("/memory/lang", params={"set": "klingon"})).status_code == 400


async def test_notices_and_confirmations_speak_chinese_too(site: Site) -> None:
    mid = await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        r = await c.post("/memory/login", data={"token": TOKEN})
        c.cookies.set("myclaw_lang", "zh")
        csrf = csrf_of((await c.get("/memory", params={"user": "alice"})).text)
        r = await c.post("/memory/archive", data={"csrf": csrf, "id": str(mid), "user": "alice",
                                                  "back": "/memory?user=alice"}, follow_redirects=True)
        assert f"记忆 m{mid} 已归档" in r.text and "退出登录" in r.text
        r = await c.post("/memory/erase", data={"csrf": csrf, "id": str(mid), "user": "alice"})
        assert f"永久删除记忆 m{mid}？" in r.text and "改为归档" in r.text
        r = await c.post("/memory/archive-all", data={"csrf": csrf, "user": "alice"})
        assert "归档 alice 的 0 条有效记忆？" in r.text
        r = await c.post("/memory/erase-all", data={"csrf": csrf, "user": "alice", "confirm": "yes", "typed": "bob"})
        assert r.status_code == 400 and "输入的名字不对" in r.text
        r = await c.post("/memory/add", data={"csrf": "wrong", "user": "alice", "content": "x"})
        assert r.status_code == 403 and "表单已过期" in r.text
    async with httpx.AsyncClient(base_url=site.url, headers=BEARER) as api:  # the API stays English
        r = await api.get("/memory/api/memories", params={"user": "alice", "status": "nope"}, headers=ZH)
        assert r.status_code == 400 and "unknown status" in r.json()["error"]


async def test_the_chinese_change_log_names_jobs_and_actions_in_chinese(site: Site) -> None:
    """The log showed the write path's codes ("web", "add", "weekly_compress"):
    English words on the Chinese page. The code stays in the cell's title."""
    from memory.changelog import write_log

    async with site.client() as c:
        r = await c.post("/memory/api/add", json={"user": "alice", "content": "alice keeps bees"})
        mid = r.json()["memory"]["id"]
        async with site.engine.db.transaction() as conn:
            await write_log(conn, at="2026-03-01T12:00:00Z", job="weekly_compress", owner="alice", action="promote",
                            memory_id=mid)
            await write_log(conn, at="2026-03-01T12:00:00Z", job="someday_job", owner="alice", action="new_thing")
        r = await c.get("/memory/log", params={"user": "alice"}, headers=ZH)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", r.text)
        for word in ("记忆管理页", "添加", "每周压缩", "提升为个人档案"):
            assert word in cells, word
        assert "someday_job" in cells and "new_thing" in cells  # a code it does not know is shown as it is
        assert 'title="weekly_compress"' in r.text
        r = await c.get("/memory/log", params={"user": "alice"})  # English keeps the codes
        assert "weekly_compress" in re.findall(r"<td[^>]*>(.*?)</td>", r.text)


ZH_TW = {"Accept-Language": "zh-TW,zh;q=0.9,en-US;q=0.8,en;q=0.7"}
# Simplified characters of the zh-Hans page a reader in Taiwan or Hong Kong should not meet.
SIMPLIFIED = set("记忆归档删编辑这条户详变层级数据库机没录总计显项标签")
# Every Chinese character of the catalogue, the change log's words and
# memory/origin.py is either mapped (gateway/web/_hant.py CHARS) or written
# the same in both scripts (this list, read by hand): a new string with a
# character in neither fails here until someone looks at it.
SAME_IN_BOTH = set(
    "一上下不中串主久之也了事些交享人什仍他代令以件任份但何作你例依保做像免入全共其再出分列到刷前加包化匹升原又及取"
    "只可台史各合同名含告周命和器回在地址型基填多大天太如始字存它完定容少就左已常建引待得心必志忘性恢息情想成我或所手"
    "才打找把拒提搜摘撤操收改效整文新方日早是晚更最有期未本果某查核案模次正此段每永求法流消添清渠源版牌理用由留登的目"
    "相看知示秒移程空端符第等管系索缺置群翻者而聊能自至若行表衰被要解起跳身近返退逐道那部都配重降除需面默稍"
    "密按逗隔另束"
)


def _chinese_chars() -> set[str]:
    import memory.origin
    from pathlib import Path

    from gateway.web._i18n import LOG_WORDS_ZH

    text = "".join(z for _, z in CATALOGUE.values()) + "".join(LOG_WORDS_ZH.values())
    text += Path(memory.origin.__file__).read_text(encoding="utf-8")
    return {c for c in text if "\u4e00" <= c <= "\u9fff"}


def test_every_chinese_character_has_its_traditional_form_or_is_the_same_in_both() -> None:
    from gateway.web._hant import CHARS, to_hant

    unknown = sorted(_chinese_chars() - set(CHARS) - SAME_IN_BOTH)
    assert unknown == [], "".join(unknown)
    assert not set(CHARS) & SAME_IN_BOTH
    assert all(k != v and v not in CHARS for k, v in CHARS.items())  # one pass is enough
    hant = Words("zh-Hant")
    for key in CATALOGUE:
        assert not set(hant(key, **_dummy_fields(CATALOGUE[key][1]))) & set(CHARS), key
    assert to_hant("用户的记忆“已归档”") == "使用者的記憶「已歸檔」"  # Taiwan's words and quotes


def _dummy_fields(template: str) -> dict[str, str]:
    return {f: "x" for _, f, _, _ in string.Formatter().parse(template) if f}


async def test_a_taiwan_or_hong_kong_browser_gets_traditional_chinese(site: Site) -> None:
    await site.add("alice", "Alice 喜欢喝绿茶")  # the memory's own words are never converted
    archived = await site.add("alice", "old fact")
    await site.engine.set_status(archived, Status.ARCHIVED)
    async with site.client(bearer=False) as anon:
        r = await anon.get("/memory", headers={"Accept-Language": "zh-HK"})
        assert r.status_code == 401 and '<html lang="zh-Hant">' in r.text and "管理員令牌" in r.text
    async with site.client() as c:
        for path, params in [("/memory", {"user": "alice"}), ("/memory", {"user": "alice", "status": "archived"}),
                             ("/memory/item", {"id": str(archived)}), ("/memory/log", {"user": "alice"})]:
            r = await c.get(path, params=params, headers=ZH_TW)
            assert r.status_code == 200 and '<html lang="zh-Hant">' in r.text
            left = sorted(set(visible_text(r.text)) & SIMPLIFIED)
            assert left == [], (path, "".join(left))
        page = (await c.get("/memory", params={"user": "alice"}, headers=ZH_TW)).text
        assert cards(page) == ["Alice 喜欢喝绿茶"]
        for label in ("有效 (1)", "已歸檔 (1)", "搜尋", "編輯", "使用者", "變更日誌"):
            assert label in page, label
        # The switch offers the other two, each in its own words.
        links = dict((name, href) for href, name in re.findall(r'href="(/memory/lang\?[^"]+)"[^>]*>([^<]+)<', page))
        assert set(links) == {"English", "简体中文"}
        r = await c.get(links["简体中文"].replace("&amp;", "&"), headers=ZH_TW)
        assert "myclaw_lang=zh;" in r.headers["Set-Cookie"]
        r = await c.get("/memory/lang", params={"set": "zh-Hant", "back": "/memory?user=alice"})
        assert r.status_code == 303 and "myclaw_lang=zh-Hant;" in r.headers["Set-Cookie"]
        c.cookies.set("myclaw_lang", "zh-Hant")
        page = (await c.get("/memory", params={"user": "alice"})).text
        assert '<html lang="zh-Hant">' in page
