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

from typing import Any

import httpx

from memory.redact import scrub_provider_text

from .bus import Audio
from .config import ProviderConfig

__all__ = ["Transcriber", "TranscriptionError"]


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


def _message(resp: httpx.Response) -> str:
    try:
        error = resp.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return str(error.get("message", "")) if isinstance(error, dict) else ""
