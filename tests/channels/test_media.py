"""channels/media.py: a picture's type from its bytes, the size limit, and
what the user reads when one is not read."""

from __future__ import annotations

import pytest

from channels.media import (
    FAILED,
    TOO_LARGE,
    UNSUPPORTED,
    ImageError,
    album_note,
    answering,
    as_image,
    image_note,
    placeholder,
    sniff_mime,
)
from gateway.bus import Image, InboundMessage

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(200)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(200)
GIF = b"GIF89a" + bytes(200)
WEBP = b"RIFF\x00\x01\x00\x00WEBPVP8 " + bytes(200)


def test_the_type_is_read_from_the_bytes() -> None:
    assert [sniff_mime(d) for d in (JPEG, PNG, GIF, WEBP)] == ["image/jpeg", "image/png", "image/gif", "image/webp"]
    assert sniff_mime(b"%PDF-1.7 ...") is None and sniff_mime(b"") is None
    assert sniff_mime(b"RIFF\x00\x01\x00\x00WAVEfmt ") is None  # a RIFF that is no picture


def test_as_image_checks_size_and_type() -> None:
    assert as_image(PNG, len(PNG)) == Image(PNG, "image/png")
    with pytest.raises(ImageError) as too_large:
        as_image(PNG, len(PNG) - 1)
    assert too_large.value.reason == TOO_LARGE
    with pytest.raises(ImageError) as unsupported:
        as_image(b"\x00\x00\x00\x18ftypheic" + bytes(50), 10_000)  # an iPhone's HEIC
    assert unsupported.value.reason == UNSUPPORTED


def test_the_bytes_never_show_in_a_repr() -> None:
    msg = InboundMessage("telegram", "1", "1", "look", images=(Image(b"SECRET-BYTES", "image/png"),))
    assert "SECRET-BYTES" not in repr(msg)


def test_placeholders_and_notes() -> None:
    assert (placeholder(1), placeholder(3)) == ("[photo]", "[3 photos]")
    msg = InboundMessage("telegram", "1", "1", "the wifi?", placeholder="[photo]")
    assert msg.history_text == "[photo] the wifi?"
    assert InboundMessage("telegram", "1", "1", "", placeholder="[photo]").history_text == "[photo]"
    assert InboundMessage("telegram", "1", "1", "plain").history_text == "plain"
    note = image_note(TOO_LARGE, 5 * 1024 * 1024, has_text=True)
    assert "too large" in note and "5 MB" in note and note.endswith("I am answering your text without it.")
    assert "512 KB" in image_note(TOO_LARGE, 512 * 1024, has_text=False)
    assert "JPEG, PNG, GIF and WebP" in image_note(UNSUPPORTED, 1024, has_text=False)
    assert "send it again" in image_note(FAILED, 1024, has_text=False)


def test_an_album_note_counts_the_albums_parts_and_its_videos() -> None:
    mb = 1024 * 1024
    assert album_note([(1, FAILED), (3, FAILED)], 3, mb, videos=1) == (
        "Sorry, I could not read either photo of that album: the download failed; please send it again. "
        "I cannot watch videos, so I did not see the video.")
    assert album_note([(1, UNSUPPORTED), (2, UNSUPPORTED), (3, UNSUPPORTED)], 3, mb) == (
        "Sorry, I could not read any of the 3 photos of that album: I can only read JPEG, PNG, GIF and WebP pictures.")
    assert album_note([], 3, mb, videos=2) == (
        "I cannot watch videos, so I did not see the 2 videos. I am answering with the photo.")


def test_a_note_names_what_it_answers_without_the_thing_not_read() -> None:
    """A forward's words are someone else's: not "your text"."""
    assert answering(has_text=True) == " I am answering your text without it."
    assert answering(has_text=False, forwarded=1) == " I am answering the forwarded message without it."
    assert answering(has_text=True, forwarded=3) == " I am answering your text and the forwarded messages without it."
    assert answering(has_text=False) == ""
    assert image_note(FAILED, 1024, has_text=False, forwarded=2).endswith("the forwarded messages without it.")


def test_an_album_note_names_the_pictures_not_read_by_their_place() -> None:
    mb = 5 * 1024 * 1024
    assert album_note([(2, FAILED)], 3, mb) == (
        "Sorry, photo 2 of 3 could not be read: the download failed; please send it again. "
        "I am answering with the others.")
    assert album_note([(3, UNSUPPORTED), (1, UNSUPPORTED)], 4, mb) == (
        "Sorry, photos 1 and 3 of 4 could not be read: I can only read JPEG, PNG, GIF and WebP pictures. "
        "I am answering with the others.")
    assert album_note([(1, TOO_LARGE), (2, TOO_LARGE), (4, TOO_LARGE)], 4, mb) == (
        "Sorry, photos 1, 2 and 4 of 4 could not be read: too large for me (the limit is 5 MB); please send "
        "smaller ones or screenshots. I am answering with the other one.")
    # Different reasons: which, without a why that would be wrong for some.
    assert album_note([(1, TOO_LARGE), (2, FAILED)], 3, mb) == (
        "Sorry, photos 1 and 2 of 3 could not be read. I am answering with the other one.")
