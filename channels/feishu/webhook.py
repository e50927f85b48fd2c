"""Event intake by webhook: Feishu POSTs events to our HTTP endpoint.

What Feishu does, and what we check (in this order):

1. With an encrypt key configured, ``X-Lark-Signature`` must equal
   sha256(timestamp + nonce + encrypt_key + raw body) -> else 401, checked
   before anything is decrypted. The body is ``{"encrypt": base64}``:
   AES-256-CBC, key = sha256(encrypt key), the first 16 bytes are the IV,
   PKCS#7 padding. Undecryptable -> 400.
2. ``url_verification`` (sent once when the URL is saved in the console,
   unsigned): answer ``{"challenge": ...}`` after checking the token. With
   an encrypt key, any other unsigned request, and any failure of one
   (padding, JSON, token), gets the same 401: different answers to
   unsigned ciphertext would be a padding oracle.
3. Events: the verification token in the payload must match -> else 401.
4. An event created before what the event-id dedup surely remembers
   (``remembered_after``: 7 h back, less on a bot so busy that ids left
   it for room) -> 401: its id may have left the dedup, so a captured
   delivery replayed then would be taken as new. ``header.create_time`` is
   inside the signed body, and Feishu keeps it across its retries (the
   last about 6 h after the event), so they still pass.
5. Accepted events get 200 at once; Feishu retries anything else, and the
   event id dedup upstream absorbs those retries. An event the durable
   inbox cannot write (gateway.db full) gets 503, so Feishu retries it.

We decrypt with pycryptodome (lark-oapi's own dependency) instead of
lark-oapi's helpers so webhook mode does not import the whole SDK
(~2 s, ~170 MB). No key, token or body ever reaches the log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web
from Crypto.Cipher import AES

from gateway.bus import NotKept

__all__ = ["EventHandler", "WebhookError", "WebhookReceiver", "decrypt_event", "sign"]

EventHandler = Callable[[dict[str, Any]], Awaitable[None]]


class WebhookError(Exception):
    """``reason`` goes to the log; ``answer`` (default: the reason) to the sender."""

    def __init__(self, status: int, reason: str, answer: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.answer = reason if answer is None else answer


BAD_SIGNATURE = "bad X-Lark-Signature"


def _aes_key(encrypt_key: str) -> bytes:
    return hashlib.sha256(encrypt_key.encode()).digest()


def decrypt_event(encrypt_key: str, encrypted: str) -> str:
    try:
        raw = base64.b64decode(encrypted, validate=True)
    except (ValueError, TypeError) as exc:
        raise ValueError("encrypt field is not base64") from exc
    if len(raw) < 32 or len(raw) % 16:
        raise ValueError("ciphertext has an invalid length")
    plain = AES.new(_aes_key(encrypt_key), AES.MODE_CBC, raw[:16]).decrypt(raw[16:])
    pad = plain[-1]
    if not 1 <= pad <= 16 or plain[-pad:] != bytes([pad]) * pad:
        raise ValueError("invalid padding (wrong encrypt key?)")
    try:
        return plain[:-pad].decode()
    except UnicodeDecodeError as exc:
        raise ValueError("decrypted event is not UTF-8 (wrong encrypt key?)") from exc


def sign(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


class WebhookReceiver:
    def __init__(
        self,
        *,
        verification_token: str,
        encrypt_key: str,
        on_event: EventHandler,
        remembered_after: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``remembered_after()``: wall-clock seconds; an event created at or
        before it is refused (None: any age). ``clock``: wall-clock seconds,
        to tell the refusal by how old such an event is allowed to be."""
        self._token = verification_token
        self._encrypt_key = encrypt_key
        self._remembered_after = remembered_after
        self._clock = clock
        self._on_event = on_event
        self._log = structlog.get_logger(channel="feishu", component="webhook")

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        # With a key, only the URL check comes unsigned; everything else is signed.
        unsigned = bool(self._encrypt_key) and not request.headers.get("X-Lark-Signature")
        try:
            if self._encrypt_key and not unsigned:
                # Before decrypting: ciphertext nobody signed never reaches the
                # decryptor, whose failures would tell "bad padding" from "not
                # JSON": a padding oracle that decrypts a captured delivery.
                self._check_signature(request, body)
            try:
                payload = self._open(body)
                if payload.get("type") == "url_verification":
                    self._check_token(payload.get("token"))
                    return web.json_response({"challenge": payload.get("challenge", "")})
                if unsigned:
                    raise WebhookError(401, "an event without a signature")
            except WebhookError as exc:
                if unsigned:  # one answer for every failure: the log keeps the reason
                    raise WebhookError(401, f"unsigned request refused: {exc.reason}", BAD_SIGNATURE) from exc
                raise
            header = payload.get("header")
            self._check_token(header.get("token") if isinstance(header, dict) else payload.get("token"))
            self._check_age(header)
        except WebhookError as exc:
            self._log.warning("feishu webhook request rejected", reason=exc.reason, status=exc.status, remote=request.remote)
            return web.json_response({"error": exc.answer}, status=exc.status)
        try:
            await self._on_event(payload)
        except NotKept:
            # gateway.db full: not taken, so not a 200: Feishu retries (the
            # last about 6 h after the event), by when there may be room.
            return web.json_response({"error": "not taken; send it again"}, status=503)
        return web.json_response({})

    def _open(self, body: bytes) -> dict[str, Any]:
        try:
            outer = json.loads(body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            # RecursionError: nested too deep ("[[[[..."), no ValueError
            raise WebhookError(400, "body is not JSON") from exc
        if not isinstance(outer, dict):
            raise WebhookError(400, "body is not a JSON object")
        encrypted = outer.get("encrypt")
        if self._encrypt_key and not isinstance(encrypted, str):
            # With a key configured Feishu always encrypts; plain events are forged.
            raise WebhookError(400, "event is not encrypted but an encrypt key is configured")
        if encrypted is None:
            return outer
        if not self._encrypt_key:
            raise WebhookError(400, "event is encrypted but no encrypt key is configured")
        try:
            inner = json.loads(decrypt_event(self._encrypt_key, str(encrypted)))
        except (ValueError, json.JSONDecodeError) as exc:
            raise WebhookError(400, f"cannot decrypt event: {exc}") from exc
        except RecursionError as exc:
            raise WebhookError(400, "decrypted event is not JSON (nested too deep)") from exc
        if not isinstance(inner, dict):
            raise WebhookError(400, "decrypted event is not a JSON object")
        return inner

    def _check_signature(self, request: web.Request, body: bytes) -> None:
        # Feishu signs only when an encrypt key is set
        ts = request.headers.get("X-Lark-Request-Timestamp", "")
        nonce = request.headers.get("X-Lark-Request-Nonce", "")
        got = request.headers.get("X-Lark-Signature", "")
        # As bytes: compare_digest refuses str with non-ASCII (a forged header).
        expected = sign(ts, nonce, self._encrypt_key, body).encode()
        if not got or not hmac.compare_digest(got.encode("utf-8", "surrogateescape"), expected):
            raise WebhookError(401, BAD_SIGNATURE)

    def _check_age(self, header: object) -> None:
        # Schema 2.0 only: a v1 event (no header) carries no creation time we check.
        if self._remembered_after is None or not isinstance(header, dict):
            return
        try:
            created = int(header.get("create_time") or 0) / 1000
        except (TypeError, ValueError, OverflowError):
            raise WebhookError(400, "header.create_time is not a number") from None
        oldest = self._remembered_after()
        if created and created <= oldest:
            window = max(self._clock() - oldest, 0.0)
            shown = f"{window / 3600:.3g} h" if window >= 3600 else f"{window:.0f} s"
            raise WebhookError(401, f"event older than {shown}, what the dedup remembers (a replay?)")

    def _check_token(self, token: object) -> None:
        if not self._token:
            return
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self._token.encode()):
            raise WebhookError(401, "bad verification token")
