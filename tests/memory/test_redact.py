"""``redact_credentials``: what a user pastes that opens something (a key, a
token, a private key, a card number) leaves the text before memory keeps
it, and a password line too before a log line does; ordinary numbers,
dates, phone numbers and words about passwords stay."""

from __future__ import annotations

import pytest

from memory.redact import REDACTED, luhn_ok, redact_credentials

PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBQ3uIhcy9pNUm4q5rK0WJ9Hk1aQZ8xWmPqg6fT3FhU0wAAAJiZ3u6Jmd7u\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


@pytest.mark.parametrize(("said", "kept", "gone"), [
    ("my key is sk-proj-AbCdEf0123456789xyz, use it", "my key is sk-***, use it", "AbCdEf0123456789"),
    ("curl -H 'Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc'", "Bearer ***", "eyJhbGci"),
    ("token: 9f8e7d6c5b4a", f"token: {REDACTED}", "9f8e7d6c5b4a"),
    ("验证码是 482913，五分钟内有效", f"验证码是 {REDACTED}，五分钟内有效", "482913"),
    ("api_key = AKIAIOSFODNN7EXAMPLE", f"api_key = {REDACTED}", "AKIAIOSFODNN7EXAMPLE"),
    ("the token ghp_16C7e42F292c6912E7710c838347Ae178B4a works", "the token *** works", "ghp_16C7e42F"),
    (f"here is my key\n{PRIVATE_KEY}\nthanks", "here is my key\n[private key redacted]\nthanks", "b3BlbnNzaC1"),
    ("pay with 4111 1111 1111 1111 exp 12/27", "pay with [card number redacted] exp 12/27", "4111"),
    ("card 5500-0000-0000-0004", "card [card number redacted]", "5500"),
])
def test_credentials_are_redacted(said: str, kept: str, gone: str) -> None:
    out = redact_credentials(said)
    assert gone not in out, out
    assert kept in out, out


@pytest.mark.parametrize(("said", "kept", "gone"), [
    ("password: hunter2", f"password: {REDACTED}", "hunter2"),
    ("Password=Tr0ub4dor&3 for the staging db", f"Password={REDACTED} for the staging db", "Tr0ub4dor"),
    ("the wifi password is Sunny-Day-42", f"the wifi password is {REDACTED}", "Sunny-Day-42"),
    ("wifi密码是 qwerty123，别告诉别人", f"wifi密码是 {REDACTED}，别告诉别人", "qwerty123"),
    ("服务器密码：Passw0rd!", f"服务器密码：{REDACTED}", "Passw0rd"),
])
def test_a_password_line_leaves_a_log_line_but_memory_keeps_it_for_its_owner(said: str, kept: str, gone: str) -> None:
    # A password the user asked to have remembered is a ``credential`` fact
    # (by id only, private chats only); the logs never carry it.
    assert redact_credentials(said) == said
    out = redact_credentials(said, passwords=True)
    assert gone not in out and kept in out, out


@pytest.mark.parametrize("said", [
    "call me at 13812345678 or +86 138 1234 5678",
    "the meeting is on 2026-11-23 at 09:30, room 4111",
    "order 1234567890123456 shipped",  # 16 digits, not a card (Luhn fails)
    "the group is -1001234567890 and the timestamp 1732345678901",
    "I forgot my password again, can you remind me how to reset it?",
    "the password is required for login",
    "my passport number expires in 2030",
    "max tokens: 4096, temperature 0.7",
    "the PIN pad was broken",
    "ID 4111111111111111111111 is too long to be a card",
])
def test_ordinary_text_survives(said: str) -> None:
    assert redact_credentials(said) == said
    assert redact_credentials(said, passwords=True) == said


@pytest.mark.parametrize("said", [
    "token: 4096",
    "max_token=4096 for the summariser",
    "the model's max token is 8192",
    "token = 128k",
    "context token: 1M, output token: 32,000",
    "max token：200000",
])
def test_a_token_count_about_a_model_is_kept(said: str) -> None:
    # A number of tokens is a user's real fact about their model settings,
    # no secret: "token: 4096" used to lose its number.
    assert redact_credentials(said) == said
    assert redact_credentials(said, passwords=True) == said


@pytest.mark.parametrize(("said", "gone"), [
    ("token: 482913", "482913"),  # a one-time code: no count a model setting has
    ("token: 4096abcdef0123456789", "4096abcdef"),
    ("token=40960000000000000000", "40960000000000000000"),
    ("token is 1a2b3c4d5e6f7a8b", "1a2b3c4d"),
    ("api key: 4096", "4096"),  # only a token has a count
])
def test_a_real_token_beside_the_count_rule_is_still_removed(said: str, gone: str) -> None:
    assert gone not in redact_credentials(said)


def test_luhn() -> None:
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112")


def test_an_unterminated_private_key_is_redacted_to_its_end() -> None:
    cut = PRIVATE_KEY.rsplit("\n", 2)[0]  # the paste lost its END line
    assert "b3Blbn" not in redact_credentials(f"key:\n{cut}")
