"""Voice messages and audio files as text (``agent.transcription``): an OpenAI-compatible
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
import re
from collections.abc import Sequence
from typing import Any

import httpx
import structlog

from memory.redact import summarize_error

from .bus import Audio, Forwarded, audio_mark, audio_not_read
from .config import ProviderConfig

__all__ = [
    "TRANSCRIPT", "Transcriber", "TranscriptionError", "forwarded_not_heard_note", "hear_forwarded", "not_heard_note",
    "recaptioned", "recording_mark", "with_transcript",
]

# An audio file's words follow this line: someone's recording (a meeting, a
# lecture), not the user's own dictation, as a voice message is.
TRANSCRIPT = "[transcript]"

log = structlog.get_logger(component="gateway")

# The mark a stored recording's row starts with (gateway/bus.py audio_mark,
# audio_not_read), then a space: "[voice] ", "[audio Song — Band not read] ".
_RECORDING = re.compile(r"^\[(?:voice|audio [^\]\n]+?)( not read)?\](?= |$)")


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
            # The endpoint's words, without the key it may echo or the
            # file's name (the user's words) it may quote: this is logged.
            said = _message(resp)
            said = summarize_error(said, f"{audio.filename}\n{audio.name}", [self._key]) if said else ""
            raise TranscriptionError(f"transcription refused: HTTP {resp.status_code} {said}".rstrip())
        try:
            body: Any = resp.json()
        except ValueError as exc:
            raise TranscriptionError("transcription answer is not JSON") from exc
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str):
            raise TranscriptionError("transcription answer has no text")
        return text.strip()


def with_transcript(said: str, audio: Audio, words: str) -> str:
    """The words of a message (or a forward) whose recording was heard:
    what was said with it (a caption), then the transcript; an audio
    file's marked as its transcript (:data:`TRANSCRIPT`)."""
    return "\n".join(w for w in (said.strip(), TRANSCRIPT if audio.name else "", words) if w)


def recording_mark(stored: str) -> str:
    """The mark of a recording a stored user message starts with (``[voice]``,
    ``[audio NAME not read]``); "" for none."""
    m = _RECORDING.match(stored)
    return m.group(0) if m else ""


def recaptioned(stored: str, words: str, caption_chars: int | None) -> str | None:
    """The stored row of a recording (``[voice] caption\ntranscript``, as
    :func:`with_transcript` made it, or ``[voice not read] caption``) with
    its caption now ``words`` and the rest as stored; None when ``stored``
    is not such a row or where its caption ends cannot be told.

    ``caption_chars``: how long the caption was, as the channel kept it
    (None: not known). Without it, a row is split only where its form
    leaves one reading: a recording not heard holds its caption only; a
    voice message's row on one line is its transcript alone; an audio
    file's caption ends where its one ``[transcript]`` line starts."""
    m = _RECORDING.match(stored)
    if m is None:
        return None
    mark, rest = m.group(0), stored[m.end() + 1 :]
    if m.group(1):  # not heard: no transcript, the words are all caption
        return f"{mark} {words}".strip()
    split = f"\n{TRANSCRIPT}\n"
    if caption_chars is not None:
        if caption_chars < 0 or (caption_chars and rest[caption_chars : caption_chars + 1] != "\n"):
            return None  # changed since in a way the kept length does not describe
        tail = rest[caption_chars + 1 :] if caption_chars else rest
    elif mark == "[voice]":
        if "\n" in rest:
            return None  # a caption then the transcript, or a transcript of several lines
        tail = rest
    elif rest.startswith(split[1:]):
        tail = rest
    elif rest.count(split) == 1:
        tail = rest[rest.index(split) + 1 :]
    else:
        return None
    if not tail or (mark != "[voice]" and not tail.startswith(split[1:])):
        return None  # a recording heard keeps its transcript: this row is not one
    return f"{mark} {words}\n{tail}" if words else f"{mark} {tail}"


def not_heard_note(audio: Audio, *, zh: bool) -> str:
    """What the user is told when the recording they sent could not be transcribed."""
    if not audio.name:
        return ("抱歉，这条语音我没听清。请重新发送，或者直接打字。" if zh
                else "Sorry, I could not make out that voice message. Please send it again or type it.")
    return (f"抱歉，音频文件 {audio.name} 没能转写出来，请重新发送。" if zh
            else f"Sorry, I could not transcribe the audio file {audio.name}. Please send it again.")


def forwarded_not_heard_note(missed: Sequence[Audio], *, zh: bool, rest: bool) -> str:
    """... and when recordings they forwarded could not be (``rest``: there
    is more to answer, and it is answered without them)."""
    files = [a.name for a in missed if a.name]
    if zh:
        what = f"转发的音频文件 {'、'.join(files)}" if files and len(files) == len(missed) else "转发的语音"
        return f"抱歉，{what}我没听清。" + ("其余内容我先照常回复。" if rest else "")
    if files and len(files) == len(missed):
        what = f"the forwarded audio file {files[0]}" if len(files) == 1 else "the forwarded audio files " + ", ".join(files)
    else:
        what = "the forwarded voice message" if len(missed) == 1 else "the forwarded voice messages"
    return f"Sorry, I could not make out {what}." + (" I am answering the rest without it." if rest else "")


async def hear_forwarded(
    transcriber: Transcriber | None, items: Sequence[Forwarded]
) -> tuple[tuple[Forwarded, ...], list[Audio]]:
    """``items`` (a message's forwards) with each recording the channel
    attached turned into its words, still its author's: its mark
    (``[voice]``, ``[audio NAME]``) and the caption it came with, then the
    transcript (:func:`with_transcript`); one that could not be transcribed
    (or with ``transcriber`` None) becomes ``[voice not read]`` (``[audio
    NAME not read]``). Every recording is dropped. Returns them and the
    recordings not heard. The recordings are transcribed at once: a burst
    may hold several, and the user waits for all."""

    async def hear(item: Forwarded) -> tuple[Forwarded, Audio | None]:
        audio = item.audio
        if audio is None:
            return item, None
        said = item.text.removeprefix(audio_mark(audio.name)).strip()  # its caption, if any
        words = ""
        try:
            if transcriber is None:
                raise TranscriptionError("agent.transcription is off")
            words = await transcriber.transcribe(audio)
        except TranscriptionError as exc:
            log.warning("forwarded recording not transcribed", error=str(exc))
        if not words:
            return dataclasses.replace(item, text=f"{audio_not_read(audio.name)} {said}".strip(), audio=None), audio
        text = f"{audio_mark(audio.name)} {with_transcript(said, audio, words)}"
        return dataclasses.replace(item, text=text, audio=None), None

    heard = await asyncio.gather(*(hear(i) for i in items))
    return tuple(i for i, _ in heard), [a for _, a in heard if a is not None]


def _message(resp: httpx.Response) -> str:
    try:
        error = resp.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return str(error.get("message", "")) if isinstance(error, dict) else ""
