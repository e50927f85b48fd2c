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
    audio_filename,
    audio_label,
    image_note,
    is_audio_name,
    placeholder,
    recording_note,
    sniff_mime,
)
from channels.documents import document_note
from gateway.bus import Forwarded, Image, InboundMessage, notes_in_chinese

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


def test_a_limit_under_a_kilobyte_is_shown_in_bytes_not_as_zero() -> None:
    assert "(the limit is 500 bytes)" in image_note(TOO_LARGE, 500, has_text=False)
    assert "（上限 500 字节）" in image_note(TOO_LARGE, 500, has_text=False, zh=True)
    assert "(the limit is 1 byte)" in image_note(TOO_LARGE, 1, has_text=False)
    assert "(the limit is 1 KB)" in image_note(TOO_LARGE, 1024, has_text=False)
    assert "(the limit is 800 bytes)" in document_note(TOO_LARGE, 800, has_text=False)
    assert "（上限 800 字节）" in document_note(TOO_LARGE, 800, has_text=False, zh=True)


def test_notes_in_chinese_keep_the_same_facts() -> None:
    mb = 5 * 1024 * 1024
    assert image_note(TOO_LARGE, mb, has_text=True, zh=True) == (
        "这张图片太大了，我读不了（上限 5 MB）。请发小一点的图片或截图。我先根据你的文字回复。")
    assert image_note(TOO_LARGE, 512 * 1024, has_text=False, what="voice message", zh=True) == (
        "这条语音太大了，我读不了（上限 512 KB）。请发短一点的语音，或者直接打字。")
    assert image_note(UNSUPPORTED, mb, has_text=False, zh=True) == "我只能读 JPEG、PNG、GIF 和 WebP 格式的图片，这张图片读不了。"
    assert image_note(FAILED, mb, has_text=False, forwarded=2, zh=True) == (
        "抱歉，这张图片没能下载下来，请重新发送。我先根据转发的消息回复。")
    assert answering(has_text=True, forwarded=1, without="them", zh=True) == "我先根据你的文字和转发的消息回复。"
    assert answering(has_text=False, zh=True) == ""
    assert album_note([(1, TOO_LARGE), (2, TOO_LARGE), (4, TOO_LARGE)], 4, mb, zh=True) == (
        "抱歉，这组 4 张里的第 1、2、4 张没能读取：太大了，我读不了（上限 5 MB），请发小一点的图片或截图。"
        "我先根据另一张照片回复。")
    assert album_note([(1, FAILED), (3, FAILED)], 3, mb, videos=1, zh=True) == (
        "抱歉，这组相册里的两张照片都没能读取：下载失败了，请重新发送。我看不了视频，所以没看到这段视频。")
    assert album_note([], 3, mb, videos=2, zh=True) == "我看不了视频，所以没看到这 2 段视频。我先根据这张照片回复。"
    # English stays as it was when zh is not asked for.
    assert image_note(FAILED, mb, has_text=True, zh=False) == image_note(FAILED, mb, has_text=True)


def test_the_notes_language_comes_from_the_words_then_the_senders_app() -> None:
    def zh(text: str, locale: str = "", forwarded: tuple[str, ...] = ()) -> bool:
        return notes_in_chinese(InboundMessage("telegram", "1", "1", text, locale=locale,
                                               forwarded=tuple(Forwarded("A", f) for f in forwarded)))

    assert zh("这张收据多少钱？") and zh("看看", locale="en") and zh("", forwarded=("[photo] 明天开会",))
    assert not zh("what does it say?", locale="zh-hans") and not zh("", locale="zh", forwarded=("[photo] lunch?",))
    # No words (our marks are not words): the sender's app language.
    assert zh("", locale="zh-hans") and zh("👍 123", locale="ZH") and zh("", locale="zh", forwarded=("[voice]",))
    assert not zh("", locale="en") and not zh("") and not zh("", forwarded=("[file report.pdf]",))
    # Japanese has kanji too, but with kana: not Chinese, whatever the app says.
    assert not zh("この写真は何ですか", locale="zh") and not zh("", forwarded=("[photo] 会議は明日です",))
    assert zh("会议明天") and zh("我の猫")  # kanji alone, or with a borrowed の: Chinese


def test_an_audio_file_is_named_as_a_player_shows_it_and_sent_under_a_name_with_its_format() -> None:
    assert audio_label(title="Weekly sync", performer="Nina", file_name="a.mp3") == "Nina – Weekly sync"
    assert audio_label(title="Weekly sync") == "Weekly sync"
    assert audio_label(file_name="notes [v2]\n.m4a") == "notes v2 .m4a"  # brackets would end its mark
    assert audio_label() == "audio"
    assert audio_filename("standup.M4A", "audio/mp4") == "standup.M4A"
    assert audio_filename("standup", "audio/x-m4a") == "audio.m4a"
    assert audio_filename("", "audio/ogg; codecs=opus") == "audio.ogg"
    assert audio_filename("", "application/octet-stream") == "audio.mp3"
    assert is_audio_name("会议.mp3") and is_audio_name("a.WAV") and not is_audio_name("plan.pdf")


def test_a_recording_not_downloaded_is_told_by_name_and_limit() -> None:
    note = recording_note(TOO_LARGE, 20 * 1024 * 1024, name="sync.m4a", has_text=True)
    assert note == ("The audio file sync.m4a is too large for me to transcribe (the limit is 20 MB). "
                    "Please send a shorter recording, or split it. I am answering your text without it.")
    assert recording_note(FAILED, 1024, name="sync.m4a", has_text=False, zh=True) == \
        "抱歉，音频文件 sync.m4a 没能下载下来，请重新发送。"
    # A voice message's is a picture's note, as before.
    assert recording_note(TOO_LARGE, 1024, has_text=False) == image_note(TOO_LARGE, 1024, has_text=False,
                                                                         what="voice message")
