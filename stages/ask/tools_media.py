"""The tools that look at a clip again: [Rewatch] its frames, [Listen] to its audio, with a focused question.

CAM's watch_video_clip and listen_to_audio: the clip's own video file is decoded and sent to the
multimodal LLM; without one, or without the file, [Rewatch] answers from the clip's sight lines. These
are the only tools that read a video and call a model on media, so their decoding and their failures
(a damaged file, a refused image) stay here, apart from the tools that read the memory dataset alone.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from m3cli.stages.ask import prompts as P
from m3cli.stages.ask.actions import ToolError
from m3cli.stages.ask.nodes import ClipInfo, Node
from m3cli.stages.ask.text import SIGHT_LINE, fmt_time, overlap, terms
from m3cli.stages.ask.tools_context import ToolContext, ToolResult, _query_arg

if TYPE_CHECKING:
    from m3cli.schemas.records import VideoInfo


REWATCH_FRAMES = 8


_CLIP_Q = re.compile(r"^\s*clip\s*(\d{1,6})\s*[:,\-]?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_ABOUT_TEXT = re.compile(r"\b(written|writing|text|read|says?|sign|caption|title|words?|letters?)\b", re.I)


def _clip_arg(ctx: ToolContext, arg: str, tag: str) -> tuple[ClipInfo, str]:
    m = _CLIP_Q.match(arg)
    if not m:
        raise ToolError(f"[{tag}] takes 'clip <N>: <question>'")
    question = _query_arg(m.group(2), f"[{tag}]")
    return ctx.check_clip(ctx.video_for(f"[{tag}]"), int(m.group(1))), question


def _clip_question(ctx: ToolContext, arg: str, tag: str) -> tuple[ClipInfo, str]:
    info, question = _clip_arg(ctx, arg, tag)
    if not info.path or not Path(info.path).is_file():
        raise ToolError(f"the video file of clip {info.clip} is not available ({info.path or 'no path'})")
    if ctx.llm is None:
        raise ToolError(f"[{tag}] needs a multimodal LLM")
    return info, question


def _ask_media(
    ctx: ToolContext, tool: str, info: ClipInfo, question: str, parts: list[dict], prompt: str
) -> ToolResult:
    from m3cli.stages.backends.llm import LlmError

    text = prompt.format(
        clip=info.clip, start=fmt_time(info.start), end=fmt_time(info.end), question=question
    )
    try:
        reply = ctx.llm.chat([{"role": "user", "content": [{"type": "text", "text": text}, *parts]}])
    except LlmError as exc:
        raise ToolError(f"[{tool.capitalize()}] failed: {exc}") from None
    result = ToolResult(
        tool,
        f"clip {info.clip}: {question}",
        lines=[
            f"What clip {info.clip} ({fmt_time(info.start)}-{fmt_time(info.end)}) shows, "
            f"asked {question!r}: {reply.text.strip()}"
        ],
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        llm_s=reply.latency_s,
    )
    result.nodes = ctx.memory.clip_nodes(info.video, [info.clip], ctx.scope)[:3]
    return result


def rewatch_from_sight(ctx: ToolContext, info: ClipInfo, question: str, why: str) -> ToolResult | None:
    """[Rewatch] with no frames to look at (``why``): the clip's sight lines, what `m3 sight` read on its
    keyframes and tagged in them, those sharing words with the question first (on-screen text first
    when the question asks what was written). None when the clip has no sight lines."""
    members = ctx.memory.clip_nodes(info.video, [info.clip], ctx.scope)
    said = {
        n.id: m.group(0).strip()
        for n in members
        if n.kind == "episodic" and (m := SIGHT_LINE.match(n.raw_text or n.text))
    }
    nodes = [n for n in members if n.id in said]
    if not nodes:
        return None
    q = terms(question)
    text_first = bool(_ABOUT_TEXT.search(question))

    def order(n: Node) -> tuple:
        on_screen = "on screen" in (n.raw_text or n.text).lower()
        return (-(overlap(q, n.text) if q else 0.0), on_screen != text_first, n.t_start or 0.0, n.id)

    ranked = sorted(nodes, key=order)[: max(ctx.k, 8)]
    what = "; ".join(said[n.id] for n in ranked)
    result = ToolResult(
        "rewatch",
        f"clip {info.clip}: {question}",
        ranked,
        [
            f"What clip {info.clip} ({fmt_time(info.start)}-{fmt_time(info.end)}) shows, asked {question!r}: "
            f"its keyframes as read offline (on-screen text and object tags; {why}): {what}",
            *(ctx.render(n) for n in ranked),
        ],
    )
    result.note = f"answered from the clip's sight lines: {why}"
    return result


def tool_rewatch(ctx: ToolContext, arg: str) -> ToolResult:
    """CAM's watch_video_clip: frames of one clip to the multimodal LLM with a focused question. Without
    an LLM, or the video file, or when the LLM refuses the frames, the clip's sight lines answer
    (:func:`rewatch_from_sight`) where it has any."""
    info, question = _clip_arg(ctx, arg, "Rewatch")
    why = None
    if ctx.llm is None:
        why = "no multimodal LLM to look at the frames"
    elif not info.path or not Path(info.path).is_file():
        why = "the video file is not available"
    if why:
        found = rewatch_from_sight(ctx, info, question, why)
        if found is not None:
            return found
    try:
        return _rewatch_frames(ctx, arg)
    except ToolError as exc:
        found = rewatch_from_sight(ctx, info, question, str(exc))
        if found is None:
            raise
        return found


def _rewatch_frames(ctx: ToolContext, arg: str) -> ToolResult:
    from m3cli.stages.backends.llm.media import image_part
    from m3cli.stages.core import media, media_frames

    info, question = _clip_question(ctx, arg, "Rewatch")
    fps = max(REWATCH_FRAMES / max(info.end - info.start, 1e-3), 0.05)
    try:
        frames = media_frames.sample_frames(
            media.source_path(_video_of(info), ctx.cache),
            info.video,
            info.clip,
            info.start,
            info.end,
            fps=fps,
            max_side=512,
            cache=ctx.cache,
        )
    except Exception as exc:  # decoding errors of a damaged file: the round fails, the question goes on
        raise ToolError(f"cannot read frames of clip {info.clip}: {exc}") from None
    images = frames.images[:REWATCH_FRAMES]
    if not images:
        raise ToolError(f"clip {info.clip} has no frames")
    return _ask_media(
        ctx,
        "rewatch",
        info,
        question,
        [image_part(media_frames.encode_jpeg(i, 85)) for i in images],
        P.REWATCH_PROMPT,
    )


def _video_of(info: ClipInfo) -> VideoInfo:
    """The clip's video as the media readers take it: only its path and id are read."""
    from m3cli.schemas.records import VideoInfo

    return VideoInfo.model_construct(path=info.path, id=info.video)


def tool_listen(ctx: ToolContext, arg: str) -> ToolResult:
    """CAM's listen_to_audio: the clip's audio (16 kHz WAV) to an omni model with a focused question."""
    from m3cli.stages.backends.llm.media import audio_part, wav_bytes
    from m3cli.stages.core import media, media_audio

    info, question = _clip_question(ctx, arg, "Listen")
    try:
        audio = media_audio.clip_audio(
            media.source_path(_video_of(info), ctx.cache),
            info.video,
            info.clip,
            info.start,
            info.end,
            cache=ctx.cache,
        )
    except Exception as exc:
        raise ToolError(f"cannot read the audio of clip {info.clip}: {exc}") from None
    if audio.size == 0:
        raise ToolError(f"clip {info.clip} has no audio")
    return _ask_media(
        ctx, "listen", info, question, [audio_part(wav_bytes(audio, media_audio.AUDIO_RATE))], P.LISTEN_PROMPT
    )
