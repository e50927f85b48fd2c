"""What a Feishu message's ``content`` says, in words.

The content JSON of each message type is the same in a receive event and
in ``GET /open-apis/im/v1/messages/:id`` (Feishu's "接收消息内容结构"), so
the event parser (``events``) and the chat-record reader (``records``)
share these: rich text (``post``) as plain text, a card's visible text, and
one bracketed line for what has no words of its own (a location, a task,
a vote, an event, a shared chat or contact), so such a message is answered
instead of dropped in silence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from channels.marks import location_mark, place_mark, poll_mark

__all__ = [
    "SHARED_TYPES",
    "card_text",
    "flatten_post_content",
    "media_mark",
    "post_image_keys",
    "resolve_placeholders",
    "shared_words",
]

_PLACEHOLDER = re.compile(r"(@_user_\d+|@_all)([ \t]?)")
_LOCALE_PREFERENCE = ("zh_cn", "en_us", "ja_jp")
# What a user shares that is not words: said as one bracketed line.
SHARED_TYPES = frozenset({
    "location", "share_chat", "share_user", "todo", "vote", "share_calendar_event", "calendar", "general_calendar",
})
_CALENDAR_TYPES = frozenset({"share_calendar_event", "calendar", "general_calendar"})


def resolve_placeholders(text: str, names: Mapping[str, str]) -> str:
    """``@_user_N`` -> ``names[key]`` ("" removes the mention and its space)."""

    def repl(match: re.Match[str]) -> str:
        key, space = match.group(1), match.group(2)
        name = names.get(key, "@all" if key == "@_all" else "")
        return name + space if name else ""  # a removed mention takes its space along

    return _PLACEHOLDER.sub(repl, text)


def _post_body(content: Mapping[str, Any]) -> Mapping[str, Any]:
    """Received posts carry ``{title, content}``; sent ones are wrapped in a
    locale (``{"zh_cn": {...}}``), sometimes under ``"post"``. Accept all."""
    if "post" in content and isinstance(content["post"], Mapping):
        content = content["post"]
    if "content" in content:
        return content
    for locale in _LOCALE_PREFERENCE:
        body = content.get(locale)
        if isinstance(body, Mapping):
            return body
    for value in content.values():
        if isinstance(value, Mapping) and "content" in value:
            return value
    return {}


def flatten_post_content(
    content: Mapping[str, Any], names: Mapping[str, str], bot_open_id: str | None
) -> tuple[str, bool]:
    """A post as plain text (title, then one line per paragraph) and
    whether it @-mentions the bot."""
    body = _post_body(content)
    lines: list[str] = []
    at_bot = False
    if body.get("title"):
        lines.append(str(body["title"]))
    for paragraph in body.get("content") or ():
        if not isinstance(paragraph, list):
            continue
        parts: list[str] = []
        for el in paragraph:
            if not isinstance(el, Mapping):
                continue
            tag = el.get("tag")
            if tag in ("text", "md", "code_block"):
                parts.append(str(el.get("text") or ""))
            elif tag == "a":
                label, href = str(el.get("text") or ""), str(el.get("href") or "")
                parts.append(f"{label} ({href})" if href and href not in label else label or href)
            elif tag == "at":
                uid = str(el.get("user_id") or el.get("open_id") or "")
                if bot_open_id and uid == bot_open_id:
                    at_bot = True
                elif uid in names:
                    at_bot = at_bot or names[uid] == ""
                    parts.append(names[uid])
                elif uid in ("@_all", "all"):
                    parts.append("@all")
                else:
                    parts.append(f"@{el.get('user_name') or uid}")
            elif tag == "img":
                parts.append("[image]")
            elif tag == "media":
                parts.append("[video]")
            elif tag == "emotion":
                parts.append(f":{el.get('emoji_type') or 'emoji'}:")
        line = "".join(parts)
        if any(isinstance(el, Mapping) and el.get("tag") == "code_block" for el in paragraph):
            line = line.rstrip()  # keep code indentation
        else:
            line = line.strip()  # e.g. the space left where the bot's @ was
        if line:
            lines.append(line)
    return resolve_placeholders("\n".join(lines), names), at_bot


def post_image_keys(content: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``image_key`` of each ``img`` element of a post, in order."""
    keys: list[str] = []
    for paragraph in _post_body(content).get("content") or ():
        if isinstance(paragraph, list):
            keys.extend(
                str(el["image_key"])
                for el in paragraph
                if isinstance(el, Mapping) and el.get("tag") == "img" and el.get("image_key")
            )
    return tuple(keys)


def card_text(content: Mapping[str, Any]) -> str:
    """A card's visible words as Feishu hands a received card out: its
    ``title`` and ``elements``, paragraphs of text, links, mentions and
    notes (buttons, pickers and pictures are left out: no words to read)."""
    lines = [str(content["title"]).strip()] if isinstance(content.get("title"), str) and content["title"].strip() else []
    for paragraph in content.get("elements") or ():
        row = paragraph if isinstance(paragraph, list) else [paragraph]
        line = "".join(_card_words(el) for el in row).strip()
        if line:
            lines.append(line)
    return "\n".join(lines)


def _card_words(el: Any) -> str:
    if not isinstance(el, Mapping):
        return ""
    tag = el.get("tag")
    if tag in ("text", "plain_text", "lark_md", "markdown", "md"):
        return str(el.get("text") or el.get("content") or "")
    if tag == "a":
        label, href = str(el.get("text") or ""), str(el.get("href") or "")
        return f"{label} ({href})" if href and href not in label else label or href
    if tag == "at":
        return f"@{el['user_name']}" if el.get("user_name") else ""
    if tag == "note":
        return " ".join(w for w in (_card_words(e).strip() for e in el.get("elements") or ()) if w)
    return ""


def media_mark(msg_type: str, content: Mapping[str, Any]) -> str:
    """What stands for a message without words: ``[photo]``, ``[file
    name]``, ``[voice]``, ``[video]``, ``[sticker]``; "" for another type."""
    if msg_type == "image":
        return "[photo]"
    if msg_type in ("file", "folder"):
        name = str(content.get("file_name") or "").strip()
        return f"[{msg_type} {name}]" if name else f"[{msg_type}]"
    return {"audio": "[voice]", "media": "[video]", "sticker": "[sticker]"}.get(msg_type, "")


def shared_words(msg_type: str, content: Mapping[str, Any]) -> str:
    """One bracketed line for a shared location, chat, contact, task, vote
    or calendar event (:data:`SHARED_TYPES`); "" for another type. Times
    are Feishu's millisecond stamps, shown in UTC (the channel does not
    know the user's zone; the model does, and converts)."""
    if msg_type == "location":  # the same marks as Telegram's: one vocabulary for the model and memory
        name = str(content.get("name") or "").strip()
        try:
            lat, lon = float(content.get("latitude") or ""), float(content.get("longitude") or "")
        except (TypeError, ValueError):
            return place_mark(name, "") if name else "[location]"
        return place_mark(name, f"{lat:.5f}, {lon:.5f}") if name else location_mark(lat, lon)
    if msg_type == "share_chat":
        return "[shared group chat]"  # only its chat_id: the name needs the bot in that chat
    if msg_type == "share_user":
        return "[shared contact]"
    if msg_type == "todo":
        summary = content.get("summary")
        title = flatten_post_content(summary, {}, None)[0] if isinstance(summary, Mapping) else str(summary or "")
        title = " ".join(title.split())
        due = _when(content.get("due_time"))
        return f"[task: {title or 'untitled'}{f', due {due}' if due else ''}]"
    if msg_type == "vote":
        topic = str(content.get("topic") or "").strip() or "untitled"
        return poll_mark(topic, [str(o).strip() for o in content.get("options") or () if str(o).strip()])
    if msg_type in _CALENDAR_TYPES:
        summary = str(content.get("summary") or "").strip() or "untitled"
        span = _span(content.get("start_time"), content.get("end_time"))
        return f"[event: {summary}{f', {span}' if span else ''}]"
    return ""


def _moment(ms: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(int(ms) / 1000, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _when(ms: Any) -> str:
    at = _moment(ms)
    return at.strftime("%Y-%m-%d %H:%M UTC") if at is not None else ""


def _span(start_ms: Any, end_ms: Any) -> str:
    start, end = _moment(start_ms), _moment(end_ms)
    if start is None:
        return _when(end_ms) and f"until {_when(end_ms)}"
    if end is None or end <= start:
        return _when(start_ms)
    if end.date() == start.date():
        return f"{start:%Y-%m-%d %H:%M}–{end:%H:%M} UTC"
    return f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC"
