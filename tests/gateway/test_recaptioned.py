"""A recording's stored row with a new caption (gateway/transcription.py
``recaptioned``): only the caption's characters change, and a row whose
caption cannot be told from its transcript is not split at all."""

from __future__ import annotations

from gateway.transcription import recaptioned, recording_mark


def test_a_known_caption_length_changes_those_characters_only() -> None:
    row = "[voice] to do\nline one\nline two"
    assert recaptioned(row, "to do today", 5) == "[voice] to do today\nline one\nline two"
    assert recaptioned("[voice] line one\nline two", "note", 0) == "[voice] note\nline one\nline two"
    assert recaptioned(row, "to do\nnow", 5) == "[voice] to do\nnow\nline one\nline two"


def test_a_length_the_row_does_not_bear_out_splits_nothing() -> None:
    assert recaptioned("[voice] to do\nline one", "x", 3) is None  # no line break after 3 characters
    assert recaptioned("[voice] to do", "x", 5) is None  # a caption with no transcript after it
    assert recaptioned("[audio a.mp3] hi\nsomething else", "x", 2) is None  # no [transcript] line


def test_without_a_length_only_a_row_of_one_reading_is_split() -> None:
    assert recaptioned("[voice] call the bank", "todo", None) == "[voice] todo\ncall the bank"
    assert recaptioned("[voice] todo\ncall the bank", "x", None) is None  # a caption, or a transcript of two lines
    audio = "[audio Nina – Sync] what did we decide?\n[transcript]\nwe ship"
    assert recaptioned(audio, "decided?", None) == "[audio Nina – Sync] decided?\n[transcript]\nwe ship"
    assert recaptioned("[audio a.mp3] [transcript]\nwe ship", "hi", None) == "[audio a.mp3] hi\n[transcript]\nwe ship"
    twice = "[audio a.mp3] see\n[transcript]\nbelow\n[transcript]\nwe ship"
    assert recaptioned(twice, "x", None) is None


def test_a_recording_not_heard_holds_its_caption_only() -> None:
    assert recaptioned("[voice not read] abuot her", "about her", None) == "[voice not read] about her"
    assert recaptioned("[audio Lecture 2 not read] sum up", "summarise", 6) == "[audio Lecture 2 not read] summarise"


def test_other_rows_are_not_recordings() -> None:
    assert recording_mark("[photo] hi") == "" and recaptioned("[photo] hi", "x", None) is None
    assert recording_mark("[forwarded from Dana]\n[voice] hi") == ""
    assert recording_mark("[audio Nina – Sync not read] x") == "[audio Nina – Sync not read]"
