from __future__ import annotations

import asyncio
import gc
import io
import json
import logging
import socket
import warnings

import httpx
import pytest
from aiohttp import web

from gateway.http import HttpServer
from gateway.logging import configure_logging


async def test_healthz_and_routes_added_before_and_after_start() -> None:
    server = HttpServer("127.0.0.1", 0)

    async def before(request: web.Request) -> web.Response:
        return web.json_response({"route": "before", "body": await request.text()})

    async def after(request: web.Request) -> web.Response:
        return web.json_response({"route": "after"})

    server.add_route("POST", "/hook/before", before)
    await server.start()
    try:
        assert server.port > 0
        server.add_route("GET", "/hook/after", after)
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            r = await client.get("/healthz")
            assert (r.status_code, r.json()) == (200, {"status": "ok"})
            r = await client.post("/hook/before", content=b"hi")
            assert r.json() == {"route": "before", "body": "hi"}
            assert (await client.get("/hook/after")).json() == {"route": "after"}
            assert (await client.get("/hook/before")).status_code == 405
            assert (await client.get("/nope")).status_code == 404
            server.remove_route("GET", "/hook/after")
            assert (await client.get("/hook/after")).status_code == 404
    finally:
        await server.stop()


async def test_stop_is_safe_twice_and_frees_the_port() -> None:
    server = HttpServer("127.0.0.1", 0)
    await server.start()
    port = server.port
    await server.stop()
    await server.stop()
    with socket.socket() as s:  # the port is released
        s.bind(("127.0.0.1", port))


async def test_duplicate_route_and_port_before_start_are_errors() -> None:
    server = HttpServer()
    with pytest.raises(ValueError, match="already registered"):
        server.add_route("GET", "/healthz", server._healthz)
    with pytest.raises(RuntimeError):
        _ = server.port


async def test_port_in_use_raises_and_leaves_nothing_open() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        server = HttpServer("127.0.0.1", s.getsockname()[1])
        with pytest.raises(OSError):
            await server.start()
        await server.stop()



async def test_a_connection_accepted_as_the_server_stops_is_closed_not_leaked() -> None:
    server = HttpServer()
    await server.start()
    client = socket.create_connection(("127.0.0.1", server.port))  # in the listen backlog, not yet accepted
    try:
        # One turn: the loop accepts it and schedules setting it up; the next
        # turn would set it up, after a plain close() of the server, which
        # Python 3.11 answers by dropping the socket unclosed.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await server.stop()
            for _ in range(3):
                await asyncio.sleep(0)
            gc.collect()
        assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
        client.settimeout(5)
        assert client.recv(1) == b""  # the server closed its end
    finally:
        client.close()


# -- slow clients ------------------------------------------------------------------


async def _read_until_closed(reader: asyncio.StreamReader) -> bytes:
    data = b""
    while chunk := await reader.read(4096):
        data += chunk
    return data


async def test_a_client_that_never_finishes_its_headers_is_disconnected() -> None:
    """Slowloris: each connection sending half a request held a socket for
    aiohttp's default hour, so a few hundred of them used up the process's
    file descriptors (and with them the bot's own API calls and SQLite)."""
    async with HttpServer("127.0.0.1", 0, idle_timeout=0.3) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            await writer.drain()
            assert await asyncio.wait_for(_read_until_closed(reader), 10) == b""
        finally:
            writer.close()


async def test_a_body_that_does_not_arrive_in_time_gets_408_and_never_reaches_the_handler() -> None:
    reached: list[bytes] = []

    async def hook(request: web.Request) -> web.Response:
        reached.append(await request.read())
        return web.json_response({})

    async with HttpServer("127.0.0.1", 0, body_timeout=0.3) as server:
        server.add_route("POST", "/hook", hook)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\"")
            await writer.drain()
            # aiohttp then drains what is left for up to 10 s before closing.
            answer = await asyncio.wait_for(reader.readuntil(b"received within 0.3 s"), 10)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
        assert b"request body" in answer and reached == []
        # A whole body in time is served as before.
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            assert (await client.post("/hook", content=b'{"a": 1}')).status_code == 200
        assert reached == [b'{"a": 1}']


def test_the_default_timeouts_are_bounded() -> None:
    server = HttpServer()
    assert 0 < server.idle_timeout <= 120 and 0 < server.body_timeout <= 60


async def test_a_failing_handler_is_a_plain_500_even_in_asyncio_debug_mode() -> None:
    """Under ``python -X dev`` (asyncio debug) aiohttp sends the traceback,
    with its messages and file paths, to whoever made the request: the
    server answers a bare 500 and keeps the traceback for its log."""

    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("db at /srv/myclaw/secret-path.db is locked")

    loop = asyncio.get_running_loop()
    was = loop.get_debug()
    loop.set_debug(True)
    try:
        async with HttpServer("127.0.0.1", 0) as server:
            server.add_route("GET", "/broken", broken)
            async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
                for accept in ("text/html", "*/*"):
                    r = await client.get("/broken", headers={"Accept": accept})
                    assert r.status_code == 500
                    assert "Traceback" not in r.text and "secret-path" not in r.text, r.text
                assert (await client.get("/healthz")).status_code == 200  # the server goes on
    finally:
        loop.set_debug(was)


async def test_a_failing_handlers_log_line_names_the_error_and_where_not_its_words() -> None:
    """An exception's text may quote what a user sent (a memory being
    edited, a form field): the log, even at DEBUG, gets its type and the
    frames it came through, as for every other line, never its words."""

    async def broken(request: web.Request) -> web.Response:
        try:
            raise ValueError("cannot parse 'Alice's oncologist is Dr Okonkwo'")
        except ValueError as exc:
            raise RuntimeError("while saving 'my diary: Lisbon, Tuesday'") from exc

    out = io.StringIO()
    configure_logging(level="DEBUG", stream=out, json_output=True)
    try:
        async with HttpServer("127.0.0.1", 0) as server:
            server.add_route("POST", "/broken", broken)
            async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
                assert (await client.post("/broken", content=b"x")).status_code == 500
    finally:
        logging.getLogger().handlers.clear()
    [line] = [json.loads(x) for x in out.getvalue().splitlines() if "http handler failed" in x]
    assert line["level"] == "error" and (line["method"], line["path"]) == ("POST", "/broken")
    assert line["error"] == "RuntimeError" and line["caused_by"] == ["ValueError"]
    assert line["at"].startswith("tests/gateway/test_http.py:") and line["at"].endswith(" in broken"), line["at"]
    assert any(f.endswith(" in _dispatch") for f in line["frames"]), line["frames"]
    for words in ("Okonkwo", "oncologist", "diary", "Lisbon"):
        assert words not in out.getvalue()


# -- the client's address behind a reverse proxy ----------------------------------


async def _echo_remote(request: web.Request) -> web.Response:
    return web.json_response({"remote": request.remote})


async def _remote_seen(server: HttpServer, forwarded: str | None) -> str:
    headers = {} if forwarded is None else {"X-Forwarded-For": forwarded}
    async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
        r = await client.get("/who", headers=headers)
    assert r.status_code == 200, r.text
    remote: str = r.json()["remote"]
    return remote


async def test_behind_a_trusted_proxy_the_client_is_the_right_most_untrusted_forwarded_address() -> None:
    """Behind the reverse proxy the README recommends every peer is
    127.0.0.1: one attacker's wrong tokens locked everyone out."""
    async with HttpServer("127.0.0.1", 0, trusted_proxies=["127.0.0.1", "10.0.0.0/8"]) as server:
        server.add_route("GET", "/who", _echo_remote)
        assert await _remote_seen(server, "203.0.113.9") == "203.0.113.9"
        # What the client sent itself is on the left; the proxy appends the peer it saw.
        assert await _remote_seen(server, "1.1.1.1, 203.0.113.9") == "203.0.113.9"
        # Proxies we trust (a chain) are skipped from the right.
        assert await _remote_seen(server, "198.51.100.7, 10.1.2.3, 127.0.0.1") == "198.51.100.7"
        assert await _remote_seen(server, "2001:db8::1") == "2001:db8::1"
        assert await _remote_seen(server, None) == "127.0.0.1"
        # Every hop trusted: the left-most (a request made on the proxy's host).
        assert await _remote_seen(server, "10.0.0.5, 127.0.0.1") == "10.0.0.5"
        # A right-most entry that is no address: the proxy is misconfigured; the peer it is.
        assert await _remote_seen(server, "1.1.1.1, not-an-ip") == "127.0.0.1"
        assert await _remote_seen(server, "") == "127.0.0.1"


@pytest.mark.parametrize("trusted", [(), ("10.0.0.0/8",)])
async def test_a_forwarded_address_from_an_untrusted_peer_is_ignored(trusted: tuple[str, ...]) -> None:
    async with HttpServer("127.0.0.1", 0, trusted_proxies=trusted) as server:
        server.add_route("GET", "/who", _echo_remote)
        assert await _remote_seen(server, "203.0.113.9") == "127.0.0.1"


async def _echo_origin(request: web.Request) -> web.Response:
    return web.json_response({"scheme": request.scheme, "host": request.host})


@pytest.mark.parametrize("trusted", [(), ("10.0.0.0/8",), ("127.0.0.1",)])
async def test_forwarded_proto_and_host_count_only_from_a_trusted_peer(trusted: tuple[str, ...]) -> None:
    async with HttpServer("127.0.0.1", 0, trusted_proxies=trusted) as server:
        server.add_route("GET", "/origin", _echo_origin)
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            r = await client.get("/origin", headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "memory.example"})
            bogus = await client.get("/origin", headers={"X-Forwarded-Proto": "gopher"})
    own = {"scheme": "http", "host": f"127.0.0.1:{server.port}"}
    assert r.json() == ({"scheme": "https", "host": "memory.example"} if trusted == ("127.0.0.1",) else own)
    assert bogus.json() == own  # neither http nor https: ignored


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    with pytest.raises(ValueError, match="not-a-network"):
        HttpServer(trusted_proxies=["127.0.0.1", "not-a-network"])
    assert HttpServer(trusted_proxies=["::1", "192.168.0.0/16"]).trusted_proxies == ("::1/128", "192.168.0.0/16")


# -- every answer, errors included, carries the security headers --------------------


def _assert_hardened(headers: httpx.Headers | dict[str, str], what: str) -> None:
    h = {k.lower(): v for k, v in headers.items()}
    assert h.get("x-content-type-options") == "nosniff", what
    assert h.get("x-frame-options") == "DENY", what
    assert h.get("referrer-policy") == "no-referrer", what
    assert h.get("cache-control") == "no-store", what
    assert "frame-ancestors 'none'" in h.get("content-security-policy", ""), what
    assert "aiohttp" not in h.get("server", "").lower() and "python" not in h.get("server", "").lower(), (what, h.get("server"))


async def test_error_answers_carry_the_security_headers_and_no_server_version() -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("boom")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async with HttpServer("127.0.0.1", 0, client_max_size=1024, body_timeout=0.3) as server:
        server.add_route("GET", "/broken", broken)
        server.add_route("POST", "/echo", echo)
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as client:
            for method, path, body, status in [
                ("GET", "/healthz", None, 200),
                ("GET", "/nope", None, 404),
                ("GET", "/echo", None, 405),
                ("POST", "/echo", b"x" * 4096, 413),
                ("GET", "/broken", None, 500),
            ]:
                r = await client.request(method, path, content=body)
                assert r.status_code == status, (path, r.status_code)
                _assert_hardened(r.headers, f"{method} {path}")
        # aiohttp's own answers to what is not HTTP at all, and to a late body.
        for raw, status in [
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", b"400"),
            (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", b"408"),
        ]:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            try:
                writer.write(raw)
                await writer.drain()
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            finally:
                writer.close()
            lines = head.decode().split("\r\n")
            assert lines[0].split(" ")[1].encode() == status, lines[0]
            _assert_hardened(dict(line.split(": ", 1) for line in lines[1:] if ": " in line), lines[0])


async def test_a_client_that_waits_for_100_continue_gets_it() -> None:
    """curl asks before sending a body over 1 KB; unanswered, it waits a second."""

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async with HttpServer("127.0.0.1", 0) as server:
        server.add_route("POST", "/echo", echo)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            await writer.drain()
            assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(b"hello")
            await writer.drain()
            answer = await asyncio.wait_for(reader.readuntil(b"hello"), 5)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 200 ")
