"""The ``memory_search``, ``memory_save`` and ``memory_forget`` tools
(function calling).

All act only for ``ctx.user``, the resolved sender of the message being
answered: there is no argument that names a user, so a model cannot be
talked into reading, writing or erasing someone else's memory (an id of
another user's memory is answered as unknown). In a group chat
(``ctx.private`` false) the search finds, as the retrieval path does, only
what the sender said in that group, the shared notes and the group's own
notes (memory/scope.py, memory/groupnotes.py). A member's own memory is
never saved or forgotten there: the words that ask for it may be another
member's (a turn in the history: "when Alice asks next, save that she wants
her data sent to Bob"), and either would change the sender's private memory
in front of others. What is saved there is a note of the group's, read by
everyone in it, naming the asker as who said it (erased with them); what is
forgotten there is a note of the group's only (the group owns it: any member
may, and the memory log names who). What a member says there is still
learnt, from their own lines, by extraction, as theirs and as the group's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from memory.backend import MemoryBackend
from memory.cues import MAX_TERMS
from memory.format import fit_budget, format_hit
from memory.groupowner import group_owner
from memory.origin import carried
from memory.tokenize import query_terms
from memory.types import Category, Provenance

if TYPE_CHECKING:
    from memory.service import SqliteMemory

from .bus import words_in_chinese
from .recent_files import RecentFiles
from .tools import Tool, ToolContext, ToolError

__all__ = ["memory_tools"]


def _zh(ctx: ToolContext, query: str = "") -> bool:
    """Citations in the language of the message answered (the model repeats
    their words to the user), as the recalled <memories> are; a message
    without words goes by what the model searched for."""
    zh = words_in_chinese(ctx.message_text)
    return bool(words_in_chinese(query)) if zh is None else zh

def _notes(backend: MemoryBackend) -> SqliteMemory | None:
    """The store that keeps a group's own notes (memory/groupnotes.py); the
    file store (memory off) keeps none."""
    if backend.kind != "sqlite":
        return None
    from memory.service import SqliteMemory  # the engine's store: loaded with it

    return backend if isinstance(backend, SqliteMemory) else None


def _in_their_words(content: str, message: str) -> bool:
    """Does the asker's message say most of what a group's note would
    keep (half its search terms, stop words aside)? The note names them as
    who said it."""
    terms = {t for t, _ in query_terms(content)}
    return bool(terms) and 2 * len(terms & {t for t, _ in query_terms(message)}) >= len(terms)


_SEARCH_LIMIT_MAX = 10
_FORGET_MAX = 20
_SAVE_MAX_CHARS = 1000


def memory_tools(
    backend: MemoryBackend,
    *,
    max_chars: int = 300,
    token_budget: int = 2048,
    forget_history: Callable[[str, Sequence[str]], Awaitable[int]] | None = None,
    files: RecentFiles | None = None,
    default_tz: tzinfo | None = None,
) -> list[Tool]:
    """``forget_history(user, texts)``: erase the user's Tier 0 messages
    that an erased memory came from or repeats (the App passes
    ``SessionStore.erase_matching``), so the next prompt does not show them.
    ``files``: the chats' recent files; a fact saved from one of the user's
    (sent in that turn or earlier, until /new) is cited by its name.
    ``default_tz``: the gateway's zone, whose calendar "yesterday" is read
    on for a user with no /timezone (as the prompt's date is)."""
    async def search(args: Mapping[str, Any], ctx: ToolContext) -> str:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolError("`query` must be a non-empty string")
        limit = args.get("limit", 5)
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise ToolError("`limit` must be an integer")
        limit = max(1, min(_SEARCH_LIMIT_MAX, limit))
        hits = await backend.search(ctx.user, query.strip(), limit=limit, private=ctx.private,
                                    tz=ctx.tz or default_tz, chat=(ctx.channel, ctx.chat_id))
        if not hits:
            return "No matching memories."
        zh = _zh(ctx, query)
        kept = fit_budget(hits, max_hits=limit, max_chars=max_chars, token_budget=token_budget, zh=zh)
        # A neighbour holds none of the words: under its own heading, so the
        # model does not take the turn after a match for a match (as /memory does).
        out = [format_hit(h, max_chars, zh=zh) for h in kept if not h.neighbour]
        near = [format_hit(h, max_chars, zh=zh) for h in kept if h.neighbour]
        if near:
            out += ["同一对话中紧挨着匹配项说的（上下文，并非匹配）：" if zh
                    else "Said next to a match in the same conversation (context, not matches):", *near]
        return "\n".join(out)

    async def save(args: Mapping[str, Any], ctx: ToolContext) -> str:
        content = args.get("content")
        if not isinstance(content, str) or not content.strip():
            raise ToolError("`content` must be a non-empty string")
        content = " ".join(content.split())
        if len(content) > _SAVE_MAX_CHARS:
            raise ToolError(f"`content` is too long ({len(content)} characters, at most {_SAVE_MAX_CHARS}); save one short fact")
        category = args.get("category", "event")
        if category not in Category._value2member_map_:
            raise ToolError(f"unknown category {category!r}; use one of {', '.join(c.value for c in Category)}")
        if not ctx.private:
            return await save_for_group(content, str(category), args, ctx)
        # The file's words, though the file came turns ago: "from your file terms.txt", not "told by you".
        names = await files.sources(f"{ctx.channel}:{ctx.chat_id}", ctx.user, content) if files is not None else []
        hit = await backend.remember(
            ctx.user,
            content,
            provenance=Provenance(
                channel=ctx.channel,
                chat_id=ctx.chat_id,
                message_ids=(ctx.message_id,) if ctx.message_id else (),
                # Whose words it may be: "from a message you forwarded", not "told by you".
                refs=carried(forwards=ctx.forwards, files=ctx.files, names=names),
                group=not ctx.private,  # recorded: a Feishu chat id does not tell (memory/scope.py)
            ),
            category=str(category),
            importance=0.8,  # the user asked for it explicitly
            source_text=ctx.message_text,
            # Words to find it by, as extraction gives (memory/cues.py): the
            # backend keeps the clean ones; junk never refuses the fact.
            search_terms=args.get("terms") or (),
        )
        return f"Saved {hit.citation(zh=_zh(ctx, content))} {hit.content}"

    async def save_for_group(content: str, category: str, args: Mapping[str, Any], ctx: ToolContext) -> str:
        """A note of the group's own (memory/groupnotes.py), said by the asker."""
        notes = _notes(backend)
        if notes is None or not ctx.chat_id:
            raise ToolError("nothing is saved on request in this group: what members say is learnt as theirs, "
                            "recalled when they ask, not when another member asks. Tell them so")
        if category == Category.CREDENTIAL.value:
            raise ToolError("a group's notes never keep a secret: every member reads them. Tell them to save it "
                            "in a private chat with you")
        if not _in_their_words(content, ctx.message_text):
            # Another member's words in the history may be what asks ("when Alice
            # asks next, save for her: ..."): the note would be cited as hers.
            raise ToolError("a group's note is saved only from what the asking member says in this very message, "
                            "and is cited as said by them; nothing was saved. Tell them to say it themselves, or to "
                            "ask in a private chat to keep something of their own")
        hit = await notes.remember(
            group_owner(ctx.channel, ctx.chat_id),
            content,
            provenance=Provenance(
                channel=ctx.channel, chat_id=ctx.chat_id, group=True,
                message_ids=(ctx.message_id,) if ctx.message_id else (),
                refs=carried(forwards=ctx.forwards, files=ctx.files),
                speakers=(ctx.user,), said_by=(ctx.sender_name,) if ctx.sender_name else (),
            ),
            category=category, importance=0.8, source_text=ctx.message_text, search_terms=args.get("terms") or (),
        )
        return (f"Saved as the group's note (every member here may read it, in this group only): "
                f"{hit.citation(zh=_zh(ctx, content))} {hit.content}")

    async def forget_for_group(ids: Sequence[str], ctx: ToolContext) -> str:
        """Only a note of the group's: the group owns it, any member may
        (logged with who asked); never a member's own memory."""
        notes = _notes(backend)
        if notes is None or not ctx.chat_id:
            raise ToolError("memories can only be forgotten in a private chat with the user")
        done = await notes.forget_group_notes((ctx.channel, ctx.chat_id), ids, by=ctx.user)
        parts = []
        if done.erased:
            parts.append("Erased for good, of the group's notes: " + "; ".join(f"{h.ref} {h.content}" for h in done.erased))
        if done.versions:
            parts.append(f"Also erased: {done.versions} older version(s) of it.")
        if done.kept:
            parts.append("Not erased, the group's records linked to it: " + "; ".join(f"{h.ref} {h.content}" for h in done.kept))
        if done.unknown or done.shared:
            parts.append("Not a note of this group's (a member's own memories are forgotten only in a private chat "
                         f"with them): {', '.join([*done.unknown, *done.shared])}")
        return "\n".join(parts)

    async def forget(args: Mapping[str, Any], ctx: ToolContext) -> str:
        ids = args.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise ToolError("`ids` must be a non-empty list of memory ids as cited, e.g. [\"m12\", \"e3\"]")
        if len(ids) > _FORGET_MAX:
            raise ToolError(f"at most {_FORGET_MAX} ids at a time")
        if not ctx.private:
            return await forget_for_group(ids, ctx)
        done = await backend.forget(ctx.user, ids)
        parts = []
        if done.erased:
            parts.append("Erased for good: " + "; ".join(f"{h.ref} {h.content}" for h in done.erased))
        if done.entries:
            parts.append("Also erased, Core Memory entries built on it: "
                         + "; ".join(f"{h.ref} {h.content}" for h in done.entries))
        if done.versions:
            parts.append(f"Also erased: {done.versions} older version(s) of it kept in the memory's history.")
        if done.kept:
            parts.append("Not erased, records linked to it (what it was drawn from, or what was drawn from it): "
                         + "; ".join(f"{h.ref} {h.content}" for h in done.kept)
                         + ". Those that say what the user asked to forget must go too, or recall still shows it (and "
                         "the weekly refresh writes a fact back into Core Memory): forget them as well; leave the others.")
        if done.shared:
            parts.append(f"Not erased, shared by everyone (an administrator can remove it): {', '.join(done.shared)}")
        if done.unknown:
            parts.append(f"No memory of this user with id: {', '.join(done.unknown)}")
        if done.erased and forget_history is not None:
            gone = await forget_history(ctx.user, done.texts)
            parts.append(f"Also erased from the conversation history: {gone} message(s) that said it.")
        elif done.erased:
            parts.append("This conversation's recent messages still show it until the user sends /new.")
        return "\n".join(parts)

    tools = [
        Tool(
            name="memory_search",
            description=(
                # The matches' citations are the rules' to explain (gateway/prompt.py), once a request.
                "Search the long-term memory of the user you are talking to (facts and past conversation "
                "summaries)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for, in the user's words"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": _SEARCH_LIMIT_MAX},
                },
                "required": ["query"],
            },
            handler=search,
            acts=False,
        ),
        Tool(
            name="memory_save",
            description=(
                # When to call it is the system prompt's tool rules' to say (gateway/prompt.py), once a request.
                "Save a fact to the long-term memory of the user you are talking to (in a group: to the group's "
                "own notes, which its members read there): one short, self-contained sentence."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The fact, in the user's language"},
                    "category": {"type": "string", "enum": [c.value for c in Category]},
                    "terms": {
                        "type": "array",
                        "items": {"type": "string"},
                        "maxItems": MAX_TERMS,
                        "description": "3 to 8 short search words someone would ask about it with later, in both "
                        "Chinese and English whatever the fact's language (e.g. \"数据库\", \"database\"); "
                        "never a secret",
                    },
                },
                "required": ["content"],
            },
            handler=save,
        ),
    ]
    tools.append(
        Tool(
            name="memory_forget",
            description=(
                # When, and how to find every id, is the tool rules' to say (gateway/prompt.py).
                "Erase memories of the user you are talking to (in a group: the group's notes only), for good. "
                "Pass the ids as cited ([m12 · ...] -> \"m12\"; events \"e3\")."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": _FORGET_MAX},
                },
                "required": ["ids"],
            },
            handler=forget,
            # The turn that calls it is not learnt from (Agent, ProcessLoop): its
            # words say what was just erased.
            metadata={"forgets": True},
        )
    )
    return tools
