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

The response body is read in full before it is returned: no streaming
(the LLM client reads whole chat completions).
"""

from __future__ import annotations

import asyncio

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
            async with session.request(
                request.method,
                str(request.url),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=timeout,
            ) as resp:
                connected = True
                content = await resp.read()
                return httpx.Response(
                    resp.status,
                    headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.raw_headers],
                    stream=httpx.ByteStream(content),
                    extensions={"http_version": f"HTTP/{resp.version.major}.{resp.version.minor}".encode()}
                    if resp.version
                    else {},
                    request=request,
                )
        except (TimeoutError, asyncio.TimeoutError) as exc:  # aiohttp's ServerTimeoutError is one too
            if isinstance(exc, aiohttp.ConnectionTimeoutError) or not connected and not isinstance(
                exc, aiohttp.SocketTimeoutError
            ):
                raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
            raise httpx.ReadTimeout(str(exc) or "read timed out", request=request) from exc
        except aiohttp.InvalidURL as exc:
            raise httpx.UnsupportedProtocol(str(exc), request=request) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
            raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__, request=request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc

    async def aclose(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
