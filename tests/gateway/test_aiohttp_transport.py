"""gateway.aiohttp_transport: httpx's API over aiohttp, httpx's behaviour kept."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from gateway.aiohttp_transport import AiohttpTransport


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def echo(req: web.Request) -> web.Response:
        body = await req.read()
        return web.json_response({"method": req.method, "body": body.decode(), "auth": req.headers.get("Authorization")})

    async def moved(req: web.Request) -> web.Response:
        raise web.HTTPFound("/echo")

    async def zipped(req: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(b"hello " * 100), headers={"Content-Encoding": "gzip"})

    app = web.Application()
    app.router.add_route("*", "/echo", echo)
    app.router.add_get("/moved", moved)
    app.router.add_get("/zipped", zipped)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_request_body_headers_and_json(server: str) -> None:
    async with httpx.AsyncClient(transport=AiohttpTransport()) as c:
        r = await c.post(f"{server}/echo", json={"a": 1}, headers={"Authorization": "Bearer k"})
    assert r.status_code == 200
    assert r.json() == {"method": "POST", "body": '{"a":1}', "auth": "Bearer k"}
    assert r.http_version == "HTTP/1.1"


async def test_redirects_and_decoding_stay_with_httpx(server: str) -> None:
    async with httpx.AsyncClient(transport=AiohttpTransport()) as c:
        r = await c.get(f"{server}/moved")
        assert r.status_code == 302 and r.headers["location"] == "/echo"
        r = await c.get(f"{server}/moved", follow_redirects=True)
        assert r.json()["method"] == "GET"
        r = await c.get(f"{server}/zipped")
        assert r.text == "hello " * 100


async def test_errors_are_httpx_errors() -> None:
    async with httpx.AsyncClient(transport=AiohttpTransport()) as c:
        with pytest.raises(httpx.ConnectError):
            await c.get("http://127.0.0.1:9/")  # discard port: connection refused


async def test_close_twice_then_use_is_an_error(server: str) -> None:
    t = AiohttpTransport()
    async with httpx.AsyncClient(transport=t) as c:
        await c.get(f"{server}/echo")
    await t.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await t.handle_async_request(httpx.Request("GET", f"{server}/echo"))
