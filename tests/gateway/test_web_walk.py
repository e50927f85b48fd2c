"""The memory page walked as a demanding user would, on a phone and a
laptop, in English and Chinese: a lockout's page, a light page with
hundreds of memories (and working with JavaScript off), hostile words in
memories and searches, the back button after a POST."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from memory import MemoryEngine, NewMemory

from tests.gateway.test_web import TOKEN, Site, cards, csrf_of, site  # noqa: F401  (site: the fixture)
from tests.gateway.webform import parse

WRONG = "a-wrong-token-typed-by-a-scanner"


async def _locked_out(c: httpx.AsyncClient) -> None:
    for _ in range(10):
        r = await asyncio.wait_for(c.post("/memory/login", data={"token": WRONG}), 10)
        assert r.status_code == 401


@pytest.mark.parametrize(("accept", "lang", "words"), [
    ("en-GB", "en", "too many wrong tokens"), ("zh-CN", "zh-Hans", "输错令牌的次数太多"),
    ("zh-TW", "zh-Hant", "輸錯令牌的次數太多"),
])
async def test_a_locked_out_browser_gets_the_pages_html_in_its_language(site: Site, accept: str, lang: str, words: str) -> None:
    async with site.client(bearer=False) as c:
        await _locked_out(c)
        for r in (await c.get("/memory", headers={"Accept-Language": accept}),
                  await c.post("/memory/login", data={"token": TOKEN}, headers={"Accept-Language": accept})):
            assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
            assert r.headers["Content-Type"].startswith("text/html")
            assert f'<html lang="{lang}">' in r.text and words in r.text and '<link rel="stylesheet"' in r.text
            assert "style-src 'self'" in r.headers["Content-Security-Policy"]  # the page's own style is allowed
            assert 'action="/memory/login"' not in r.text  # no form to type a token into yet
            seconds = re.search(r"(\d+)", r.text.split(words)[1])
            assert seconds and int(seconds.group(1)) == int(r.headers["Retry-After"])
        r = await c.get("/memory/api/users")  # the API's stays JSON
        assert r.status_code == 429 and "too many wrong tokens" in r.json()["error"]


async def _post_click(c: httpx.AsyncClient, html: str, label: str) -> httpx.Response:
    method, action, fields = parse(html).submit(parse(html).button(label))
    assert method == "post"
    return await asyncio.wait_for(c.post(action, data=dict(fields)), 10)


async def _hundreds(site: Site, n: int) -> list[int]:
    words = "alice mentioned her sister in lisbon and the garden project with postgres on friday mornings "
    return [await site.add("alice", f"{words * 2}number {i}") for i in range(n)]


async def test_a_page_of_hundreds_of_memories_is_light_and_carries_each_memorys_words_once(site: Site) -> None:
    """Each card carried its own edit form (the words a second time, every
    field, the CSRF token): 71 KiB for twenty cards on a phone."""
    ids = await _hundreds(site, 120)
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        r = await c.get("/memory", params={"user": "alice"})
        assert len(cards(r.text)) == 20
        assert len(r.content) < 44 * 1024, len(r.content)  # 75.8 KiB before
        assert r.text.count("number 119<") == 1  # its words once, in its card
        # The page's forms, none a card's: actions, add, edit, sign out.
        assert r.text.count('name="csrf"') == 4
        assert r.text.count("<textarea") == 2  # the add and the edit dialog's
        r = await c.get("/memory", params={"user": "alice", "q": "lisbon garden"})
        assert len(cards(r.text)) == 30 and len(r.content) < 64 * 1024, len(r.content)  # 30 recalled: 73 KiB before
    assert len(ids) == 120


async def test_with_javascript_off_every_cards_action_still_works(site: Site) -> None:
    ids = await _hundreds(site, 25)
    target, other = ids[-1], ids[-2]
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        page = (await c.get("/memory", params={"user": "alice", "category": "event"})).text
        # Edit: a link to the memory's own form (the shared dialog is JavaScript's shortcut to it).
        r = await c.get(parse(page).link(f"Edit memory m{target}"))
        assert r.status_code == 200
        form = [f for f in parse(r.text).forms if f.action == "/memory/edit"]
        assert len(form) == 1 and dict(form[0].fields)["content"].endswith(f"number {len(ids) - 1}")
        fields = dict(form[0].fields)
        assert fields["id"] == str(target) and fields["back"] == "/memory?user=alice&category=event"
        fields["content"] = "Alice's sister moved from Lisbon to Porto"
        r = await c.post("/memory/edit", data=fields, follow_redirects=True)
        assert r.status_code == 200 and str(r.url.params.get("category")) == "event"
        assert cards(r.text)[0] == "Alice&#x27;s sister moved from Lisbon to Porto"
        # Archive: a button of the page's one shared form; erase: a link to its confirmation.
        r = await _post_click(c, r.text, f"Archive m{other}")
        assert r.status_code == 303
        r = await c.get(r.headers["Location"])
        assert f"Memory m{other} archived" in r.text
        r = await c.get(parse(r.text).link(f"Erase… m{target}"))
        assert r.status_code == 200 and f"Erase memory m{target} for good?" in r.text
        r = await _post_click(c, r.text, "Erase for good")
        assert r.status_code == 303
    assert (await site.engine.get(other)).status.value == "archived"  # type: ignore[union-attr]
    assert await site.engine.get(target) is None


HOSTILE_QUERIES = ['"', '"unbalanced', "AND", "NOT tea", "tea OR", "*", "(", ")", "NEAR(tea", "^tea", "-tea", "owner:alice",
                   "text:tea", "tea*", "'", "\\", "%", "_", "🍵", "绿茶\"", "a" * 5000, "  ", "\x00tea", "tea\u200b",
                   "<script>alert(1)</script>", "{}", "[]", ";DROP TABLE memories;--"]


async def test_searching_with_fts5_syntax_or_hostile_text_answers_and_never_fails(site: Site) -> None:
    await site.add("alice", "Alice drinks green tea 绿茶 🍵")
    async with site.client() as c:
        for q in HOSTILE_QUERIES:
            r = await asyncio.wait_for(c.get("/memory", params={"user": "alice", "q": q}), 10)
            assert r.status_code in (200, 400), (q, r.status_code)
            assert "<script>alert(1)</script>" not in r.text
            r = await asyncio.wait_for(c.get("/memory", params={"user": "alice", "has": q, "status": "all"}), 10)
            assert r.status_code in (200, 400), (q, r.status_code)
            r = await asyncio.wait_for(c.get("/memory/api/search", params={"user": "alice", "q": q}), 10)
            assert r.status_code in (200, 400), (q, r.status_code)
        r = await c.get("/memory", params={"user": "alice", "q": "NOT tea"})
        assert "Alice drinks green tea" in r.text  # words, not FTS5 operators


EVIL = '"><script>alert(1)</script><img src=x onerror=alert(2)>{{7*7}}</p></article>'


@pytest.mark.parametrize("user", ["alice", 'mallory"><script>alert(3)</script>'])
async def test_markup_in_a_memory_or_a_user_name_is_shown_as_text_and_survives_an_edit(site: Site, user: str) -> None:
    from memory import Category

    mid = await site.add(user, EVIL + "\nsecond line", project='p"x', topic="<t>", category=Category.DECISION)
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        pages = [(await c.get("/memory", params={"user": user})).text,
                 (await c.get("/memory", params={"user": user, "q": "script alert"})).text,
                 (await c.get("/memory/item", params={"id": str(mid)})).text,
                 (await c.get("/memory/edit", params={"id": str(mid)})).text,
                 (await c.get("/memory/log", params={"user": user})).text]
        for html in pages:
            assert "<script>alert" not in html and "<img src=x" not in html and 'p"x' not in html and "<t>" not in html
            assert len(re.findall(r"<script\b", html)) == 1  # the page's own
        assert len(cards(pages[0])) == 1
        # Saved unchanged through the no-JavaScript edit form, the words come back exactly.
        form = next(f for f in parse(pages[3]).forms if f.action == "/memory/edit")
        r = await c.post("/memory/edit", data=dict(form.fields))
        assert r.status_code == 303
    m = await site.engine.get(mid)
    assert m is not None and (m.content, m.project, m.topic) == (EVIL + "\nsecond line", 'p"x', "<t>")


async def test_a_browsers_line_breaks_in_the_edit_form_are_not_a_change_of_the_words(site: Site) -> None:
    """A browser sends a textarea's line breaks as CRLF (HTML's form
    encoding): saving a new importance of a two-line memory changed its
    words, superseding the Core Memory entries built on them."""
    from memory import Category, Provenance, Source, Status
    from memory.changelog import read_log

    fact = await site.add("alice", "Alice's plan:\nmove to Porto", category=Category.DECISION)
    entry = await site.add("alice", "Alice plans to move to Porto", tier=1, source=Source.COMPRESSION,
                           provenance=Provenance(refs=("weekly", f"m:{fact}")))
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        form = next(f for f in parse((await c.get("/memory/edit", params={"id": str(fact)})).text).forms
                    if f.action == "/memory/edit")
        fields = dict(form.fields)
        assert fields["content"] == "Alice's plan:\nmove to Porto"
        fields.update(content=fields["content"].replace("\n", "\r\n"), importance="0.9")
        r = await c.post("/memory/edit", data=fields)
        assert r.status_code == 303 and "done=edited&" in r.headers["Location"]
    m = await site.engine.get(fact)
    assert m is not None and (m.content, m.importance) == ("Alice's plan:\nmove to Porto", 0.9)
    assert (await site.engine.get(entry)).status is Status.ACTIVE  # type: ignore[union-attr]
    [edit] = [x for x in await read_log(site.engine.db, owner="alice") if x.action == "edit"]
    assert '"importance"' in edit.detail and "content" not in edit.detail


async def test_a_form_from_a_tab_left_open_across_a_new_sign_in_gives_back_what_was_typed(site: Site) -> None:
    """Signed out and in again in another tab, the first tab's CSRF token
    is stale: its add or edit was refused and the words typed were gone."""
    mid = await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        stale = csrf_of((await c.get("/memory", params={"user": "alice"})).text)
        await c.post("/memory/logout", data={"csrf": stale})
        await c.post("/memory/login", data={"token": TOKEN})
        typed = "alice keeps bees and two hives of wasps, a long note typed on a phone"
        for action, extra in [("/memory/edit", {"id": str(mid)}), ("/memory/add", {})]:
            r = await c.post(action, data={"csrf": stale, "user": "alice", "content": typed, "importance": "0.8",
                                           "back": "/memory?user=alice", **extra})
            assert r.status_code == 403 and "form had expired" in r.text
            form = next(f for f in parse(r.text).forms if f.action == action)
            fields = dict(form.fields)
            assert fields["content"] == typed and fields["importance"] == "0.80" and fields["csrf"] != stale
            assert fields.get("id", "") == extra.get("id", "")
            r = await c.post(action, data=fields)  # sent again from the page: the fresh token
            assert r.status_code == 303
    assert [m.content for m in await site.engine.list_memories("alice")] == [typed]  # edited; the add found it


async def test_a_session_ended_under_a_form_signs_in_back_to_the_page_it_was_on(site: Site) -> None:
    """The session expired (12 hours, or signed out on the laptop) while a
    phone's page was open: its next click led to the sign-in, and signing in
    led to the overview, not back to the list the user was working on."""
    mid = await site.add("alice", "alice keeps bees")
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        page = (await c.get("/memory", params={"user": "alice", "status": "all", "category": "event"})).text
        c.cookies.clear()  # the session is gone
        r = await _post_click(c, page, f"Archive m{mid}")
        assert r.status_code == 401 and 'action="/memory/login"' in r.text
        back = dict(next(f for f in parse(r.text).forms if f.action == "/memory/login").fields)["back"]
        assert back == "/memory?user=alice&status=all&category=event"
        r = await c.post("/memory/login", data={"token": TOKEN, "back": back})
        assert r.status_code == 303 and r.headers["Location"] == back
    assert (await site.engine.get(mid)).status.value == "active"  # type: ignore[union-attr]  # nothing done unasked


async def test_a_very_long_unbroken_memory_wraps_on_a_phone_wherever_it_is_shown(site: Site) -> None:
    """A 4000-character link or hash pasted into a chat: the erase
    confirmation and a memory's provenance table ran off a phone's screen."""
    word = "https://example.com/" + "x" * 3900
    mid = await site.add("alice", word, source_text=word)
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        csrf = csrf_of((await c.get("/memory", params={"user": "alice"})).text)
        pages = {"list": (await c.get("/memory", params={"user": "alice"})).text,
                 "detail": (await c.get("/memory/item", params={"id": str(mid)})).text,
                 "erase": (await c.post("/memory/erase", data={"csrf": csrf, "id": str(mid), "user": "alice"})).text}
        href = re.search(r'<link rel="stylesheet" href="([^"]+)">', pages["list"]).group(1)  # type: ignore[union-attr]
        css = (await c.get(href)).text
    wrapping = {sel.strip() for sels, body in re.findall(r"([^{}]+)\{([^}]*)\}", css) if "overflow-wrap:anywhere" in body
                for sel in sels.split(",")}
    for name, html in pages.items():
        # Each element holding the long word, by its tag and class, must be a wrapping one.
        for tag, attrs in re.findall(r"<(\w+)([^>]*)>[^<]*" + re.escape(word[:40]), html):
            cls = re.search(r'class="([^"]+)"', attrs)
            sel = f".{cls.group(1).split()[0]}" if cls else tag
            assert sel in wrapping or f"table.log {tag}" in wrapping, (name, tag, attrs, sorted(wrapping))


async def test_the_back_button_after_an_erase_meets_no_form_resubmission(site: Site) -> None:
    """"Erase…" was a POST answered with the confirmation page: after the
    erase, Back landed on a page the browser could only show by posting
    again ("Confirm form resubmission"). The way to a confirmation is now
    a link; only the final click posts, and it redirects."""
    keep = await site.add("alice", "alice keeps bees")
    mid = await site.add("alice", "alice's old phone number")
    async with site.client(bearer=False) as c:
        await c.post("/memory/login", data={"token": TOKEN})
        history = ["/memory?user=alice&offset=0"]
        page = (await c.get(history[-1])).text
        history.append(parse(page).link(f"Erase… m{mid}"))  # a GET, so it can be in the history
        r = await c.get(history[-1])
        assert r.status_code == 200 and f"Erase memory m{mid} for good?" in r.text
        assert parse(r.text).link("Cancel") == "/memory?user=alice&offset=0"
        r = await _post_click(c, r.text, "Erase for good")
        assert r.status_code == 303
        r = await c.get(r.headers["Location"])
        assert cards(r.text) == ["alice keeps bees"]
        r = await c.get(history[-1])  # Back: the confirmation again, of a memory that is gone
        assert r.status_code == 404 and f"no memory with id {mid}" in r.text
        assert 'href="/memory?user=alice&amp;offset=0"' in r.text  # and the way back to the list
        # "Archive all…" and "Erase all…" are links too.
        page = (await c.get("/memory", params={"user": "alice"})).text
        r = await c.get(parse(page).link("Archive all…"))
        assert r.status_code == 200 and "Archive the 1 active memory of alice?" in r.text
        r = await c.get(parse(page).link("Erase all for good…"))
        assert r.status_code == 200 and "Type the user name" in r.text
        # A link (prefetched, crawled, clicked twice) never does the thing itself.
        for path, params in [("/memory/erase", {"id": str(keep), "confirm": "yes", "cascade": "yes"}),
                             ("/memory/archive-all", {"user": "alice", "confirm": "yes"}),
                             ("/memory/erase-all", {"user": "alice", "confirm": "yes", "typed": "alice"})]:
            assert (await c.get(path, params=params)).status_code == 200
    assert (await site.engine.get(keep)).status.value == "active"  # type: ignore[union-attr]
    assert (await site.engine.get(keep)) is not None


async def test_the_style_is_a_stylesheet_cached_for_good_under_its_content_hash(site: Site) -> None:
    """The page's ~6 KiB of CSS went inline with every page: now one
    stylesheet, fetched once, whose address changes when its content does."""
    import hashlib

    async with site.client(bearer=False) as anon:
        signed_out = await anon.get("/memory")  # the sign-in page is styled too
        assert signed_out.status_code == 401
        async with site.client() as c:
            page = await c.get("/memory", params={"user": "alice"})
        for r in (signed_out, page):
            assert "<style" not in r.text
            links = re.findall(r'<link rel="stylesheet" href="(/memory/style-([0-9a-f]{16})\.css)">', r.text)
            assert len(links) == 1, r.text[:600]
            csp = r.headers["Content-Security-Policy"]
            assert "style-src 'self'" in csp and "unsafe-inline" not in csp and "script-src 'nonce-" in csp
        href, digest = links[0]
        css = await anon.get(href)  # no sign-in needed: nothing in it is anyone's
        assert css.status_code == 200 and css.headers["Content-Type"].startswith("text/css")
        assert hashlib.sha256(css.content).hexdigest()[:16] == digest
        assert css.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert css.headers["X-Content-Type-Options"] == "nosniff"
        assert "overflow-wrap:anywhere" in css.text
        assert (await anon.get("/memory/style-0000000000000000.css")).status_code == 404  # not a stale copy


async def test_an_add_or_edit_sent_after_the_session_expired_comes_back_typed_after_signing_in(engine: MemoryEngine) -> None:
    """The session expired while a note was being typed: Save led to the
    sign-in, and after it the words were gone. They now ride along in the
    sign-in form (the browser's, never stored on the server), and signing in
    gives back the form as typed, to be saved with a click."""
    from gateway.http import HttpServer
    from gateway.web import AdminAuth, MemoryAdmin, MemoryWeb
    from memory.retrieval import Retriever

    now = [1_000_000.0]
    http = HttpServer("127.0.0.1", 0)
    MemoryWeb(MemoryAdmin(engine, Retriever(engine)), AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0])).mount(http)
    await http.start()
    try:
        mid = (await engine.add(NewMemory(owner="alice", content="alice keeps bees"))).id
        async with httpx.AsyncClient(base_url=http.url, timeout=10) as c:
            await c.post("/memory/login", data={"token": TOKEN})
            csrf = csrf_of((await c.get("/memory", params={"user": "alice"})).text)
            now[0] += 61  # typing took longer than the session lasts
            typed = "alice keeps bees and two hives of wasps, a long note typed on a phone"
            for action, extra in [("/memory/edit", {"id": str(mid)}), ("/memory/add", {})]:
                r = await asyncio.wait_for(c.post(action, data={
                    "csrf": csrf, "user": "alice", "content": typed, "importance": "0.8", "back": "/memory?user=alice",
                    **extra}), 10)
                assert r.status_code == 401 and "comes back" in r.text
                login = dict(next(f for f in parse(r.text).forms if f.action == "/memory/login").fields)
                assert login["back"] == "/memory?user=alice"
                # A mistyped token keeps them too.
                r = await c.post("/memory/login", data={**login, "token": WRONG})
                assert r.status_code == 401 and "Wrong token" in r.text
                login = dict(next(f for f in parse(r.text).forms if f.action == "/memory/login").fields)
                r = await c.post("/memory/login", data={**login, "token": TOKEN})
                assert r.status_code == 200 and "myclaw_admin" in r.headers.get("Set-Cookie", "")
                assert "Nothing was saved yet" in r.text
                form = next(f for f in parse(r.text).forms if f.action == action)
                fields = dict(form.fields)
                assert fields["content"] == typed and fields["importance"] == "0.80" and fields["csrf"] != csrf
                assert fields.get("id", "") == extra.get("id", "") and fields["user"] == "alice"
                if action == "/memory/edit":  # nothing done unasked
                    assert (await engine.get(mid)).content == "alice keeps bees"  # type: ignore[union-attr]
                r = await c.post(action, data=fields)  # Save: the new session's token
                assert r.status_code == 303, r.text
                now[0] += 61
            # Another site's form posted here: its words are not offered back after signing in.
            r = await c.post("/memory/add", data={"user": "alice", "content": "planted words"},
                             headers={"Origin": "https://elsewhere.example"})
            assert r.status_code == 401 and "planted words" not in r.text and "kept_action" not in r.text
    finally:
        await http.stop()
    assert [m.content for m in await engine.list_memories("alice")] == [typed]  # edited; the add found it


async def test_an_add_sent_while_the_address_is_locked_out_keeps_what_was_typed(engine: MemoryEngine) -> None:
    """The session had ended and the address was locked out (too many wrong
    tokens): Save, or the sign-in carrying the typed note, got the 429 page
    with no form, and the note was gone. The 429 page now carries it in its
    sign-in form, to send once the wait is over."""
    from gateway.http import HttpServer
    from gateway.web import AdminAuth, MemoryAdmin, MemoryWeb
    from memory.retrieval import Retriever

    now = [1_000_000.0]
    http = HttpServer("127.0.0.1", 0)
    MemoryWeb(MemoryAdmin(engine, Retriever(engine)), AdminAuth(TOKEN, session_ttl=60, clock=lambda: now[0])).mount(http)
    await http.start()
    try:
        async with httpx.AsyncClient(base_url=http.url, timeout=10) as c:
            await c.post("/memory/login", data={"token": TOKEN})
            csrf = csrf_of((await c.get("/memory", params={"user": "alice"})).text)
            now[0] += 61  # the session ended while typing
            await _locked_out(c)  # and the address is locked out
            typed = "alice keeps bees, a long note typed on a phone"
            r = await asyncio.wait_for(c.post("/memory/add", data={
                "csrf": csrf, "user": "alice", "content": typed, "importance": "0.8", "back": "/memory?user=alice"}), 10)
            assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
            assert "too many wrong tokens" in r.text and "kept in this page" in r.text
            login = dict(next(f for f in parse(r.text).forms if f.action == "/memory/login").fields)
            assert login["kept_content"] == typed and login["kept_action"] == "/memory/add"
            assert login["back"] == "/memory?user=alice"
            # Sent before the wait is over: refused again, and kept again.
            r = await asyncio.wait_for(c.post("/memory/login", data={**login, "token": TOKEN}), 10)
            assert r.status_code == 429
            login = dict(next(f for f in parse(r.text).forms if f.action == "/memory/login").fields)
            assert login["kept_content"] == typed
            now[0] += 301  # the lockout is over
            r = await asyncio.wait_for(c.post("/memory/login", data={**login, "token": TOKEN}), 10)
            assert r.status_code == 200 and "Nothing was saved yet" in r.text
            fields = dict(next(f for f in parse(r.text).forms if f.action == "/memory/add").fields)
            assert fields["content"] == typed
            assert (await asyncio.wait_for(c.post("/memory/add", data=fields), 10)).status_code == 303
            # Another site's post while locked out: its words are not offered back.
            now[0] += 61
            await _locked_out(c)
            r = await c.post("/memory/add", data={"user": "alice", "content": "planted words"},
                             headers={"Origin": "https://elsewhere.example"})
            assert r.status_code == 429 and "planted words" not in r.text and "kept_action" not in r.text
    finally:
        await http.stop()
    assert [m.content for m in await engine.list_memories("alice")] == [typed]
