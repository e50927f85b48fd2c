"""HTML for the memory page: plain functions returning strings.

Everything that comes from the database or the request goes through
:func:`e` (``html.escape`` with quotes), memory text above all: people type
it into a chat, so ``<script>`` in a memory is shown as text. Attribute
values are always double-quoted. No inline event handlers or ``style=``
attributes: the page's Content-Security-Policy allows only the one
``<style>`` and ``<script>`` carrying the response's nonce.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from urllib.parse import urlencode

from memory.changelog import LogEntry
from memory.engine import Stats
from memory.forgetting import Erasure
from memory.origin import origin
from memory.types import GLOBAL_OWNER, Category, Hit, Memory, Source, Status

from ._actions import UserSummary

__all__ = [
    "PageContext",
    "SOURCE_LABELS",
    "clear_confirm_page",
    "count_memories",
    "detail_page",
    "e",
    "erase_confirm_page",
    "log_page",
    "login_page",
    "main_page",
    "message_page",
]

SOURCE_LABELS = {
    Source.EXTRACTION: "Auto-extracted",
    Source.COMPRESSION: "Auto (compressed)",
    Source.MANUAL: "Added by hand",
    Source.MIGRATION: "Migrated from file",
}
STATUS_TABS = (("active", "Active"), ("archived", "Archived"), ("superseded", "Superseded"), ("all", "All"))
DONE = {
    "added": "Memory m{id} added.",
    "exists": "The same memory is already stored as m{id}; nothing added.",
    "edited": "Memory m{id} saved.",
    "edited_entries": ("Memory m{id} saved. The Core Memory entries built on its old words are superseded "
                       "(Superseded tab); the next weekly refresh writes the profile again."),
    "archived": "Memory m{id} archived. It can be restored from the Archived tab.",
    "restored": "Memory m{id} restored.",
    "erased": "Memory m{id} erased for good.",
    "erased_cascade": "Memory m{id} erased for good, with its older versions and the Core Memory entries built on it.",
    "archived_all": "{memories} archived.",
    "erased_all": "{memories} erased for good.",
    "retried_set_aside": "{id} set-aside lines will be tried again at the next extraction run.",
}


def e(value: object) -> str:
    return escape(str(value), quote=True)


def count_memories(n: int) -> str:
    """"1 memory", "2 memories": a count as a person writes it."""
    return f"{n} memory" if n == 1 else f"{n} memories"


def url(path: str, **params: object) -> str:
    q = {k: v for k, v in params.items() if v is not None and v != "" and not (k == "offset" and v == 0)}
    return path + ("?" + urlencode(q) if q else "")


@dataclass
class PageContext:
    """What every page needs: CSP nonce, CSRF token, users for the picker."""

    nonce: str
    csrf: str
    users: Sequence[UserSummary] = ()
    user: str | None = None
    back: str = "/memory"
    flash: str = ""
    extra_head: list[str] = field(default_factory=list)


# -- building blocks -----------------------------------------------------------


def _hidden(ctx: PageContext, **values: object) -> str:
    fields = {"csrf": ctx.csrf, "back": ctx.back, **values}
    return "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items() if v is not None)


def _post(ctx: PageContext, action: str, label: str, *, cls: str = "", **values: object) -> str:
    return (
        f'<form method="post" action="{e(action)}" class="inline">{_hidden(ctx, **values)}'
        f'<button type="submit" class="{e(cls)}">{e(label)}</button></form>'
    )


def _when(ts: str) -> str:
    """``2026-03-01T12:00:00Z`` -> ``2026-03-01 12:00``."""
    return ts[:16].replace("T", " ") if ts else "-"


def _provenance(ctx: PageContext, m: Memory) -> str:
    """Where it came from in the words citations use (memory/origin.py),
    the chat for the operator, and the memories it was built on as links:
    never raw refs (``m:12``, ``buf:7``), which mean nothing on a page."""
    p = m.provenance
    bits = [e(x) for x in (origin(m.source.value, p), f"chat {p.chat_id}" if p.chat_id else "",
                           f"session {p.session}" if p.session else "") if x]
    if (p.date_from or p.date_to) and m.source is not Source.COMPRESSION:  # a summary's words say its span
        span = p.date_from if p.date_from == p.date_to or not p.date_to else f"{p.date_from or '?'} – {p.date_to}"
        bits.append(f"said {e(span)}")
    built = [r[2:] for r in p.refs if r.startswith("m:") and r[2:].isdigit()]
    if built:
        links = ", ".join(f'<a href="{e(url("/memory/item", id=i, user=ctx.user))}">m{e(i)}</a>' for i in built[:10])
        bits.append("built on " + links + (" …" if len(built) > 10 else ""))
    return " · ".join(bits)


def _options(values: Iterable[str], selected: str) -> str:
    return "".join(f'<option value="{e(v)}"{" selected" if v == selected else ""}>{e(v)}</option>' for v in values)


def _fields(m: Memory | None) -> str:
    """The editable fields, filled from ``m`` (edit) or defaults (add)."""
    content = m.content if m else ""
    tier = str(m.tier) if m else "2"
    cat = m.category.value if m else ""
    imp = f"{m.importance:.2f}" if m else "0.70"
    project = "" if m is None or m.project == GLOBAL_OWNER else m.project
    topic = "" if m is None or m.topic == "_general" else m.topic
    cat_opts = ("" if m else '<option value="">default (identity for tier 1, decision for tier 2)</option>') + _options(
        (c.value for c in Category), cat
    )
    return f"""
<label class="wide">Content<textarea name="content" rows="3" required maxlength="4000">{e(content)}</textarea></label>
<div class="row">
<label>Tier<select name="tier">{_options(["1", "2"], tier)}</select></label>
<label>Category<select name="category">{cat_opts}</select></label>
<label>Importance<input type="number" name="importance" min="0" max="1" step="0.05" value="{e(imp)}"></label>
<label>Project<input name="project" value="{e(project)}" placeholder="{GLOBAL_OWNER}"></label>
<label>Topic<input name="topic" value="{e(topic)}" placeholder="_general"></label>
</div>"""


def card(ctx: PageContext, m: Memory, *, replaced: Sequence[Memory] = (), score: float | None = None, detail_link: bool = True) -> str:
    shared = m.owner != ctx.user
    tier = "profile (tier 1)" if m.tier == 1 else "knowledge (tier 2)"
    meta = [
        f'<span class="badge src-{e(m.source.value)}">{e(SOURCE_LABELS.get(m.source, m.source.value))}</span>',
        f'<span class="badge tier">{e(tier)}</span>',
        f'<span class="badge cat">{e(m.category.value)}</span>',
        f'<span title="importance">★ {m.importance:.2f}</span>',
    ]
    if m.status is not Status.ACTIVE:
        meta.insert(0, f'<span class="badge st-{e(m.status.value)}">{e(m.status.value)}</span>')
    if shared:
        meta.insert(0, f'<span class="badge shared" title="visible to every user">shared: {e(m.owner)}</span>')
    if m.project != GLOBAL_OWNER or m.topic != "_general":
        meta.append(f"<span>{e(m.project)} / {e(m.topic)}</span>")
    if score is not None:
        meta.append(f'<span class="score" title="retrieval score">score {score:.3f}</span>')
    where = _provenance(ctx, m)
    dates = f"created {e(_when(m.created_at))}"
    if m.updated_at != m.created_at:
        dates += f" · updated {e(_when(m.updated_at))}"
    chain = ""
    if replaced:
        items = ", ".join(
            f'<a href="{e(url("/memory/item", id=r.id, user=ctx.user))}">m{r.id}</a> “{e(_short(r.content))}”' for r in replaced
        )
        chain += f'<p class="chain">Replaced {items}</p>'
    if m.superseded_by is not None:
        chain += (
            f'<p class="chain">Superseded by <a href="{e(url("/memory/item", id=m.superseded_by, user=ctx.user))}">'
            f"m{m.superseded_by}</a></p>"
        )
    actions = []
    if not shared:
        actions.append(
            f'<details class="edit"><summary>Edit</summary><form method="post" action="/memory/edit">'
            f"{_hidden(ctx, id=m.id, user=m.owner)}{_fields(m)}"
            f'<button type="submit" class="primary">Save</button></form></details>'
        )
        if m.status is Status.ACTIVE:
            actions.append(_post(ctx, "/memory/archive", "Archive", id=m.id, user=m.owner))
        else:
            actions.append(_post(ctx, "/memory/restore", "Restore", id=m.id, user=m.owner))
        actions.append(_post(ctx, "/memory/erase", "Erase…", cls="danger", id=m.id, user=m.owner))
    if detail_link:
        actions.append(f'<a class="button" href="{e(url("/memory/item", id=m.id, user=ctx.user))}">Details</a>')
    return f"""
<article class="card st-{e(m.status.value)}" id="m{m.id}">
  <p class="content">{e(m.content)}</p>
  <div class="meta">{" ".join(meta)}</div>
  <div class="meta sub"><a href="{e(url("/memory/item", id=m.id, user=ctx.user))}">m{m.id}</a> · {dates}{" · " + where if where else ""}</div>
  {chain}
  <div class="actions">{"".join(actions)}</div>
</article>"""


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _stats_bar(s: Stats) -> str:
    src = s.by_source
    auto = src.get("extraction", 0) + src.get("compression", 0)
    tiles = [
        ("Active", s.by_status.get("active", 0), "active memories: what the bot can recall"),
        ("Profile", s.by_tier.get("1", 0), "tier 1: always in the prompt (active)"),
        ("Knowledge", s.by_tier.get("2", 0), "tier 2: recalled when relevant (active)"),
        ("Auto-extracted", auto, "extracted or compressed from conversations (active)"),
        ("By hand", src.get("manual", 0), "added by hand: this page, the CLI or the bot's memory_save (active)"),
        ("Migrated", src.get("migration", 0), "imported from MEMORY.md / daily files (active)"),
        ("Archived", s.by_status.get("archived", 0), "hidden from the bot, restorable"),
        ("Superseded", s.by_status.get("superseded", 0), "replaced by a newer fact"),
        ("Events", s.events, "tier 3 conversation summaries"),
        ("Buffered", s.buffered - s.set_aside, "messages waiting for extraction"),
        *([("Set aside", s.set_aside, "messages the memory model could not take even one at a time: kept, "
            "not retried until asked (Try again, below, or myclaw memory retry-set-aside)")] if s.set_aside else []),
    ]
    body = "".join(f'<div class="tile" title="{e(t)}"><b>{v}</b><span>{e(k)}</span></div>' for k, v, t in tiles)
    return f'<section class="stats" aria-label="statistics"><div class="tile total"><b>{s.total}</b><span>Total</span></div>{body}</section>'


def _set_aside(ctx: PageContext, user: str, s: Stats) -> str:
    """Lines the memory model could not take: after a switch to a model
    that can, the operator has them tried again."""
    if not s.set_aside:
        return ""
    return (f'<p class="muted">{s.set_aside} buffered lines were set aside: the memory model could not take them. '
            f'After changing it for one with a larger context: '
            f'{_post(ctx, "/memory/retry-set-aside", "Try them again", user=user)}</p>')


# -- layout ---------------------------------------------------------------------


CSS = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI","Noto Sans","PingFang SC","Microsoft YaHei",sans-serif;color:#1f2328;background:#f6f7f9}
a{color:#0b63c5;text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;align-items:center;gap:16px;padding:10px 20px;background:#1f2937;color:#fff}
header.top h1{font-size:16px;margin:0;font-weight:600}header.top .grow{flex:1}
header.top a{color:#cbd5e1}header.top button{background:transparent;color:#cbd5e1;border-color:#475569}
.layout{display:flex;min-height:calc(100vh - 46px)}
nav.users{width:230px;flex:none;background:#fff;border-right:1px solid #e3e6ea;padding:12px 0}
nav.users h2{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#6b7280;margin:4px 16px 8px}
nav.users ul{list-style:none;margin:0;padding:0}
nav.users li a{display:flex;justify-content:space-between;gap:8px;padding:6px 16px;color:#1f2328;overflow-wrap:anywhere}
nav.users li a:hover{background:#f1f5f9;text-decoration:none}
nav.users li a.on{background:#e0ecff;font-weight:600}
nav.users .count{color:#6b7280;font-variant-numeric:tabular-nums}
main{flex:1;padding:18px 26px;max-width:1120px;min-width:0}
.head{display:flex;align-items:center;gap:12px;flex-wrap:wrap}.head h2{margin:0;font-size:20px;overflow-wrap:anywhere}.head .grow{flex:1}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(78px,1fr));gap:6px;margin:14px 0}
.tile{background:#fff;border:1px solid #e3e6ea;border-radius:8px;padding:4px 8px}
.tile b{display:block;font-size:17px;font-variant-numeric:tabular-nums}.tile span{color:#6b7280;font-size:11px;line-height:1.25;display:block}
.tile.total{background:#1f2937;color:#fff;border-color:#1f2937}.tile.total span{color:#cbd5e1}
form.search{display:flex;gap:8px;margin:8px 0}form.search input[type=search]{flex:1}
.tabs{display:flex;gap:4px;border-bottom:1px solid #e3e6ea;margin:10px 0 12px}
.tabs a{padding:6px 12px;border-radius:6px 6px 0 0;color:#4b5563}.tabs a.on{background:#fff;border:1px solid #e3e6ea;border-bottom-color:#fff;margin-bottom:-1px;color:#1f2328;font-weight:600}
.card{background:#fff;border:1px solid #e3e6ea;border-radius:10px;padding:12px 16px;margin:10px 0}
.card.st-archived,.card.st-superseded{background:#fafafa;border-style:dashed}
.card .content{margin:0 0 6px;font-size:15px;white-space:pre-wrap;overflow-wrap:anywhere}
.meta{display:flex;flex-wrap:wrap;gap:6px;align-items:center;color:#4b5563;font-size:12px}.meta.sub{margin-top:4px;color:#6b7280}
.badge{border-radius:10px;padding:1px 8px;background:#eef2f7;color:#374151}
.src-extraction,.src-compression{background:#e6f4ea;color:#1e6b34}.src-manual{background:#e8effd;color:#1d4ed8}.src-migration{background:#fdf3e1;color:#8a5a00}
.st-archived .badge.st-archived,.badge.st-archived{background:#f3f4f6;color:#6b7280}.badge.st-superseded{background:#fdecec;color:#9f1d1d}
.badge.shared{background:#f3e8ff;color:#6b21a8}.score{color:#6b7280}
.chain{margin:6px 0 0;font-size:12px;color:#6b7280}
.actions{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start;margin-top:8px}
form.inline{display:inline}
button,.button{font:inherit;font-size:13px;padding:4px 12px;border:1px solid #cfd5dc;border-radius:6px;background:#fff;color:#1f2328;cursor:pointer;display:inline-block}
button:hover,.button:hover{background:#f1f5f9;text-decoration:none}
button.primary,.button.primary{background:#0b63c5;border-color:#0b63c5;color:#fff}button.primary:hover{background:#0a56ab}
button.danger{color:#b42318;border-color:#f1b8b3}button.danger:hover{background:#fdecec}
button.danger.solid{background:#b42318;color:#fff;border-color:#b42318}
input,select,textarea{font:inherit;padding:5px 8px;border:1px solid #cfd5dc;border-radius:6px;background:#fff}
textarea{width:100%;resize:vertical}
details.edit{order:-1}details.edit[open]{flex-basis:100%;padding:8px;border:1px solid #e3e6ea;border-radius:8px;background:#fbfcfd}
details.edit summary{display:inline-block;cursor:pointer;padding:4px 12px;border:1px solid #cfd5dc;border-radius:6px;font-size:13px;background:#fff}
label{display:flex;flex-direction:column;font-size:12px;color:#4b5563;gap:2px}label.wide{margin:8px 0}
.row{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:8px}.row input[type=number]{width:90px}
.empty{text-align:center;padding:50px 20px;color:#6b7280;background:#fff;border:1px dashed #cfd5dc;border-radius:10px}
.empty h3{color:#1f2328;margin:0 0 6px}
.flash{background:#e6f4ea;border:1px solid #b7dfc3;color:#1e6b34;padding:8px 12px;border-radius:8px;margin-bottom:10px}
.flash.err{background:#fdecec;border-color:#f1b8b3;color:#9f1d1d}
.pager{display:flex;justify-content:space-between;margin:14px 0}
details.danger{margin-top:28px;border:1px solid #f1b8b3;border-radius:10px;padding:10px 14px;background:#fff}
details.danger summary{cursor:pointer;color:#b42318;font-weight:600}
table.log{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
table.log th,table.log td{border-bottom:1px solid #e3e6ea;padding:6px 8px;text-align:left;vertical-align:top}
table.prov th{width:160px;white-space:nowrap}table.log td.detail{font-family:ui-monospace,monospace;font-size:12px;overflow-wrap:anywhere;max-width:420px}
dialog{border:none;border-radius:12px;padding:18px 20px;width:min(640px,92vw);box-shadow:0 10px 40px rgba(0,0,0,.25)}
dialog::backdrop{background:rgba(15,23,42,.45)}dialog h3{margin:0 0 4px}
.muted{color:#6b7280}.events li{margin:4px 0}
.login{max-width:380px;margin:12vh auto;background:#fff;border:1px solid #e3e6ea;border-radius:12px;padding:24px}
.login h1{font-size:18px;margin:0 0 12px}.login input{width:100%;margin:6px 0 12px}
.confirm{background:#fff;border:1px solid #f1b8b3;border-radius:10px;padding:16px 20px}
.confirm h3{margin:14px 0 4px;font-size:15px}ul.linked{margin:4px 0 8px;padding-left:20px}ul.linked li{margin:3px 0}
"""

JS = """
document.querySelectorAll('[data-open]').forEach(function (b) {
  b.addEventListener('click', function () { document.getElementById(b.dataset.open).showModal(); });
});
document.querySelectorAll('[data-close]').forEach(function (b) {
  b.addEventListener('click', function () { b.closest('dialog').close(); });
});
var linked = location.hash && document.getElementById(location.hash.slice(1));
if (linked && linked.tagName === 'DIALOG') { linked.showModal(); }
"""


def layout(ctx: PageContext, title: str, body: str, *, picker: bool = True) -> str:
    nav = _picker(ctx) if picker else ""
    logout = (
        f'<form method="post" action="/memory/logout" class="inline">{_hidden(ctx)}<button type="submit">Sign out</button></form>'
        if ctx.csrf
        else ""
    )
    flash = f'<div class="flash">{e(ctx.flash)}</div>' if ctx.flash else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{e(title)} · myclaw memory</title>
<style nonce="{e(ctx.nonce)}">{CSS}</style></head>
<body><header class="top"><h1><a href="/memory">myclaw · memory</a></h1><span class="grow"></span>{logout}</header>
<div class="layout">{nav}<main>{flash}{body}</main></div>
<script nonce="{e(ctx.nonce)}">{JS}</script></body></html>"""


def _picker(ctx: PageContext) -> str:
    items = "".join(
        f'<li><a href="{e(url("/memory", user=u.name))}" class="{"on" if u.name == ctx.user else ""}"'
        f' title="{u.active} active, {u.archived} archived, {u.superseded} superseded">'
        f'<span>{e(u.name)}</span><span class="count">{u.active}</span></a></li>'
        for u in ctx.users
    )
    return f'<nav class="users" aria-label="users"><h2>Users</h2><ul>{items}</ul></nav>'


# -- pages ------------------------------------------------------------------------


def login_page(nonce: str, *, failed: bool = False) -> str:
    ctx = PageContext(nonce=nonce, csrf="")
    msg = '<div class="flash err">Wrong token.</div>' if failed else ""
    body = f"""<div class="login"><h1>Sign in</h1>{msg}
<p class="muted">The memory page needs the admin token (<code>gateway.admin.token</code>).</p>
<form method="post" action="/memory/login"><label>Admin token<input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit" class="primary">Sign in</button></form></div>"""
    return layout(ctx, "Sign in", body, picker=False)


def message_page(ctx: PageContext, title: str, text: str) -> str:
    return layout(ctx, title, f'<h2>{e(title)}</h2><div class="flash err">{e(text)}</div><p><a href="/memory">Back to the memory page</a></p>')


def overview_body(ctx: PageContext) -> str:
    if not ctx.users or all(u.total == 0 for u in ctx.users):
        return _empty("No memories yet", "Memories appear here once people talk to the bot, or add one by hand under a user (for example _global, which every user sees).")
    return (
        '<div class="head"><h2>Choose a user</h2></div>'
        '<p class="muted">Each person the bot talks to has their own memories; <b>_global</b> holds facts every user sees. '
        "Pick one on the left to see, search and edit their memories.</p>"
    )


def _empty(title: str, text: str) -> str:
    return f'<div class="empty"><h3>{e(title)}</h3><p>{e(text)}</p></div>'


def main_page(
    ctx: PageContext,
    *,
    stats: Stats,
    status: str,
    query: str,
    memories: Sequence[Memory] = (),
    scored: Sequence[tuple[Memory, float]] = (),
    events: Sequence[Hit] = (),
    replaced: dict[int, list[Memory]] | None = None,
    offset: int = 0,
    page_size: int = 20,
    more: bool = False,
) -> str:
    user = ctx.user or ""
    replaced = replaced or {}
    tabs = "".join(
        f'<a href="{e(url("/memory", user=user, status=k))}" class="{"on" if k == status and not query else ""}">{e(label)}'
        + (f" ({stats.by_status.get(k, 0)})" if k != "all" else f" ({stats.total})")
        + "</a>"
        for k, label in STATUS_TABS
    )
    search = f"""<form class="search" method="get" action="/memory" role="search">
<input type="hidden" name="user" value="{e(user)}">
<input type="search" name="q" value="{e(query)}" placeholder="Search {e(user)}'s memories as the bot would recall them…" aria-label="search">
<button type="submit">Search</button>{f'<a class="button" href="{e(url("/memory", user=user))}">Clear</a>' if query else ""}</form>"""
    if query:
        head = f'<p class="muted">{count_memories(len(scored))} the bot would recall for “{e(query)}”, best first (active memories of {e(user)}'
        head += "" if user == GLOBAL_OWNER else " and _global"
        head += ").</p>"
        cards = "".join(card(ctx, m, score=s, replaced=replaced.get(m.id, ())) for m, s in scored)
        if not scored:
            cards = _empty("Nothing found", f"No active memory of {user} matches “{query}”. Archived memories are not searched.")
        if events:
            cards += "<h3>Matching events (tier 3)</h3><ul class='events'>" + "".join(
                f"<li><b>{e(h.date)}</b> {e(h.content)} <span class='muted'>{e(h.citation())}</span></li>" for h in events
            ) + "</ul>"
        listing = head + cards
    else:
        if memories:
            listing = "".join(card(ctx, m, replaced=replaced.get(m.id, ())) for m in memories)
        elif offset:
            listing = _empty("No more memories", "You are past the last page.")
        elif status == "active":
            listing = _empty(
                f"{user} has no memories yet",
                "The bot extracts facts from conversations in the background; you can also add one by hand.",
            )
        else:
            listing = _empty(f"No {status} memories", "Nothing here.")
        pager = ""
        if offset or more:
            prev = (
                f'<a class="button" href="{e(url("/memory", user=user, status=status, offset=max(0, offset - page_size)))}">← Newer</a>'
                if offset
                else "<span></span>"
            )
            nxt = f'<a class="button" href="{e(url("/memory", user=user, status=status, offset=offset + page_size))}">Older →</a>' if more else "<span></span>"
            pager = f'<div class="pager">{prev}<span class="muted">{offset + 1}–{offset + len(memories)}</span>{nxt}</div>'
        listing = f'<div class="tabs">{tabs}</div>' + listing + pager
    add_dialog = f"""<dialog id="add-dialog"><h3>Add a memory for {e(user)}</h3>
<p class="muted">Stored as “Added by hand”; the bot recalls it like any other memory{"" if user != GLOBAL_OWNER else ", for every user"}.</p>
<form method="post" action="/memory/add">{_hidden(ctx, user=user)}{_fields(None)}
<div class="actions"><button type="submit" class="primary">Add memory</button><button type="button" data-close>Cancel</button></div></form></dialog>"""
    danger = f"""<details class="danger"><summary>Clear this user's memories</summary>
<p>Archive every active memory of <b>{e(user)}</b> ({stats.by_status.get("active", 0)}): they leave the bot's recall and can be restored one by one from the Archived tab.</p>
{_post(ctx, "/memory/archive-all", "Archive all…", cls="danger", user=user)}
<p>Or erase all {count_memories(stats.total)} of <b>{e(user)}</b> for good (all statuses; cannot be undone).</p>
{_post(ctx, "/memory/erase-all", "Erase all for good…", cls="danger", user=user)}</details>""" if stats.total else ""
    body = f"""<div class="head"><h2>{e(user)}</h2><span class="grow"></span>
<button type="button" class="primary" data-open="add-dialog">+ Add memory</button>
<a class="button" href="{e(url("/memory/log", user=user))}">Change log</a></div>
{_stats_bar(stats)}{_set_aside(ctx, user, stats)}{search}{listing}{add_dialog}{danger}"""
    return layout(ctx, user, body)


def detail_page(
    ctx: PageContext, m: Memory, *, older: Sequence[Memory], newer: Sequence[Memory], log: Sequence[LogEntry]
) -> str:
    p = m.provenance
    prov_rows = [
        ("Owner", m.owner),
        ("Status", m.status.value),
        ("Source", SOURCE_LABELS.get(m.source, m.source.value)),
        ("Channel", p.channel),
        ("Chat", p.chat_id),
        ("Session", p.session),
        ("Said", " – ".join(x for x in (p.date_from, p.date_to) if x)),
        ("Messages", ", ".join(p.message_ids)),
        ("Refs", ", ".join(p.refs)),
        # Indexed with the fact, never shown to the model: the owner may see it.
        ("Drawn from", m.source_text),
        ("Created", _when(m.created_at)),
        ("Updated", _when(m.updated_at)),
        ("Last recalled", f"{_when(m.last_accessed)} ({m.access_count} times)" if m.access_count else "never"),
    ]
    table = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in prov_rows if v)
    chain = ""
    if newer:
        chain += "<h3>Replaced by</h3>" + "".join(card(ctx, x) for x in newer)
    if older:
        chain += "<h3>This fact replaced</h3>" + "".join(card(ctx, x) for x in older)
    body = f"""<div class="head"><h2>Memory m{m.id}</h2><span class="grow"></span>
<a class="button" href="{e(url("/memory", user=ctx.user or m.owner))}">← {e(ctx.user or m.owner)}</a></div>
{card(ctx, m, detail_link=False)}
<h3>Provenance</h3><table class="log prov">{table}</table>
{chain or '<p class="muted">No earlier or later version of this fact.</p>'}
<h3>Change log</h3>{_log_table(log) if log else '<p class="muted">No log entries for this memory.</p>'}"""
    return layout(ctx, f"m{m.id}", body)


def _log_table(entries: Sequence[LogEntry]) -> str:
    rows = "".join(
        f"<tr><td>{e(_when(x.at))}</td><td>{e(x.job)}</td><td>{e(x.action)}</td>"
        f"<td>{_memory_link(x.memory_id)}</td><td class='detail'>{e(_detail(x.detail))}</td></tr>"
        for x in entries
    )
    return f'<table class="log"><tr><th>When</th><th>Job</th><th>Action</th><th>Memory</th><th>Detail</th></tr>{rows}</table>'


def _memory_link(memory_id: int | None) -> str:
    if memory_id is None:
        return "-"
    return f'<a href="{e(url("/memory/item", id=memory_id))}">m{memory_id}</a>'


def _detail(text: str) -> str:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


def log_page(ctx: PageContext, entries: Sequence[LogEntry]) -> str:
    user = ctx.user or ""
    body = f"""<div class="head"><h2>Change log: {e(user)}</h2><span class="grow"></span>
<a class="button" href="{e(url("/memory", user=user))}">← {e(user)}</a></div>
<p class="muted">What extraction, compression, the bot (asked to forget), this page and <code>myclaw memory</code> changed, newest first (the same log as <code>myclaw memory log</code>).</p>
{_log_table(entries) if entries else _empty("No changes logged", "Nothing has changed this user's memories through the write path or this page yet.")}"""
    return layout(ctx, f"log {user}", body)


def _linked(items: Iterable[str]) -> str:
    return '<ul class="linked">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _linked_memories(rows: Sequence[Memory]) -> str:
    return _linked(
        f'<a href="{e(url("/memory/item", id=m.id, user=m.owner))}">m{m.id}</a> '
        f'<span class="badge st-{e(m.status.value)}">{e(m.status.value)}</span> “{e(_short(m.content, 100))}”'
        for m in rows
    )


def _kept(owner: str, kept: Sequence[Hit]) -> str:
    """The linked records an erase leaves, each with a link: a memory to its
    page, an event (no page of its own) to a search for its words."""
    facts = [h for h in kept if h.kind == "memory"]
    events = [h for h in kept if h.kind == "event"]
    out = ""
    if facts:
        out += "<p>Facts it was drawn from (the weekly refresh could write it again from them):</p>" + _linked(
            f'<a href="{e(url("/memory/item", id=h.id, user=owner))}">m{h.id}</a> “{e(_short(h.content, 100))}”'
            for h in facts
        )
    if events:
        out += "<p>Daily events of the same conversation (kept; they may still say it, and recall can show them):</p>" + _linked(
            f'<a href="{e(url("/memory", user=owner, q=" ".join(h.content.split())[:100]))}">e{h.id}</a> '
            f"{e(h.date)} “{e(_short(h.content, 100))}”"
            for h in events
        )
    return out


def erase_confirm_page(ctx: PageContext, m: Memory, plan: Erasure) -> str:
    """Erase one row, or with it what would keep the fact alive: its older
    versions (the same words, restorable) and the Core Memory entries built
    on it (in every system prompt, and kept fresh by the weekly refresh)."""
    more = len(plan.versions) + len(plan.entries)
    built = ""
    if plan.versions:
        built += (
            f"<p>{len(plan.versions)} older version{'s' if len(plan.versions) != 1 else ''} of this fact "
            "(the versions it replaced, the originals a weekly merge folded into it):</p>"
            + _linked_memories(plan.versions)
        )
    if plan.entries:
        built += (
            f"<p>{len(plan.entries)} Core Memory entr{'ies' if len(plan.entries) != 1 else 'y'} built on it "
            "(in every system prompt):</p>" + _linked_memories(plan.entries)
        )
    if built:
        built = (
            f"<h3>Built on it, erased only with its history</h3>{built}"
            '<p class="muted">With its history also go the messages that said it, still waiting for extraction '
            "or in the recent conversation, so the bot does not learn it again.</p>"
        )
    else:
        built = '<p class="muted">No older version of it and no Core Memory entry built on it.</p>'
    kept = ""
    if plan.kept:
        kept = (
            "<h3>Linked records that stay either way</h3>"
            '<p class="muted">A summary often holds several facts, so these are not erased; '
            "edit or erase them yourself if they say the same.</p>" + _kept(m.owner, plan.kept)
        )
    if more:
        buttons = (
            _post(ctx, "/memory/erase", f"Erase it with its history and the Core Memory entries built on it ({more + 1} rows)",
                  cls="danger solid", id=m.id, user=m.owner, confirm="yes", cascade="yes")
            + _post(ctx, "/memory/erase", "Erase this row only", cls="danger", id=m.id, user=m.owner, confirm="yes")
        )
    else:
        buttons = _post(ctx, "/memory/erase", "Erase for good", cls="danger solid", id=m.id, user=m.owner, confirm="yes")
    body = f"""<div class="confirm"><h2>Erase memory m{m.id} for good?</h2>
<p class="content">{e(m.content)}</p>
<p>This deletes it from the database; it cannot be restored. To hide it from the bot but keep it, archive it instead.</p>
{built}{kept}
<div class="actions">{buttons}
{_post(ctx, "/memory/archive", "Archive instead", id=m.id, user=m.owner)}
<a class="button" href="{e(ctx.back)}">Cancel</a></div></div>"""
    return layout(ctx, f"erase m{m.id}", body)


def clear_confirm_page(ctx: PageContext, *, erase: bool, count: int) -> str:
    user = ctx.user or ""
    if erase:
        body = f"""<div class="confirm"><h2>Erase all {count_memories(count)} of {e(user)} for good?</h2>
<p>Every memory of <b>{e(user)}</b>, active, archived and superseded, is deleted from the database. This cannot be undone.</p>
<form method="post" action="/memory/erase-all">{_hidden(ctx, user=user, confirm="yes")}
<label>Type the user name <b>{e(user)}</b> to confirm<input name="typed" autocomplete="off" required></label>
<div class="actions"><button type="submit" class="danger solid">Erase all for good</button>
<a class="button" href="{e(ctx.back)}">Cancel</a></div></form></div>"""
    else:
        body = f"""<div class="confirm"><h2>Archive {"the" if count == 1 else "all"} {count} active {"memory" if count == 1 else "memories"} of {e(user)}?</h2>
<p>The bot stops recalling them. They stay in the database and can be restored one by one from the Archived tab.</p>
<div class="actions">{_post(ctx, "/memory/archive-all", "Yes, archive all", cls="danger solid", user=user, confirm="yes")}
<a class="button" href="{e(ctx.back)}">Cancel</a></div></div>"""
    return layout(ctx, "clear " + user, body)
