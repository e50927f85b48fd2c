"""``im.message.receive_v1`` events (schema 2.0) -> ``InboundMessage``, and
``im.message.recalled_v1`` -> a RECALL of the message it names, and
``im.chat.member.user.deleted_v1`` -> a LEFT for each member who went.

Plain dicts in, so the webhook and the long connection share one parser.
Text and rich text (``post``) become plain text; ``@_user_N`` placeholders
are resolved through the event's ``mentions``: the bot's own mention is
removed (it only addresses the bot), others become ``@Name`` so the model
still sees who was addressed. A location, task, vote, calendar event or
shared chat or contact becomes one bracketed line (``content.shared_words``);
a card the user passes on, its words as a forward; a chat record
(``merge_forward``) is flagged for the channel to read (``records``).
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from channels.media import audio_label, is_audio_name
from gateway.bus import BOT_LEFT, LEFT, RECALL, Forwarded, InboundMessage, Quoted
from gateway.commands import is_own_command

from .content import SHARED_TYPES, card_text, flatten_post_content, post_image_keys, resolve_placeholders, shared_words

__all__ = [
    "BOT_LEFT_EVENT",
    "LEFT_EVENT",
    "MESSAGE_EVENT",
    "RECALL_EVENT",
    "RECORD_TYPE",
    "UNREADABLE_TYPES",
    "EventParseError",
    "ParsedMessage",
    "app_tenant_of",
    "contact_id",
    "content_of",
    "event_id_of",
    "fetched_mention_names",
    "flatten_post",
    "parse_left_event",
    "parse_message_event",
    "parse_recall_event",
    "quoted_of",
]

MESSAGE_EVENT = "im.message.receive_v1"
# A message was withdrawn ("unsent"). lark-oapi has no event for an edited
# message, so Feishu edits are not followed.
RECALL_EVENT = "im.message.recalled_v1"
# Members left a group or were removed from it: a LEFT for each.
LEFT_EVENT = "im.chat.member.user.deleted_v1"
# The bot removed from a group: a LEFT of BOT_LEFT (the group's own memory goes).
BOT_LEFT_EVENT = "im.chat.member.bot.deleted_v1"
# What a user sends that has no text: parsed with text "" and metadata
# "unreadable", so the channel answers with a note instead of silence.
UNREADABLE_TYPES = frozenset({"image", "file", "audio", "media", "sticker"})
# A chat record (合并转发): the event holds a stand-in; the channel reads the
# messages (records.py).
RECORD_TYPE = "merge_forward"


class EventParseError(ValueError):
    """The event does not have the shape of a message event."""


@dataclass(frozen=True)
class ParsedMessage:
    message: InboundMessage
    # Every id of the sender (open_id, union_id, user_id with its tenant, and bare
    # for the app's own tenant: _sender): allowFrom may list any.
    sender_ids: tuple[str, ...]
    # The pictures of an ``image`` message or a ``post`` (its ``img``
    # elements), in order: keys for the message resource API.
    image_keys: tuple[str, ...] = ()
    audio_key: str = ""  # an ``audio`` message's recording (its ``file_key``), or an audio file's
    file_key: str = ""  # a ``file`` message's file, and its name
    file_name: str = ""
    audio_name: str = ""  # an audio file's (a ``file`` message of an audio type): its mark's name; "": voice
    record: bool = False  # a chat record: its messages are read by id (records.py)


def event_id_of(payload: Mapping[str, Any]) -> str:
    """The id Feishu redelivers under; v1 events call it ``uuid``."""
    header = payload.get("header")
    if isinstance(header, Mapping) and header.get("event_id"):
        return str(header["event_id"])
    return str(payload.get("uuid") or "")


def event_type_of(payload: Mapping[str, Any]) -> str:
    header = payload.get("header")
    if isinstance(header, Mapping):
        return str(header.get("event_type") or "")
    event = payload.get("event")
    return str(event.get("type") or "") if isinstance(event, Mapping) else ""


def _sender(ids: Mapping[str, Any], tenant: str, app_tenant: str) -> tuple[str, tuple[str, ...]]:
    """Who sent it (its ``sender_id``, the owner's second half) and every id
    allowFrom may match. Feishu's ids differ in reach: an open_id is the
    user's for this app, a union_id for its developer's apps, a user_id
    within one tenant only (and sent with the "user ID" permission alone).
    An external group holds several tenants, so a user_id is taken with
    the sender's ``tenant_key`` (``u0001@2ed2...``): two tenants' "u0001"
    are two people, never one owner sharing memory. A bare user_id still
    matches allowFrom for the app's own tenant (or a sender naming none,
    as before), as the operator read it off their admin console."""
    open_id, union_id, user_id = (str(ids.get(k) or "") for k in ("open_id", "union_id", "user_id"))
    scoped = f"{user_id}@{tenant}" if user_id and tenant else ""
    bare = user_id if user_id and (not tenant or tenant == app_tenant) else ""
    allowed = tuple(i for i in (open_id, union_id, scoped, bare) if i)
    if open_id or union_id:
        return open_id or union_id, allowed
    if not user_id:
        # Its owner would be "feishu:", one shared by every such sender.
        raise EventParseError("message sender has no open_id, union_id or user_id")
    if not tenant:
        # A user_id is one tenant's: taken bare, someone of another tenant
        # with the same user_id would be this sender, and read their memory.
        raise EventParseError("message sender named by user_id alone and no tenant_key")
    return scoped, allowed


def app_tenant_of(payload: Mapping[str, Any]) -> str:
    """The tenant the app is installed in: the event header's ``tenant_key``."""
    header = payload.get("header")
    return str(header.get("tenant_key") or "") if isinstance(header, Mapping) else ""


def contact_id(sender: str, app_tenant: str) -> tuple[str, str] | None:
    """How the contact directory is asked about a sender (:func:`_sender`'s
    id): (id, ``user_id_type``). A union_id is asked as one; a user_id
    (``u0001@tenant``) bare, and only in the app's own tenant, the one
    directory it can read: None for another tenant's, which names nobody
    there. Any other id is an open_id (a chat record's authors are)."""
    if sender.startswith("on_"):
        return sender, "union_id"
    user, at, tenant = sender.rpartition("@")
    if not at:
        return sender, "open_id"
    return (user, "user_id") if user and tenant and tenant == app_tenant else None


def parse_message_event(
    payload: Mapping[str, Any],
    *,
    bot_open_id: str | None,
    bot_message_ids: Container[str] = (),
) -> ParsedMessage | None:
    """Parse one message event.

    Returns None for messages the bot does not handle (sent by an app, or of
    an unknown type such as a system message, a red packet or a video call,
    or empty). An image, file, audio, video or sticker
    (:data:`UNREADABLE_TYPES`) comes back with text "" and
    ``metadata["unreadable"]`` set to its type; a chat record with text ""
    and ``record`` set; a shared location, task, vote, event, chat or
    contact as one bracketed line of text; a card (which a user can only
    pass on) as a forward of its words. Raises
    ``EventParseError`` for a payload that is not a message event at all,
    or one of a user who is named by no id.

    ``bot_open_id=None`` (the bot's identity could not be fetched) counts any
    mention as addressing the bot: better to answer one group message too
    many than to go silent in every group.
    """
    event = payload.get("event")
    if not isinstance(event, Mapping):
        raise EventParseError("event has no 'event' object")
    message, sender = event.get("message"), event.get("sender")
    if not isinstance(message, Mapping) or not isinstance(sender, Mapping):
        raise EventParseError("event has no 'message' or 'sender'")
    chat_id, message_id = message.get("chat_id"), message.get("message_id")
    if not chat_id or not message_id:
        raise EventParseError("message has no chat_id or message_id")
    if sender.get("sender_type", "user") != "user":
        return None  # other bots and apps: answering them risks bot-to-bot loops

    sender_id = sender.get("sender_id")
    ids: Mapping[str, Any] = sender_id if isinstance(sender_id, Mapping) else {}
    raw_header = payload.get("header")
    header: Mapping[str, Any] = raw_header if isinstance(raw_header, Mapping) else {}
    who, sender_ids = _sender(ids, str(sender.get("tenant_key") or ""), str(header.get("tenant_key") or ""))

    mentions = [m for m in message.get("mentions") or () if isinstance(m, Mapping)]
    mentioned = _mentions_bot(mentions, bot_open_id)
    names = _placeholder_names(mentions, bot_open_id)

    msg_type = message.get("message_type")
    content = _load_content(message.get("content"))
    image_keys: tuple[str, ...] = ()
    audio_key = file_key = file_name = audio_name = ""
    forwarded: tuple[Forwarded, ...] = ()
    if msg_type == "text":
        text = resolve_placeholders(str(content.get("text") or ""), names)
    elif msg_type == "post":
        text, at_bot = flatten_post_content(content, names, bot_open_id)
        mentioned = mentioned or at_bot
        image_keys = post_image_keys(content)
    elif msg_type in UNREADABLE_TYPES:
        if msg_type == "image" and content.get("image_key"):
            image_keys = (str(content["image_key"]),)
        if msg_type == "audio" and content.get("file_key"):
            audio_key = str(content["file_key"])
        if msg_type == "file" and content.get("file_key"):
            file_key, file_name = str(content["file_key"]), str(content.get("file_name") or "file")
            if is_audio_name(file_name):  # a recording sent as a file: heard, with transcription on
                audio_key, audio_name = file_key, audio_label(file_name=file_name)
        text = ""  # answered with a note by the channel (metadata "unreadable")
    elif msg_type == RECORD_TYPE:
        text = ""  # the stand-in "Merged and Forwarded Message": the channel reads the record
    elif msg_type in SHARED_TYPES:
        text = shared_words(str(msg_type), content)
    elif msg_type == "interactive":
        # Someone else's card (a user cannot write one): its words are passed
        # on, never the user's own, so memory does not take them as theirs.
        words = _tidy(card_text(content))
        forwarded = (Forwarded(author="", text=words),) if words else ()
        text = ""
    else:
        return None
    text = _tidy(text)
    if not text and not forwarded and msg_type not in UNREADABLE_TYPES and msg_type != RECORD_TYPE:
        return None

    chat_type = str(message.get("chat_type") or "")
    if chat_type != "p2p" and msg_type in ("text", "post") and is_own_command(text):
        # Feishu has no /help@bot: a group's bare "/help" reaches the app only
        # with the read-all-group-messages permission, and is then ours.
        mentioned = True
    parent_id = str(message.get("parent_id") or "")
    root_id = str(message.get("root_id") or "")
    inbound = InboundMessage(
        channel="feishu",
        chat_id=str(chat_id),
        sender_id=who,
        text=text,
        message_id=str(message_id),
        timestamp=_timestamp(message.get("create_time") or header.get("create_time")),
        is_group=chat_type != "p2p",
        mentioned=mentioned,
        reply_to_bot=bool(parent_id and parent_id in bot_message_ids) or bool(root_id and root_id in bot_message_ids),
        metadata={
            "event_id": event_id_of(payload),
            "chat_type": chat_type,
            "message_type": msg_type,
            **({"unreadable": msg_type} if msg_type in UNREADABLE_TYPES else {}),
            "parent_id": parent_id,
            "root_id": root_id,
            "tenant_key": str(header.get("tenant_key") or sender.get("tenant_key") or ""),
            "union_id": str(ids.get("union_id") or ""),
            "user_id": str(ids.get("user_id") or ""),
        },
        forwarded=forwarded,
    )
    return ParsedMessage(inbound, sender_ids, image_keys, audio_key, file_key, file_name, audio_name,
                         record=msg_type == RECORD_TYPE)


def parse_left_event(payload: Mapping[str, Any]) -> list[InboundMessage]:
    """Parse one ``im.chat.member.user.deleted_v1`` event: ``{chat_id,
    users: [{user_id: {open_id, ...}}]}``, a LEFT for each member named by
    open_id (as their messages are: their jobs are theirs by it); or one
    ``im.chat.member.bot.deleted_v1``: a LEFT of ``BOT_LEFT``. Raises
    ``EventParseError`` without a chat id."""
    event = payload.get("event")
    if not isinstance(event, Mapping) or not event.get("chat_id"):
        raise EventParseError("member event has no chat_id")
    if event_type_of(payload) == BOT_LEFT_EVENT:  # ``{chat_id, operator_id, ...}``: the bot itself
        return [InboundMessage(channel="feishu", chat_id=str(event["chat_id"]), sender_id=BOT_LEFT, text="",
                               is_group=True, kind=LEFT, metadata={"event_id": event_id_of(payload)})]
    gone: list[InboundMessage] = []
    for user in event.get("users") or ():
        ids = user.get("user_id") if isinstance(user, Mapping) else None
        open_id = str(ids.get("open_id") or "") if isinstance(ids, Mapping) else ""
        if open_id:
            gone.append(InboundMessage(channel="feishu", chat_id=str(event["chat_id"]), sender_id=open_id, text="",
                                       is_group=True, kind=LEFT, metadata={"event_id": event_id_of(payload)}))
    return gone


def parse_recall_event(payload: Mapping[str, Any]) -> InboundMessage:
    """Parse one ``im.message.recalled_v1`` event: ``{message_id, chat_id,
    recall_time, recall_type}``. It names no sender (``recall_type`` says
    who: ``message_owner``, a group owner or manager, an admin), so the
    RECALL carries none; the gateway finds whose message it was in what it
    stored. Raises ``EventParseError`` without a message or chat id."""
    event = payload.get("event")
    if not isinstance(event, Mapping):
        raise EventParseError("event has no 'event' object")
    chat_id, message_id = event.get("chat_id"), event.get("message_id")
    if not chat_id or not message_id:
        raise EventParseError("recall has no chat_id or message_id")
    return InboundMessage(
        channel="feishu",
        chat_id=str(chat_id),
        sender_id="",
        text="",
        message_id=str(message_id),
        timestamp=_timestamp(event.get("recall_time")),
        metadata={"event_id": event_id_of(payload), "recall_type": str(event.get("recall_type") or "")},
        kind=RECALL,
    )


def flatten_post(content: Mapping[str, Any] | str, bot_open_id: str | None = None) -> str:
    """Rich text as plain text (title, then one line per paragraph)."""
    data = _load_content(content) if isinstance(content, str) else content
    return _tidy(flatten_post_content(data, {}, bot_open_id)[0])


# -- helpers ---------------------------------------------------------------------
def quoted_of(item: Mapping[str, Any], *, app_id: str, bot_open_id: str | None) -> Quoted | None:
    """A message fetched by id (``GET .../messages/:id``, the one a user
    replied to) as the model reads it: its words (a text's, a post's;
    mentions by name) and who wrote it ("you" for this app); None for a
    withdrawn message or one without words (a picture, a file)."""
    if item.get("deleted"):
        return None
    content = content_of(item)
    names = fetched_mention_names(item, bot_open_id)
    msg_type = item.get("msg_type")
    if msg_type == "text":
        text = resolve_placeholders(str(content.get("text") or ""), names)
    elif msg_type == "post":
        text = flatten_post_content(content, names, bot_open_id)[0]
    else:
        return None
    if not text.strip():
        return None
    sender = item.get("sender")
    sender = sender if isinstance(sender, Mapping) else {}
    mine = sender.get("sender_type") == "app" and sender.get("id") == app_id
    return Quoted(author="you" if mine else "", text=_tidy(text))


def content_of(item: Mapping[str, Any]) -> Mapping[str, Any]:
    """The content of a message fetched by id (``body.content``), parsed;
    ``EventParseError`` when it is not a JSON object."""
    body = item.get("body")
    return _load_content(body.get("content") if isinstance(body, Mapping) else None)


def fetched_mention_names(item: Mapping[str, Any], bot_open_id: str | None) -> dict[str, str]:
    """``@_user_N`` -> ``@Name`` for a message fetched by id ("" for the
    bot when ``bot_open_id`` is given)."""
    # A fetched message names a mention's open_id flat; an event nests it.
    mentions = [{**m, "id": {"open_id": m.get("id")}} if isinstance(m.get("id"), str) else m
                for m in item.get("mentions") or () if isinstance(m, Mapping)]
    return _placeholder_names(mentions, bot_open_id)


def _load_content(raw: Any) -> Mapping[str, Any]:
    # ``content`` is a JSON document inside a JSON string.
    if isinstance(raw, Mapping):
        return raw
    try:
        data = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError) as exc:
        raise EventParseError("message content is not JSON") from exc
    if not isinstance(data, Mapping):
        raise EventParseError("message content is not a JSON object")
    return data


def _mentions_bot(mentions: list[Mapping[str, Any]], bot_open_id: str | None) -> bool:
    if bot_open_id is None:
        return bool(mentions)
    return any(_mention_open_id(m) == bot_open_id for m in mentions)


def _mention_open_id(mention: Mapping[str, Any]) -> str:
    mid = mention.get("id")
    if isinstance(mid, Mapping):
        return str(mid.get("open_id") or "")
    return str(mid or "")  # some payloads flatten the id to a string


def _placeholder_names(mentions: list[Mapping[str, Any]], bot_open_id: str | None) -> dict[str, str]:
    """``@_user_N`` -> what it becomes in the text ("" for the bot)."""
    names: dict[str, str] = {}
    for m in mentions:
        key = str(m.get("key") or "")
        if not key:
            continue
        is_bot = bot_open_id is not None and _mention_open_id(m) == bot_open_id
        names[key] = "" if is_bot else f"@{m.get('name') or 'user'}"
    return names


def _tidy(text: str) -> str:
    # Only the ends: inner whitespace may be code indentation.
    return text.strip()


def _timestamp(ms: Any) -> datetime:
    try:
        return datetime.fromtimestamp(int(ms) / 1000, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC)
