"""The routes of the memory page and its JSON API on the gateway's
:class:`~gateway.http.HttpServer`.

Pages (GET renders, POST changes and redirects back with a short notice)::

    GET  /memory                 users; with ?user= stats, list (?status=, ?category=, ?has=, ?offset=) or search (?q=)
    GET  /memory/item?id=        one memory: provenance, supersede chain, its log entries
    GET  /memory/edit?id=&back=  one memory's edit form (a card's Edit without JavaScript)
    GET  /memory/log?user=       the user's change log (memory_log), older with ?before=<entry id>
    GET  /memory/export?user=    the person's memories as a Markdown file, their handles' too (as ``myclaw memory export``)
    GET  /memory/lang?set=en|zh|zh-Hant  the page's language (a cookie; no sign-in needed), back to ?back=
    GET  /memory/style-<hash>.css  the page's stylesheet (no sign-in needed; cached for good: the hash is its content's)
    POST /memory/login           token -> session cookie;  POST /memory/logout
                                 (an add or edit sent signed out comes back with its kept_* fields: its form, as typed)
    GET  /memory/erase | archive-all | erase-all ?id= or ?user=, &back=   the confirmation page (a link)
    POST /memory/add | edit | archive | restore | erase | archive-all | erase-all | retry-set-aside | unshare
    POST /memory/undo            token= (from an edit's, archive-all's or unshare's notice): put back what it changed
    GET  /memory/group?group=<channel>:<chat_id>   a group's own notes (memory/groupnotes.py), each with Edit and Erase
    GET  /memory/group-note/edit | erase ?id=&group=&back=   one group note's edit form, its erasure's confirmation
    POST /memory/group-note/edit | erase   id=, group= (+ content, search_terms | confirm=yes): that group's note only
    GET  /memory/forget-group?group=  /  POST /memory/forget-group   a group's whole memory, after a confirmation

``erase`` and ``archive-all`` without ``confirm=yes`` answer with a
confirmation page; ``erase-all`` also needs the user name typed again.
``erase`` with ``cascade=yes`` also erases the memory's older versions and
the Core Memory entries built on it (the confirmation page lists them).

JSON API (same actions, ``Authorization: Bearer <token>``; a browser
session may use it too with the ``X-CSRF-Token`` header on POST)::

    GET  /memory/api/users | stats?user= | memories?user=&status=&category=&has=&limit=&offset=
    GET  /memory/api/search?user=&q=&limit= | memory?id= | log?user=
    POST /memory/api/add | edit | archive | restore | erase | unshare | undo     (JSON body)

``erase`` takes ``"cascade": true`` to erase the older versions and the
Core Memory entries built on the memory too; the answer lists them and the
linked records kept. ``unshare`` takes a fact back from every group it was
shared with (``/share``); the answer's ``was`` names those groups.
``edit`` and ``unshare`` answer with ``undo``, a token (null when nothing
changed) that ``undo`` takes (``{"token": ..., "user": ...}``, ``user``
optional: when given, an undo of another user's memory is refused and
kept) to put back what they changed, once, within 15 minutes, in this
process only (the page's Undo; an archive's undo is ``restore``).
"""

from __future__ import annotations

import contextlib
import math
import secrets
from datetime import UTC, tzinfo
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import structlog
from aiohttp import web

from gateway.chattitles import ChatTitles
from gateway.datalock import ChatRunning
from gateway.cli._common import memory_dict, near_handles
from gateway.export import MIME, Spool, UserExport, write_markdown
from gateway.http import HttpServer
from memory.groupowner import logged_owner
from memory.identity import IdentityMap
from memory.service import SqliteMemory
from memory.sharing import shared_places
from memory.types import GLOBAL_OWNER, Category, Memory, Status

from ._actions import (EDITABLE, AdminError, Conflict, Edited, Invalid, MemoryAdmin, NotFound, editable_values,
                       person, parse_group)
from ._auth import COOKIE, COOKIE_PATH, AdminAuth, Identity, is_https, same_origin
from ._i18n import LANG_COOKIE, LANGS, Words, pick_lang
from ._undo import ArchiveAllUndo, EditUndo, Undoable, UndoStore, UnshareUndo
from ._views import (
    CSS_BYTES,
    DONE,
    KEPT,
    STYLESHEET,
    PageContext,
    clear_confirm_page,
    forget_group_page,
    group_note_edit_page,
    group_note_erase_page,
    group_page,
    count_memories,
    detail_page,
    edit_page,
    erase_confirm_page,
    layout,
    log_page,
    login_page,
    main_page,
    message_page,
    retry_page,
    url,
    overview_body,
)

__all__ = ["MemoryWeb"]

log = structlog.get_logger(component="web")

Data = dict[str, Any]
PageFn = Callable[[web.Request, Identity, PageContext, Data], Awaitable[web.StreamResponse]]
ApiFn = Callable[[web.Request, Data], Awaitable[Any]]

MAX_LIMIT = 200
LOG_PAGE = 200  # change log entries a page
MAX_HAS = 200  # characters of the list's words filter (a memory holds at most 4000)
EXPORT_IN_MEMORY = 1 << 20  # an export larger than this is spooled to an anonymous temporary file

_R = TypeVar("_R", bound=web.StreamResponse)


def _security_headers(response: _R, nonce: str = "") -> _R:
    h = response.headers
    if nonce:
        h["Content-Security-Policy"] = (
            f"default-src 'none'; style-src 'self'; script-src 'nonce-{nonce}'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
    h["X-Content-Type-Options"] = "nosniff"
    h["X-Frame-Options"] = "DENY"
    h["Referrer-Policy"] = "no-referrer"
    h["Cache-Control"] = "no-store"
    return response


def _html(text: str, nonce: str, status: int = 200) -> web.Response:
    return _security_headers(web.Response(text=text, status=status, content_type="text/html", charset="utf-8"), nonce)


def _json(obj: Any, status: int = 200) -> web.Response:
    return _security_headers(web.json_response(obj, status=status))


# SQLite's INTEGER is 64-bit: a larger id or offset would make the driver
# raise OverflowError (a 500 with a traceback) instead of a 400 that says why.
_SQLITE_MAX_INT = 2**63 - 1


def _int(value: Any, name: str, *, default: int | None = None, lo: int = 0, hi: int = _SQLITE_MAX_INT) -> int:
    if value is None or value == "":
        if default is None:
            raise Invalid(f"{name} is required", key="err_required", name=name)
        return default
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        # JSON true is not the id 1, nor 2.7 the id 2.
        raise Invalid(f"{name} must be an integer, got {value!r}", key="err_int", name=name, value=repr(value))
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):
        raise Invalid(f"{name} must be an integer, got {value!r}", key="err_int", name=name,
                      value=repr(value)[:40]) from None
    if n < lo or n > hi:
        shown = "∞" if hi == _SQLITE_MAX_INT else hi
        raise Invalid(f"{name} must be within [{lo}, {shown}], got {str(value)[:40]}", key="err_range", name=name, lo=lo,
                      hi=shown, value=str(value)[:40])
    return n


def _status(value: str | None) -> Status | None:
    if not value or value == "active":
        return Status.ACTIVE
    if value == "all":
        return None
    try:
        return Status(value)
    except ValueError:
        raise Invalid(f"unknown status {value!r} (active, archived, superseded or all)", key="err_status",
                      value=repr(value)) from None


def _category(value: str | None) -> Category | None:
    if not value:
        return None
    try:
        return Category(value)
    except ValueError:
        raise Invalid(f"unknown category {value!r} (one of {', '.join(c.value for c in Category)})", key="err_category",
                      value=repr(value), choices=", ".join(c.value for c in Category)) from None


def _user(data: Data, *, required: bool = True) -> str | None:
    u = data.get("user")
    if u is None or (isinstance(u, str) and not u.strip()):
        if required:
            raise Invalid("user is required", key="err_required", name="user")
        return None
    if not isinstance(u, str):
        raise Invalid("user must be a string", key="err_user_string")
    return person(u)  # a group's own memory is never taken for a person's


def safe_back(value: Any, default: str = "/memory") -> str:
    """Where to go after a POST: only a path of this page (no open redirect)."""
    if not isinstance(value, str) or not value.startswith("/memory") or "\\" in value:
        return default
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or not (parts.path == "/memory" or parts.path.startswith("/memory/")):
        return default
    if any(ord(c) < 32 for c in value):
        return default
    return value


NOTICE_KEYS = ("done", "n", "undo")  # a notice's part of an address: not kept by the next one


def _with_notice(back: str, done: str, n: int, anchor: str = "", *, undo: str = "") -> str:
    parts = urlsplit(back)
    q = [(k, v) for k, v in parse_qsl(parts.query) if k not in NOTICE_KEYS]
    q += [("done", done), ("n", str(n))] + ([("undo", undo)] if undo else [])
    return f"{parts.path}?{urlencode(q)}{anchor}"


def _redirect(location: str) -> web.Response:
    return _security_headers(web.Response(status=303, headers={"Location": location}))


class MemoryWeb:
    """The memory page's handlers; :meth:`mount` registers them."""

    def __init__(
        self, admin: MemoryAdmin, auth: AdminAuth, *, page_size: int = 20, tz: tzinfo = UTC, undo: UndoStore | None = None,
        identities: IdentityMap | None = None,
    ) -> None:
        self.admin = admin
        # memory.identities: a person's export holds their handles' rows
        # from before the mapping too (merge-identities not run yet), as /export does.
        self.identities = identities or IdentityMap()
        self.auth = auth
        self.undo = undo or UndoStore()
        self.page_size = page_size
        self.tz = tz
        self.titles: ChatTitles | None = None  # groups named by title (set once gateway.db is open)
        # How many of a user's messages wait in the inbox to be answered, for
        # the export (set once gateway.db is open: Inbox.owned).
        self.unanswered: Callable[[str], Awaitable[int]] | None = None
        # What the gateway keeps of a user beside memory (UserData.kept: settings,
        # history, jobs, messages waiting), in their export as the CLI's has it.
        self.kept: Callable[[str], Awaitable[UserExport]] | None = None
        self._mounted: list[tuple[str, str]] = []
        # Held while erase-all runs (the App's ChatLock.erasing): refused beside a `myclaw chat`.
        self.erasing: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext

    async def _name_groups(self, ctx: PageContext, memories: Iterable[Memory]) -> None:
        """The titles of the groups these memories name (where said, where
        shared, where a newer fact is read instead), and which of those newer
        facts still exist (one erased no longer stands in: memory/scope.py)."""
        memories = list(memories)
        ctx.replacing = set(await self.admin.engine.get_many(
            sorted({i for m in memories for _, i in m.provenance.replaced_in})))
        if self.titles is None:
            return
        places = {p for m in memories for p in (*m.provenance.shared, f"{m.provenance.channel}:{m.provenance.chat_id}",
                                                *(g for g, _ in m.provenance.replaced_in))}
        ctx.names.update(await self.titles.names(places))  # the picker's groups too

    def routes(self) -> list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]]:
        page, api = self._page, self._api
        return [
            ("GET", "/memory", page(self._main)),
            ("GET", "/memory/item", page(self._item)),
            ("GET", "/memory/edit", page(self._edit_form)),
            # The confirmations, reached by links: Back after the POST that follows meets no resubmission.
            ("GET", "/memory/erase", page(self._confirm(self._erase))),
            ("GET", "/memory/archive-all", page(self._confirm(self._archive_all))),
            ("GET", "/memory/erase-all", page(self._confirm(self._erase_all))),
            ("GET", "/memory/forget-group", page(self._confirm(self._forget_group))),
            ("GET", "/memory/group", page(self._group)),
            ("GET", "/memory/group-note/edit", page(self._group_note_form)),
            ("GET", "/memory/group-note/erase", page(self._confirm(self._erase_group_note))),
            ("GET", "/memory/log", page(self._log)),
            ("GET", "/memory/export", page(self._export)),
            ("POST", "/memory/login", self._login),
            ("GET", "/memory/lang", self._lang),
            ("GET", STYLESHEET, self._stylesheet),
            ("POST", "/memory/logout", page(self._logout, post=True)),
            ("POST", "/memory/add", page(self._add, post=True)),
            ("POST", "/memory/edit", page(self._edit, post=True)),
            ("POST", "/memory/archive", page(self._archive, post=True)),
            ("POST", "/memory/restore", page(self._restore, post=True)),
            ("POST", "/memory/erase", page(self._erase, post=True)),
            ("POST", "/memory/archive-all", page(self._archive_all, post=True)),
            ("POST", "/memory/erase-all", page(self._erase_all, post=True)),
            ("POST", "/memory/forget-group", page(self._forget_group, post=True)),
            ("POST", "/memory/group-note/edit", page(self._edit_group_note, post=True)),
            ("POST", "/memory/group-note/erase", page(self._erase_group_note, post=True)),
            ("POST", "/memory/retry-set-aside", page(self._retry_set_aside, post=True)),
            ("POST", "/memory/unshare", page(self._unshare, post=True)),
            ("POST", "/memory/undo", page(self._undo, post=True)),
            ("GET", "/memory/api/users", api(self._api_users)),
            ("GET", "/memory/api/groups", api(self._api_groups)),
            ("GET", "/memory/api/stats", api(self._api_stats)),
            ("GET", "/memory/api/memories", api(self._api_memories)),
            ("GET", "/memory/api/search", api(self._api_search)),
            ("GET", "/memory/api/memory", api(self._api_memory)),
            ("GET", "/memory/api/log", api(self._api_log)),
            ("POST", "/memory/api/add", api(self._api_add, post=("user", *EDITABLE))),
            ("POST", "/memory/api/edit", api(self._api_edit, post=("id", "user", *EDITABLE))),
            ("POST", "/memory/api/archive", api(self._api_status("archive"), post=("id", "user"))),
            ("POST", "/memory/api/restore", api(self._api_status("restore"), post=("id", "user"))),
            ("POST", "/memory/api/erase", api(self._api_erase, post=("id", "user", "cascade"))),
            ("POST", "/memory/api/unshare", api(self._api_unshare, post=("id", "user"))),
            ("POST", "/memory/api/undo", api(self._api_undo, post=("token", "user"))),
        ]

    def mount(self, http: HttpServer) -> None:
        for method, path, handler in self.routes():
            http.add_route(method, path, handler)
            self._mounted.append((method, path))

    def unmount(self, http: HttpServer) -> None:
        for method, path in self._mounted:
            http.remove_route(method, path)
        self._mounted.clear()

    # -- guards ----------------------------------------------------------------

    async def _refused(self, request: web.Request, reason: str) -> None:
        # Never the token, the cookie or the Authorization header: only why.
        log.warning("memory page: request refused", path=request.path, method=request.method, remote=request.remote, reason=reason)
        if reason.startswith("wrong"):  # a token was tried and was wrong
            await self.auth.failed(request.remote or "?")

    async def _throttled(self, request: web.Request, *, as_json: bool) -> web.StreamResponse | None:
        wait = self.auth.attempts.retry_after(request.remote or "?")
        if wait <= 0:
            return None
        headers = {"Retry-After": str(max(1, math.ceil(wait)))}
        if as_json:
            text = Words()("too_many", seconds=math.ceil(wait))  # the API speaks English
            return web.json_response({"error": text}, status=429, headers=headers)
        # The page's own look and language, with no form: a token typed now would only be refused.
        nonce, t = secrets.token_urlsafe(16), _words(request, self.tz)
        kept, action, back = await _kept_in(request)
        if kept:
            # An add or edit sent after its session ended (or the sign-in
            # carrying one): kept in the sign-in form, to send after the wait.
            page = login_page(nonce, t=t, back=back, kept=kept, kept_action=action, wait=headers["Retry-After"])
        else:
            ctx = PageContext(nonce=nonce, csrf="", t=t)
            page = message_page(ctx, t("too_many_title"), t("too_many", seconds=headers["Retry-After"]))
        response = _html(page, nonce, status=429)
        response.headers.update(headers)
        return response

    def _page(self, fn: PageFn, *, post: bool = False) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handler(request: web.Request) -> web.StreamResponse:
            if (slow := await self._throttled(request, as_json=False)) is not None:
                return slow
            nonce = secrets.token_urlsafe(16)
            t = _words(request, self.tz)
            ident, why = self.auth.identify(request)
            if ident is None:
                await self._refused(request, why)
                # Signed in, the user lands where they were going (a bookmark, a
                # link) or, after a POST, on the page the form was on (only its
                # "back" is read: nothing the form asked for is done unasked).
                kept: dict[str, str] = {}
                if request.method == "GET":
                    back = safe_back(request.path_qs)
                else:
                    form = await request.post()
                    back = _strip_notice(safe_back(form.get("back")))
                    # What was typed rides along in the sign-in form; not another site's words.
                    if request.path in KEEPS and same_origin(request):
                        kept = _keepable(form, "")
                return _html(login_page(nonce, t=t, back=back, kept=kept, kept_action=request.path if kept else ""),
                             nonce, status=401)
            data: Data = dict(request.query)
            if post:
                form = await request.post()
                data = {k: v for k, v in form.items() if isinstance(v, str)}
                if not self.auth.csrf_ok(ident, request, data.get("csrf", "")):
                    await self._refused(request, "missing or wrong CSRF token")
                    ctx = PageContext(nonce=nonce, csrf=ident.csrf, t=t, back=_strip_notice(safe_back(data.get("back"))))
                    if request.path in ("/memory/add", "/memory/edit"):
                        # A tab left open across a new sign-in: nothing saved, and
                        # nothing typed lost; sent again, it carries this session's token.
                        ctx.users = await self.admin.users()
                        page = retry_page(ctx, t("refused"), t("form_expired_kept"), action=request.path, typed=data)
                    else:
                        page = message_page(ctx, t("refused"), t("form_expired"))
                    return _html(page, nonce, status=403)
            back = safe_back(data.get("back") if post else request.path_qs)
            ctx = PageContext(nonce=nonce, csrf=ident.csrf, back=_strip_notice(back), t=t)
            here = ctx.back
            try:
                ctx.users = await self.admin.users()
                ctx.groups = await self.admin.groups()
                if ctx.groups and self.titles is not None:
                    ctx.names.update(await self.titles.names(g.place for g in ctx.groups))
                return await fn(request, ident, ctx, data)
            except AdminError as exc:
                text = t(exc.key, **exc.fields) if exc.key and t.zh else str(exc)
                if post and request.path in ("/memory/add", "/memory/edit"):
                    page = retry_page(ctx, t("cannot"), text, action=request.path, typed=data)
                else:
                    # Back to the form's page, or the page a link came from (?back=), else the start.
                    page = message_page(ctx, t("cannot"), text, back=ctx.back if post or ctx.back != here else "/memory")
                return _html(page, nonce, status=exc.status)

        return handler

    def _api(self, fn: ApiFn, *, post: tuple[str, ...] = ()) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """``post``: a POST endpoint's JSON fields. Any other key is refused:
        a misspelt one ("importnce", "cascde") would otherwise be ignored
        and the action done with a default the caller did not mean."""

        async def handler(request: web.Request) -> web.StreamResponse:
            if (slow := await self._throttled(request, as_json=True)) is not None:
                return slow
            ident, why = self.auth.identify(request)
            if ident is None:
                await self._refused(request, why)
                return _json({"error": "unauthorized: send Authorization: Bearer <admin token>"}, status=401)
            data: Data = dict(request.query)
            if post:
                try:
                    body = await request.json()
                except (ValueError, RecursionError):  # RecursionError: nested too deep
                    return _json({"error": "the body must be a JSON object"}, status=400)
                if not isinstance(body, dict):
                    return _json({"error": "the body must be a JSON object"}, status=400)
                unknown = sorted(k for k in body if k not in post)
                if unknown:
                    return _json({"error": f"unknown field {unknown[0]!r} (this endpoint takes {', '.join(post)})"}, status=400)
                data = body
                if not self.auth.csrf_ok(ident, request, ""):
                    await self._refused(request, "missing or wrong CSRF token")
                    return _json({"error": "missing or wrong X-CSRF-Token"}, status=403)
            try:
                result = await fn(request, data)
            except AdminError as exc:
                return _json({"error": str(exc)}, status=exc.status)
            if isinstance(result, web.StreamResponse):
                return result
            return _json(result)

        return handler

    # -- login -----------------------------------------------------------------

    async def _login(self, request: web.Request) -> web.StreamResponse:
        if (slow := await self._throttled(request, as_json=False)) is not None:
            return slow
        nonce = secrets.token_urlsafe(16)
        t = _words(request, self.tz)
        if not same_origin(request):
            # Another site's page posting wrong tokens from the operator's
            # browser would lock the operator's own address out: not counted.
            await self._refused(request, "login posted from another site")
            ctx = PageContext(nonce=nonce, csrf="", t=t)
            return _html(message_page(ctx, t("refused"), t("login_elsewhere")), nonce, status=403)
        form = await request.post()
        token = form.get("token")
        action = form.get(KEPT + "action")
        kept = _keepable(form, KEPT) if action in KEEPS else {}
        action = action if kept and isinstance(action, str) else ""
        back = safe_back(form.get("back"))
        if not isinstance(token, str) or not self.auth.token_ok(token):
            await self._refused(request, "wrong token at login" if token else "empty login")
            return _html(login_page(nonce, failed=True, t=t, back=back, kept=kept, kept_action=action), nonce, status=401)
        session = await self.auth.new_session()
        if action:
            # The add or edit sent after the session ended: its form again as
            # typed, with this session's CSRF token; saved only when sent.
            ctx = PageContext(nonce=nonce, csrf=self.auth.csrf_for(session), t=t, back=back,
                              users=await self.admin.users())
            response: web.StreamResponse = _html(
                retry_page(ctx, t("kept_title"), t("kept_after_sign_in"), action=action, typed=kept, err=False), nonce)
        else:
            response = _redirect(back)
        self.auth.set_cookie(request, response, session)
        log.info("memory page: signed in", remote=request.remote, form_kept=bool(action))
        return response

    async def _stylesheet(self, request: web.Request) -> web.StreamResponse:
        """The page's style, the same for everyone (no sign-in): its address
        names its content, so a browser may keep it for good."""
        return web.Response(body=CSS_BYTES, content_type="text/css", charset="utf-8",
                            headers={"Cache-Control": "public, max-age=31536000, immutable"})

    async def _lang(self, request: web.Request) -> web.StreamResponse:
        """The language switch: remembered in a cookie (a year), so the page
        stays in the chosen language whatever the browser asks for."""
        lang = request.query.get("set", "")
        if lang not in LANGS:
            return _json({"error": "set must be one of " + ", ".join(LANGS)}, status=400)
        response = _redirect(safe_back(request.query.get("back")))
        response.set_cookie(LANG_COOKIE, lang, path=COOKIE_PATH, max_age=365 * 24 * 3600, httponly=True,
                            samesite="Lax", secure=is_https(request))
        return response

    async def _logout(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        if ident.session:  # a Bearer request has no session to end
            await self.auth.end_session(ident.session)
        response = _redirect("/memory")
        response.del_cookie(COOKIE, path=COOKIE_PATH)
        log.info("memory page: signed out", remote=request.remote)
        return response

    # -- pages -----------------------------------------------------------------

    async def _main(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        user = _user(data, required=False)
        ctx.flash = _notice(ctx.t, data)
        ctx.undo = _undo(ctx, data)
        ctx.undo_token = self._undo_token(ctx, data)
        if ctx.flash and data.get("done") in ANCHORED:
            ctx.flash_on = _notice_id(data)
        if user is None:
            return _html(layout(ctx, "memory", overview_body(ctx)), ctx.nonce)
        ctx.user = user
        stats = await self.admin.stats(user)
        renamed = await self.admin.engine.owned_project_aliases(user)
        query = str(data.get("q") or "").strip()
        status_text = str(data.get("status") or "active")
        if query:
            found = await self.admin.search(user, query, limit=50)
            replaced = await self.admin.replaced([m.id for m, _ in found.memories])
            await self._name_groups(ctx, (m for m, _ in found.memories))
            text = main_page(ctx, stats=stats, status=status_text, query=query, scored=found.memories, events=found.events,
                             replaced=replaced, renamed=renamed)
            return _html(text, ctx.nonce)
        status = _status(status_text)
        category = _category(str(data.get("category") or ""))
        has = " ".join(str(data.get("has") or "").split())[:MAX_HAS]
        offset = _int(data.get("offset"), "offset", default=0)
        rows = await self.admin.list(user, status=status, category=category, has=has, limit=self.page_size + 1,
                                     offset=offset)
        more, rows = len(rows) > self.page_size, rows[: self.page_size]
        total = await self.admin.count(user, status=status, category=category, has=has)
        replaced = await self.admin.replaced([m.id for m in rows])
        await self._name_groups(ctx, rows)
        text = main_page(
            ctx, stats=stats, status=status_text if status is not None else "all", query="", memories=rows,
            replaced=replaced, offset=offset, page_size=self.page_size, more=more, total=total,
            category=category.value if category else "", has=has, renamed=renamed,
        )
        return _html(text, ctx.nonce)

    async def _item(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        m = await self.admin.get(_int(data.get("id"), "id"))
        ctx.user = m.owner
        ctx.flash = _notice(ctx.t, data)
        ctx.undo = _undo(ctx, data)
        ctx.undo_token = self._undo_token(ctx, data)
        older, newer = await self.admin.chain(m.id)
        await self._name_groups(ctx, (m, *older, *newer))
        entries = await self.admin.memory_log([m.id, *(x.id for x in older), *(x.id for x in newer)])
        return _html(detail_page(ctx, m, older=older, newer=newer, log=entries), ctx.nonce)

    def _confirm(self, fn: PageFn) -> PageFn:
        """An action's confirmation page by GET: never the action itself
        (``confirm`` is dropped); Cancel and the action go back to ``?back=``."""
        async def go(request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
            user = _user(data, required=False)
            ctx.back = _strip_notice(safe_back(data.get("back"), url("/memory", user=user)))
            return await fn(request, ident, ctx, {k: v for k, v in data.items() if k != "confirm"})

        return go

    async def _edit_form(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        m = await self.admin.get(_int(data.get("id"), "id"))
        ctx.user = m.owner
        # Saved or cancelled, back to the list the Edit link was on.
        ctx.back = _strip_notice(safe_back(data.get("back"), f"/memory?{urlencode({'user': m.owner})}"))
        return _html(edit_page(ctx, m), ctx.nonce)

    async def _log(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        user = _user(data)
        ctx.user = user
        before = _int(data.get("before"), "before", default=0) or None
        entries = await self.admin.log(user or "", limit=LOG_PAGE + 1, before=before)
        more, entries = len(entries) > LOG_PAGE, entries[:LOG_PAGE]
        return _html(log_page(ctx, entries, older=entries[-1].id if more else None, paged=before is not None), ctx.nonce)

    async def _export(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        """The operator's Markdown export (gateway/export.py) of one user,
        written page by page into a :class:`Spool` (a large memory goes to an
        anonymous temporary file, not into RAM), then sent in chunks. Written
        whole first: a failure is a 500, never a file cut short."""
        asked = _user(data)
        assert asked is not None
        # The person, with their handles, as `myclaw memory export --user` resolves them.
        user = self.identities.resolve(*asked.split(":", 1)) if ":" in asked else asked
        handles = [h for h in self.identities.handles(user) if h != user]
        # An empty file of a misspelt handle would read as "nothing stored about them" (as the CLI refuses).
        owners = await self.admin.engine.owners()
        kept = self.kept if user != GLOBAL_OWNER else None
        # Someone memory holds nothing of yet may still have said something
        # (their first message being answered): that is theirs, as the CLI's export has it.
        if (user != GLOBAL_OWNER and not any(u in owners for u in (user, *handles))
                and not (kept is not None and (await kept(user)).beside_memory)):
            near = " / ".join(near_handles(user, owners))
            raise NotFound(f"nothing is stored about {user}, so there is nothing to export"
                           + (f" (did you mean {near}?)" if near else ""),
                           key="err_export_unknown_near" if near else "err_export_unknown",
                           user=user, near=near)
        now = self.admin.engine.clock.now()  # the clock the data is dated by (tests hand in theirs)
        spool = Spool(EXPORT_IN_MEMORY)
        try:
            titles = (await self.titles.names([p for u in (user, *handles)
                                                for p in await shared_places(self.admin.engine, u)])
                      if self.titles is not None else {})
            await write_markdown(spool.write, SqliteMemory(self.admin.engine, self.admin.retriever), [user, *handles],
                                 at=now.strftime("%Y-%m-%d %H:%M UTC"), renamed=self.admin.engine.owned_project_aliases,
                                 titles=titles, unanswered=self.unanswered, mapped=dict.fromkeys(handles, user),
                                 kept=kept)
        except BaseException:
            spool.close()
            raise
        name = f"myclaw-memory-{_file_part(user)}-{now.date().isoformat()}.md"
        # filename*: the user's own name (RFC 6266), for a name not in ASCII; filename for old clients.
        named = quote(f"myclaw-memory-{user}-{now.date().isoformat()}.md", safe="")
        attachment = spool.attachment(name, MIME)
        size = attachment.size
        try:
            response = _security_headers(web.StreamResponse(headers={
                "Content-Type": f"{MIME}; charset=utf-8",
                "Content-Disposition": f"attachment; filename=\"{name}\"; filename*=UTF-8''{named}",
                "Content-Length": str(size),
            }))
            await response.prepare(request)
            with attachment.open() as f:
                while chunk := f.read(1 << 16):
                    await response.write(chunk)
            await response.write_eof()
        finally:
            attachment.close()
        log.info("memory page: memories exported", owner=user, bytes=size)
        return response

    async def _add(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        user = _user(data)
        assert user is not None
        m, added = await self.admin.add(user, data)
        log.info("memory page: memory added", memory_id=m.id, owner=m.owner, added=added)
        parts = urlsplit(ctx.back)
        same_page = parts.path == "/memory" and dict(parse_qsl(parts.query)).get("user") == user
        back = ctx.back if same_page else f"/memory?{urlencode({'user': user})}"
        return _redirect(_with_notice(back, "added" if added else "exists", m.id, f"#m{m.id}"))

    async def _edit(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        done = await self.admin.edit(_int(data.get("id"), "id"), _user(data, required=False), data)
        m = done.memory
        log.info("memory page: memory edited", memory_id=m.id, owner=m.owner, entries_superseded=len(done.entries))
        return _redirect(_with_notice(ctx.back, "edited_entries" if done.entries else "edited", m.id, f"#m{m.id}",
                                      undo=self._edit_undo(done)))

    async def _archive(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        m = await self.admin.archive(_int(data.get("id"), "id"), _user(data, required=False))
        log.info("memory page: memory archived", memory_id=m.id, owner=m.owner)
        return _redirect(_with_notice(ctx.back, "archived", m.id))

    async def _restore(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        m = await self.admin.restore(_int(data.get("id"), "id"), _user(data, required=False))
        log.info("memory page: memory restored", memory_id=m.id, owner=m.owner)
        return _redirect(_with_notice(ctx.back, "restored", m.id, f"#m{m.id}"))

    async def _erase(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        memory_id, owner = _int(data.get("id"), "id"), _user(data, required=False)
        if data.get("confirm") != "yes":
            m, plan = await self.admin.erase_plan(memory_id, owner)
            ctx.user = m.owner
            return _html(erase_confirm_page(ctx, m, plan), ctx.nonce)
        cascade = data.get("cascade") == "yes"
        plan = await self.admin.erase(memory_id, owner, cascade=cascade)
        m = plan.named[0]
        log.info("memory page: memory erased", memory_id=m.id, owner=m.owner, cascade=cascade,
                 with_rows=len(plan.memory_ids) - 1)
        back = ctx.back
        if urlsplit(back).path == "/memory/item":  # its page is gone
            back = f"/memory?{urlencode({'user': m.owner})}"
        return _redirect(_with_notice(back, "erased_cascade" if len(plan.memory_ids) > 1 else "erased", m.id))

    async def _archive_all(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        user = _user(data)
        assert user is not None
        ctx.user = user
        if data.get("confirm") != "yes":
            stats = await self.admin.stats(user)
            return _html(clear_confirm_page(ctx, erase=False, count=stats.by_status.get("active", 0)), ctx.nonce)
        ids = await self.admin.archive_all(user)
        log.info("memory page: all memories archived", owner=user, count=len(ids))
        token = self.undo.put(ArchiveAllUndo(user, tuple(ids))) if ids else ""
        return _redirect(_with_notice(f"/memory?{urlencode({'user': user})}", "archived_all", len(ids), undo=token))

    async def _unshare(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        m, was = await self.admin.unshare(_int(data.get("id"), "id"), _user(data, required=False))
        log.info("memory page: memory unshared", memory_id=m.id, owner=m.owner, groups=len(was))
        token = self.undo.put(UnshareUndo(m.id, m.owner, was)) if was else ""
        return _redirect(_with_notice(ctx.back, "unshared", m.id, f"#m{m.id}", undo=token))

    async def _undo(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        """The Undo of an edit's, an archive-all's or an unshare's notice
        (a single archive's Undo is a plain restore)."""
        item, m, n = await self._apply_undo(str(data.get("token") or ""), None, via="page")
        if m is None:
            return _redirect(_with_notice(f"/memory?{urlencode({'user': item.owner})}", "undone_archive_all", n))
        done = "undone_unshare" if isinstance(item, UnshareUndo) else "undone_edit"
        return _redirect(_with_notice(ctx.back, done, m.id, f"#m{m.id}"))

    async def _apply_undo(self, token: str, owner: str | None, *, via: str) -> tuple[Undoable, Memory | None, int]:
        """Put back what the undo ``token`` names, once; the page's and the
        API's Undo alike. ``owner``: the user it must be about (the API's
        ``user``; another's is refused and the undo kept). Returns the undo,
        the memory it put back (None for an archive-all) and how many rows."""
        item = self.undo.peek(token)
        if item is None:
            raise Conflict("this undo has expired or was used already; nothing was changed", key="err_undo_gone")
        if owner is not None and item.owner != owner:
            raise NotFound(f"no undo of user {owner} with this token; nothing was changed")
        self.undo.take(token)
        if isinstance(item, UnshareUndo):
            m = await self.admin.reshare(item.memory_id, item.owner, item.places)
            log.info(f"memory {via}: unshare undone", memory_id=m.id, owner=m.owner)
            return item, m, 1
        if isinstance(item, EditUndo):
            m = await self.admin.undo_edit(item.memory_id, item.owner, item.before, item.after, item.entries)
            log.info(f"memory {via}: edit undone", memory_id=m.id, owner=m.owner)
            return item, m, 1
        n = await self.admin.restore_archived(item.owner, item.ids)
        log.info(f"memory {via}: archive-all undone", owner=item.owner, count=n)
        return item, None, n

    def _edit_undo(self, done: Edited) -> str:
        """An undo token for an edit that changed something, else ''."""
        if done.before is None:
            return ""
        m = done.memory
        was, now = editable_values(done.before), editable_values(m)
        changed = {k: v for k, v in was.items() if v != now[k]}
        return self.undo.put(EditUndo(m.id, m.owner, changed, now, tuple(x.id for x in done.entries)))

    def _undo_token(self, ctx: PageContext, data: Data) -> str:
        """The undo a notice offers, if it is still there to be had."""
        token = str(data.get("undo") or "")
        return token if ctx.flash and token and self.undo.peek(token) is not None else ""

    async def _retry_set_aside(
        self, request: web.Request, ident: Identity, ctx: PageContext, data: Data
    ) -> web.StreamResponse:
        user = _user(data)
        assert user is not None
        n = await self.admin.retry_set_aside(user)
        log.info("memory page: set-aside lines to be tried again", owner=user, lines=n)
        return _redirect(_with_notice(f"/memory?{urlencode({'user': user})}", "retried_set_aside", n))

    async def _erase_all(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        user = _user(data)
        assert user is not None
        ctx.user = user
        if data.get("confirm") != "yes" or data.get("typed", "").strip() != user:
            stats = await self.admin.stats(user)
            retry = data.get("confirm") == "yes"
            if retry:
                ctx.flash = ctx.t("name_mismatch")
            page = clear_confirm_page(ctx, erase=True, count=stats.total)
            return _html(page, ctx.nonce, status=400 if retry else 200)
        try:
            with self.erasing():
                n = await self.admin.erase_all(user)
        except ChatRunning:
            # A `myclaw chat` holds what it has of them (gateway/datalock.py ChatLock): nothing erased.
            ctx.flash = ctx.t("erase_chat_running", user=user)
            page = clear_confirm_page(ctx, erase=True, count=(await self.admin.stats(user)).total)
            return _html(page, ctx.nonce, status=409)
        log.info("memory page: all memories erased", owner=user, count=n)
        return _redirect(_with_notice(f"/memory?{urlencode({'user': user})}", "erased_all", n))

    async def _forget_group(self, request: web.Request, ident: Identity, ctx: PageContext,
                            data: Data) -> web.StreamResponse:
        """One group's own memory erased (memory/groupnotes.py), as the bot's
        removal from it does; after a confirmation page (a link)."""
        channel, chat_id = parse_group(str(data.get("group") or ""))
        place = f"{channel}:{chat_id}"
        if data.get("confirm") != "yes":
            found = [g for g in ctx.groups if g.place == place]
            if not found:
                raise NotFound(f"no memory is kept for the group {place}", key="err_group_unknown", group=place)
            return _html(forget_group_page(ctx, found[0]), ctx.nonce)
        n = await self.admin.forget_group(place)
        log.info("memory page: a group's memory erased", rows=n)  # the group's id is a chat's: not logged
        return _redirect(_with_notice("/memory", "forgot_group", n))

    async def _group(self, request: web.Request, ident: Identity, ctx: PageContext, data: Data) -> web.StreamResponse:
        """One group's own notes, each editable and erasable."""
        channel, chat_id = parse_group(str(data.get("group") or ""))
        place = f"{channel}:{chat_id}"
        found = [g for g in ctx.groups if g.place == place]
        if not found:
            raise NotFound(f"no memory is kept for the group {place}", key="err_group_unknown", group=place)
        ctx.flash = _notice(ctx.t, data)
        ctx.back = url("/memory/group", group=place)
        return _html(group_page(ctx, found[0], await self.admin.group_notes(place)), ctx.nonce)

    def _group_back(self, data: Data, place: str) -> str:
        return _strip_notice(safe_back(data.get("back"), url("/memory/group", group=place)))

    async def _group_note_form(self, request: web.Request, ident: Identity, ctx: PageContext,
                               data: Data) -> web.StreamResponse:
        place = str(data.get("group") or "")
        m = await self.admin.group_note(_int(data.get("id"), "id"), place)
        ctx.back = self._group_back(data, place)
        return _html(group_note_edit_page(ctx, place, m), ctx.nonce)

    async def _edit_group_note(self, request: web.Request, ident: Identity, ctx: PageContext,
                               data: Data) -> web.StreamResponse:
        place = str(data.get("group") or "")
        done = await self.admin.edit_group_note(_int(data.get("id"), "id"), place, data)
        m = done.memory
        # The group's id is a chat's: logged by its tag (memory/groupowner.py), as the erasure logs it.
        log.info("memory page: group note edited", memory_id=m.id, owner=logged_owner(m.owner))
        return _redirect(_with_notice(self._group_back(data, place), "group_note_edited", m.id, f"#m{m.id}"))

    async def _erase_group_note(self, request: web.Request, ident: Identity, ctx: PageContext,
                                data: Data) -> web.StreamResponse:
        place = str(data.get("group") or "")
        memory_id = _int(data.get("id"), "id")
        if data.get("confirm") != "yes":
            m, plan = await self.admin.group_note_plan(memory_id, place)
            ctx.back = self._group_back(data, place)
            return _html(group_note_erase_page(ctx, place, m, plan), ctx.nonce)
        plan = await self.admin.erase_group_note(memory_id, place)
        m = plan.named[0]
        log.info("memory page: group note erased", memory_id=m.id, owner=logged_owner(m.owner),
                 with_rows=len(plan.memory_ids) - 1)
        return _redirect(_with_notice(self._group_back(data, place), "group_note_erased", m.id))

    # -- JSON API ----------------------------------------------------------------

    async def _api_users(self, request: web.Request, data: Data) -> Any:
        return {"users": [{"user": u.name, "active": u.active, "archived": u.archived, "superseded": u.superseded} for u in await self.admin.users()]}

    async def _api_groups(self, request: web.Request, data: Data) -> Any:
        groups = await self.admin.groups()
        titles = await self.titles.names(g.place for g in groups) if self.titles is not None and groups else {}
        return {"groups": [{"group": g.place, "owner": g.owner, "title": titles.get(g.place, ""), "notes": g.notes,
                            "rows": g.rows} for g in groups]}

    async def _api_stats(self, request: web.Request, data: Data) -> Any:
        user = _user(data)
        return {"user": user, **vars(await self.admin.stats(user or ""))}

    async def _api_memories(self, request: web.Request, data: Data) -> Any:
        user = _user(data)
        limit = _int(data.get("limit"), "limit", default=self.page_size, lo=1, hi=MAX_LIMIT)
        offset = _int(data.get("offset"), "offset", default=0)
        status, category = _status(data.get("status")), _category(data.get("category"))
        has = " ".join(str(data.get("has") or "").split())[:MAX_HAS]
        rows = await self.admin.list(user or "", status=status, category=category, has=has, limit=limit + 1, offset=offset)
        return {
            "memories": [memory_dict(m) for m in rows[:limit]],
            "next_offset": offset + limit if len(rows) > limit else None,
            "total": await self.admin.count(user or "", status=status, category=category, has=has),
        }

    async def _api_search(self, request: web.Request, data: Data) -> Any:
        user = _user(data)
        q = str(data.get("q") or "").strip()
        if not q:
            raise Invalid("q is required (to list without a query use /memory/api/memories)")
        found = await self.admin.search(user or "", q, limit=_int(data.get("limit"), "limit", default=20, lo=1, hi=MAX_LIMIT))
        return {
            "memories": [{"score": round(s, 4), "memory": memory_dict(m)} for m, s in found.memories],
            "events": [{"score": round(h.score, 4), "id": h.id, "date": h.date, "content": h.content, "citation": h.citation()} for h in found.events],
        }

    async def _api_memory(self, request: web.Request, data: Data) -> Any:
        m = await self.admin.get(_int(data.get("id"), "id"), _user(data, required=False))
        older, newer = await self.admin.chain(m.id)
        entries = await self.admin.memory_log([m.id])
        return {
            "memory": memory_dict(m),
            "replaced": [memory_dict(x) for x in older],
            "replaced_by": [memory_dict(x) for x in newer],
            "log": [vars(x) for x in entries],
        }

    async def _api_log(self, request: web.Request, data: Data) -> Any:
        user = _user(data)
        limit = _int(data.get("limit"), "limit", default=100, lo=1, hi=1000)
        return {"log": [vars(x) for x in await self.admin.log(user or "", limit=limit)]}

    async def _api_add(self, request: web.Request, data: Data) -> Any:
        user = _user(data)
        m, added = await self.admin.add(user or "", data)
        log.info("memory api: memory added", memory_id=m.id, owner=m.owner, added=added)
        return _json({"added": added, "memory": memory_dict(m)}, status=201 if added else 200)

    async def _api_edit(self, request: web.Request, data: Data) -> Any:
        done = await self.admin.edit(_int(data.get("id"), "id"), _user(data, required=False), data)
        m = done.memory
        log.info("memory api: memory edited", memory_id=m.id, owner=m.owner, entries_superseded=len(done.entries))
        # The Core Memory entries built on its old words, superseded by it;
        # "undo": the token /memory/api/undo takes to put it all back (null: nothing changed).
        return {"memory": memory_dict(m), "entries_superseded": [e.id for e in done.entries],
                "undo": self._edit_undo(done) or None}

    def _api_status(self, action: str) -> ApiFn:
        async def go(request: web.Request, data: Data) -> Any:
            fn = {"archive": self.admin.archive, "restore": self.admin.restore}[action]
            m = await fn(_int(data.get("id"), "id"), _user(data, required=False))
            log.info(f"memory api: memory {action}d", memory_id=m.id, owner=m.owner)
            return {"memory": memory_dict(m), "erased": False}

        return go

    async def _api_unshare(self, request: web.Request, data: Data) -> Any:
        m, was = await self.admin.unshare(_int(data.get("id"), "id"), _user(data, required=False))
        log.info("memory api: memory unshared", memory_id=m.id, owner=m.owner, groups=len(was))
        token = self.undo.put(UnshareUndo(m.id, m.owner, was)) if was else None
        return {"memory": memory_dict(m), "was": list(was), "undo": token}

    async def _api_undo(self, request: web.Request, data: Data) -> Any:
        token = data.get("token")
        if not isinstance(token, str) or not token:
            raise Invalid("token is required: the \"undo\" of an edit's or an unshare's answer")
        item, m, n = await self._apply_undo(token, _user(data, required=False), via="api")
        if m is None:
            return {"undone": "archive_all", "user": item.owner, "restored": n}
        return {"undone": "unshare" if isinstance(item, UnshareUndo) else "edit", "memory": memory_dict(m)}

    async def _api_erase(self, request: web.Request, data: Data) -> Any:
        cascade = data.get("cascade", False)
        if not isinstance(cascade, bool):
            raise Invalid(f"cascade must be true or false, got {cascade!r}")
        plan = await self.admin.erase(_int(data.get("id"), "id"), _user(data, required=False), cascade=cascade)
        m = plan.named[0]
        log.info("memory api: memory erased", memory_id=m.id, owner=m.owner, cascade=cascade,
                 with_rows=len(plan.memory_ids) - 1)
        return {
            "memory": memory_dict(m),
            "erased": True,
            "cascade": cascade,
            "versions": [memory_dict(x) for x in plan.versions],
            "entries": [memory_dict(x) for x in plan.entries],
            "erased_ids": plan.memory_ids,
            "buffered_lines": plan.buffered_lines,
            "history_lines": plan.history_lines,
            "kept": [{"ref": h.ref, "kind": h.kind, "id": h.id, "date": h.date, "content": h.content} for h in plan.kept],
        }


KEEPS = ("/memory/add", "/memory/edit")  # the forms whose typed values survive a sign-in
_KEEPABLE = ("id", "user", *EDITABLE)


def _keepable(form: Any, prefix: str) -> dict[str, str]:
    """An add's or edit's typed values in ``form`` (their names after
    ``prefix``); nothing else it carries."""
    return {k: v for k in _KEEPABLE if isinstance(v := form.get(prefix + k), str) and v}


async def _kept_in(request: web.Request) -> tuple[dict[str, str], str, str]:
    """What a POST carries that typed values ride in (an add or edit, the
    sign-in form carrying one): (the values, their form's path, ``back``);
    nothing from another site's page."""
    if request.method != "POST" or not same_origin(request):
        return {}, "", "/memory"
    form = await request.post()
    back = _strip_notice(safe_back(form.get("back")))
    if request.path in KEEPS:
        return _keepable(form, ""), request.path, back
    action = form.get(KEPT + "action")
    if request.path == "/memory/login" and isinstance(action, str) and action in KEEPS:
        return _keepable(form, KEPT), action, back
    return {}, "", back


def _strip_notice(back: str) -> str:
    parts = urlsplit(back)
    q = [(k, v) for k, v in parse_qsl(parts.query) if k not in NOTICE_KEYS]
    return parts.path + ("?" + urlencode(q) if q else "")


def _file_name_safe(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "-_.")


def _file_part(user: str) -> str:
    """A user name in a download's file name: header-safe ASCII only."""
    return "".join(c if _file_name_safe(c) else "_" for c in user)[:60].strip("._") or "user"


# Notices whose redirect jumps to the memory's card (#m<id>): shown on it.
ANCHORED = ("added", "exists", "edited", "edited_entries", "restored", "undone_edit", "unshared", "undone_unshare")


def _notice_id(data: Data) -> int:
    try:
        return int(data.get("n") or 0)
    except ValueError:
        return 0


def _undo(ctx: PageContext, data: Data) -> int:
    """The memory an archive's notice offers to restore (the one change a
    click undoes; an erase is asked for twice instead)."""
    return _notice_id(data) if ctx.flash and data.get("done") == "archived" else 0


def _words(request: web.Request, tz: tzinfo = UTC) -> Words:
    return Words(pick_lang(request.headers.get("Accept-Language", ""), request.cookies.get(LANG_COOKIE, "")), tz)


def _notice(t: Words, data: Data) -> str:
    done = str(data.get("done") or "")
    if done not in DONE:
        return ""
    try:
        n = int(data.get("n") or 0)
    except ValueError:
        return ""
    return t(f"done_{done}", id=n, memories=count_memories(n, t), rows=t.count("row", n))
