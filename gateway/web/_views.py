"""HTML for the memory page: plain functions returning strings.

Everything that comes from the database or the request goes through
:func:`e` (``html.escape`` with quotes), memory text above all: people type
it into a chat, so ``<script>`` in a memory is shown as text. Attribute
values are always double-quoted. No inline event handlers or ``style=``
attributes: the page's Content-Security-Policy allows only the page's own
stylesheet (:data:`STYLESHEET`) and the one ``<script>`` carrying the
response's nonce.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from html import escape
from urllib.parse import urlencode

from memory.changelog import LogEntry
from memory.engine import Stats
from memory.forgetting import Erasure
from memory.origin import origin
from memory.sharing import EVERY_GROUP
from memory.types import GLOBAL_OWNER, Category, Hit, Memory, Source, Status

from ..chattitles import group_name
from ._actions import EDITABLE, GroupSummary, UserSummary
from ._i18n import CATALOGUE, LANGS, Words

__all__ = [
    "CSS_BYTES",
    "KEPT",
    "PageContext",
    "STYLESHEET",
    "clear_confirm_page",
    "count_memories",
    "detail_page",
    "edit_page",
    "e",
    "erase_confirm_page",
    "log_page",
    "login_page",
    "main_page",
    "message_page",
    "retry_page",
    "url",
]

STATUS_TABS = ("active", "archived", "superseded", "all")
# The notices a POST's redirect names (``?done=``): catalogue keys ``done_<name>``.
DONE = ("added", "exists", "edited", "edited_entries", "archived", "restored", "erased", "erased_cascade",
        "archived_all", "erased_all", "retried_set_aside", "undone_edit", "undone_archive_all", "unshared",
        "undone_unshare", "forgot_group", "group_note_edited", "group_note_erased")


def e(value: object) -> str:
    return escape(str(value), quote=True)


def count_memories(n: int, t: Words | None = None) -> str:
    """"1 memory", "2 memories", "2 条记忆": a count as a person writes it."""
    return (t or Words()).count("memory", n)


def url(path: str, **params: object) -> str:
    q = {k: v for k, v in params.items() if v is not None and v != "" and not (k == "offset" and v == 0)}
    return path + ("?" + urlencode(q) if q else "")


@dataclass
class PageContext:
    """What every page needs: CSP nonce, CSRF token, users for the picker."""

    nonce: str
    csrf: str
    users: Sequence[UserSummary] = ()
    groups: Sequence[GroupSummary] = ()  # groups' own memories: listed apart, never as a user
    user: str | None = None
    back: str = "/memory"
    flash: str = ""
    extra_head: list[str] = field(default_factory=list)
    t: Words = field(default_factory=Words)  # the page's language
    undo: int = 0  # a memory just archived: its notice offers to restore it
    undo_token: str = ""  # an edit or archive-all just made: its notice offers to undo it (gateway/web/_undo.py)
    flash_on: int = 0  # the memory the notice is about: shown on its card (the page scrolls there), if on the page
    flash_shown: bool = False  # a card showed the notice: not again at the top
    names: dict[str, str] = field(default_factory=dict)  # channel:chat_id -> group title (gateway/chattitles.py)
    replacing: set[int] = field(default_factory=set)  # ids of the group facts read instead of a shared one that exist


# -- building blocks -----------------------------------------------------------


def _hidden(ctx: PageContext, **values: object) -> str:
    fields = {"csrf": ctx.csrf, "back": ctx.back, **values}
    return "".join(f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items() if v is not None)


def _post(ctx: PageContext, action: str, label: str, *, cls: str = "", aria: str = "", **values: object) -> str:
    """A one-button form; ``aria``: the button's full name for a screen
    reader when ``label`` alone does not say what it acts on."""
    named = f' aria-label="{e(aria)}"' if aria else ""
    return (
        f'<form method="post" action="{e(action)}" class="inline">{_hidden(ctx, **values)}'
        f'<button type="submit" class="{e(cls)}"{named}>{e(label)}</button></form>'
    )


ACTION_FORM = "act"  # the id of a page's one form the cards' buttons submit (HTML's form= attribute)


def _act(ctx: PageContext, action: str, label: str, memory_id: int, *, cls: str = "") -> str:
    """A card's button: no form of its own, it submits the page's action
    form (:func:`_action_form`) to ``action`` with ``id``; works with
    JavaScript off."""
    named = f' class="{e(cls)}"' if cls else ""
    return (f'<button type="submit" form="{ACTION_FORM}" formaction="{e(action)}" name="id" value="{memory_id}"{named}'
            f' aria-label="{e(label)} m{memory_id}">{e(label)}</button>')


def _action_form(ctx: PageContext) -> str:
    """The one form behind every card's buttons: the CSRF token, where to
    come back to, and the user whose page it is (a card of another user
    has no buttons)."""
    return (f'<form id="{ACTION_FORM}" method="post" action="/memory/archive" hidden>'
            f"{_hidden(ctx, user=ctx.user or '')}</form>")


def _edit_dialog(ctx: PageContext) -> str:
    """The page's one edit form, for JavaScript to fill from a card."""
    t = ctx.t
    return (f'<dialog id="edit-dialog" aria-labelledby="edit-title"><h3 id="edit-title">{e(t("edit"))}</h3>'
            f'<form method="post" action="/memory/edit">{_hidden(ctx, id="", user="")}{_fields(t, None, add=False)}'
            f'<div class="actions"><button type="submit" class="primary">{e(t("save"))}</button>'
            f'<button type="button" data-close>{e(t("cancel"))}</button></div></form></dialog>')


def edit_page(ctx: PageContext, m: Memory) -> str:
    """A memory's edit form on a page of its own: the card's Edit link
    without JavaScript (and a link to share: "fix this one")."""
    t = ctx.t
    title = t("edit_label", id=m.id)
    form = (f'<form method="post" action="/memory/edit">{_hidden(ctx, id=m.id, user=m.owner)}{_fields(t, m)}'
            f'<div class="actions"><button type="submit" class="primary">{e(t("save"))}</button>'
            f'<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></form>')
    return layout(ctx, title, f'<div class="head"><h2>{e(title)}</h2></div>{form}')


def _status(t: Words, status: Status | str) -> str:
    return t(f"st_{status}")


def _category(t: Words, category: str) -> str:
    return t(f"cat_{category}") if f"cat_{category}" in CATALOGUE else category


def _provenance(ctx: PageContext, m: Memory) -> str:
    """Where it came from in the words citations use (memory/origin.py),
    the chat for the operator, and the memories it was built on as links:
    never raw refs (``m:12``, ``buf:7``), which mean nothing on a page."""
    t = ctx.t
    p = m.provenance
    title = ctx.names.get(f"{p.channel}:{p.chat_id}")
    chat = f"{title} ({p.chat_id})" if title else p.chat_id
    bits = [e(x) for x in (t.chinese(origin(m.source.value, p, zh=t.zh)), t("chat", id=chat) if p.chat_id else "",
                           t("session", id=p.session) if p.session else "") if x]
    if (p.date_from or p.date_to) and m.source is not Source.COMPRESSION:  # a summary's words say its span
        start, end = _said(t, p.date_from), _said(t, p.date_to)
        span = start if p.date_from == p.date_to or not p.date_to else f"{start or '?'} – {end}"
        bits.append(e(t("said", span=span)))
    built = [r[2:] for r in p.refs if r.startswith("m:") and r[2:].isdigit()]
    if built:
        links = ", ".join(f'<a href="{e(url("/memory/item", id=i, user=ctx.user))}">m{e(i)}</a>' for i in built[:10])
        bits.append(t("built_on", links=links + (" …" if len(built) > 10 else "")))
    return " · ".join(bits)


def _said(t: Words, ts: str) -> str:
    """A span's end on the gateway's clock, as the page's other times (it
    stood raw, in UTC); a day alone (a summary's, an import's) as it is."""
    return t.when(ts) if "T" in ts else ts


def _options(values: Iterable[str], selected: str, label: Callable[[str], str] = str) -> str:
    return "".join(
        f'<option value="{e(v)}"{" selected" if v == selected else ""}>{e(label(v))}</option>' for v in values
    )


def _values(m: Memory | None) -> dict[str, str]:
    """A form's fields from ``m`` (edit) or the defaults (add)."""
    if m is None:
        return {"content": "", "tier": "2", "category": "", "importance": "0.70", "project": "", "topic": "",
                "search_terms": ""}
    return {
        "content": m.content, "tier": str(m.tier), "category": m.category.value, "importance": f"{m.importance:.2f}",
        "project": "" if m.project == GLOBAL_OWNER else m.project, "topic": "" if m.topic == "_general" else m.topic,
        "search_terms": ", ".join(m.search_terms),
    }


def _fields(t: Words, m: Memory | None, *, typed: dict[str, str] | None = None, add: bool | None = None) -> str:
    """The editable fields, filled from ``m`` (edit) or defaults (add), or
    with what was ``typed`` into a form the server refused."""
    v = {**_values(m), **(typed or {})}
    add = m is None if add is None else add
    content, tier, cat, project, topic = v["content"], v["tier"], v["category"], v["project"], v["topic"]
    try:
        imp = f"{float(v['importance']):.2f}"
    except ValueError:
        imp = v["importance"]
    cat_opts = (f'<option value="">{e(t("category_default"))}</option>' if add else "") + _options(
        (c.value for c in Category), cat, lambda c: _category(t, c)
    )
    return f"""
<label class="wide">{e(t("content"))}<textarea name="content" rows="3" required maxlength="4000">{e(content)}</textarea></label>
<div class="row">
<label>{e(t("tier"))}<select name="tier">{_options(["1", "2"], tier, lambda x: t(f"tier_{x}"))}</select></label>
<label>{e(t("category"))}<select name="category">{cat_opts}</select></label>
<label>{e(t("importance_label"))}<input type="number" name="importance" min="0" max="1" step="0.05" value="{e(imp)}"></label>
<label>{e(t("project"))}<input name="project" value="{e(project)}" placeholder="{GLOBAL_OWNER}"></label>
<label>{e(t("topic"))}<input name="topic" value="{e(topic)}" placeholder="_general"></label>
</div>
<label class="wide">{e(t("search_terms_label"))}<input name="search_terms" value="{e(v["search_terms"])}" placeholder="猫, cat" maxlength="600"></label>"""


def card(ctx: PageContext, m: Memory, *, replaced: Sequence[Memory] = (), score: float | None = None, detail_link: bool = True) -> str:
    t = ctx.t
    shared = m.owner != ctx.user
    meta = [
        f'<span class="badge src-{e(m.source.value)}">{e(t(f"src_{m.source.value}"))}</span>',
        f'<span class="badge tier">{e(t(f"tier_{m.tier}"))}</span>',
        f'<span class="badge cat">{e(_category(t, m.category.value))}</span>',
        f'<span title="{e(t("importance"))}">★ {m.importance:.2f}</span>',
    ]
    if m.status is not Status.ACTIVE:
        meta.insert(0, f'<span class="badge st-{e(m.status.value)}">{e(_status(t, m.status))}</span>')
    if shared:
        meta.insert(0, f'<span class="badge shared" title="{e(t("shared_hint"))}">{e(t("shared", owner=m.owner))}</span>')
    groups = shared_with(m)
    if groups:
        every = EVERY_GROUP in groups
        label = t("shared_all") if every else t("shared_group", groups=", ".join(group_name(g, ctx.names) for g in groups))
        meta.append(f'<span class="badge groups" title="{e(t("shared_groups_hint"))}">{e(label)}</span>')
        # A group's own newer fact is read there instead while it exists (memory/scope.py), as /share lists.
        for g, i in m.provenance.replaced_in:
            if i in ctx.replacing:
                meta.append(f'<span class="badge groups" title="{e(t("replaced_in_hint"))}">'
                            f'{e(t("replaced_in", group=group_name(g, ctx.names), id=i))}</span>')
    if m.project != GLOBAL_OWNER or m.topic != "_general":
        meta.append(f"<span>{e(m.project)} / {e(m.topic)}</span>")
    if score is not None:
        meta.append(f'<span class="score" title="{e(t("score_hint"))}">{e(t("score", score=f"{score:.3f}"))}</span>')
    where = _provenance(ctx, m)
    dates = e(t("created", when=t.when(m.created_at)))
    if m.updated_at != m.created_at:
        dates += " · " + e(t("updated", when=t.when(m.updated_at)))
    chain = ""
    if replaced:
        items = ", ".join(
            f'<a href="{e(url("/memory/item", id=r.id, user=ctx.user))}">m{r.id}</a> “{e(_short(r.content))}”' for r in replaced
        )
        chain += f'<p class="chain">{t("replaced", items=items)}</p>'
    if m.superseded_by is not None:
        link = f'<a href="{e(url("/memory/item", id=m.superseded_by, user=ctx.user))}">m{m.superseded_by}</a>'
        chain += f'<p class="chain">{t("superseded_by", link=link)}</p>'
    actions = []
    data = ""
    if not shared:
        # A light card: Edit is a link to the memory's own form (the page's
        # one edit dialog opens instead when JavaScript runs, filled from
        # the card's words and data-*), and the buttons belong to the page's
        # one action form (ACTION_FORM), so no card repeats a form or its words.
        v = _values(m)  # an empty project or topic is left out: the dialog's default
        data = "".join(f' data-{k}="{e(v[k])}"' for k in ("tier", "category", "importance", "project", "topic") if v[k])
        actions.append(f'<a class="button" href="{e(url("/memory/edit", id=m.id, back=ctx.back))}" data-edit'
                       f' aria-label="{e(t("edit_label", id=m.id))}">{e(t("edit"))}</a>')
        # Twenty cards a page: each button names its memory for a screen reader.
        if m.status is Status.ACTIVE:
            actions.append(_act(ctx, "/memory/archive", t("archive"), m.id))
        else:
            actions.append(_act(ctx, "/memory/restore", t("restore"), m.id))
        if groups:
            actions.append(_act(ctx, "/memory/unshare", t("unshare"), m.id))
        # A link to the confirmation (no POST yet: Back after the erase meets no resubmission).
        actions.append(f'<a class="button danger" href="{e(url("/memory/erase", id=m.id, back=ctx.back))}"'
                       f' aria-label="{e(t("erase_dots"))} m{m.id}">{e(t("erase_dots"))}</a>')
    if detail_link:
        actions.append(f'<a class="button" href="{e(url("/memory/item", id=m.id, user=ctx.user))}"'
                       f' aria-label="{e(t("details"))} m{m.id}">{e(t("details"))}</a>')
    notice = ""
    if ctx.flash and ctx.flash_on == m.id and not ctx.flash_shown:
        notice, ctx.flash_shown = f'<div class="flash" role="status">{e(ctx.flash)}{_undo_button(ctx)}</div>', True
    return f"""
<article class="card st-{e(m.status.value)}" id="m{m.id}" data-id="{m.id}"{data}>{notice}
  <p class="content">{e(m.content)}</p>
  <div class="meta">{" ".join(meta)}</div>
  <div class="meta sub"><a href="{e(url("/memory/item", id=m.id, user=ctx.user))}">m{m.id}</a> · {dates}{" · " + where if where else ""}</div>
  {chain}
  <div class="actions">{"".join(actions)}</div>
</article>"""


def shared_with(m: Memory) -> tuple[str, ...]:
    """The groups a member let read ``m`` (``/share``: ``*`` for every
    group), as memory/scope.py reads them: a credential, a profile entry or
    a ``_global`` row is never shared, whatever its provenance says."""
    if m.owner == GLOBAL_OWNER or m.tier != 2 or m.category is Category.CREDENTIAL:
        return ()
    return m.provenance.shared


def _undo_button(ctx: PageContext) -> str:
    """The notice's Undo: a single archive's is a restore; an edit's or an
    archive-all's names what the server kept of it (gateway/web/_undo.py)."""
    if not ctx.csrf:
        return ""
    if ctx.undo:
        return " " + _post(ctx, "/memory/restore", ctx.t("undo"), id=ctx.undo, user=ctx.user or "")
    if ctx.undo_token:
        return " " + _post(ctx, "/memory/undo", ctx.t("undo"), token=ctx.undo_token)
    return ""


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _renamed(t: Words, renamed: Sequence[tuple[str, str]]) -> str:
    """The user's renamed projects (memory/projects.py), or nothing."""
    if not renamed:
        return ""
    names = ", ".join(f"{old} → {new}" for old, new in renamed)
    return f'<p class="muted">{e(t("renamed_projects", names=names))}</p>'


def _stats_bar(t: Words, s: Stats) -> str:
    src = s.by_source
    auto = src.get("extraction", 0) + src.get("compression", 0)
    tiles = [
        ("active", s.by_status.get("active", 0)),
        ("profile", s.by_tier.get("1", 0)),
        ("knowledge", s.by_tier.get("2", 0)),
        ("auto", auto),
        ("manual", src.get("manual", 0)),
        ("migrated", src.get("migration", 0)),
        ("archived", s.by_status.get("archived", 0)),
        ("superseded", s.by_status.get("superseded", 0)),
        ("events", s.events),
        ("buffered", s.buffered - s.set_aside),
        *([("set_aside", s.set_aside)] if s.set_aside else []),
    ]
    body = "".join(
        f'<div class="tile" title="{e(t(f"tile_{k}_hint"))}"><b>{v}</b><span>{e(t(f"tile_{k}"))}</span></div>'
        for k, v in tiles
    )
    return (f'<section class="stats" aria-label="{e(t("statistics"))}"><div class="tile total"><b>{s.total}</b>'
            f'<span>{e(t("total"))}</span></div>{body}</section>')


def _set_aside(ctx: PageContext, user: str, s: Stats) -> str:
    """Lines the memory model could not take: after a switch to a model
    that can, the operator has them tried again."""
    if not s.set_aside:
        return ""
    return (f'<p class="muted">{e(ctx.t("set_aside_text", n=s.set_aside))}'
            f'{_post(ctx, "/memory/retry-set-aside", ctx.t("try_again"), user=user)}</p>')


# -- layout ---------------------------------------------------------------------


CSS = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI","Noto Sans","PingFang SC","Microsoft YaHei",sans-serif;color:#1f2328;background:#f6f7f9}
a{color:#0b63c5;text-decoration:none}a:hover{text-decoration:underline}
header.top{display:flex;align-items:center;gap:16px;padding:10px 20px;background:#1f2937;color:#fff}
header.top h1{font-size:16px;margin:0;font-weight:600}header.top .grow{flex:1}
header.top a{color:#cbd5e1}.langs{display:flex;gap:10px}header.top button{background:transparent;color:#cbd5e1;border-color:#475569}
.layout{display:flex;min-height:calc(100vh - 46px)}
nav.users{width:230px;flex:none;background:#fff;border-right:1px solid #e3e6ea;padding:12px 0}
nav.users h2{font-size:12px;text-transform:uppercase;letter-spacing:.05em;color:#6b7280;margin:4px 16px 8px}
nav.users ul{list-style:none;margin:0;padding:0}
nav.users li a{display:flex;justify-content:space-between;gap:8px;padding:6px 16px;color:#1f2328;overflow-wrap:anywhere}
nav.users li a:hover{background:#f1f5f9;text-decoration:none}
nav.users li a.on{background:#e0ecff;font-weight:600}
nav.users .count{color:#6b7280;font-variant-numeric:tabular-nums}
nav.users h2+p.hint{margin:0 16px 6px;font-size:12px}
nav.users ul+h2{margin-top:16px}
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
.content{white-space:pre-wrap;overflow-wrap:anywhere}.card .content{margin:0 0 6px;font-size:15px}
table.log td,.events li,ul.linked li{overflow-wrap:anywhere}
.meta{display:flex;flex-wrap:wrap;gap:6px;align-items:center;color:#4b5563;font-size:12px}.meta.sub{margin-top:4px;color:#6b7280}
.badge{border-radius:10px;padding:1px 8px;background:#eef2f7;color:#374151}
.src-extraction,.src-compression{background:#e6f4ea;color:#1e6b34}.src-manual{background:#e8effd;color:#1d4ed8}.src-migration{background:#fdf3e1;color:#8a5a00}
.st-archived .badge.st-archived,.badge.st-archived{background:#f3f4f6;color:#6b7280}.badge.st-superseded{background:#fdecec;color:#9f1d1d}
.badge.shared{background:#f3e8ff;color:#6b21a8}.badge.groups{background:#fdf3e1;color:#8a5a00}.score{color:#6b7280}
.chain{margin:6px 0 0;font-size:12px;color:#6b7280}
.actions{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start;margin-top:8px}
form.inline{display:inline}
button,.button{font:inherit;font-size:13px;padding:4px 12px;border:1px solid #cfd5dc;border-radius:6px;background:#fff;color:#1f2328;cursor:pointer;display:inline-block}
button:hover,.button:hover{background:#f1f5f9;text-decoration:none}
button.primary,.button.primary{background:#0b63c5;border-color:#0b63c5;color:#fff}button.primary:hover{background:#0a56ab}
button.danger,.button.danger{color:#b42318;border-color:#f1b8b3}button.danger:hover,.button.danger:hover{background:#fdecec}
button.danger.solid{background:#b42318;color:#fff;border-color:#b42318}
input,select,textarea{font:inherit;padding:5px 8px;border:1px solid #cfd5dc;border-radius:6px;background:#fff}
textarea{width:100%;resize:vertical}
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
.skip{position:absolute;left:-9999px;top:0;background:#fff;padding:6px 12px;z-index:10}.skip:focus{left:8px}
a:focus-visible,button:focus-visible,summary:focus-visible,input:focus-visible,select:focus-visible,textarea:focus-visible{outline:2px solid #0b63c5;outline-offset:2px}
form.filter{display:inline-flex;gap:6px;align-items:flex-end;margin-left:auto}form.filter label{flex-direction:row;align-items:center;gap:6px}
@media (max-width: 720px){.layout{flex-direction:column}nav.users{width:auto;border-right:none;border-bottom:1px solid #e3e6ea;max-height:32vh;overflow:auto}main{padding:12px}header.top{padding:10px 12px;gap:10px}.tabs{flex-wrap:wrap}.row input,.row select{max-width:100%}table.log{display:block;overflow-x:auto}table.prov th{width:auto;white-space:normal}}
"""

# Served apart (``GET STYLESHEET``), not inline: fetched once and cached for
# good, its address naming its content so a new release's is fetched anew.
CSS_BYTES = CSS.encode("utf-8")
STYLESHEET = f"/memory/style-{hashlib.sha256(CSS_BYTES).hexdigest()[:16]}.css"

JS = """
document.querySelectorAll('[data-open]').forEach(function (b) {
  b.addEventListener('click', function () { document.getElementById(b.dataset.open).showModal(); });
});
document.querySelectorAll('[data-close]').forEach(function (b) {
  b.addEventListener('click', function () { b.closest('dialog').close(); });
});
document.querySelectorAll('a[data-edit]').forEach(function (a) {
  a.addEventListener('click', function (ev) {
    var card = a.closest('article'), d = document.getElementById('edit-dialog');
    if (!card || !d || !d.showModal) { return; }  // the link's own page then
    ev.preventDefault();
    var f = d.querySelector('form'), el = function (n) { return f.elements.namedItem(n); };
    el('id').value = card.dataset.id;
    el('user').value = document.getElementById('act').elements.namedItem('user').value;
    el('content').value = card.querySelector('.content').textContent;
    ['tier', 'category', 'importance', 'project', 'topic'].forEach(function (k) { el(k).value = card.dataset[k] || ''; });
    document.getElementById('edit-title').textContent = a.getAttribute('aria-label');
    d.showModal();
  });
});
var linked = location.hash && document.getElementById(location.hash.slice(1));
if (linked && linked.tagName === 'DIALOG') { linked.showModal(); }
"""


def layout(ctx: PageContext, title: str, body: str, *, picker: bool = True) -> str:
    t = ctx.t
    nav = _picker(ctx) if picker else ""
    logout = (
        f'<form method="post" action="/memory/logout" class="inline">{_hidden(ctx)}<button type="submit">{e(t("sign_out"))}</button></form>'
        if ctx.csrf
        else ""
    )
    # The other languages, each in its own words (a reader lost in one still finds theirs).
    switch = '<span class="langs">' + " ".join(
        f'<a href="{e(url("/memory/lang", set=code, back=ctx.back))}" lang="{tag}" hreflang="{tag}">{e(name)}</a>'
        for code, (name, tag) in LANGS.items() if code != t.lang
    ) + "</span>"
    flash = f'<div class="flash" role="status">{e(ctx.flash)}{_undo_button(ctx)}</div>' if ctx.flash and not ctx.flash_shown else ""
    # Signed in only (the users are listed): the gateway's zone is no one else's business.
    footer = f'<footer class="muted">{e(t("times_in", zone=t.zone))}</footer>' if ctx.users else ""
    return f"""<!doctype html>
<html lang="{t.html_lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{e(title)} · {e(t("title_suffix"))}</title>
<link rel="stylesheet" href="{STYLESHEET}"></head>
<body><a class="skip" href="#main">{e(t("skip"))}</a>
<header class="top"><h1><a href="/memory">{e(t("brand"))}</a></h1><span class="grow"></span>{switch}{logout}</header>
<div class="layout">{nav}<main id="main">{flash}{body}{_action_form(ctx) if ctx.user else ""}{footer}</main></div>
<script nonce="{e(ctx.nonce)}">{JS}</script></body></html>"""


CURRENT = ' aria-current="page"'


def _picker(ctx: PageContext) -> str:
    t = ctx.t
    items = "".join(
        f'<li><a href="{e(url("/memory", user=u.name))}" class="{"on" if u.name == ctx.user else ""}"'
        f'{CURRENT if u.name == ctx.user else ""}'
        f' title="{e(t("user_counts", active=u.active, archived=u.archived, superseded=u.superseded))}">'
        f'<span>{e(u.name)}</span><span class="count">{u.active}</span></a></li>'
        for u in ctx.users
    )
    groups = "".join(
        f'<li><a href="{e(url("/memory/group", group=g.place))}" title="{e(g.place)}">'
        f'<span>{e(ctx.names.get(g.place) or g.place)}</span>'
        f'<span class="count">{e(t.count("note", g.notes))}</span></a></li>'
        for g in ctx.groups
    )
    if groups:  # a group's own memory (memory/groupnotes.py): nobody's, so not among the users
        groups = (f'<h2 aria-label="{e(t("groups_nav"))}">{e(t("groups"))}</h2>'
                  f'<p class="muted hint">{e(t("groups_hint"))}</p><ul>{groups}</ul>')
    return (f'<nav class="users" aria-label="{e(t("users_nav"))}"><h2>{e(t("users"))}</h2><ul>{items}</ul>'
            f'{groups}</nav>')


def group_page(ctx: PageContext, group: GroupSummary, notes: Sequence[Memory]) -> str:
    """One group's own notes (memory/groupnotes.py), each with who said it,
    an edit and an erase link; and the erasure of the group's whole memory."""
    t = ctx.t
    name = ctx.names.get(group.place) or group.place
    title = t("group_notes_h", group=name)
    back = url("/memory/group", group=group.place)
    cards = "".join(
        f"""<article class="card" id="m{m.id}"><p class="content">{e(m.content)}</p>
<div class="meta"><span class="badge">{e(t("said_by_names", names=", ".join(m.provenance.said_by) or "?"))}</span>
<span>m{m.id} · {e(t.when(m.created_at))}</span></div>
<div class="actions"><a class="button" href="{e(url("/memory/group-note/edit", id=m.id, group=group.place, back=back))}"
 aria-label="{e(t("edit"))} m{m.id}">{e(t("edit"))}</a>
<a class="button danger" href="{e(url("/memory/group-note/erase", id=m.id, group=group.place, back=back))}"
 aria-label="{e(t("erase_dots"))} m{m.id}">{e(t("erase_dots"))}</a></div></article>"""
        for m in notes
    ) or f'<div class="empty"><h3>{e(t("group_notes_empty"))}</h3></div>'
    body = f"""<div class="head"><h2>{e(title)}</h2></div>
<p class="muted">{e(t("groups_hint"))}</p>{cards}
<details class="danger"><summary>{e(t("forget_group"))}</summary>
<a class="button danger" href="{e(url("/memory/forget-group", group=group.place, back=back))}">{e(t("forget_group"))}</a></details>"""
    return layout(ctx, title, body)


def group_note_edit_page(ctx: PageContext, place: str, m: Memory) -> str:
    """A group note's edit form: its words and search terms (who said it stays)."""
    t = ctx.t
    title = t("edit_group_note", id=m.id)
    terms = ", ".join(m.search_terms)
    form = (f'<form method="post" action="/memory/group-note/edit">{_hidden(ctx, id=m.id, group=place)}'
            f'<label class="wide">{e(t("content"))}<textarea name="content" rows="3" required maxlength="4000">'
            f'{e(m.content)}</textarea></label>'
            f'<label class="wide">{e(t("search_terms_label"))}<input name="search_terms" value="{e(terms)}"'
            f' maxlength="600"></label>'
            f'<div class="actions"><button type="submit" class="primary">{e(t("save"))}</button>'
            f'<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></form>')
    return layout(ctx, title, f'<div class="head"><h2>{e(title)}</h2></div>'
                              f'<p class="muted">{e(t("said_by_names", names=", ".join(m.provenance.said_by) or "?"))}</p>{form}')


def group_note_erase_page(ctx: PageContext, place: str, m: Memory, plan: Erasure) -> str:
    """The confirmation of erasing one group note, with what goes with it."""
    t = ctx.t
    built = ""
    if plan.versions:
        built = (f"<p>{e(t('versions_of', versions=t.count('version', len(plan.versions))))}</p>"
                 + _linked_memories(t, plan.versions))
    title = t("erase_group_note_q", id=m.id)
    body = f"""<div class="confirm"><h2>{e(title)}</h2>
<p class="content">{e(m.content)}</p>
<p>{e(t("erase_group_note_text"))}</p>
{built}
<div class="actions">{_post(ctx, "/memory/group-note/erase", t("erase_for_good"), cls="danger solid", id=m.id, group=place,
                            confirm="yes")}
<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></div>"""
    return layout(ctx, title, body)


def forget_group_page(ctx: PageContext, group: GroupSummary) -> str:
    """The confirmation of erasing one group's own memory."""
    t = ctx.t
    name = ctx.names.get(group.place) or group.place
    title = t("forget_group_q", group=name)
    body = f"""<div class="confirm"><h2>{e(title)}</h2>
<p>{e(t("forget_group_text", group=name, place=group.place, notes=t.count("note", group.notes),
                             rows=t.count("row", group.rows)))}</p>
<div class="actions">{_post(ctx, "/memory/forget-group", t("forget_group"), cls="danger solid", group=group.place,
                            confirm="yes")}
<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></div>"""
    return layout(ctx, title, body)


# -- pages ------------------------------------------------------------------------


KEPT = "kept_"  # the sign-in form's fields carrying an add's or edit's typed values (kept_action: which)


def login_page(
    nonce: str, *, failed: bool = False, t: Words | None = None, back: str = "/memory", kept: dict[str, str] | None = None,
    kept_action: str = "",
    wait: str = "",
) -> str:
    """The sign-in form. ``kept``: what was typed into an add or edit form
    (``kept_action``) sent after the session ended, carried in this form's
    hidden fields (the browser's copy, never stored on the server) so that
    signing in gives the form back as typed. ``wait``: the seconds this
    address is locked out for (too many wrong tokens), said first: the
    form is there only to carry ``kept`` until then."""
    ctx = PageContext(nonce=nonce, csrf="", t=t or Words(), back=back)
    t = ctx.t
    msg = f'<div class="flash err" role="alert">{e(t("wrong_token"))}</div>' if failed else ""
    if wait:
        msg += f'<div class="flash err" role="alert">{e(t("too_many", seconds=wait))}</div>'
    carried = ""
    if kept and kept_action:
        msg += f'<div class="flash" role="status">{e(t("kept_wait" if wait else "kept_sign_in"))}</div>'
        carried = f'<input type="hidden" name="{KEPT}action" value="{e(kept_action)}">' + "".join(
            f'<input type="hidden" name="{KEPT}{e(k)}" value="{e(v)}">' for k, v in kept.items())
    body = f"""<div class="login"><h2>{e(t("sign_in"))}</h2>{msg}
<p class="muted">{t("needs_token")}</p>
<form method="post" action="/memory/login"><input type="hidden" name="back" value="{e(back)}">{carried}<label>{e(t("admin_token"))}<input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit" class="primary">{e(t("sign_in"))}</button></form></div>"""
    return layout(ctx, t("sign_in"), body, picker=False)


def message_page(ctx: PageContext, title: str, text: str, *, back: str = "/memory") -> str:
    return layout(ctx, title, f'<h2>{e(title)}</h2><div class="flash err" role="alert">{e(text)}</div>'
                              f'<p><a href="{e(back)}">{e(ctx.t("back_to_page"))}</a></p>')


def retry_page(ctx: PageContext, title: str, text: str, *, action: str, typed: dict[str, str], err: bool = True) -> str:
    """An add or edit the server refused (or one sent after the session
    ended, after signing in: ``err=False``): the reason, and the form again
    with what was typed in it, so nothing typed is lost."""
    t = ctx.t
    keep = {k: typed[k] for k in ("id", "user") if typed.get(k)}
    values: dict[str, str] = {k: str(typed[k]) for k in EDITABLE if k in typed}
    form = (f'<form method="post" action="{e(action)}">{_hidden(ctx, **keep)}'
            f'{_fields(t, None, typed=values, add=action == "/memory/add")}'
            f'<div class="actions"><button type="submit" class="primary">{e(t("save"))}</button>'
            f'<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></form>')
    notice = f'<div class="flash err" role="alert">{e(text)}</div><p>{e(t("try_again_below"))}</p>' if err else \
        f'<div class="flash" role="status">{e(text)}</div>'
    body = f'<h2>{e(title)}</h2>{notice}{form}'

    return layout(ctx, title, body)


def overview_body(ctx: PageContext) -> str:
    t = ctx.t
    if not ctx.users or all(u.total == 0 for u in ctx.users):
        return _empty(t("no_memories_title"), t("no_memories_text"))
    return f'<div class="head"><h2>{e(t("choose_user"))}</h2></div><p class="muted">{t("choose_user_text")}</p>'



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
    total: int = 0,
    category: str = "",
    has: str = "",
    renamed: Sequence[tuple[str, str]] = (),
) -> str:
    t = ctx.t
    user = ctx.user or ""
    replaced = replaced or {}
    cat = category or None
    kept = {"category": cat, "has": has or None}  # the list's filters, kept by its tabs and pages
    tabs = "".join(
        f'<a href="{e(url("/memory", user=user, status=k, **kept))}" class="{"on" if k == status and not query else ""}"'
        f'{CURRENT if k == status and not query else ""}>{e(t(f"tab_{k}"))}'
        + (f" ({stats.by_status.get(k, 0)})" if k != "all" else f" ({stats.total})")
        + "</a>"
        for k in STATUS_TABS
    )
    search = f"""<form class="search" method="get" action="/memory" role="search">
<input type="hidden" name="user" value="{e(user)}">
<input type="search" name="q" value="{e(query)}" placeholder="{e(t("search_placeholder", user=user))}" aria-label="{e(t("search_label"))}">
<button type="submit">{e(t("search"))}</button>{f'<a class="button" href="{e(url("/memory", user=user))}">{e(t("clear"))}</a>' if query else ""}</form>"""
    if query:
        also = "" if user == GLOBAL_OWNER else t("found_also_global")
        head = f'<p class="muted">{e(t("found_head", memories=count_memories(len(scored), t), query=query, user=user, also=also))}</p>'
        cards = "".join(card(ctx, m, score=s, replaced=replaced.get(m.id, ())) for m, s in scored)
        if not scored:
            cards = _empty(t("nothing_found"), t("nothing_found_text", user=user, query=query))
        # The bot recalls its best few; the list holds every one with the words.
        cards += (f'<p><a class="button" href="{e(url("/memory", user=user, status="all", has=" ".join(query.split())[:200]))}">'
                  f'{e(t("every_holding", words=query))}</a></p>')
        if events:
            cards += f"<h3>{e(t('matching_events'))}</h3><ul class='events'>" + "".join(
                f"<li><b>{e(h.date)}</b> {e(h.content)} <span class='muted'>{e(h.citation())}</span></li>" for h in events
            ) + "</ul>"
        listing = head + cards
    else:
        if memories:
            listing = "".join(card(ctx, m, replaced=replaced.get(m.id, ())) for m in memories)
        elif offset:
            # A stale link or a page emptied by erasing: the way back is the last page that has any.
            last = max(0, (total - 1) // page_size * page_size)
            back = f'<p><a class="button" href="{e(url("/memory", user=user, status=status, **kept, offset=last))}">{e(t("newer"))}</a></p>'
            listing = _empty(t("no_more"), t("no_more_text")) + (back if total else "")
        elif has:
            shown = t("none_holding", status=_status(t, status) if status != "all" else "", words=has)
            listing = _empty(" ".join(shown.split()), t("nothing_here"))
        elif category:
            shown = t("none_in_category", status=_status(t, status) if status != "all" else "", category=_category(t, category))
            listing = _empty(" ".join(shown.split()), t("nothing_here"))
        elif status in ("active", "all"):
            listing = _empty(t("user_empty", user=user), t("user_empty_text"))
        else:
            listing = _empty(t("none_in_tab", status=_status(t, status)), t("nothing_here"))
        pager = ""
        if memories and (offset or more):
            prev = (
                f'<a class="button" rel="prev" href="{e(url("/memory", user=user, status=status, **kept, offset=max(0, offset - page_size)))}">{e(t("newer"))}</a>'
                if offset
                else "<span></span>"
            )
            nxt = (f'<a class="button" rel="next" href="{e(url("/memory", user=user, status=status, **kept, offset=offset + page_size))}">{e(t("older"))}</a>'
                   if more else "<span></span>")
            shown = t("shown", first=offset + 1, last=offset + len(memories), total=max(total, offset + len(memories)))
            pager = f'<nav class="pager" aria-label="{e(t("pages"))}">{prev}<span class="muted">{e(shown)}</span>{nxt}</nav>'
        cats = f'<option value="">{e(t("all_categories"))}</option>' + _options(
            (c.value for c in Category), category, lambda c: _category(t, c))
        filters = (f'<form class="filter" method="get" action="/memory"><input type="hidden" name="user" value="{e(user)}">'
                   f'<input type="hidden" name="status" value="{e(status)}">'
                   f'<label>{e(t("filter_category"))}<select name="category">{cats}</select></label>'
                   f'<label>{e(t("has_label"))}<input type="search" name="has" value="{e(has)}" maxlength="200"'
                   f' placeholder="{e(t("has_placeholder"))}"></label>'
                   f'<button type="submit">{e(t("filter"))}</button></form>')
        listing = f'<nav class="tabs" aria-label="{e(t("tabs_label"))}">{tabs}</nav>{filters}' + listing + pager
    add_dialog = f"""<dialog id="add-dialog" aria-labelledby="add-title"><h3 id="add-title">{e(t("add_title", user=user))}</h3>
<p class="muted">{e(t("add_text", everyone=t("add_everyone") if user == GLOBAL_OWNER else ""))}</p>
<form method="post" action="/memory/add">{_hidden(ctx, user=user)}{_fields(t, None)}
<div class="actions"><button type="submit" class="primary">{e(t("add_memory"))}</button><button type="button" data-close>{e(t("cancel"))}</button></div></form></dialog>"""
    danger = f"""<details class="danger"><summary>{e(t("clear_title"))}</summary>
<p>{t("clear_archive_text", user=e(user), n=stats.by_status.get("active", 0))}</p>
<a class="button danger" href="{e(url("/memory/archive-all", user=user, back=ctx.back))}">{e(t("archive_all_dots"))}</a>
<p>{t("clear_erase_text", memories=e(count_memories(stats.total, t)), user=e(user))}</p>
<a class="button danger" href="{e(url("/memory/erase-all", user=user, back=ctx.back))}">{e(t("erase_all_dots"))}</a></details>""" if stats.total else ""
    body = f"""<div class="head"><h2>{e(user)}</h2><span class="grow"></span>
<button type="button" class="primary" data-open="add-dialog">{e(t("add_button"))}</button>
<a class="button" href="{e(url("/memory/log", user=user))}">{e(t("change_log"))}</a>
<a class="button" href="{e(url("/memory/export", user=user))}" download title="{e(t("export_hint", user=user))}">{e(t("export"))}</a></div>
{_stats_bar(t, stats)}{_renamed(t, renamed)}{_set_aside(ctx, user, stats)}{search}{listing}{add_dialog}{_edit_dialog(ctx)}{danger}"""
    return layout(ctx, user, body)


def detail_page(
    ctx: PageContext, m: Memory, *, older: Sequence[Memory], newer: Sequence[Memory], log: Sequence[LogEntry]
) -> str:
    t = ctx.t
    p = m.provenance
    prov_rows = [
        ("p_owner", m.owner),
        ("p_status", _status(t, m.status)),
        ("p_source", t(f"src_{m.source.value}")),
        ("p_channel", p.channel),
        ("p_chat", p.chat_id),
        ("p_session", p.session),
        ("p_said", " – ".join(_said(t, x) for x in (p.date_from, p.date_to) if x)),
        ("p_messages", ", ".join(p.message_ids)),
        ("p_refs", ", ".join(p.refs)),
        # Indexed with the fact, never shown to the model: the owner may see it.
        ("p_drawn_from", m.source_text),
        ("p_found_by", ", ".join(m.search_terms)),  # memory/cues.py: found by, never shown as the fact
        ("p_created", t.when(m.created_at)),
        ("p_updated", t.when(m.updated_at)),
        ("p_recalled", t("recalled_times", when=t.when(m.last_accessed), times=t.count("time", m.access_count))
         if m.access_count else t("never")),
    ]
    table = "".join(f'<tr><th scope="row">{e(t(k))}</th><td>{e(v)}</td></tr>' for k, v in prov_rows if v)
    chain = ""
    if newer:
        chain += f"<h3>{e(t('replaced_by_h'))}</h3>" + "".join(card(ctx, x) for x in newer)
    if older:
        chain += f"<h3>{e(t('this_replaced_h'))}</h3>" + "".join(card(ctx, x) for x in older)
    body = f"""<div class="head"><h2>{e(t("memory_title", id=m.id))}</h2><span class="grow"></span>
<a class="button" href="{e(url("/memory", user=ctx.user or m.owner))}">← {e(ctx.user or m.owner)}</a></div>
{card(ctx, m, detail_link=False)}
<h3>{e(t("provenance"))}</h3><table class="log prov">{table}</table>
{chain or f'<p class="muted">{e(t("no_versions"))}</p>'}
<h3>{e(t("change_log"))}</h3>{_log_table(t, log) if log else f'<p class="muted">{e(t("no_log_for_memory"))}</p>'}
{_edit_dialog(ctx)}"""
    return layout(ctx, f"m{m.id}", body)


def _log_table(t: Words, entries: Sequence[LogEntry]) -> str:
    rows = "".join(
        f"<tr><td>{e(t.when(x.at))}</td><td{_code(t, x.job)}>{e(t.code(x.job))}</td>"
        f"<td{_code(t, x.action)}>{e(t.code(x.action))}</td>"
        f"<td>{_memory_link(x.memory_id)}</td><td class='detail'>{e(_detail(x.detail))}</td></tr>"
        for x in entries
    )
    head = "".join(f'<th scope="col">{e(t(k))}</th>' for k in ("col_when", "col_job", "col_action", "col_memory", "col_detail"))
    return f'<table class="log"><tr>{head}</tr>{rows}</table>'


def _code(t: Words, code: str) -> str:
    """The code itself as a cell's title where words stand for it (the CLI's log shows codes)."""
    return f' title="{e(code)}"' if t.code(code) != code else ""


def _memory_link(memory_id: int | None) -> str:
    if memory_id is None:
        return "-"
    return f'<a href="{e(url("/memory/item", id=memory_id))}">m{memory_id}</a>'


def _detail(text: str) -> str:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


def log_page(ctx: PageContext, entries: Sequence[LogEntry], *, older: int | None = None, paged: bool = False) -> str:
    """``older``: the id the next (older) page starts below; ``paged``: this is not the newest page."""
    t = ctx.t
    user = ctx.user or ""
    pager = ""
    if older is not None or paged:
        first = f'<a class="button" href="{e(url("/memory/log", user=user))}">{e(t("newest"))}</a>' if paged else "<span></span>"
        nxt = (f'<a class="button" rel="next" href="{e(url("/memory/log", user=user, before=older))}">{e(t("older"))}</a>'
               if older is not None else "<span></span>")
        pager = f'<nav class="pager" aria-label="{e(t("pages"))}">{first}{nxt}</nav>'
    body = f"""<div class="head"><h2>{e(t("log_title", user=user))}</h2><span class="grow"></span>
<a class="button" href="{e(url("/memory", user=user))}">← {e(user)}</a></div>
<p class="muted">{t("log_text")}</p>
{_log_table(t, entries) if entries else _empty(t("log_empty"), t("log_empty_text"))}{pager}"""
    return layout(ctx, t("log_title", user=user), body)


def _linked(items: Iterable[str]) -> str:
    return '<ul class="linked">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _linked_memories(t: Words, rows: Sequence[Memory]) -> str:
    return _linked(
        f'<a href="{e(url("/memory/item", id=m.id, user=m.owner))}">m{m.id}</a> '
        f'<span class="badge st-{e(m.status.value)}">{e(_status(t, m.status))}</span> “{e(_short(m.content, 100))}”'
        for m in rows
    )


def _kept(t: Words, owner: str, kept: Sequence[Hit]) -> str:
    """The linked records an erase leaves, each with a link: a memory to its
    page, an event (no page of its own) to a search for its words."""
    facts = [h for h in kept if h.kind == "memory"]
    events = [h for h in kept if h.kind == "event"]
    out = ""
    if facts:
        out += f"<p>{e(t('kept_facts'))}</p>" + _linked(
            f'<a href="{e(url("/memory/item", id=h.id, user=owner))}">m{h.id}</a> “{e(_short(h.content, 100))}”'
            for h in facts
        )
    if events:
        out += f"<p>{e(t('kept_events'))}</p>" + _linked(
            f'<a href="{e(url("/memory", user=owner, q=" ".join(h.content.split())[:100]))}">e{h.id}</a> '
            f"{e(h.date)} “{e(_short(h.content, 100))}”"
            for h in events
        )
    return out


def erase_confirm_page(ctx: PageContext, m: Memory, plan: Erasure) -> str:
    """Erase one row, or with it what would keep the fact alive: its older
    versions (the same words, restorable) and the Core Memory entries built
    on it (in every system prompt, and kept fresh by the weekly refresh)."""
    t = ctx.t
    more = len(plan.versions) + len(plan.entries)
    built = ""
    if plan.versions:
        built += f"<p>{e(t('versions_of', versions=t.count('version', len(plan.versions))))}</p>" + _linked_memories(t, plan.versions)
    if plan.entries:
        built += f"<p>{e(t('entries_on', entries=t.count('entry', len(plan.entries))))}</p>" + _linked_memories(t, plan.entries)
    if built:
        built = f"<h3>{e(t('built_h'))}</h3>{built}" f'<p class="muted">{e(t("built_note"))}</p>'
    else:
        built = f'<p class="muted">{e(t("nothing_built"))}</p>'
    kept = ""
    if plan.kept:
        kept = f"<h3>{e(t('kept_h'))}</h3>" f'<p class="muted">{e(t("kept_note"))}</p>' + _kept(t, m.owner, plan.kept)
    if more:
        buttons = (
            _post(ctx, "/memory/erase", t("erase_with_history", rows=t.count("row", more + 1)),
                  cls="danger solid", id=m.id, user=m.owner, confirm="yes", cascade="yes")
            + _post(ctx, "/memory/erase", t("erase_row_only"), cls="danger", id=m.id, user=m.owner, confirm="yes")
        )
    else:
        buttons = _post(ctx, "/memory/erase", t("erase_for_good"), cls="danger solid", id=m.id, user=m.owner, confirm="yes")
    body = f"""<div class="confirm"><h2>{e(t("erase_q", id=m.id))}</h2>
<p class="content">{e(m.content)}</p>
<p>{e(t("erase_text"))}</p>
{built}{kept}
<div class="actions">{buttons}
{_post(ctx, "/memory/archive", t("archive_instead"), id=m.id, user=m.owner)}
<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></div>"""
    return layout(ctx, t("erase_q", id=m.id), body)


def clear_confirm_page(ctx: PageContext, *, erase: bool, count: int) -> str:
    t = ctx.t
    user = ctx.user or ""
    if erase:
        title = t("erase_all_q", memories=count_memories(count, t), user=user)
        body = f"""<div class="confirm"><h2>{e(title)}</h2>
<p>{t("erase_all_text", user=e(user))}</p>
<form method="post" action="/memory/erase-all">{_hidden(ctx, user=user, confirm="yes")}
<label>{t("type_name", user=e(user))}<input name="typed" autocomplete="off" required></label>
<div class="actions"><button type="submit" class="danger solid">{e(t("erase_all"))}</button>
<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></form></div>"""
    else:
        title = t("archive_all_q", which="the" if count == 1 else "all", count=count,
                  noun="memory" if count == 1 else "memories", user=user)
        body = f"""<div class="confirm"><h2>{e(title)}</h2>
<p>{e(t("archive_all_text"))}</p>
<div class="actions">{_post(ctx, "/memory/archive-all", t("archive_all_yes"), cls="danger solid", user=user, confirm="yes")}
<a class="button" href="{e(ctx.back)}">{e(t("cancel"))}</a></div></div>"""
    return layout(ctx, title, body)
