"""Reading a streamed chat completion (``"stream": true``).

An OpenAI-compatible server answers a streamed request with server-sent
events (``text/event-stream``): one ``data:`` line per event holding a
``chat.completion.chunk``, and ``data: [DONE]`` at the end. Each chunk's
``choices[0].delta`` adds to the reply: ``content`` text, and
``tool_calls`` pieces keyed by ``index`` (the first piece of a call has its
``id`` and ``function.name``, the following ones more of
``function.arguments``). :class:`Accumulator` puts them together;
:func:`sse_data` cuts the byte stream into events' data.

Servers differ at the edges, and all of these occur: comment lines
(``: keep-alive``, OpenRouter's ``: OPENROUTER PROCESSING``), ``event:``
lines, an event's data spread over several ``data:`` lines, CRLF line
ends, a last chunk with ``usage`` and no choices, an error object in place
of a chunk, and no ``[DONE]`` before the connection closes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Accumulator", "StreamError", "sse_data"]


class StreamError(Exception):
    """The stream said something other than a completion chunk: an error
    object (``message``, and ``status`` when it names one) or a malformed
    event."""

    def __init__(self, message: str, *, status: int | None = None, error: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.error = error  # the server sent an error object (not a malformed event)


async def sse_data(chunks: AsyncIterator[bytes]) -> AsyncGenerator[str, None]:
    """The data of each event in a ``text/event-stream`` body, in order,
    ``[DONE]`` included (the caller tells a finished stream from a cut
    one by it); stops after ``[DONE]`` or at the end of the body.

    ``chunks`` is closed when this ends or is closed: a generator left
    suspended costs the event loop a task to close it when it is collected
    (and the caller stops at ``[DONE]``, before the body's end)."""
    buffer = b""
    data: list[str] = []
    try:
        async for chunk in chunks:
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.rstrip(b"\r").decode("utf-8", "replace")
                if not line:  # an event ends at a blank line
                    if data:
                        payload = "\n".join(data)
                        data = []
                        yield payload
                        if payload.strip() == "[DONE]":
                            return
                    continue
                if line.startswith(":"):
                    continue  # a comment: keep-alive
                name, _, value = line.partition(":")
                if name == "data":
                    data.append(value[1:] if value.startswith(" ") else value)
    finally:
        if isinstance(chunks, AsyncGenerator):
            await chunks.aclose()
    tail = buffer.rstrip(b"\r").decode("utf-8", "replace")
    if tail.startswith("data:"):
        data.append(tail[5:].lstrip(" "))
    if data:
        yield "\n".join(data)


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class Accumulator:
    """A streamed completion put together chunk by chunk."""

    content: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str = ""
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    chunks: int = 0

    @property
    def text(self) -> str:
        return "".join(self.content)

    def feed(self, payload: str) -> bool:
        """Take one event's data; True when it added reply text."""
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise StreamError(f"a stream event that is not JSON ({exc})") from exc
        if not isinstance(chunk, dict):
            raise StreamError("a stream event that is not a JSON object")
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            code = error.get("code") if isinstance(error, dict) else None
            status = code if isinstance(code, int) else None
            raise StreamError(str(message or "error"), status=status, error=True)
        self.chunks += 1
        if chunk.get("model") and not self.model:
            self.model = str(chunk["model"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not choices:
            return False
        try:
            choice = choices[0]
            delta = choice.get("delta") or {}
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
            added = False
            piece = delta.get("content")
            if isinstance(piece, list):  # content as parts, as a few servers send it
                piece = "".join(p.get("text", "") for p in piece if isinstance(p, dict))
            if isinstance(piece, str) and piece:
                self.content.append(piece)
                added = True
            for n, tc in enumerate(delta.get("tool_calls") or []):
                index = tc.get("index", n)
                call = self.calls.setdefault(int(index), _Call())
                if tc.get("id"):
                    call.id = str(tc["id"])
                fn = tc.get("function") or {}
                if fn.get("name"):
                    call.name = str(fn["name"])
                args = fn.get("arguments")
                if isinstance(args, str):
                    call.arguments.append(args)
                elif args is not None:  # a few servers send the object itself, whole
                    call.arguments.append(json.dumps(args, ensure_ascii=False))
            return added
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise StreamError(f"not a completion chunk: {type(exc).__name__} {exc}") from exc

    def tool_calls(self) -> list[tuple[str, str, str]]:
        """(id, name, arguments) of each call, in index order; a call's id
        defaults as a whole completion's does."""
        out = []
        for i, (_, call) in enumerate(sorted(self.calls.items())):
            if not call.name:
                raise StreamError("a streamed tool call without a function name")
            out.append((call.id or f"call_{i}", call.name, "".join(call.arguments)))
        return out
