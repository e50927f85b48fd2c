"""Pictures users send, for a chat model that reads them (``agent.vision``),
and voice messages and audio files, for transcription (``agent.transcription``).

A channel fetches the bytes its own way (Telegram ``getFile``, Feishu's
message resource) and hands them to :func:`as_image`, which checks the size
and reads the type from the bytes themselves: what a platform or a user's
file name claims is not what the model provider checks. A picture that
cannot be read becomes an :class:`ImageError`, whose ``reason`` picks the
short note the user gets (:func:`image_note`).
"""

from __future__ import annotations

from collections.abc import Sequence

import re

from gateway.bus import PHOTO_NOT_READ, Image
from gateway.bus import VOICE as VOICE
from gateway.bus import VOICE_NOT_READ as VOICE_NOT_READ

__all__ = [
    "FAILED",
    "MAX_IMAGES",
    "NOT_READ",
    "VOICE",
    "VOICE_NOT_READ",
    "TOO_LARGE",
    "UNSUPPORTED",
    "ImageError",
    "album_note",
    "answering",
    "as_image",
    "audio_filename",
    "audio_label",
    "image_note",
    "is_audio_name",
    "recording_note",
    "placeholder",
    "sniff_mime",
]

# The formats OpenAI-compatible vision models take.
_FORMATS = "JPEG, PNG, GIF and WebP"
TOO_LARGE = "too_large"
UNSUPPORTED = "unsupported"
FAILED = "failed"
# Pictures of one message that go to the model (a Feishu post may hold many).
MAX_IMAGES = 4

NOT_READ = PHOTO_NOT_READ


class ImageError(Exception):
    """A picture was not read. ``reason``: :data:`TOO_LARGE`,
    :data:`UNSUPPORTED` or :data:`FAILED`; the message says why for the
    log (never the bytes, never a token)."""

    def __init__(self, reason: str, detail: str, *, note: str = "") -> None:
        super().__init__(detail)
        self.reason = reason
        # What the user is told instead of one picture's note (an album's
        # pictures, none read), without what is answered: the publisher adds that.
        self.note = note


def sniff_mime(data: bytes) -> str | None:
    """The image type the bytes are, by their signature; None for any other."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def as_image(data: bytes, max_bytes: int) -> Image:
    """``data`` as an :class:`Image`, or :class:`ImageError` when it is over
    ``max_bytes`` or not a picture the model takes."""
    if len(data) > max_bytes:
        raise ImageError(TOO_LARGE, f"{len(data)} bytes, over the {max_bytes} byte limit")
    mime = sniff_mime(data)
    if mime is None:
        raise ImageError(UNSUPPORTED, f"not {_FORMATS} ({len(data)} bytes)")
    return Image(data=data, mime=mime)


# What transcription endpoints take, by extension (OpenAI's list, and kin).
_AUDIO_TYPES = {
    "audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mp4": "m4a", "audio/x-m4a": "m4a", "audio/m4a": "m4a",
    "audio/aac": "aac", "audio/ogg": "ogg", "audio/opus": "ogg", "audio/wav": "wav", "audio/x-wav": "wav",
    "audio/wave": "wav", "audio/webm": "webm", "audio/flac": "flac", "audio/x-flac": "flac", "audio/amr": "amr",
}
_AUDIO_EXTENSIONS = frozenset({*_AUDIO_TYPES.values(), "mpga", "mpeg", "oga", "opus", "wma", "aiff"})
_LABEL_UNSAFE = re.compile(r"[\[\]\s]+")


def audio_label(*, title: str = "", performer: str = "", file_name: str = "") -> str:
    """An audio file's name as its mark shows it (``[audio NAME]``):
    "performer – title" as a player shows it, else the title, else the
    file name, else "audio"; one line, without brackets (they end a mark)."""
    title, performer, file_name = (_LABEL_UNSAFE.sub(" ", w).strip() for w in (title, performer, file_name))
    if title:
        return f"{performer} – {title}" if performer else title
    return file_name or "audio"


def is_audio_name(file_name: str) -> bool:
    """A file name with an audio extension (Feishu says no MIME type of a file)."""
    return file_name.rpartition(".")[2].lower() in _AUDIO_EXTENSIONS


def audio_filename(file_name: str, mime: str) -> str:
    """The name a recording goes to the transcription endpoint under,
    which reads the format from its extension: the sender's, when it has
    one; else by the MIME type (``audio.mp3``)."""
    if "." in file_name and is_audio_name(file_name):
        return file_name
    return f"audio.{_AUDIO_TYPES.get(mime.split(';')[0].strip().lower(), 'mp3')}"


def placeholder(count: int) -> str:
    """What stands for ``count`` pictures in the history: "[photo]", "[3 photos]"."""
    return "[photo]" if count == 1 else f"[{count} photos]"


def answering(*, has_text: bool, forwarded: int = 0, without: str = "it", zh: bool = False) -> str:
    """The end of a note on something not read: what is answered without
    it, the user's own words (``has_text``) and/or ``forwarded`` messages
    with words of their own; "" for nothing. A forward's words are not
    "your text": the user asked about them, someone else wrote them.
    ``zh``: in Chinese (``without`` has no Chinese: the sentence needs none)."""
    if zh:
        what_zh = "和".join(w for w, said in (("你的文字", has_text), ("转发的消息", forwarded)) if said)
        return f"我先根据{what_zh}回复。" if what_zh else ""
    forwards = "the forwarded message" if forwarded == 1 else "the forwarded messages"
    if has_text and forwarded:
        what = f"your text and {forwards}"
    elif forwarded or has_text:
        what = forwards if forwarded else "your text"
    else:
        return ""
    return f" I am answering {what} without {without}."


# A Chinese note's name for what was not read (image_note's ``what``).
_THIS_ZH = {"picture": "这张图片", "voice message": "这条语音"}
_FORMATS_ZH = "JPEG、PNG、GIF 和 WebP"


def image_note(reason: str, max_bytes: int, *, has_text: bool, what: str = "picture", forwarded: int = 0,
               zh: bool = False) -> str:
    """The short note a user gets for a picture (``what``: or a "voice
    message") that was not read; with ``has_text`` (their words) or
    ``forwarded`` (forwards with words), those are answered all the same,
    and it says so (:func:`answering`). ``zh``: in Chinese."""
    if zh:
        this = _THIS_ZH[what]
        if reason == TOO_LARGE:
            smaller = "小一点的图片或截图" if what == "picture" else "短一点的语音，或者直接打字"
            note = f"{this}太大了，我读不了（上限 {_megabytes(max_bytes, zh=True)}）。请发{smaller}。"
        elif reason == UNSUPPORTED:
            note = f"我只能读 {_FORMATS_ZH} 格式的图片，{this}读不了。"
        else:
            note = f"抱歉，{this}没能下载下来，请重新发送。"
        return note + answering(has_text=has_text, forwarded=forwarded, zh=True)
    if reason == TOO_LARGE:
        smaller = "a smaller one or a screenshot" if what == "picture" else "a shorter one or type it"
        note = f"That {what} is too large for me to read (the limit is {_megabytes(max_bytes)}). Please send {smaller}."
    elif reason == UNSUPPORTED:
        note = f"I can only read {_FORMATS} pictures, so I could not read that one."
    else:
        note = f"Sorry, I could not download that {what}. Please send it again."
    return note + answering(has_text=has_text, forwarded=forwarded)


def recording_note(reason: str, max_bytes: int, *, name: str = "", has_text: bool, forwarded: int = 0,
                   zh: bool = False) -> str:
    """The short note for a recording not downloaded: a voice message's
    (``name`` "") as :func:`image_note` says it; an audio file's names it
    (and the limit, when it is too large); then what is answered. ``zh``: in Chinese."""
    if not name:
        return image_note(reason, max_bytes, has_text=has_text, what="voice message", forwarded=forwarded, zh=zh)
    if zh:
        if reason == TOO_LARGE:
            note = f"音频文件 {name} 太大了，我转写不了（上限 {_megabytes(max_bytes, zh=True)}）。请发短一点的录音，或者分段发送。"
        else:
            note = f"抱歉，音频文件 {name} 没能下载下来，请重新发送。"
        return note + answering(has_text=has_text, forwarded=forwarded, zh=True)
    if reason == TOO_LARGE:
        note = (f"The audio file {name} is too large for me to transcribe (the limit is {_megabytes(max_bytes)}). "
                "Please send a shorter recording, or split it.")
    else:
        note = f"Sorry, I could not download the audio file {name}. Please send it again."
    return note + answering(has_text=has_text, forwarded=forwarded)


def album_note(failed: Sequence[tuple[int, str]], total: int, max_bytes: int, *, videos: int = 0,
               zh: bool = False) -> str:
    """The note for an album of ``total`` parts, ``videos`` of them videos
    the model cannot watch and the rest pictures, of which those in
    ``failed`` (their place in the album, from 1, and the
    :class:`ImageError` reason) were not read: which, and why when they
    share a reason; then what is answered. When no picture was read, what
    is answered is for the publisher to add (:func:`answering`). ``zh``:
    in Chinese."""
    if zh:
        return _album_note_zh(failed, total, max_bytes, videos=videos)
    pictures = total - videos
    read = pictures - len(failed)
    said: list[str] = []
    if failed:
        numbers = sorted(n for n, _ in failed)
        which = f"photo {numbers[0]}" if len(numbers) == 1 else "photos " + _listed(numbers)
        reasons = {reason for _, reason in failed}
        why = ""
        if reasons == {TOO_LARGE}:
            smaller = "a smaller one or a screenshot" if len(numbers) == 1 else "smaller ones or screenshots"
            why = f": too large for me (the limit is {_megabytes(max_bytes)}); please send {smaller}"
        elif reasons == {UNSUPPORTED}:
            why = f": I can only read {_FORMATS} pictures"
        elif reasons == {FAILED}:
            why = ": the download failed; please send it again"
        if read:
            said.append(f"Sorry, {which} of {total} could not be read{why}.")
        else:
            none = "the photo" if pictures == 1 else "either photo" if pictures == 2 else f"any of the {pictures} photos"
            said.append(f"Sorry, I could not read {none} of that album{why}.")
    if videos:
        said.append(f"I cannot watch videos, so I did not see {'the video' if videos == 1 else f'the {videos} videos'}.")
    if read:
        if not failed:
            rest = "the photo" if read == 1 else "the photos"
        elif videos:
            rest = "the other photo" if read == 1 else "the other photos"
        else:
            rest = "the other one" if read == 1 else "the others"
        said.append(f"I am answering with {rest}.")
    return " ".join(said)


def _album_note_zh(failed: Sequence[tuple[int, str]], total: int, max_bytes: int, *, videos: int) -> str:
    """:func:`album_note` in Chinese: the same facts, said as a Chinese app says them."""
    pictures = total - videos
    read = pictures - len(failed)
    said: list[str] = []
    if failed:
        numbers = sorted(n for n, _ in failed)
        reasons = {reason for _, reason in failed}
        why = ""
        if reasons == {TOO_LARGE}:
            why = f"：太大了，我读不了（上限 {_megabytes(max_bytes, zh=True)}），请发小一点的图片或截图"
        elif reasons == {UNSUPPORTED}:
            why = f"：我只能读 {_FORMATS_ZH} 格式的图片"
        elif reasons == {FAILED}:
            why = "：下载失败了，请重新发送"
        if read:
            unit = "项" if videos else "张"
            said.append(f"抱歉，这组 {total} {unit}里的第 {'、'.join(map(str, numbers))} 张没能读取{why}。")
        else:
            none = "照片" if pictures == 1 else "两张照片都" if pictures == 2 else f"{pictures} 张照片都"
            said.append(f"抱歉，这组相册里的{none}没能读取{why}。")
    if videos:
        said.append(f"我看不了视频，所以没看到{'这段视频' if videos == 1 else f'这 {videos} 段视频'}。")
    if read:
        if not failed:
            rest = "这张照片" if read == 1 else "这些照片"
        else:
            rest = "另一张照片" if read == 1 else "其余的照片"
        said.append(f"我先根据{rest}回复。")
    return "".join(said)


def _listed(numbers: Sequence[int]) -> str:
    """``[1, 3, 4]`` -> ``"1, 3 and 4"``."""
    head, last = numbers[:-1], numbers[-1]
    return f"{', '.join(map(str, head))} and {last}" if head else str(last)


def _megabytes(n: int, *, zh: bool = False) -> str:
    mb = n / (1024 * 1024)
    if n < 1024:  # a limit set that low is shown as it is, not as "0 KB"
        return f"{n} 字节" if zh else f"{n} byte{'' if n == 1 else 's'}"
    if mb < 1:
        return f"{n // 1024} KB"
    return f"{mb:.0f} MB" if mb == int(mb) else f"{mb:.1f} MB"
