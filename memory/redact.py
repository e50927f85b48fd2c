"""Provider text made fit for a log line or an exception message.

Providers echo what they were sent in their error bodies: "Incorrect API
key provided: sk-proj-abc…wxyz", a header, a piece of the prompt. Every
client that keeps such text (the chat client, the memory model's, the
embeddings' and the transcription client) passes it through
:func:`scrub_provider_text` with the keys it knows, so the text is safe
wherever it goes next, whether or not the logging set up its own
redaction (``gateway/logging.py``, which shares :data:`KEY_SHAPES`).

Chat text on its way into long-term memory goes through
:func:`redact_credentials`: a key, a password, a private key or a card
number a user pastes is replaced before the extraction buffer (and so the
memory model, facts, events and Core Memory) or the file store keeps it.

What goes into an exception's text, and so into a log, is less again
(:func:`error_summary`): the error's type and code, its message without
anything it quotes nor any word of what was sent (a provider may echo
the prompt, and the prompt is people's words and memories), and the
message's length and hash, so two errors are still told apart. The
whole scrubbed text stays on the exception for telling refusals apart,
never logged.

It lives in ``memory`` because ``memory`` must not import ``gateway``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

import httpx

__all__ = [
    "CREDENTIAL_SHAPES",
    "KEY_SHAPES",
    "PROVIDER_TEXT_MAX",
    "REDACTED",
    "error_summary",
    "luhn_ok",
    "nothing_but_redactions",
    "provider_error_text",
    "redact_credentials",
    "redacted_and_what",
    "scrub_provider_text",
    "sent_text",
    "summarize_error",
]

# What API keys and tokens look like, also when a provider masks part of
# one ("sk-proj-****…wxyz" still gives away its ends).
KEY_SHAPES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=*-]{6,}"), "Bearer ***"),
    (re.compile(r"\bsk-[A-Za-z0-9_*.…-]{4,}"), "sk-***"),
    (re.compile(r"\b(?:gsk|xai|rk)[-_][A-Za-z0-9_*.…-]{12,}"), "***"),  # Groq, xAI, restricted keys
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), "***"),  # Google API keys
]

REDACTED = "[redacted]"

# Tokens whose prefix says what they are (GitHub, Slack, AWS key ids,
# Telegram bot tokens); with KEY_SHAPES, what memory never keeps.
TOKEN_SHAPES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"), "***"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), "***"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "***"),
    (re.compile(r"\b\d{8,10}:[A-Za-z0-9_-]{35}\b"), "***"),
]

_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# A secret's name, then its value. After ":" or "=" the value goes
# whatever it is (that is how a credential is written down); after "is" /
# "是" only a value no sentence word looks like (a digit or a symbol in it):
# "the password is required" stays.
# Machine secrets (keys, tokens, one-time codes) are never worth keeping.
_MACHINE_WORD = (
    r"(?:(?<![A-Za-z])(?:secret|api[ _-]?key|access[ _-]?key|private[ _-]?key|token)(?![A-Za-z])|密钥|私钥|验证码)"
)
# A password a person chose is theirs to have remembered (the ``credential``
# category: shown by id only, in private chats only); it is kept out of logs.
_PASSWORD_WORD = r"(?:(?<![A-Za-z])(?:pass(?:word|wd|phrase|code)|pwd|pin)(?![A-Za-z])|密码|口令)"
_VALUE = r"[^\s，。；、,;\"'“”]+"
_LEAD = r"\s*(?:[:：=]|\bis\b:?|是|为)\s*"
_SET_MACHINE_SECRET = re.compile(rf"(?i)({_MACHINE_WORD}{_LEAD})({_VALUE})")
_SET_PASSWORD = re.compile(rf"(?i)({_PASSWORD_WORD}{_LEAD})({_VALUE})")
_SYMBOLISH = re.compile(r"[\d!@#$%^&*()_+=\[\]{}|\\/<>?~`-]")
_SEPARATED = re.compile(r"[:：=]")
# 13 to 19 digits, in groups split by single spaces or dashes, starting as
# card numbers do (2 to 6): not part of a longer number, not a phone (11),
# a date, a Telegram chat id (-100...) or a timestamp (1...).
_CARD = re.compile(r"(?<![\d-])[2-6](?:[ -]?\d){12,18}(?![\d])")


def luhn_ok(digits: str) -> bool:
    """The check digit every card number carries (ISO/IEC 7812)."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


# A number of tokens ("token: 4096", "max_token=128k", "token: 32,000")
# is a model setting, no secret: a count written with a k/M suffix or
# thousands commas, or a number of at most 7 digits that is round (a
# power of two or a multiple of 100), as context sizes and output limits
# are. A one-time code ("token: 482913") is neither and still goes; so
# does anything with a letter in it or longer.
_COUNT = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d{1,4}(?:\.\d+)?[kKmM]|(?P<n>\d{1,7}))(?![\w.])")
_TOKEN_WORD = re.compile(r"(?i)token")


def _token_count(m: re.Match[str]) -> bool:
    """Whether the "token ..." value of ``m`` is a count of tokens (:data:`_COUNT`)."""
    if not _TOKEN_WORD.match(m.group(1)):
        return False
    count = _COUNT.match(m.string, m.end(1))
    if count is None:
        return False
    if count.group("n") is None:
        return True
    n = int(count.group("n"))
    return n > 0 and (n % 100 == 0 or n & (n - 1) == 0)


def _set_secret(m: re.Match[str]) -> str:
    lead, value = m.group(1), m.group(2)
    if _token_count(m):
        return m.group(0)
    if _SEPARATED.search(lead) or _SYMBOLISH.search(value):
        return lead + REDACTED
    return m.group(0)


def _card(m: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", m.group(0))
    return "[card number redacted]" if luhn_ok(digits) else m.group(0)


CREDENTIAL_SHAPES = [*KEY_SHAPES, *TOKEN_SHAPES]


def redact_credentials(text: str, *, passwords: bool = False) -> str:
    """``text`` without what would open something if it were read from
    memory later: key and token shapes, private key blocks, the value of a
    "token: ..." / "api key = ..." line (not a count of tokens, "token:
    4096"), card numbers (Luhn-checked).
    ``passwords`` also takes the value of a "password: ..." line: the logs
    ask for it; memory keeps a password the user told it (category
    ``credential``, never shown outside their private chats). Everything
    else, line breaks included, is left as it was."""
    return redacted_and_what(text, passwords=passwords)[0]


def redacted_and_what(text: str, *, passwords: bool = False) -> tuple[str, tuple[str, ...]]:
    """:func:`redact_credentials`, and what it took out in words for a
    person ("an API key or token", "a card number"), never the values."""
    what: list[str] = []

    def step(kind: str, after: str, before: str) -> str:
        if after != before and kind not in what:
            what.append(kind)
        return after

    text = step("a private key", _PRIVATE_KEY.sub("[private key redacted]", text), text)
    for pattern, repl in CREDENTIAL_SHAPES:
        text = step("an API key or token", pattern.sub(repl, text), text)
    text = step("the value of a key or token line", _SET_MACHINE_SECRET.sub(_set_secret, text), text)
    if passwords:
        text = step("a password", _SET_PASSWORD.sub(_set_secret, text), text)
    return step("a card number", _CARD.sub(_card, text), text), tuple(what)


_PLACEHOLDERS = re.compile(
    r"\[(?:private key |card number )?redacted\]|\b(?:sk-|Bearer )?\*\*\*", re.IGNORECASE
)


def nothing_but_redactions(text: str) -> bool:
    """Whether ``text`` (redacted) says nothing once its placeholders are
    gone: no letter, digit or CJK character is left."""
    return not any(c.isalnum() for c in _PLACEHOLDERS.sub(" ", text))


PROVIDER_TEXT_MAX = 300
"""Characters of a provider's text kept: enough to say what went wrong,
too few to carry a prompt into the log."""


def scrub_provider_text(text: str, secrets: Iterable[str] = (), *, limit: int = PROVIDER_TEXT_MAX) -> str:
    """``text`` on one line, without ``secrets`` (the keys the caller
    sends; values under 6 characters are ignored, they would blank ordinary
    words), with key-shaped tokens masked, cut at ``limit`` characters."""
    text = " ".join(str(text).split())
    # Longest first: a secret that contains another is replaced whole.
    for s in sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True):
        text = text.replace(s, "***")
    for pattern, repl in KEY_SHAPES:
        text = pattern.sub(repl, text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def provider_error_text(resp: httpx.Response) -> str:
    """The provider's words for an error, whole: the ``error.message`` of
    a JSON body, a proxy's HTML error page as its text, else the body.
    Scrub it (:func:`scrub_provider_text`) before it goes anywhere: cut
    only once scrubbed, so a key is never cut in two halves that no longer
    match it."""
    try:
        err = resp.json().get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    except (ValueError, AttributeError):
        pass
    if "html" in resp.headers.get("content-type", "").lower():
        # A proxy's or gateway's error page: its words, not its markup.
        return " ".join(_TAG.sub(" ", _HIDDEN.sub(" ", resp.text)).split())
    return resp.text


_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


# Quoted spans in a provider's message: what it quotes is what it was sent.
# A single quote only as a quote mark ("model's" is no quote).
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|‘[^’]*’|`[^`]*`|「[^」]*」|«[^»]*»|(?<!\w)'[^']*'(?!\w)")
_WORD = re.compile(r"\w+")
# The words providers' errors are made of: kept even when the prompt has them too.
_ERROR_WORDS = frozenset("""
a an the this that these your you is are was be been it its of in on to for and or not no with by as at
than then only most least maximum max minimum min however please try again later reduce retry
model models message messages request requests prompt input output token tokens context length window
limit limits rate exceeded exceeds exceed resulted completion completions content image images vision
stream streaming tool tools function functions call support supported supports does do invalid error
value values type types field fields parameter param required missing unknown role user assistant
system string array object must characters bytes allowed server overloaded unavailable internal found
exist exists policy filter filtered management safety key api quota billing account organization
""".split())


def sent_text(value: object) -> str:
    """Every string in a request body (messages, their parts, tool
    arguments, embedding inputs), joined: what an error must not echo."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(sent_text(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return "\n".join(sent_text(v) for v in value)
    return ""


def _vetted(message: str, sent: str) -> str:
    """``message`` without quoted spans and without any word (3+ letters)
    that ``sent`` holds, bar the common words of error messages."""
    haystack = sent.lower()
    text = _QUOTED.sub("…", message)

    def keep(m: re.Match[str]) -> str:
        w = m.group(0)
        low = w.lower()
        return w if len(w) < 3 or low in _ERROR_WORDS or low not in haystack else "…"

    text = _WORD.sub(keep, text)
    return re.sub(r"…(?:[\s\W]*…)+", "…", text)


def error_summary(resp: httpx.Response, sent: str, secrets: Iterable[str] = (), *, limit: int = 200) -> str:
    """What may be logged of an error response to a request whose words
    are ``sent`` (:func:`sent_text`): ``"invalid_request_error
    context_length_exceeded - <message vetted> (412 chars, sha256 1a2b3c4d)"``."""
    kind: list[str] = []
    try:
        err = resp.json().get("error")
        if isinstance(err, dict):
            kind = [str(err[k]) for k in ("type", "code") if isinstance(err.get(k), (str, int)) and err.get(k)]
    except (ValueError, AttributeError):
        pass
    return summarize_error(provider_error_text(resp), sent, secrets, kind=kind, limit=limit)


def summarize_error(raw: str, sent: str, secrets: Iterable[str] = (), *, kind: Iterable[str] = (),
                    limit: int = 200) -> str:
    """A provider's error text ``raw`` as :func:`error_summary` logs it."""
    secrets = list(secrets)
    digest = hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:8]
    said = scrub_provider_text(_vetted(raw, sent), secrets, limit=limit)
    head = scrub_provider_text(" ".join(_vetted(k, sent)[:60] for k in kind), secrets)
    # " - ", not ": ": a code such as invalid_api_key before a colon reads as
    # "api_key: <value>" to the log's redaction, which blanked the message's first word.
    return f"{head + ' - ' if head else ''}{said} ({len(raw)} chars, sha256 {digest})"
