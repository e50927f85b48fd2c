"""Provider text made fit for a log line or an exception message.

Providers echo what they were sent in their error bodies: "Incorrect API
key provided: sk-proj-abc…wxyz", a header, a piece of the prompt. Every
client that keeps such text (the chat client, the memory model's, the
embeddings' and the transcription client) passes it through
:func:`scrub_provider_text` with the keys it knows, so the text is safe
wherever it goes next, whether or not the logging set up its own
redaction (``gateway/logging.py``, which shares :data:`KEY_SHAPES`).

It lives in ``memory`` because ``memory`` must not import ``gateway``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import httpx

__all__ = ["KEY_SHAPES", "PROVIDER_TEXT_MAX", "provider_error_text", "scrub_provider_text"]

# What API keys and tokens look like, also when a provider masks part of
# one ("sk-proj-****…wxyz" still gives away its ends).
KEY_SHAPES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=*-]{6,}"), "Bearer ***"),
    (re.compile(r"\bsk-[A-Za-z0-9_*.…-]{4,}"), "sk-***"),
    (re.compile(r"\b(?:gsk|xai|rk)[-_][A-Za-z0-9_*.…-]{12,}"), "***"),  # Groq, xAI, restricted keys
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), "***"),  # Google API keys
]

PROVIDER_TEXT_MAX = 300
"""Characters of a provider's text kept: enough to say what went wrong,
too few to carry a prompt into the log."""


def scrub_provider_text(text: str, secrets: Iterable[str] = (), *, limit: int = PROVIDER_TEXT_MAX) -> str:
    """``text`` on one line, without ``secrets`` (the keys the caller
    sends; values under 6 characters are ignored, they would blank ordinary
    words), with key-shaped tokens masked, cut at ``limit`` characters."""
    text = " ".join(str(text).split())
    # Longest first: a secret that contains another is replaced whole.
    for s in sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True):
        text = text.replace(s, "***")
    for pattern, repl in KEY_SHAPES:
        text = pattern.sub(repl, text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def provider_error_text(resp: httpx.Response) -> str:
    """The provider's words for an error, whole: the ``error.message`` of
    a JSON body, a proxy's HTML error page as its text, else the body.
    Scrub it (:func:`scrub_provider_text`) before it goes anywhere: cut
    only once scrubbed, so a key is never cut in two halves that no longer
    match it."""
    try:
        err = resp.json().get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    except (ValueError, AttributeError):
        pass
    if "html" in resp.headers.get("content-type", "").lower():
        # A proxy's or gateway's error page: its words, not its markup.
        return " ".join(_TAG.sub(" ", _HIDDEN.sub(" ", resp.text)).split())
    return resp.text


_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")
