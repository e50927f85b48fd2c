"""Who may use the memory page: whoever holds ``gateway.admin.token``.

A request is let in with either

* ``Authorization: Bearer <token>`` (scripts, the JSON API), or
* the session cookie the login form sets after a correct token: HttpOnly,
  SameSite=Strict, path ``/memory``. Its value is ``issued.nonce.mac``, the
  MAC keyed with a key derived from the token, so changing the token ends
  every session. The server also keeps the live sessions it issued: signing
  out ends one there, so a copy of the cookie is refused too. With a store
  (:meth:`AdminAuth.attach`, the gateway's ``gateway.db``) they outlive a
  restart; the store holds only a keyed hash of each nonce, so its file
  alone gives no cookie. Sessions expire after ``session_ttl`` seconds.

Every comparison is constant-time (``hmac.compare_digest``).

A state-changing request (POST) made with the cookie must carry the CSRF
token of its session (form field ``csrf`` or header ``X-CSRF-Token``), and
an ``Origin`` header, when sent, must be this server. Bearer requests need
no CSRF token: a browser never adds that header on its own.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from aiohttp import web

from ._store import AdminStore

__all__ = ["COOKIE", "AdminAuth", "FailedAttempts", "Identity", "same_origin"]

COOKIE = "myclaw_admin"
COOKIE_PATH = "/memory"
STEPPED_BACK = 24 * 3600  # the most a session's time of issue may be ahead of the clock (an NTP step back)


@dataclass(frozen=True)
class Identity:
    """An authenticated request: how it proved itself, and the CSRF token
    its forms must echo ('' for Bearer requests, which need none)."""

    via: str  # "bearer" | "cookie"
    csrf: str
    session: str = ""  # the cookie's value, to end it on sign-out


class FailedAttempts:
    """Wrong tokens per client address: after ``limit`` within ``window``
    seconds the address is refused until the oldest of them is ``window``
    old. A 16-character token cannot be guessed anyway; this keeps a
    scanner from trying, and from filling the log. Bounded: the least
    recently failing addresses are forgotten first."""

    def __init__(
        self, limit: int = 10, window: float = 300.0, *, clock: Callable[[], float] = time.monotonic, max_clients: int = 10_000
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._max_clients = max_clients
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, who: str) -> float:
        """Seconds until ``who`` may try again (0: now)."""
        times = self._failures.get(who)
        if times is None:
            return 0.0
        now = self._clock()
        _clamp(times, now)
        while times and now - times[0] >= self.window:
            times.popleft()
        if not times:
            del self._failures[who]
            return 0.0
        return self.window - (now - times[0]) if len(times) >= self.limit else 0.0

    def failed(self, who: str, at: float | None = None) -> None:
        """One more wrong token from ``who``, now or ``at`` (taken up from a store)."""
        times = self._failures.pop(who, None) or deque(maxlen=self.limit)
        if at is None:
            _clamp(times, at := self._clock())
        times.append(at)
        self._failures[who] = times  # most recent last
        while len(self._failures) > self._max_clients:
            self._failures.popitem(last=False)


def _clamp(times: deque[float], now: float) -> None:
    """Failures counted "after" ``now``: the wall clock was stepped back
    since (NTP). Taken as now, so the lockout lasts its window from here,
    not the window and the step."""
    if times and times[-1] > now:
        kept = [min(t, now) for t in times]
        times.clear()
        times.extend(kept)


def _mac(key: bytes, msg: str) -> str:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).hexdigest()


class AdminAuth:
    def __init__(
        self, token: str, *, session_ttl: float = 12 * 3600, clock: Callable[[], float] = time.time, max_sessions: int = 1000
    ) -> None:
        if len(token.strip()) < 16:
            raise ValueError("the admin token must be at least 16 characters")
        self._token = token.encode("utf-8")
        self._key = hmac.new(self._token, b"myclaw admin session v1", hashlib.sha256).digest()
        self.session_ttl = session_ttl
        self._clock = clock
        # The wall clock, not a monotonic one: lockouts are kept across restarts.
        self.attempts = FailedAttempts(clock=clock)
        # Live sessions (the keyed hash of their nonce) -> when they expire,
        # oldest first. Bounded: only the token's holder signs in, and the
        # oldest session goes first.
        self._sessions: OrderedDict[str, float] = OrderedDict()
        self._max_sessions = max_sessions
        self._store: AdminStore | None = None

    async def attach(self, store: AdminStore) -> None:
        """Keep sessions and lockouts in ``store`` from now on, taking up the
        live ones it kept (a session a previous process issued)."""
        now = self._clock()
        kept = dict(await store.sessions(now))
        for h, expires in self._sessions.items():
            await store.add_session(h, expires)
        kept.update(self._sessions)
        self._sessions = OrderedDict(sorted(kept.items(), key=lambda kv: kv[1]))
        for who, at in await store.failures(now - self.attempts.window):
            self.attempts.failed(who, at)
        self._store = store

    # -- the token ------------------------------------------------------------

    def token_ok(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode("utf-8", "surrogatepass"), self._token)

    async def failed(self, who: str) -> None:
        """A wrong token from ``who`` (counted towards its lockout)."""
        self.attempts.failed(who)
        if self._store is not None:
            now = self._clock()
            await self._store.add_failure(who, now, keep=self.attempts.limit, since=now - self.attempts.window)

    # -- sessions -------------------------------------------------------------

    def _id_hash(self, nonce: str) -> str:
        """What the server keeps of a session: keyed, so the stored value is
        no use without the token."""
        return _mac(self._key, "sid." + nonce)

    async def new_session(self) -> str:
        now = self._clock()
        gone: list[str] = []
        while self._sessions and next(iter(self._sessions.values())) < now:
            gone.append(self._sessions.popitem(last=False)[0])  # expired
        while len(self._sessions) >= self._max_sessions:
            gone.append(self._sessions.popitem(last=False)[0])
        nonce = secrets.token_hex(16)
        h = self._id_hash(nonce)
        self._sessions[h] = int(now) + self.session_ttl
        if self._store is not None:
            await self._store.end_sessions(gone)
            await self._store.add_session(h, self._sessions[h])
        head = f"{int(now)}.{nonce}"
        return f"{head}.{_mac(self._key, 'session.' + head)}"

    def _nonce(self, value: str) -> str | None:
        """The nonce of a cookie value this key signed, else None. The MAC is
        checked first: without the key no one can probe for live nonces."""
        head, _, mac = value.rpartition(".")
        issued, _, nonce = head.partition(".")
        if not issued.isdigit() or not hmac.compare_digest(mac.encode(), _mac(self._key, "session." + head).encode()):
            return None
        # Issued "after" now: the clock was stepped back since (NTP), not a
        # session from the future (the MAC is ours). It lasts its time on the
        # clock that issued it; refused, the operator was signed out at once.
        # Up to a day ahead: a clock once set years ahead gives no cookie for years.
        if not -STEPPED_BACK <= self._clock() - int(issued) <= self.session_ttl:
            return None
        return nonce

    def session_ok(self, value: str) -> bool:
        nonce = self._nonce(value)
        return nonce is not None and self._id_hash(nonce) in self._sessions

    async def end_session(self, value: str) -> None:
        """Sign-out: the session is refused from now on, whoever holds it."""
        nonce = self._nonce(value)
        if nonce is not None:
            h = self._id_hash(nonce)
            self._sessions.pop(h, None)
            if self._store is not None:
                await self._store.end_sessions([h])

    def csrf_for(self, session: str) -> str:
        return _mac(self._key, "csrf." + session)[:32]

    # -- requests -------------------------------------------------------------

    def identify(self, request: web.Request) -> tuple[Identity | None, str]:
        """The request's identity, or None and why it was refused (for the
        log; never containing what was sent)."""
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "bearer":
                return None, "unsupported authorization scheme"
            if self.token_ok(value.strip()):
                return Identity("bearer", ""), ""
            return None, "wrong bearer token"
        session = request.cookies.get(COOKIE, "")
        if not session:
            return None, "no credentials"
        if not self.session_ok(session):
            return None, "invalid or expired session"
        return Identity("cookie", self.csrf_for(session), session), ""

    def csrf_ok(self, identity: Identity, request: web.Request, sent: str) -> bool:
        if not same_origin(request):
            return False
        if identity.via == "bearer":
            return True
        sent = sent or request.headers.get("X-CSRF-Token", "")
        return bool(sent) and hmac.compare_digest(sent.encode("utf-8", "surrogatepass"), identity.csrf.encode())

    def set_cookie(self, request: web.Request, response: web.StreamResponse, session: str) -> None:
        response.set_cookie(
            COOKIE,
            session,
            path=COOKIE_PATH,
            max_age=int(self.session_ttl),
            httponly=True,
            samesite="Strict",
            secure=is_https(request),
        )


def is_https(request: web.Request) -> bool:
    """Behind a TLS-terminating reverse proxy the cookie gets ``Secure``: the
    server takes the scheme from ``X-Forwarded-Proto`` of a listed proxy only
    (``gateway.trustedProxies``, gateway/http.py)."""
    return request.secure


def same_origin(request: web.Request) -> bool:
    """No ``Origin`` header (curl, old browsers: CSRF token still checked),
    or one naming this host."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    if origin == "null":
        return False
    # request.host is X-Forwarded-Host only when a listed proxy sent it (gateway/http.py).
    return urlsplit(origin).netloc.lower() == request.host.lower()
