"""The gateway's own small HTTP server: webhook endpoints (Feishu events),
the memory page, ``GET /healthz`` and ``GET /metrics`` (gateway/health.py).

Routes live in our own table, looked up by one catch-all aiohttp route.
aiohttp freezes its router when the server starts, and channels register
their paths in their own ``start()``, which may run before or after the
server starts; the table removes that ordering trap and lets a channel
remove its route on ``stop()``.

Slow clients are bounded: a connection that has not sent a whole request
(headers) within ``idle_timeout`` seconds, or sits idle that long between
requests, is closed; a body not in within ``body_timeout`` gets 408. Without
these, aiohttp holds a half-sent request for an hour, and a few hundred
such connections use up the process's file descriptors. A handler that
fails answers a bare 500; the log gets its error's type and frames (not its
text, which may quote a user's words: gateway/logging.py).

Every answer, aiohttp's own included (a malformed request's 400, a 413),
carries the security headers of :data:`SECURITY_HEADERS` and a ``Server``
header that names no version. It is set as the response is prepared
(aiohttp's ``Request._prepare_hook``), the one point every answer passes:
that is why the server runs aiohttp's low-level ``web.Server`` with our own
request class rather than a ``web.Application``, whose hook skips answers to
requests it never routed.

With ``trusted_proxies`` (``gateway.trustedProxies``), a request from one of
them has its ``remote`` taken from ``X-Forwarded-For`` (gateway/proxies.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import structlog
from aiohttp import HttpVersion11, web
from aiohttp.web_protocol import RequestHandler

from .logging import error_fields
from .proxies import client_address, forwarded_value, trusted_networks

if TYPE_CHECKING:
    from .health import Health

__all__ = ["SECURITY_HEADERS", "SERVER_NAME", "Handler", "HttpServer", "stop_listening"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

SERVER_NAME = "myclaw"  # not aiohttp's "Python/3.11 aiohttp/3.x.y": no version to look up
# Defaults: a response that sets its own (the memory page's CSP with its nonce) keeps it.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _Request(web.Request):
    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        # Runs before aiohttp fills in its defaults (Server among them).
        response.headers["Server"] = SERVER_NAME
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        await super()._prepare_hook(response)


async def _continue(request: web.Request) -> None:
    """``Expect: 100-continue`` (curl, for a body over 1 KB): a web.Application
    answers it; the low-level server leaves it to us."""
    expect = request.headers.get("Expect", "")
    if not expect:
        return
    if request.version != HttpVersion11 or expect.lower() != "100-continue":
        raise web.HTTPExpectationFailed(text=f"unknown Expect: {expect[:40]}")
    await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    request.writer.output_size = 0


async def stop_listening(runner: web.BaseRunner) -> None:
    """Close the listening sockets of ``runner``; open connections stay.

    Accepting stops first and the connections already accepted are let in
    before the sockets close: Python 3.11's asyncio drops a connection it
    accepted just before its server closed without closing it (its
    transport asserts the server still listens), leaking the socket.
    """
    loop = asyncio.get_running_loop()
    sites = list(runner.sites)
    for site in sites:
        server = site._server  # aiohttp keeps the asyncio server private
        for sock in server.sockets if isinstance(server, asyncio.Server) else ():
            loop.remove_reader(sock.fileno())
    # Two turns of the loop: accepted connections get their transports, then
    # reach aiohttp (connection_made), so a shutdown after this sees them.
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    for site in sites:
        await site.stop()


class HttpServer:
    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        client_max_size: int = 4 * 1024 * 1024,
        idle_timeout: float = 75.0,  # over a reverse proxy's idle upstream keep-alive (nginx: 60 s)
        body_timeout: float = 30.0,
        trusted_proxies: Iterable[str] = (),
    ) -> None:
        if idle_timeout <= 0 or body_timeout <= 0:
            raise ValueError("idle_timeout and body_timeout must be > 0")
        self._trusted = trusted_networks(trusted_proxies)
        self.host = host
        self._requested_port = port
        self._client_max_size = client_max_size
        self.idle_timeout = idle_timeout
        self.body_timeout = body_timeout
        self._routes: dict[tuple[str, str], Handler] = {}
        self._runner: web.ServerRunner | None = None
        self._port: int | None = None
        self._log = structlog.get_logger(component="http")
        self.health: Health | None = None  # set by the App; without it /healthz only says the server answers
        self.add_route("GET", "/healthz", self._healthz)

    # -- routes ----------------------------------------------------------------
    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Register ``handler`` for ``method path``; allowed before or after start."""
        if not path.startswith("/"):
            raise ValueError(f"route path must start with '/': {path!r}")
        key = (method.upper(), path)
        if key in self._routes:
            raise ValueError(f"route already registered: {method.upper()} {path}")
        self._routes[key] = handler

    def remove_route(self, method: str, path: str) -> None:
        self._routes.pop((method.upper(), path), None)

    # -- lifecycle -------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port (the real one when started with port 0)."""
        if self._port is None:
            raise RuntimeError("HttpServer is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def trusted_proxies(self) -> tuple[str, ...]:
        return tuple(str(n) for n in self._trusted)

    async def start(self) -> None:
        if self._runner is not None:
            return
        # keepalive_timeout also runs from the moment a connection opens until
        # its first request is whole: aiohttp's only bound on slow headers.
        server = web.Server(self._handle, request_factory=self._make_request, access_log=None,
                            keepalive_timeout=self.idle_timeout)
        runner = web.ServerRunner(server)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._requested_port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()  # a taken port must not leave a half-open runner behind
            raise
        addresses = runner.addresses  # getsockname() of each bound socket
        self._port = addresses[0][1] if addresses else self._requested_port
        self._runner = runner
        self._log.info("http server listening", host=self.host, port=self._port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await stop_listening(runner)
            await runner.cleanup()
            self._log.info("http server stopped")

    async def __aenter__(self) -> HttpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- handlers --------------------------------------------------------------
    def _make_request(self, message: Any, payload: Any, protocol: RequestHandler, writer: Any,
                      task: asyncio.Task[None], **_: Any) -> web.BaseRequest:
        request = _Request(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                           client_max_size=self._client_max_size)
        if self._trusted:
            headers = request.headers
            peer = request.remote
            remote = client_address(peer, headers.getall("X-Forwarded-For", []), self._trusted)
            proto = (forwarded_value(peer, headers.getall("X-Forwarded-Proto", []), self._trusted) or "").lower()
            host = forwarded_value(peer, headers.getall("X-Forwarded-Host", []), self._trusted)
            changes: dict[str, Any] = {}  # one clone: a clone of a clone forgets the first's changes
            if remote is not None and remote != peer:
                changes["remote"] = remote
            if proto in ("http", "https"):
                changes["scheme"] = proto  # request.secure: the cookie's Secure flag
            if host:
                changes["host"] = host  # the Origin check's own host
            if changes:
                return request.clone(**changes)
        return request

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        assert isinstance(request, web.Request)  # made by _make_request
        await _continue(request)
        return await self._dispatch(request)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        handler = self._routes.get((request.method, request.path))
        if handler is None and request.method == "HEAD":
            handler = self._routes.get(("GET", request.path))
        if handler is not None:
            if request.body_exists and (slow := await self._read_body(request)) is not None:
                return slow
            try:
                return await handler(request)
            except web.HTTPException:
                raise  # aiohttp's own answers (413, ...)
            except Exception as exc:
                # The edge of the server: what failed and where goes to the log,
                # never to the client (as aiohttp would in asyncio debug mode);
                # not the exception's text, which may quote a form or a memory.
                self._log.error("http handler failed", method=request.method, path=request.path, **error_fields(exc))
                return web.json_response({"error": "internal error (see the gateway's log)"}, status=500)
        if any(path == request.path for _, path in self._routes):
            return web.json_response({"error": "method not allowed"}, status=405)
        return web.json_response({"error": "not found"}, status=404)

    async def _read_body(self, request: web.Request) -> web.Response | None:
        """Read the body within ``body_timeout`` (kept by aiohttp for the
        handler's ``read()`` / ``json()`` / ``post()``); a 408 if it is late."""
        try:
            async with asyncio.timeout(self.body_timeout):
                if request.content_type == "multipart/form-data":
                    await request.post()  # multipart is read from the stream, not from read()'s copy
                else:
                    await request.read()
        except TimeoutError:
            self._log.warning("http request body too slow", path=request.path, remote=request.remote,
                              timeout_s=self.body_timeout)
            response = web.json_response(
                {"error": f"request body not received within {self.body_timeout:g} s"}, status=408)
            response.force_close()
            return response
        return None

    async def _healthz(self, request: web.Request) -> web.Response:
        if self.health is None:
            return web.json_response({"status": "ok"})
        snap = await self.health.snapshot()
        return web.json_response(snap.to_json(), status=503 if snap.status == "down" else 200)

    async def metrics(self, request: web.Request) -> web.Response:
        """``GET /metrics``, registered by the App when ``gateway.metrics`` is on."""
        if self.health is None:
            return web.json_response({"error": "not found"}, status=404)
        text = self.health.metrics(await self.health.snapshot())
        return web.Response(body=text.encode("utf-8"), headers={
            "Content-Type": "text/plain; version=0.0.4; charset=utf-8", "Cache-Control": "no-store"})
