"""Voice messages as text (``agent.transcription``): an OpenAI-compatible
``POST /audio/transcriptions`` (multipart: ``file``, ``model``), answered
with ``{"text": ...}``. The process loop turns a message's recording into
its words before anything else reads it; the recording itself is never
stored.

The HTTP client is passed in (the gateway's shared one), so tests point it
at the loopback fake. One error type: :class:`TranscriptionError`, its
message naming the status and the endpoint's words (scrubbed of the key,
cut short), never the key or the audio.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import httpx
import structlog

from memory.redact import scrub_provider_text

from .bus import VOICE, VOICE_NOT_READ, Audio, Forwarded
from .config import ProviderConfig

__all__ = ["Transcriber", "TranscriptionError", "hear_forwarded"]

log = structlog.get_logger(component="gateway")


class TranscriptionError(Exception):
    """The recording could not be turned into text."""


class Transcriber:
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        timeout: float = 60.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self._url = base_url.rstrip("/") + "/audio/transcriptions"
        self._key = api_key
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout
        self._own = client is None
        self._client = client or httpx.AsyncClient()

    @classmethod
    def from_config(cls, provider: ProviderConfig, *, model: str, client: httpx.AsyncClient | None = None) -> Transcriber:
        return cls(
            base_url=provider.base_url,
            api_key=provider.api_key.get_secret_value(),
            model=model,
            timeout=provider.timeout.total_seconds(),
            client=client,
        )

    async def aclose(self) -> None:
        """Safe twice; leaves an injected client open."""
        if self._own:
            self._own = False
            await self._client.aclose()

    async def transcribe(self, audio: Audio) -> str:
        """The words of ``audio`` ("" when it has none)."""
        try:
            resp = await self._client.post(
                self._url,
                headers=self._headers,
                data={"model": self.model, "response_format": "json"},
                files={"file": (audio.filename, audio.data, audio.mime)},
                timeout=self._timeout,
            )
        except httpx.HTTPError as exc:
            raise TranscriptionError(f"transcription endpoint not reached: {type(exc).__name__}") from exc
        if not resp.is_success:
            # The endpoint's words, without the key it may echo.
            said = scrub_provider_text(_message(resp), [self._key], limit=200)
            raise TranscriptionError(f"transcription refused: HTTP {resp.status_code} {said}".rstrip())
        try:
            body: Any = resp.json()
        except ValueError as exc:
            raise TranscriptionError("transcription answer is not JSON") from exc
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise TranscriptionError("transcription answer has no text")
        return text.strip()


async def hear_forwarded(
    transcriber: Transcriber | None, items: Sequence[Forwarded]
) -> tuple[tuple[Forwarded, ...], int]:
    """``items`` (a message's forwards) with each recording the channel
    attached turned into its words, still its author's: ``[voice]`` (and
    the caption it came with), then the transcript; one that could not be
    transcribed (or with ``transcriber`` None) becomes ``[voice not
    read]``. Every recording is dropped. Returns them and how many were
    not heard. The recordings are transcribed at once: a burst may hold
    several, and the user waits for all."""

    async def hear(item: Forwarded) -> tuple[Forwarded, bool]:
        if item.audio is None:
            return item, True
        said = item.text.removeprefix(VOICE).strip()  # its caption, if any
        words = ""
        try:
            if transcriber is None:
                raise TranscriptionError("agent.transcription is off")
            words = await transcriber.transcribe(item.audio)
        except TranscriptionError as exc:
            log.warning("forwarded voice message not transcribed", error=str(exc))
        if not words:
            return dataclasses.replace(item, text=f"{VOICE_NOT_READ} {said}".strip(), audio=None), False
        text = f"{said}\n{words}" if said else words  # as a voice message's own caption and transcript
        return dataclasses.replace(item, text=f"{VOICE} {text}", audio=None), True

    heard = await asyncio.gather(*(hear(i) for i in items))
    return tuple(i for i, _ in heard), sum(not ok for _, ok in heard)


def _message(resp: httpx.Response) -> str:
    try:
        error = resp.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return str(error.get("message", "")) if isinstance(error, dict) else ""
