"""An OpenAI-compatible chat completions server on 127.0.0.1.

Replies come from a script (``queue_reply`` / ``queue_error``) or from a
``responder`` callable; with neither, it answers ``"ok"``. Every request body
is recorded in ``requests`` so tests can assert on the exact prompt the LLM
received.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["FakeOpenAI", "Reply"]


@dataclass
class Reply:
    content: str | None = "ok"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name":..., "arguments": {...}}]
    status: int = 200  # != 200: an error response with this status
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    error_body: str = ""
    finish_reason: str | None = None


Responder = Callable[[dict[str, Any]], "Reply | Awaitable[Reply]"]


class FakeOpenAI:
    def __init__(self, *, api_key: str | None = None, responder: Responder | None = None) -> None:
        self.api_key = api_key
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: list[Reply] = []
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- scripting ------------------------------------------------------------
    def queue_reply(self, content: str | None = "ok", tool_calls: list[dict[str, Any]] | None = None) -> None:
        self._script.append(Reply(content=content, tool_calls=tool_calls or []))

    def queue_error(self, status: int = 500, *, times: int = 1, body: str = "") -> None:
        for _ in range(times):
            self._script.append(Reply(content=None, status=status, error_body=body))

    def queue_delay(self, seconds: float, content: str = "late") -> None:
        self._script.append(Reply(content=content, delay=seconds))

    @property
    def url(self) -> str:
        """Base URL to put in ``provider.baseUrl``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def last_messages(self) -> list[dict[str, Any]]:
        return self.requests[-1]["messages"] if self.requests else []

    def prompts_text(self) -> str:
        """Every message of every request, joined: for "never contains" checks."""
        return "\n".join(
            json.dumps(m.get("content"), ensure_ascii=False) for r in self.requests for m in r.get("messages", [])
        )

    # -- server -----------------------------------------------------------------
    async def start(self, port: int = 0) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _auth_ok(self, request: web.Request) -> bool:
        if not self.api_key:
            return True
        return request.headers.get("Authorization") == f"Bearer {self.api_key}"

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        if not self._auth_ok(request):
            return web.json_response(
                {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}},
                status=401,
            )
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return web.json_response({"error": {"message": "invalid JSON body", "type": "invalid_request_error"}}, status=400)
        if not isinstance(body.get("messages"), list) or not body.get("model"):
            return web.json_response(
                {"error": {"message": "'model' and 'messages' are required", "type": "invalid_request_error"}}, status=400
            )
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self._script:
            reply = self._script.pop(0)
        elif self.responder is not None:
            r = self.responder(body)
            reply = await r if asyncio.iscoroutine(r) else r  # type: ignore[assignment]
        else:
            reply = Reply()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.status != 200:
            msg = reply.error_body or {429: "Rate limit reached", 500: "The server had an error"}.get(reply.status, "error")
            return web.json_response({"error": {"message": msg, "type": "server_error"}}, status=reply.status)
        return web.json_response(self._completion(body, reply))

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish = reply.finish_reason or "stop"
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": tc["name"],
                        "arguments": tc["arguments"] if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"], ensure_ascii=False),
                    },
                }
                for tc in reply.tool_calls
            ]
            finish = reply.finish_reason or "tool_calls"
        prompt_chars = sum(len(json.dumps(m.get("content"), ensure_ascii=False)) for m in body["messages"])
        completion_chars = len(reply.content or "")
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt_chars // 4,
                "completion_tokens": completion_chars // 4,
                "total_tokens": (prompt_chars + completion_chars) // 4,
            },
        }
