"""Face thumbnails and voice samples, made small enough to embed in the page as ``data:`` URIs.

Thumbnails are re-encoded JPEGs of at most :data:`THUMB_SIDE` pixels (a few kB each), whatever the
stored crop was; a crop that is missing or unreadable yields ``None`` and the page draws initials instead.
Voice samples are at most a few seconds of the character's own speech, cut from the video the memory
was made from and encoded as Opus in Ogg (24 kbit/s: ~3 kB per second), which every browser plays.
"""

from __future__ import annotations

import base64
import io
import logging
from pathlib import Path

import numpy as np

from m3cli.stages.report.records import Crop

log = logging.getLogger(__name__)

THUMB_SIDE = 96
KEYFRAME_SIDE = 200  # keyframes: big enough to read a title, ~6 kB each
THUMB_QUALITY = 80
VOICE_RATE = 16_000
VOICE_BITRATE = 24_000


def data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def thumbnail(crop: Crop, side: int = THUMB_SIDE) -> str | None:
    """A JPEG data URI of the crop, downscaled to fit ``side`` x ``side``; None when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    try:
        if crop.data_uri is not None:
            head, _, payload = crop.data_uri.partition(",")
            if ";base64" not in head:
                return None
            source: io.BytesIO | Path = io.BytesIO(base64.b64decode(payload, validate=False))
        elif crop.path is not None:
            source = crop.path
        else:
            return None
        with Image.open(source) as img:
            img.draft("RGB", (side, side))  # a JPEG decodes at 1/2..1/8 scale when that still covers side
            img = img.convert("RGB")
            img.thumbnail((side, side), Image.Resampling.LANCZOS)
            out = io.BytesIO()
            img.save(out, "JPEG", quality=THUMB_QUALITY, optimize=True)
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError) as exc:
        # a 20000x20000 PNG is refused by Pillow's pixel limit before it is decoded: initials instead
        # a face then shows initials, a keyframe its text and tags alone
        log.warning("image of %s unreadable (%s); not shown", crop.entity, exc)
        return None
    return data_uri("image/jpeg", out.getvalue())


def encode_opus(audio: np.ndarray, rate: int = VOICE_RATE, bitrate: int = VOICE_BITRATE) -> bytes:
    """Mono float32 samples -> an Ogg/Opus file in memory."""
    import av

    buf = io.BytesIO()
    # bitexact: the Ogg stream's serial number is otherwise random, and the same memory must give the
    # same page byte for byte
    with av.open(buf, mode="w", format="ogg", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("libopus", rate=rate)
        stream.bit_rate = bitrate
        stream.layout = "mono"
        pcm = np.clip(audio, -1.0, 1.0).astype(np.float32).reshape(1, -1)
        frame = av.AudioFrame.from_ndarray(pcm, format="flt", layout="mono")
        frame.sample_rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return buf.getvalue()


#: what a video (or a recording's sound) is named: a clip path naming anything else is not opened
MEDIA_SUFFIXES = frozenset(
    ".mp4 .m4v .mkv .mov .webm .avi .mpg .mpeg .ts .mts .m2ts .flv .wmv .3gp .ogv "
    ".wav .mp3 .m4a .flac .ogg .opus .aac".split()
)
#: clip paths already refused (and said) in this process
_REFUSED: set[str] = set()
#: kernel and device trees: never a recording, and reading some of them costs or blocks
SYSTEM_TREES = ("/proc", "/sys", "/dev")


def refuse_by_path(video: Path) -> str | None:
    """Why the memory's ``clips.path`` cannot be its video, judged by the name alone (also of the file
    a symbolic link names); None when it may be, and its content id decides.

    A memory is untrusted input, and checking a file's content id reads (hashes) all of it: a crafted
    path naming ``~/.ssh/id_rsa``, ``/proc/kcore`` or a 100-GB disk image would be read whole before
    being refused. The name is checked first, so such files are never opened."""
    import os

    for name in (os.path.abspath(video), os.path.realpath(video)):
        if any(name == tree or name.startswith(tree + "/") for tree in SYSTEM_TREES):
            return f"it names a system file ({name})"
        if Path(name).suffix.lower() not in MEDIA_SUFFIXES:
            return f"not a video file name ({Path(name).name})"
    return None


def voice_sample(video: Path, start: float, end: float, video_id: str | None = None) -> str | None:
    """An Ogg/Opus data URI of ``video``'s audio over [start, end); None when the video is not readable
    or (with ``video_id``) is not the video the memory was made from.

    A memory is untrusted input (it may come from a bucket): its ``clips.path`` may name any file on
    this machine, so the file's content id must be the memory's video id before a second of it goes
    into the page, and the samples are decoded from the very file whose bytes were checked."""
    from types import SimpleNamespace

    from m3cli.stages.core.errors import M3Error
    from m3cli.stages.core.media import display_name, source_path
    from m3cli.stages.core.media_audio import clip_audio

    if video_id is None:  # nothing to check the file against: a crafted memory could name any
        return None
    refused = refuse_by_path(video)
    if refused is not None:  # refused by its name, before a byte of it is read (or hashed)
        if str(video) not in _REFUSED:  # said once, not once per character
            _REFUSED.add(str(video))
            log.warning("no voice sample from %s: %s; it was not read", display_name(video), refused)
        return None
    if not video.is_file():
        log.info("%s not found: voice samples are left out", display_name(video))
        return None
    try:
        video = source_path(SimpleNamespace(path=str(video), id=video_id))
        audio = clip_audio(video, "", -1, float(start), float(end), rate=VOICE_RATE)
    except (M3Error, OSError) as exc:
        log.warning("no voice sample from %s: %s", display_name(video), exc)
        return None
    if audio.size == 0 or float(np.abs(audio).max()) == 0.0:
        return None
    peak = float(np.abs(audio).max())
    audio = audio * min(1.0, 0.9 / peak) if peak > 0 else audio
    return data_uri("audio/ogg", encode_opus(audio))
