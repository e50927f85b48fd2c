"""RanCommands: which edits of an answered command the user is told about."""

from __future__ import annotations

from gateway.editedcommands import RanCommands


def test_only_its_own_sender_changing_the_words_is_told_and_only_once() -> None:
    ran = RanCommands()
    ran.keep("telegram:9", "5", "9", "/timezone Asia/Shanghai", "timezone")
    assert ran.changed("telegram:9", "5", "9", " /timezone Asia/Shanghai ") is None  # a link preview's edit
    assert ran.changed("telegram:9", "5", "7", "/timezone Europe/Berlin") is None  # not the sender's
    assert ran.changed("telegram:8", "5", "9", "/timezone Europe/Berlin") is None  # another chat's message 5
    assert ran.changed("telegram:9", "5", "9", "/timezone Europe/Berlin") == "/timezone"
    assert ran.changed("telegram:9", "5", "9", "/timezone Europe/Paris") is None  # told once


def test_only_the_latest_commands_are_kept() -> None:
    ran = RanCommands(kept=2)
    for i in range(3):
        ran.keep("telegram:9", str(i), "9", "/memory", "memory")
    assert ran.changed("telegram:9", "0", "9", "/memory tea") is None
    assert ran.changed("telegram:9", "2", "9", "/memory tea") == "/memory"
    ran.keep("telegram:9", "", "9", "/memory", "memory")  # no id: nothing an edit could name
    assert ran.changed("telegram:9", "", "9", "/memory tea") is None
