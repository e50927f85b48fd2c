"""An ``httpx`` transport that sends requests with ``aiohttp``.

The LLM client keeps httpx's API (tests inject ``httpx.AsyncClient`` with
their own transports, and :func:`gateway.llm.map_transport_error` maps httpx
errors), but httpcore's connection pool is the expensive part of a request
on the event loop: ~0.8 ms of CPU per request, ~1.3 ms with tens of pooled
connections, since it checks every idle connection for readability (a
``poll`` each) whenever a request starts or ends. Under this transport the
same request costs ~0.3-0.45 ms (docs/BENCHMARKS.md, "Gateway throughput").

Behaviour kept from httpx's default transport:

* redirects and content decoding stay httpx's job (aiohttp follows no
  redirect and decompresses nothing here);
* the request's timeouts (``request.extensions["timeout"]``) apply:
  ``connect`` + ``pool`` to getting a connection, ``read`` between reads;
* every aiohttp failure is raised as the matching httpx exception
  (``ConnectTimeout``/``ReadTimeout``, ``ConnectError``, ``ReadError``,
  ``RemoteProtocolError``, ``UnsupportedProtocol``), so callers see what
  httpx would have raised.

The response body is read in full before it is returned, except for a
``text/event-stream`` answer (a streamed chat completion): its body is
handed on as it arrives, and the connection is released when the caller
closes the response (``httpx.Response.aclose``, which ``client.send(...,
stream=True)`` callers owe anyway).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx

__all__ = ["AiohttpTransport"]

# aiohttp sets these itself from the request it sends.
_SKIP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class AiohttpTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncClient(transport=AiohttpTransport(max_connections=100))``.

    The aiohttp session is created on first use (it must be made inside the
    running event loop) and closed by ``aclose()``; closing twice is safe,
    using it after close is an error."""

    def __init__(self, *, max_connections: int = 100, keepalive_expiry: float = 5.0) -> None:
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _get_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("AiohttpTransport is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=self._keepalive_expiry),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._get_session()
        t = request.extensions.get("timeout", {})
        connect, pool, read = t.get("connect"), t.get("pool"), t.get("read")
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=None if connect is None or pool is None else connect + pool,
            sock_connect=connect,
            sock_read=read,
        )
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _SKIP_HEADERS]
        body = await request.aread()
        connected = False
        try:
            resp = await session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=timeout,
            )
            connected = True
            try:
                if resp.status < 300 and resp.content_type == "text/event-stream":
                    stream: httpx.AsyncByteStream = _EventStream(resp, request)
                else:
                    stream = httpx.ByteStream(await resp.read())
                    resp.release()
            except BaseException:
                resp.release()
                raise
            return httpx.Response(
                resp.status,
                headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                stream=stream,
                extensions={"http_version": f"HTTP/{resp.version.major}.{resp.version.minor}".encode()}
                if resp.version
                else {},
                request=request,
            )
        except Exception as exc:
            mapped = _as_httpx(exc, request, connected=connected)
            if mapped is exc:
                raise
            raise mapped from exc

    async def aclose(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _as_httpx(exc: Exception, request: httpx.Request, *, connected: bool) -> Exception:
    """The httpx exception matching an aiohttp failure (``exc`` itself when
    it is none of aiohttp's)."""
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):  # aiohttp's ServerTimeoutError is one too
        if isinstance(exc, aiohttp.ConnectionTimeoutError) or not connected and not isinstance(
            exc, aiohttp.SocketTimeoutError
        ):
            return httpx.ConnectTimeout(str(exc) or "connect timed out", request=request)
        return httpx.ReadTimeout(str(exc) or "read timed out", request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(str(exc), request=request)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(str(exc), request=request)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientResponseError):
        return httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request)
    if isinstance(exc, aiohttp.ClientError):
        return httpx.ReadError(str(exc) or type(exc).__name__, request=request)
    return exc


class _EventStream(httpx.AsyncByteStream):
    """A streamed body handed on chunk by chunk, aiohttp's failures as
    httpx's; closing it releases the connection."""

    def __init__(self, resp: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._resp = resp
        self._request = request

    def __aiter__(self) -> AsyncIterator[bytes]:
        # An iterator, not an async generator: httpx stops reading at the
        # end of an event stream's [DONE], and a generator left suspended
        # costs the loop a task to close it when it is collected.
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await self._resp.content.readany()
        except Exception as exc:
            mapped = _as_httpx(exc, self._request, connected=True)
            if mapped is exc:
                raise
            raise mapped from exc
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._resp.release()

