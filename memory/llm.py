"""The memory model client (seed 11): one structured JSON completion per call.

Separate from the gateway's chat client on purpose: the write path has its
own model, endpoint and budget (``memory.model`` / ``memory.provider`` /
``memory.maxTokens``), and ``memory`` must not import ``gateway``.

Real models do not always return clean JSON. :func:`parse_json_object`
accepts JSON in code fences or with prose around it; :func:`normalize_fact`
repairs what can be repaired (category aliases, importance given as text or
out of range, project/topic as short slugs, over-long content) and rejects,
with a log line, what cannot. The caller keeps its input (the extraction
buffer) whenever a call fails, so a bad answer is retried, never lost.

Exceptions::

    MemoryLLMError
    ├── LLMUnavailable   transport error, timeout, 429/5xx, bad status
    ├── LLMOverflow      too much for one call: the prompt over the model's
    │                    context, or the reply cut at ``max_tokens``
    └── LLMBadOutput     the reply is not a usable JSON object
"""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import structlog

from .clock import Clock, SystemClock
from .cues import clean_terms
from .errorlog import Wordless, error_brief, error_fields
from .failover import (
    Cooldowns,
    EndpointCooldowns,
    Scope,
    candidate_label,
    context_exceeded,
    endpoint_scopes,
    model_missing,
)
from .redact import error_summary, provider_error_text, scrub_provider_text, sent_text
from .wrongpath import WrongPath
from .tokens import estimate_tokens
from .types import Category

__all__ = [
    "Candidate",
    "Extraction",
    "Fact",
    "LLMBadOutput",
    "LLMOverflow",
    "LLMUnavailable",
    "MemoryEndpoint",
    "MemoryLLM",
    "MemoryLLMError",
    "MergeResult",
    "MergedFact",
    "ProfileEntry",
    "dominant_language",
    "normalize_fact",
    "parse_json_object",
    "slug",
    "unbound",
]

log = structlog.get_logger(component="memory")

MAX_FACT_CHARS = 300
"""Seed 6.4 asks for facts of at most 100 characters; we allow slack and cut
longer text at a sentence or word boundary instead of rejecting it."""
MAX_SUMMARY_CHARS = 600
MAX_SLUG_CHARS = 32


class MemoryLLMError(Wordless):
    """A memory LLM call did not produce a usable answer. Its text is
    written for the log (a status, a vetted summary, a reply's shape):
    never the prompt's words."""


class LLMUnavailable(MemoryLLMError):
    """The endpoint could not be reached or answered with an error status
    (``status``, None without a response)."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        text: str = "",
        retry_after: float | None = None,
        reason: str = "",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.text = text
        self.retry_after = retry_after
        # For logs: the class of failure, never the provider's words (they may quote the prompt).
        self.reason = reason or (f"HTTP {status}" if status is not None else "unavailable")

    @property
    def scope(self) -> Scope:
        """What the failure says is down (``memory/failover.py``)."""
        if self.status in (401, 403, 429):
            return "key"
        if self.status is None and self.reason != "timeout ReadTimeout":
            return "host"  # no answer at all (a read timeout: the host took the call)
        return "model"

    @property
    def fails_over(self) -> bool:
        """Another endpoint could answer: no response, 401/403/408/409/429,
        5xx, or the model unknown here. Any other 4xx is the request's."""
        s = self.status
        return s is None or s >= 500 or s in (401, 403, 408, 409, 429) or model_missing(s, self.text)


def _retry_after_s(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw else None
    except ValueError:
        return None  # an HTTP date: the cooldown's own length will do


class LLMBadOutput(MemoryLLMError):
    """The endpoint answered, but not with a JSON object we can use."""


class LLMOverflow(MemoryLLMError):
    """The input is too much for one call: the endpoint refused the prompt
    as over the model's context (``status``), or the reply was cut at
    ``max_tokens`` (``finish_reason: "length"``, ``status`` None). The same
    call fails the same way every time, so it is not retried: the caller
    asks with less (memory/extraction.py splits the batch)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- parsing and normalisation --------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


def parse_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: bare, fenced or surrounded by prose."""
    if not isinstance(text, str) or not text.strip():
        raise LLMBadOutput("empty reply")
    tries = [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for t in tries:
        try:
            obj = json.loads(t)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    # Prose around the object: decode from each '{' until one parses.
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    # Its shape, not its words: the reply repeats the conversation (a
    # password the user said), and this text reaches the log.
    raise LLMBadOutput(f"no JSON object in reply ({_shape(text)})")


def _shape(text: str) -> str:
    """What a reply that is no JSON object looks like, without its words."""
    start = text.lstrip()[:1]
    kind = "JSON cut short or invalid" if start in ("{", "[", "`") else "prose"
    return f"{kind}, {len(text)} characters"


# The keys a reply is asked for (and the names models use instead): a
# reply's other keys are its own words, which may echo the conversation
# ("my pin is 8806"), so a log line counts them instead.
_KNOWN_KEYS = frozenset({
    "facts", "summary", "renamed", "drop", "entries", "content", "fact", "text", "category", "importance",
    "project", "topic", "same_as", "updates", "lines", "from", "to", "n", "reason", "id", "key", "value",
    "memories", "memory", "items", "results", "result", "data", "output", "response", "answer", "profile",
    "events", "error", "message", "notes", "note", "type", "tags", "confidence", "terms",
})


def _keys(obj: dict[str, Any]) -> str:
    """An object's keys, for a log line or an error: the known names, and
    how many others (never their words)."""
    named = [k for k in obj if isinstance(k, str) and k in _KNOWN_KEYS][:10]
    others = len(obj) - len(named)
    if others:
        named.append(f"{others} other key{'s' if others > 1 else ''}")
    return ", ".join(named) or "none"


_CATEGORY_ALIASES: dict[str, Category] = {
    "credentials": Category.CREDENTIAL,
    "secret": Category.CREDENTIAL,
    "password": Category.CREDENTIAL,
    "profile": Category.IDENTITY,
    "personal": Category.IDENTITY,
    "preference": Category.IDENTITY,
    "preferences": Category.IDENTITY,
    "setting": Category.CONFIG,
    "settings": Category.CONFIG,
    "configuration": Category.CONFIG,
    "fix": Category.SOLUTION,
    "howto": Category.SOLUTION,
    "choice": Category.DECISION,
    "plan": Category.DECISION,
    # Small talk is temporary (seed 8.2): "conversation" is the gist of a
    # discussion, kept at 10 % for ranking; "temp" fades and is archived.
    "chat": Category.TEMP,
    "chitchat": Category.TEMP,
    "chit-chat": Category.TEMP,
    "small talk": Category.TEMP,
    "smalltalk": Category.TEMP,
    "small_talk": Category.TEMP,
    "greeting": Category.TEMP,
    "summary": Category.CONVERSATION,
    "discussion": Category.CONVERSATION,
    "temporary": Category.TEMP,
    "bug": Category.DEBUG,
    "error": Category.DEBUG,
}

# Seed 6.4: identity 1.0, decision 0.8, event 0.5, temp 0.2.
_DEFAULT_IMPORTANCE: dict[Category, float] = {
    Category.IDENTITY: 1.0,
    Category.CONFIG: 0.8,
    Category.CREDENTIAL: 0.9,
    Category.DECISION: 0.8,
    Category.SOLUTION: 0.7,
    Category.EVENT: 0.5,
    Category.CONVERSATION: 0.4,
    Category.TEMP: 0.2,
    Category.DEBUG: 0.3,
}
_WORD_IMPORTANCE = {"critical": 1.0, "high": 0.8, "medium": 0.5, "normal": 0.5, "low": 0.2}


def _category(raw: Any) -> tuple[Category, str | None]:
    if isinstance(raw, str):
        key = raw.strip().lower()
        if key in Category._value2member_map_:
            return Category(key), None
        if key in _CATEGORY_ALIASES:
            return _CATEGORY_ALIASES[key], None
    # Unknown or missing: the fact is still worth keeping; "event" is the
    # middle decay class, so a mislabelled fact neither lives forever nor
    # vanishes in a week.
    return Category.EVENT, "missing category" if raw is None else f"unknown category {raw!r}"


def _importance(raw: Any, cat: Category) -> tuple[float, str | None]:
    if isinstance(raw, bool) or raw is None:
        return _DEFAULT_IMPORTANCE[cat], None if raw is None else f"importance {raw!r}"
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _WORD_IMPORTANCE:
            return _WORD_IMPORTANCE[word], None
        try:
            raw = float(word.rstrip("%")) / (100 if word.endswith("%") else 1)
        except ValueError:
            return _DEFAULT_IMPORTANCE[cat], f"importance {raw!r}"
    if not isinstance(raw, int | float) or raw != raw:  # NaN
        return _DEFAULT_IMPORTANCE[cat], f"importance {raw!r}"
    value = float(raw)
    if 0.0 <= value <= 1.0:
        return value, None
    return min(1.0, max(0.0, value)), f"importance {raw!r} clamped"


def slug(raw: Any, default: str) -> str:
    """A short partition key: lower case, words joined by '-', CJK kept."""
    if not isinstance(raw, str):
        return default
    text = unicodedata.normalize("NFKC", raw).strip().lower()
    text = re.sub(r"[^\w\u4e00-\u9fff]+", "-", text).strip("-_")
    text = text[:MAX_SLUG_CHARS].strip("-")
    if not text or text in {"none", "null", "n-a", "unknown", "general", "global"}:
        return default
    return text


def _cut(text: str, limit: int) -> str:
    """Cut at the last sentence end, else word break, before ``limit``."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    for marks in ("。！？.!?；;", "，, "):
        pos = max(head.rfind(c) for c in marks)
        if pos >= limit // 2:
            return head[: pos + 1].rstrip(" ,，")
    return head.rstrip()


@dataclass(frozen=True)
class Fact:
    """A validated fact from the model.

    ``same_as`` / ``updates`` are the *local* candidate numbers (1..N) the
    model was shown, never database ids.
    """

    content: str
    category: Category = Category.EVENT
    importance: float = 0.5
    project: str = "_global"
    topic: str = "_general"
    same_as: int | None = None
    updates: int | None = None
    lines: tuple[int, ...] = ()
    """Numbers (1..N) of the input lines the fact was drawn from; the writer
    indexes their words with the fact (``NewMemory.source_text``)."""
    terms: tuple[str, ...] = ()
    """Words to find the fact by, in Chinese and English (rule 15;
    :func:`memory.cues.clean_terms`): ``NewMemory.search_terms``."""


MAX_FACT_LINES = 4  # a fact comes from a message or two; more is the model listing everything


def _ref(raw: Any, prefixes: str = "#") -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str) and raw.strip().lstrip(prefixes).isdigit():
        raw = int(raw.strip().lstrip(prefixes))
    return raw if isinstance(raw, int) and raw > 0 else None


def _refs(raw: Any) -> tuple[int, ...]:
    """``[3, "L4", "#5"]`` / ``3`` / ``"3, 4"`` -> (3, 4, 5); junk is dropped."""
    if isinstance(raw, str):
        raw = raw.replace(",", " ").split()
    items = raw if isinstance(raw, list | tuple) else [raw]
    # "L3" is a line number; only here: a candidate reference ("same_as") never is.
    out = tuple(dict.fromkeys(n for n in (_ref(x, "#Ll") for x in items) if n is not None))
    return out[:MAX_FACT_LINES]


def normalize_fact(raw: Any) -> Fact | None:
    """Repair one fact from the model, or ``None`` (logged) if hopeless."""
    fact = _normalize(raw)
    if isinstance(fact, str):
        log.warning("memory llm: fact rejected", reason=fact)
        return None
    return fact


def _normalize(raw: Any) -> Fact | str:
    """One fact repaired, or why it cannot be (its kind and keys, never
    its words: a fact may hold a password)."""
    if isinstance(raw, str):
        raw = {"content": raw}
    if not isinstance(raw, dict):
        return f"not an object ({type(raw).__name__})"
    content = raw.get("content", raw.get("fact", raw.get("text")))
    if isinstance(content, int | float) and not isinstance(content, bool):
        content = str(content)
    if not isinstance(content, str) or not content.strip():
        return f"no content (keys {_keys(raw)})"
    content = " ".join(content.replace("\x00", "").split())
    notes: list[str] = []
    if len(content) > MAX_FACT_CHARS:
        content = _cut(content, MAX_FACT_CHARS)
        notes.append("content cut")
    cat, note = _category(raw.get("category"))
    if note:
        notes.append(note)
    imp, note = _importance(raw.get("importance"), cat)
    if note:
        notes.append(note)
    if notes:
        log.info("memory llm: fact repaired", repairs=notes)
    return Fact(
        content=content,
        category=cat,
        importance=round(imp, 3),
        project=slug(raw.get("project"), "_global"),
        topic=slug(raw.get("topic"), "_general"),
        same_as=_ref(raw.get("same_as")),
        updates=_ref(raw.get("updates")),
        lines=_refs(raw.get("lines")),
        terms=clean_terms(raw.get("terms")),  # junk is dropped: the fact stands without
    )


def _facts(obj: dict[str, Any], key: str = "facts") -> list[Fact]:
    raw = obj.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raw = [raw]
    facts: list[Fact] = []
    rejected: list[str] = []
    for x in raw:
        fact = _normalize(x)
        if isinstance(fact, str):
            rejected.append(fact)
        else:
            facts.append(fact)
    if rejected:  # one line a reply, not one a fact
        log.warning("memory llm: facts rejected", count=len(rejected), of=len(raw), reasons=sorted(set(rejected))[:5])
    return facts


def _renamed(raw: Any) -> list[tuple[str, str]]:
    """``[{"from": "atlas", "to": "orion"}]`` -> ``[("atlas", "orion")]``,
    as slugs; an item without both names, or naming one project twice, is
    left out (logged: the facts of the reply stand)."""
    items = raw if isinstance(raw, list) else [] if raw is None else [raw]
    out: list[tuple[str, str]] = []
    for x in items:
        pair = (slug(x.get("from"), ""), slug(x.get("to"), "")) if isinstance(x, dict) else ("", "")
        if pair[0] and pair[1] and pair[0] != pair[1]:
            out.append(pair)
    if len(out) < len(items):
        log.warning("memory llm: renames left out", count=len(items) - len(out), of=len(items))
    return list(dict.fromkeys(out))


def dominant_language(text: str) -> str:
    """``"Chinese"`` when Han characters dominate the letters, else ``"English"``
    (a hint only; the prompt also tells the model to follow the text)."""
    han = sum(1 for c in text if "\u4e00" <= c <= "\u9fff")
    latin = sum(1 for c in text if c.isascii() and c.isalpha())
    # A Han character carries about a word; four Latin letters do.
    return "Chinese" if han * 4 >= latin and han > 0 else "English"


# -- results -----------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """An existing memory shown to the model under a local number."""

    n: int
    content: str
    category: str = "event"
    importance: float = 0.5
    said: str = ""
    """When it was said (``YYYY-MM-DD``, and when last said again): shown
    where the model must tell which of two facts holds (the profile)."""


@dataclass(frozen=True)
class Extraction:
    facts: list[Fact]
    summary: str
    # (old, new) project names the user said a project was renamed from
    # and to, as slugs (memory/projects.py).
    renamed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class MergedFact:
    fact: Fact
    sources: tuple[int, ...]  # local numbers of the input facts it replaces


@dataclass(frozen=True)
class MergeResult:
    facts: list[MergedFact]
    dropped: dict[int, str]  # local number -> reason


@dataclass(frozen=True)
class ProfileEntry:
    content: str
    category: Category
    facts: tuple[int, ...] = ()  # local numbers of the important facts it states


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


# -- prompts -----------------------------------------------------------------

_CATS = "identity/config/credential/decision/solution/event/conversation/temp/debug"

EXTRACT_SYSTEM = f"""You are a memory extraction engine. From the conversation, extract facts worth remembering long term.

Rules:
1. Only facts stated explicitly; never guess.
2. Each fact is one self-contained sentence of at most 100 characters.
3. LANGUAGE: write every fact and the summary in the same language as the conversation. A Chinese conversation gives Chinese facts; an English one gives English facts. Never translate.
4. Label each fact with project and topic (short lowercase slugs, e.g. "myclaw", "deploy"; "_global" / "_general" when none), category ({_CATS}) and importance in [0.0, 1.0] (identity 1.0, technical decision 0.8, ordinary event 0.5, temporary 0.2). "conversation" is the gist of a discussion worth recalling months later; small talk, greetings, passing moods and today's weather are "temp" (forgotten within weeks); a passing error being chased is "debug".
5. Existing memories are listed with numbers. If a fact only restates existing memory N, set "same_as": N. If it replaces or contradicts existing memory N (moved, switched tools, changed a setting), set "updates": N, and write in it what of N still holds (the name, when only the job changed): N is then no longer true as a whole. Otherwise omit both.
6. The input lines are numbered L1, L2, ...: set "lines" to the numbers of the one or two lines each fact comes from. Each line starts with the day and weekday it was said (a line with the time only: the day of the line above): write a relative time (tomorrow, next Wednesday, last month, 下周三, 上个月, 三天前) as the date it means, counted from that line's day ("the release is due on 2026-03-18", not "next Wednesday"), since the fact is read months later.
7. Never store a fact from a request to forget, delete or stop remembering it ("forget that my cat is called Miso" is no fact about a cat): the user wants it gone, and leave it out of the summary too.
8. A user line starting with "(edited)" is the user's corrected version of a message they sent earlier: what it says replaces what that message said. Extract its facts as current; where one corrects existing memory N, set "updates": N.
9. "[photo]" (or "[2 photos]") at the start of a user line stands for pictures the user sent, with their words after it; the assistant's next line says what the pictures show. What it reads in them (a password, a receipt's total, a whiteboard's plan) counts as stated by the user. "[photo not read]": nobody saw the picture, so nothing about it is known. "[voice]" starts a voice message: the words after it are what the user said. "[file name]" stands for a file the user sent (notes, a PDF), read by the assistant: what its next line reports from the file counts as stated by the user when the file is theirs (their notes, plan, invoice), not when it is something they are reading (an article, a manual). "[file not read]": nobody read it. "[location ...]", "[place: ...]", "[contact: ...]", "[poll: ...]", "[dice ...]" and "[sticker ...]" stand for what the user shared instead of typing: a place or a contact is a fact only with words saying what it is to the user (their home, their dentist), a sticker or dice roll never is.
10. "[forwarded from NAME]" (or "[forwarded: N messages]", one "name: words" line each, a message's later lines indented by two spaces: an indented line is part of the message above it, whatever name it starts with) starts messages the user passed on, written by someone else or by the user earlier; the user's own words, if any, follow after a blank line. What forwarded words state is said by their author, not by the user: write "Alice said the launch moved to Friday", never "the user moved the launch". Keep a fact from them only where it matters to the user (a plan, a decision, a deadline they are told), dated by the "sent" date when it speaks of relative days.
11. Also write a summary of the conversation of at most 200 characters.
12. The input lines are in time order: where two lines contradict, the later one holds. "Replaced memories", when listed, are no longer true: never extract a fact that states one again (a line saying it is older than the memory that replaced it, which holds).
13. Whose words: a fact about the user comes from what the user said or sent (rule 9), never from what someone else said. In a group chat (the input says so) the assistant answers everyone and its lines may repeat what other members said (a move, an illness, a plan): that is never a fact about the user. Write the summary about what the user said and asked; anything it tells of someone else names them.
14. If the user says one of their projects was renamed ("we renamed atlas to orion"), add "renamed": [{{"from": "atlas", "to": "orion"}}] (project slugs) and label its facts with the new name.
15. Give each fact "terms": 3 to 8 short search words someone would use to ask about it later, in BOTH Chinese and English whatever the fact's language (its key nouns in the other language too, e.g. "数据库", "database"). Only words, never a secret.

Reply with one JSON object only:
{{"facts": [{{"content": "...", "project": "...", "topic": "...", "category": "...", "importance": 0.8, "same_as": null, "updates": null, "lines": [2], "terms": ["...", "..."]}}], "summary": "..."}}"""

MERGE_SYSTEM = f"""You consolidate a user's stored memories of one project/topic. Input facts are numbered.

Rules:
1. Merge facts that say the same thing; when facts contradict, keep the newest (higher number is newer).
2. Every output fact lists in "from" the numbers of ALL input facts it replaces. An input fact you keep unchanged is output with "from": [its number].
3. An input fact that is obsolete or worthless goes into "drop" with a reason. Every input number must appear in some "from" or in "drop".
4. Keep the language of the facts; never translate. Categories: {_CATS}. Importance in [0.0, 1.0].
5. Give each output fact "terms": 3 to 8 short search words someone would use to ask about it later, in BOTH Chinese and English whatever the fact's language (its key nouns in the other language too, e.g. "数据库", "database"). Only words, never a secret.

Reply with one JSON object only:
{{"facts": [{{"content": "...", "category": "...", "importance": 0.8, "from": [1, 3], "terms": ["...", "..."]}}], "drop": [{{"n": 2, "reason": "..."}}]}}"""

PROFILE_SYSTEM = f"""You maintain a user's core profile: at most 100 short entries that are worth reading before every conversation (identity, stable preferences, configuration, key decisions).

Given the current profile and important facts, return the complete new profile. Keep entries that still hold, add what is new and important, remove what is outdated. Each important fact says when it was said: where facts or entries contradict (the user moved, changed jobs, reversed a decision), the latest holds: leave out the older fact and any entry stating it. Keep the language of the facts; never translate. Categories: {_CATS}. For each entry, list in "facts" the numbers of the important facts it states (empty for an entry kept only from the current profile).

Reply with one JSON object only:
{{"entries": [{{"content": "...", "category": "identity", "facts": [1, 3]}}]}}"""


_GROUP_NOTE = (
    "The {source} is from a GROUP chat (rule 13): only the user's own words are theirs. What the assistant "
    "(or a summary) tells of other members is not the user's words: never a fact about the user."
)

_NOTES_NOTE = (
    "The {source} is a GROUP chat's, learnt as the GROUP's own notes, which every member may read there, not as "
    "any one user's: {lines} "
    "Write what the group decided, planned or assigned (who does what), the dates set, and what members stated "
    "about shared matters, each fact naming the person it is about or who said it (\"Dad is booking the hotel "
    "for the lake trip\", \"Lin: 2.0 ships on March 3\"), never \"the user\". {reply}Never a password, key "
    "or other secret. The summary tells what the group discussed, by name."
)
# What a group's input lines are: its batch's lines as said, or (the daily
# compression's event log) the summaries of its day, which name the members.
_NOTES_SAID = ("each line is labelled with the member who said it, the bot's replies marked as its own.",
               "A fact only the bot's reply states is none. ")
_NOTES_DAY = ("each line is a summary of the group's talk, dated and tagged with the channel it was said on "
              "([telegram], [feishu]), naming the members it tells of.", "")


_SECOND_LOOK = (
    "Memories {numbers} were found by the facts you wrote from this conversation in a first reading. For each "
    "of them, check whether a fact replaces or contradicts it (the user moved, changed jobs, a relationship "
    'ended, a tool or setting was switched): if so, set "updates" to its number on that fact (rule 5).'
)


def _numbered(cands: Sequence[Candidate]) -> str:
    return "\n".join(
        f"{c.n}. [{c.category}, {c.importance:.1f}{', ' + c.said if c.said else ''}] {c.content}" for c in cands
    )


# -- the client ----------------------------------------------------------------


def unbound(resp: httpx.Response) -> httpx.Response:
    """The response with its body held as plain bytes.

    ``AsyncClient.send`` wraps the stream in a ``BoundAsyncStream`` that
    points back at the response: a reference cycle, so every request and
    response (with the prompt's JSON) waited for the cycle collector, which
    the gateway runs rarely (gateway/runtime.py). That garbage was most of
    the gateway bench's RSS growth (docs/BENCHMARKS.md, RSS). Call it on a
    response already read (``send``/``post`` without ``stream=True``)."""
    resp.stream = httpx.ByteStream(resp.content)
    return resp


@dataclass(frozen=True)
class MemoryEndpoint:
    """One model on one OpenAI-compatible endpoint."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    timeout: float = 60.0
    retries: int = 1


class MemoryLLM:
    """An OpenAI-compatible JSON completion client for the write path.

    With ``fallbacks``, a call the model's endpoint could not answer (down,
    5xx, timeout, 429, key refused, model unknown there) goes to the next
    one not cooling down (``memory/failover.py``), so extraction does not
    wait for its backoff; a candidate with another behind it is not
    retried, the last one a call asks is, ``retries`` times. A reply that
    is not usable JSON is not failed over: the caller keeps its input and
    retries later, as without fallbacks.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        max_tokens: int = 2048,
        temperature: float = 0.2,
        timeout: float = 60.0,
        retries: int = 1,
        retry_delay: float = 1.0,
        transport: httpx.AsyncBaseTransport | None = None,
        fallbacks: Sequence[MemoryEndpoint] = (),
        clock: Clock | None = None,
        setting: str = "memory",
        cooldowns: EndpointCooldowns | None = None,
        provider_settings: Sequence[str] = (),
    ) -> None:
        """``cooldowns``: the endpoints' state shared with the chat model's
        client (the App's), so an outage either finds cools both.
        ``provider_settings``: each endpoint's provider's config path (the
        primary's first), named when its chat-completions path is not there
        (:mod:`memory.wrongpath`); by default ``provider``."""
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.retries = retries
        self.retry_delay = retry_delay
        self.usage = Usage()
        self._endpoints = [MemoryEndpoint(base_url, model, api_key, timeout, retries), *fallbacks]
        self._clients = [
            httpx.AsyncClient(
                base_url=e.base_url.rstrip("/") + "/",
                headers={"Authorization": f"Bearer {e.api_key}"} if e.api_key else {},
                timeout=e.timeout,
                transport=transport,
            )
            for e in self._endpoints
        ]
        self._client = self._clients[0]
        self._settings = [*provider_settings, *["provider"] * (len(self._endpoints) - len(provider_settings))]
        self._wrong_path = WrongPath("memory model")
        self._secrets = [e.api_key for e in self._endpoints]  # never repeated from a provider's text
        self.cooldowns = Cooldowns(
            [candidate_label(setting, i) for i in range(len(self._endpoints))],
            [e.model for e in self._endpoints],
            clock or SystemClock(),
            scopes=[endpoint_scopes(e.base_url, e.model, e.api_key) for e in self._endpoints],
            shared=cooldowns,
        )

    @classmethod
    def from_config(cls, cfg: Any, **overrides: Any) -> MemoryLLM:
        """Build from a ``gateway.config.Config`` (duck-typed: memory must not
        import gateway). The memory provider/model/maxTokens/fallbacks fall
        back to the main ones inside ``Config``."""
        prov = cfg.memory_provider()
        fallbacks = []
        # Where each endpoint's provider is set: the config path an error names.
        own = "memory.provider" if cfg.memory.provider is not None else "provider"
        listed = "memory.fallbacks" if cfg.memory.fallbacks is not None else "agent.fallbacks"
        settings = [own, *(f"{listed}[{i}].provider" if fb.provider else own
                           for i, fb in enumerate(cfg.memory_fallbacks()))]
        for fb in cfg.memory_fallbacks():
            p = fb.provider or prov
            fallbacks.append(
                MemoryEndpoint(p.base_url, fb.model, p.api_key.get_secret_value(), p.timeout.total_seconds(),
                               min(p.max_retries, 2))
            )
        kwargs: dict[str, Any] = dict(
            base_url=prov.base_url,
            api_key=prov.api_key.get_secret_value(),
            model=cfg.memory_model(),
            max_tokens=cfg.memory_max_tokens(),
            timeout=prov.timeout.total_seconds(),
            retries=min(prov.max_retries, 2),
            fallbacks=fallbacks,
            provider_settings=settings,
        )
        kwargs.update(overrides)
        return cls(**kwargs)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()

    async def __aenter__(self) -> MemoryLLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def complete_json(self, system: str, user: str, *, kind: str = "json") -> dict[str, Any]:
        """One chat completion in JSON mode, parsed into an object."""
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "response_format": {"type": "json_object"},
        }
        self.usage.by_kind[kind] = self.usage.by_kind.get(kind, 0) + 1
        plan = self.cooldowns.plan()
        was_cooling = {i for i in plan if self.cooldowns.cooling(i)}
        error: LLMUnavailable | None = None
        for n, index in enumerate(plan):
            if error is not None and self.cooldowns.cooling(index) and index not in was_cooling:
                continue  # cooled by a failure of this call: the same host (or model) just failed
            last = n == len(plan) - 1
            try:
                obj = await self._complete_on(
                    index, {**body, "model": self._endpoints[index].model}, kind,
                    retries=self._endpoints[index].retries if last else 0,
                )
            except LLMUnavailable as exc:
                if not exc.fails_over:
                    raise
                self.cooldowns.failed(index, exc.reason, retry_after=exc.retry_after, scope=exc.scope)
                error = exc
                continue
            self.cooldowns.succeeded(index)
            return obj
        assert error is not None, "a plan has at least one candidate"
        raise error

    async def _complete_on(self, index: int, body: dict[str, Any], kind: str, *, retries: int) -> dict[str, Any]:
        attempt = 0
        while True:
            attempt += 1
            self.usage.calls += 1
            try:
                content = await self._post(self._clients[index], body, self._settings[index])
                return parse_json_object(content)
            except LLMUnavailable as exc:
                self.usage.failures += 1
                if attempt > retries:
                    raise
                # Its reason and codes: the text is the provider's, vetted, but words all the same.
                log.info("memory llm: retrying", kind=kind, attempt=attempt, reason=exc.reason, **error_fields(exc))
                await asyncio.sleep(self.retry_delay * attempt)
            except (LLMBadOutput, LLMOverflow):
                self.usage.failures += 1
                raise

    async def _post(self, client: httpx.AsyncClient, body: dict[str, Any], setting: str = "provider") -> str:
        try:
            resp = unbound(await client.post("chat/completions", json=body))
        except httpx.TimeoutException as exc:
            raise LLMUnavailable(f"timeout: {type(exc).__name__}", reason=f"timeout {type(exc).__name__}") from exc
        except httpx.HTTPError as exc:
            # Its kind and errno, not its text (a proxy's URL may hold its password).
            raise LLMUnavailable(f"transport: {error_brief(exc)}", reason=type(exc).__name__) from exc
        if resp.status_code != 200:
            self._wrong_path.answered(resp.status_code, resp.request.url.path, setting)  # no /v1: said once
            # Providers echo the key they refused, or parts of the request.
            said = scrub_provider_text(provider_error_text(resp), self._secrets, limit=500)
            if context_exceeded(resp.status_code, said):
                # The provider's words may quote the prompt: the class only.
                raise LLMOverflow(f"HTTP {resp.status_code}: the prompt is over the model's context",
                                  status=resp.status_code)
            raise LLMUnavailable(
                # Logged and kept as a batch's last error: no words of the prompt (memory/redact.py).
                f"HTTP {resp.status_code}: {error_summary(resp, sent_text(body.get('messages')), self._secrets)}",
                status=resp.status_code,
                text=said,
                retry_after=_retry_after_s(resp),
            )
        try:
            data = resp.json()
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            # Its shape only: a body that is no completion may still quote the conversation.
            kind = resp.headers.get("content-type", "no content type").split(";")[0]
            raise LLMBadOutput(f"not a chat completion ({kind}, {len(resp.content)} bytes)") from exc
        usage = data.get("usage") or {}
        prompt = usage.get("prompt_tokens")
        self.usage.prompt_tokens += (
            int(prompt) if isinstance(prompt, int) else sum(estimate_tokens(m["content"]) for m in body["messages"])
        )
        comp = usage.get("completion_tokens")
        self.usage.completion_tokens += int(comp) if isinstance(comp, int) else estimate_tokens(content or "")
        if isinstance(choice, dict) and choice.get("finish_reason") == "length":
            # Part of a JSON reply is not part of the facts: the rest was never written.
            raise LLMOverflow(f"reply cut at max_tokens ({body.get('max_tokens')}): "
                              f"{len(content) if isinstance(content, str) else 0} characters written")
        if not isinstance(content, str):
            raise LLMBadOutput("reply has no text content")
        return content

    # -- the three calls of seed 11.1 ------------------------------------------

    async def extract(
        self, conversation: str | Sequence[str], candidates: Sequence[Candidate] = (), *, source: str = "conversation",
        replaced: Sequence[tuple[str, int]] = (), group: bool = False, found_for_facts: Sequence[int] = (),
        words: Sequence[str] | None = None, notes: bool = False,
    ) -> Extraction:
        """Facts and a summary from a conversation (or from event summaries).

        The input's lines are shown numbered L1..LN; each fact's ``lines``
        say which of them it came from (numbers outside 1..N are dropped).
        ``replaced``: older facts (words, number of the candidate that
        replaced them) the input may still tell, so the model does not
        extract them again as current (the daily compression's events).
        ``group``: the input is from a group chat, whose other members'
        words the assistant (or a summary) may repeat (rule 13).
        ``found_for_facts``: the candidates' numbers that the facts of a
        first reading found (the second look, memory/consolidate.py): named
        to the model with the question whether a fact replaces each, since
        one shown them in a long list without it may still say nothing.
        ``words``: what the lines say, without the labels put in front of
        them (time, role, channel), which the language is judged by: those
        labels are English, and outweighed a short Chinese exchange.
        ``notes``: a group's own batch, learnt as the group's notes
        (memory/groupnotes.py): its lines are labelled by who said them.
        """
        rows = conversation.split("\n") if isinstance(conversation, str) else list(conversation)
        # Before the L-numbers, which are Latin letters too.
        lang = dominant_language("\n".join(rows if words is None else words))
        conversation = "\n".join(f"L{i} {line}" for i, line in enumerate(rows, start=1))
        lines, reply = _NOTES_SAID if source == "conversation" else _NOTES_DAY
        parts = [
            f"The {source} below is mainly in {lang}: write the facts and the summary in {lang}.",
            *([_NOTES_NOTE.format(source=source, lines=lines, reply=reply)] if notes else [_GROUP_NOTE.format(source=source)] if group else []),
            "",
            "Existing memories:",
            _numbered(candidates) or "(none)",
            *([_SECOND_LOOK.format(numbers=", ".join(map(str, found_for_facts)))] if found_for_facts else []),
            "",
            *(["Replaced memories (no longer true):", *(f"- {c} (replaced by {n})" for c, n in replaced), ""]
              if replaced else []),
            f"{source.capitalize()}:",
            conversation,
        ]
        obj = await self.complete_json(EXTRACT_SYSTEM, "\n".join(parts), kind="extract")
        if "facts" not in obj and "summary" not in obj:
            raise LLMBadOutput(f"extraction reply has neither facts nor summary (keys: {_keys(obj)})")
        facts = _facts(obj)
        n = len(candidates)
        # A number outside 1..N points at nothing the model was shown.
        facts = [
            replace(
                f,
                same_as=f.same_as if f.same_as and f.same_as <= n else None,
                updates=f.updates if f.updates and f.updates <= n else None,
                lines=tuple(i for i in f.lines if i <= len(rows)),
            )
            for f in facts
        ]
        summary = obj.get("summary")
        summary = " ".join(summary.split()) if isinstance(summary, str) else ""
        return Extraction(facts=facts, summary=_cut(summary, MAX_SUMMARY_CHARS), renamed=_renamed(obj.get("renamed")))

    async def merge(self, facts: Sequence[Candidate], *, partition: str = "") -> MergeResult:
        """Deduplicate one partition; every input is accounted for or not."""
        user = f"Partition: {partition}\n\nFacts:\n{_numbered(facts)}"
        obj = await self.complete_json(MERGE_SYSTEM, user, kind="merge")
        n = len(facts)
        raw = obj.get("facts")
        if not isinstance(raw, list):
            raise LLMBadOutput("merge reply has no facts list")
        merged: list[MergedFact] = []
        for item in raw:
            fact = normalize_fact(item)
            src_raw = item.get("from") if isinstance(item, dict) else None
            if not isinstance(src_raw, list):
                src_raw = [src_raw]
            sources = tuple(sorted({r for r in (_ref(x) for x in src_raw) if r is not None and r <= n}))
            if fact is None:
                continue
            if not sources:
                # A fact that replaces nothing was invented by the merge.
                # Its length, not its words: a fact can be a credential, and logs outlive erasure.
                log.warning("memory llm: merged fact without sources rejected", chars=len(fact.content))
                continue
            merged.append(MergedFact(fact=fact, sources=sources))
        dropped: dict[int, str] = {}
        raw_drop = obj.get("drop") or []
        for d in raw_drop if isinstance(raw_drop, list) else []:
            num = _ref(d.get("n")) if isinstance(d, dict) else _ref(d)
            reason = d.get("reason") if isinstance(d, dict) else None
            if num is not None and num <= n:
                dropped[num] = reason if isinstance(reason, str) and reason.strip() else "no reason given"
        return MergeResult(facts=merged, dropped=dropped)

    async def profile(self, current: Sequence[str], facts: Sequence[Candidate]) -> list[ProfileEntry]:
        """The new Tier 1 profile from the current one and important facts."""
        cur = "\n".join(f"- {c}" for c in current) or "(empty)"
        user = f"Current profile:\n{cur}\n\nImportant facts:\n{_numbered(facts)}"
        obj = await self.complete_json(PROFILE_SYSTEM, user, kind="profile")
        raw = obj.get("entries")
        if not isinstance(raw, list):
            raise LLMBadOutput("profile reply has no entries list")
        out: list[ProfileEntry] = []
        seen: set[str] = set()
        for item in raw:
            fact = normalize_fact(item)
            if fact is None or fact.content in seen:
                continue
            seen.add(fact.content)
            # Which facts an entry states is what lets forgetting one of them
            # take the entry too (SqliteMemory.forget); a number past the list is junk.
            cited = _refs(item.get("facts")) if isinstance(item, dict) else ()
            out.append(ProfileEntry(fact.content, fact.category, tuple(n for n in cited if n <= len(facts))))
        return out[:100]
