"""The memory management page (seed 003), served by the gateway.

``mount_memory_page(http, engine, retriever, token)`` adds ``/memory`` (HTML)
and ``/memory/api/...`` (JSON) to the gateway's :class:`~gateway.http.HttpServer`.
The App does this when ``gateway.admin.enabled`` and memory are on.

Modules: ``_actions`` (what can be done, shared by page and API),
``_auth`` (token, session cookie, CSRF), ``_store`` (sign-ins kept in
gateway.db across restarts), ``_views`` (HTML), ``_routes`` (handlers).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, tzinfo

from memory.engine import MemoryEngine
from memory.identity import IdentityMap
from memory.retrieval import Retriever
from memory.service import ImportedFiles

from gateway.http import HttpServer

from ._actions import AdminError, ForgetHistory, MemoryAdmin
from ._auth import AdminAuth
from ._routes import MemoryWeb
from ._store import AdminStore

__all__ = ["AdminAuth", "AdminError", "AdminStore", "MemoryAdmin", "MemoryWeb", "mount_memory_page"]


def mount_memory_page(
    http: HttpServer,
    engine: MemoryEngine,
    retriever: Retriever | None,
    token: str,
    *,
    session_ttl: float = 12 * 3600,
    forget_history: ForgetHistory | None = None,
    tz: tzinfo = UTC,
    on_written: Callable[[str], None] | None = None,
    files: ImportedFiles | None = None,
    identities: IdentityMap | None = None,
    erasing: Callable[[], AbstractContextManager[None]] | None = None,
) -> MemoryWeb:
    """Register the page's routes on ``http`` (before or after it starts).
    ``forget_history``, ``on_written``, ``files``: as :class:`MemoryAdmin`'s; ``tz``:
    the clock its times are shown on (``gateway.timezone``), and a search's
    time words are read on for a user who set no zone; ``identities``:
    memory.identities, whose handles' rows a person's export holds too;
    ``erasing``: held while erase-all runs (the App's ``ChatLock.erasing``)."""
    admin = MemoryAdmin(engine, retriever, forget_history=forget_history, on_written=on_written, files=files, tz=tz)
    web = MemoryWeb(admin, AdminAuth(token, session_ttl=session_ttl), tz=tz, identities=identities)
    if erasing is not None:
        web.erasing = erasing
    web.mount(http)
    return web
