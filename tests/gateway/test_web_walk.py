"""The memory page walked as a demanding user would, on a phone and a
laptop, in English and Chinese: a lockout's page, a light page with
hundreds of memories (and working with JavaScript off), hostile words in
memories and searches, the back button after a POST."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from tests.gateway.test_web import TOKEN, Site, cards, csrf_of, site  # noqa: F401  (site: the fixture)

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
            assert f'<html lang="{lang}">' in r.text and words in r.text and "<style nonce=" in r.text
            assert "nonce-" in r.headers["Content-Security-Policy"]  # the page's own style is allowed
            assert 'action="/memory/login"' not in r.text  # no form to type a token into yet
            seconds = re.search(r"(\d+)", r.text.split(words)[1])
            assert seconds and int(seconds.group(1)) == int(r.headers["Retry-After"])
        r = await c.get("/memory/api/users")  # the API's stays JSON
        assert r.status_code == 429 and "too many wrong tokens" in r.json()["error"]
