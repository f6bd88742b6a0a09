"""What the LLM memorizer sends for one clip: the chat messages and the inputs they carry.

Sampled frames (or the sight stage's keyframes), one labelled crop per face id, the clip's audio, the
dialogue as a data block, the on-screen text and the instructions, each as far as the server accepts
it. Separate from the reply's checks (:mod:`~m3cli.stages.memorize.reply`) and from the call loop in
:mod:`~m3cli.stages.memorize.stage`: building the request reads media and the cache, and nothing else.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from m3cli.schemas.records import ClipRecord, MemoryInput
from m3cli.stages.configs.memorize import MemorizeConfig
from m3cli.stages.core import memory_prompts as prompts
from m3cli.stages.core.cache import Cache
from m3cli.stages.core.entity_ids import VOICE, is_id, sorted_ids
from m3cli.stages.core.errors import InputError, M3Error
from m3cli.stages.memorize.offline import _merge_spans, _t

log = logging.getLogger(__name__)


def clip_ids(record: ClipRecord) -> tuple[list[str], list[str]]:
    """(face ids, voice ids) perceived in the clip, sorted by number."""
    faces = {t.face_id for t in (record.faces.tracks if record.faces else [])}
    voices = {u.speaker for u in (record.utterances or []) if u.speaker}
    if record.voices and record.voices.ids:
        voices.update(v for v in record.voices.ids if is_id(v, VOICE))
    return sorted_ids(faces), sorted_ids(voices)


def _frame_parts(record: ClipRecord, config: MemorizeConfig, cache: Cache | None) -> list[dict]:
    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core import media, media_frames, media_probe

    if config.frames == 0 or media_probe.pictureless(record):  # an audio-only recording has no frames
        return []
    from m3cli.stages.sight import keyframe_parts  # the sight stage's keyframes, where it ran

    keyframes = keyframe_parts(record, config.frames, config.max_side, config.jpeg_quality, cache)
    if keyframes:
        return keyframes
    duration = max(record.clip.end - record.clip.start, 1e-3)
    path = media.source_path(record.video, cache)
    frames = media_frames.sample_frames(
        path,
        record.video.id,
        record.clip.index,
        record.clip.start,
        record.clip.end,
        fps=max(config.frames / duration, 0.02),
        max_side=config.max_side,
        cache=cache,
    )
    if len(frames) == 0:
        return []
    picks = np.unique(np.linspace(0, len(frames) - 1, min(config.frames, len(frames))).round().astype(int))
    parts: list[dict] = [{"type": "text", "text": "Frames, in time order:"}]
    for i in picks:
        parts.append({"type": "text", "text": f"t={frames.times[i]:.1f} s"})
        parts.append(image_part(media_frames.encode_jpeg(frames.images[i], quality=config.jpeg_quality)))
    return parts


def _crop_parts(
    record: ClipRecord, config: MemorizeConfig, cache: Cache | None, images: bool = True
) -> list[dict]:
    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core import media_frames
    from m3cli.stages.core.record_paths import JPEG, cache_file, record_name

    tracks = sorted(record.faces.tracks if record.faces else [], key=lambda t: t.face_id)
    if not tracks:
        return []
    parts: list[dict] = [{"type": "text", "text": "Faces (one crop per face id):"}]
    position = {id(t): i for i, t in enumerate(record.faces.tracks if record.faces else [])}
    for t in tracks:
        spans = ", ".join(f"{_t(s)}-{_t(e)}" for s, e in _merge_spans(t.spans))
        data = None
        field = f"faces.tracks[{position[id(t)]}].crop"
        path = cache_file(record, field, t.crop, cache, JPEG)  # never a file outside the cache
        if t.crop and path is None and cache is not None:
            log.warning(
                "clip %d: crop %s of %s is missing; sending the id without a picture",
                record.clip.index,
                t.crop,
                t.face_id,
            )
        if path is not None and images:
            try:
                data = path.read_bytes()
                img = media_frames.decode_jpeg(data)
            except Exception as exc:  # noqa: BLE001 - PIL raises many kinds for a broken image
                raise InputError(
                    f"{record_name(record)}: {field}: {t.crop!r} is not a readable JPEG: {exc}"
                ) from None
        if data is not None:
            if max(img.shape[:2]) > config.max_side:
                from PIL import Image

                pil = Image.fromarray(img)
                pil.thumbnail((config.max_side, config.max_side))
                data = media_frames.encode_jpeg(np.asarray(pil), quality=config.jpeg_quality)
            parts.append({"type": "text", "text": f"{t.face_id} (visible {spans} s):"})
            parts.append(image_part(data))
        else:
            why = "no crop available" if images else "picture not sent"
            parts.append({"type": "text", "text": f"{t.face_id} (visible {spans} s): {why}"})
    return parts


def _audio_parts(record: ClipRecord, config: MemorizeConfig, cache: Cache | None) -> list[dict]:
    """The clip's audio as one ``input_audio`` part (16 kHz mono WAV, at most ``max_audio_s``)."""
    from m3cli.stages.backends.llm.media import audio_part, wav_bytes
    from m3cli.stages.core import media, media_audio

    if record.video.has_audio is False or record.clip.has_audio is False:
        return []
    start = record.clip.start
    end = min(record.clip.end, start + config.max_audio_s)
    try:
        audio = media_audio.clip_audio(
            media.source_path(record.video), record.video.id, record.clip.index, start, end, cache=cache
        )
    except (OSError, M3Error) as exc:
        log.warning("clip %d: audio not sent to the model: %s", record.clip.index, exc)
        return []
    if audio.size == 0:
        return []
    return [
        {"type": "text", "text": f"Audio of the clip ({_t(start)}-{_t(end)} s, 16 kHz mono):"},
        audio_part(wav_bytes(audio, media_audio.AUDIO_RATE)),
    ]


def _dialogue_text(record: ClipRecord) -> str:
    utterances = sorted(record.utterances or [], key=lambda u: (u.start, u.end))
    tag = prompts.prompt_data.nonce(record.video.id, str(record.clip.index), "dialogue")
    return prompts.dialogue_block(tag, [(u.start, u.end, u.speaker, u.text.strip()) for u in utterances])


def _wants(client: Any, capability: str, override: bool | None) -> bool:
    if override is not None:
        return override
    return bool(client is not None and client.accepts(capability))


def build_request(
    record: ClipRecord, config: MemorizeConfig, cache: Cache | None, client: Any = None
) -> tuple[list[dict], list[MemoryInput]]:
    """The chat messages for one clip and the inputs they carry (frames, crops, faces, dialogue, audio)."""
    faces, voices = clip_ids(record)
    images = _wants(client, "images", config.images) if client is not None else config.images is not False
    content: list[dict] = [
        {
            "type": "text",
            "text": prompts.memorize_header(
                record.clip.index, record.clip.start, record.clip.end, faces, voices
            ),
        }
    ]
    inputs: list[MemoryInput] = []
    frames = _frame_parts(record, config, cache) if images else []
    if frames:
        inputs.append("frames")
    crops = _crop_parts(record, config, cache, images)
    if any(p["type"] == "image_url" for p in crops):
        inputs.append("crops")
    if crops:
        inputs.append("faces")
    audio = _audio_parts(record, config, cache) if _wants(client, "audio", config.audio) else []
    if audio:
        inputs.append("audio")
    if record.utterances:
        inputs.append("dialogue")
    content += frames + crops + audio
    content.append({"type": "text", "text": _dialogue_text(record)})
    from m3cli.stages.sight import prompt_block  # on-screen text and tags, where m3 sight ran

    if (seen := prompt_block(record)) is not None:
        content.append({"type": "text", "text": seen})
    content.append({"type": "text", "text": config.instructions()})
    messages: list[dict] = [
        {"role": "system", "content": prompts.MEMORIZE_SYSTEM},
        {"role": "user", "content": content},
    ]
    return messages, inputs


def build_messages(
    record: ClipRecord, config: MemorizeConfig, cache: Cache | None, client: Any = None
) -> list[dict]:
    return build_request(record, config, cache, client)[0]
