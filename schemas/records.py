"""Typed records mirroring ``clip.v1.json``.

Stages read and write :class:`ClipRecord`. Every model allows extra fields so that a stage passes
sections it does not know (a later stage's output, a user's own annotations) through unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Longer than any real recording (31 days): a larger duration or clip bound is a damaged record.
MAX_VIDEO_SECONDS = 31 * 86400.0
#: How far a clip may end past ``video.duration`` (rounding, a last frame's length) before it is an error.
CLIP_END_SLACK_S = 1.0


#: The longest text any record field may hold (characters). A clip's utterance or memory line is a few
#: thousand at most; a crafted 50 MB one cost abstract and index 7 GB of memory (embedding and full-text
#: indexing copy it many times over), so a record holding more is refused when it is read, in one line.
MAX_TEXT_CHARS = 100_000


class _Open(BaseModel):
    """Base for record sections: unknown fields are kept and written back out; no string field holds
    more than :data:`MAX_TEXT_CHARS` characters."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, str_max_length=MAX_TEXT_CHARS)


class VideoInfo(_Open):
    """The video a clip comes from. ``id`` is content-addressed, so renaming a file keeps its cache."""

    id: str = Field(pattern=r"^[0-9a-f]{16}$")
    path: str
    uri: str | None = None
    duration: float = Field(ge=0)
    fps: float | None = Field(default=None, ge=0)
    width: int | None = Field(default=None, ge=0)
    height: int | None = Field(default=None, ge=0)
    has_audio: bool | None = None
    has_video: bool | None = None  # False: an audio-only recording (no pictures)
    size_bytes: int | None = Field(default=None, ge=0)
    audio_track: int | None = Field(default=None, ge=0)  # set when the file has several audio tracks
    #: when the recording began: ISO 8601 with its UTC offset; absent when nothing says
    recorded: str | None = Field(
        default=None, pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)$"
    )
    #: where ``recorded`` came from
    recorded_source: Literal["container", "given", "manifest", "file-time-guess", "live-clock"] | None = None


class ClipInfo(_Open):
    """One fixed-length window of the video, in presentation time (seconds)."""

    index: int = Field(ge=0)
    start: float = Field(ge=0)
    end: float = Field(ge=0)
    fps: float | None = Field(default=None, ge=0)
    frames: int | None = Field(default=None, ge=0)
    has_audio: bool | None = None
    has_video: bool | None = None  # False: an audio-only recording (no pictures)
    width: int | None = Field(default=None, ge=0)
    height: int | None = Field(default=None, ge=0)

    @property
    def duration(self) -> float:
        return self.end - self.start


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json", exclude_none=True) if isinstance(value, BaseModel) else value


Span = tuple[float, float]


class FaceTrack(_Open):
    """One global face id as seen in one clip."""

    face_id: str = Field(pattern=r"^<face_[0-9]+>$")
    detections: int = Field(ge=1)
    spans: list[Span]
    quality: float | None = Field(default=None, ge=0, le=1)
    score: float | None = None
    boxes: list[tuple[float, float, float, float, float]] | None = None
    crop: str | None = None
    match: float | None = None
    #: [t, inner-lip opening / eye distance] at the sampled frames where the face is seen
    mouth: list[tuple[float, float]] | None = None


class FacesSection(_Open):
    backend: str
    tracks: list[FaceTrack]
    model: str | None = None
    fps: float | None = None
    frames: int | None = Field(default=None, ge=0)
    pictures: bool | None = None  # False: nothing to look at (an audio-only recording)
    detections: int | None = Field(default=None, ge=0)
    dropped: int | None = Field(default=None, ge=0)
    embeddings: str | None = None
    recluster: dict[str, str] | None = None
    shots: list[float] | None = None  # shot-change (cut) times, s, absolute


class Keyframe(_Open):
    """A frame that stands for [t, end) of the clip (added by `m3 sight`)."""

    t: float
    start: float | None = None  # the segment it stands for: [start, end)
    end: float | None = None
    why: str | None = None  # why its segment starts: first, change, drift or interval
    path: str | None = None  # cached JPEG
    text: list[str] | None = None
    tags: list[str] | None = None
    #: the earlier keyframe whose reading (text, tags) this one reuses: the same picture, not read again
    same_as: int | None = Field(default=None, ge=0)


class SightText(_Open):
    """One line of on-screen text over the keyframes that show it."""

    text: str = Field(min_length=1)
    start: float
    end: float
    score: float | None = None
    box: tuple[float, float, float, float] | None = None  # x0, y0, x1, y1 in source pixels
    keyframes: int | None = Field(default=None, ge=1)


class SightTag(_Open):
    """An object/scene tag kept above the calibrated threshold, over consecutive keyframes."""

    tag: str = Field(min_length=1)
    start: float
    end: float
    score: float | None = None
    keyframes: int | None = Field(default=None, ge=1)


class SightSection(_Open):
    backend: str
    keyframes: list[Keyframe]
    text: list[SightText]
    tags: list[SightTag]
    tag_threshold: float | None = None
    frames: int | None = Field(default=None, ge=0)
    pictures: bool | None = None  # False: nothing to look at (an audio-only recording)


class AsrSection(_Open):
    backend: str | None = None
    model: str | None = None
    language: str | None = None
    speakers: int | None = Field(default=None, ge=0)
    vad: str | None = None  # the voice activity detector that cut the speech (silero, faster-whisper, none)
    diarizer: str | None = None  # who-spoke-when: overlap, cluster or pyannote


class Word(_Open):
    start: float
    end: float
    word: str
    p: float | None = None


class Utterance(_Open):
    """A stretch of speech by one speaker, times absolute in the video."""

    start: float = Field(ge=0)
    end: float = Field(ge=0)
    text: str
    words: list[Word] | None = None
    speaker_local: str | None = None
    speaker: str | None = Field(default=None, pattern=r"^<voice_[0-9]+>$")
    voice_score: float | None = None
    #: Whisper's code (ISO 639-1) of the language it was read in
    language: str | None = None
    #: how sure the language ID was of ``language`` (None: the speaker was too briefly heard to ask);
    #: for a voice heard in English in an earlier clip of the recording, that clip's answer
    language_p: float | None = None
    second_reading: bool | None = None
    #: English translation of ``text`` (``m3 diarize --translate``, speech in another language)
    translation: str | None = None


class Turn(_Open):
    """Who speaks when, from diarization: turns of different speakers may overlap; times absolute."""

    start: float = Field(ge=0)
    end: float = Field(ge=0)
    speaker_local: str
    speaker: str | None = Field(default=None, pattern=r"^<voice_[0-9]+>$")
    overlap: bool = False
    #: the language the turn's speaker was heard in with confidence, and its probability
    language: str | None = None
    language_p: float | None = None


class AlikeVoices(_Open):
    """Two voices of one clip that sound alike and are never heard at once, which the diarizer kept apart."""

    voices: list[str] = Field(min_length=2, max_length=2)
    cosine: float


class VoicesSection(_Open):
    backend: str | None = None
    model: str | None = None
    min_seconds: float | None = None
    ids: list[str] | None = None
    assigned: int | None = None
    unassigned: int | None = None
    embeddings: str | None = None
    threshold: float | None = None  # the cosine at which a local speaker joined a voice of the bank
    recluster: bool | None = None  # true: ids from the whole-video pass (`m3 voices --recluster`)
    #: voice pairs of this clip at or above ``threshold`` that never speak at once (`m3 link` may join
    #: them when one face is seen speaking both)
    alike: list[AlikeVoices] | None = None


class MemoryItem(_Open):
    """One memory line: ``text`` refers to people only by ``<face_i>``/``<voice_j>``/``<character_k>``."""

    text: str = Field(min_length=1)
    kind: str | None = None
    start: float | None = None
    end: float | None = None
    entities: list[str] | None = None
    name: str | None = None
    name_kind: Literal["self", "vocative", "mention"] | None = None


MemoryInput = Literal["frames", "crops", "faces", "dialogue", "audio"]


class MemorySection(_Open):
    source: Literal["offline", "llm"]
    episodic: list[MemoryItem]
    semantic: list[MemoryItem]
    model: str | None = None
    prompt_version: str | None = None
    equivalences: list[tuple[str, str]] | None = None
    fallback: bool | None = None
    #: what the memory was written from (after the server's refusals): frames and crops are pictures,
    #: faces the face ids and their times, dialogue the transcribed utterances, audio the clip's sound
    inputs: list[MemoryInput] | None = None


class Vote(_Open):
    """A face-voice pair with a weight: one vote, a cumulative weight, or a kept edge."""

    face: str
    voice: str
    weight: float
    source: Literal["seen", "meta", "llm"] | None = None
    start: float | None = None
    end: float | None = None
    sources: dict[str, float] | None = None
    #: a kept edge joined because its voice sounds like the face's other voice: that voice, and the cosine
    sounds_like: str | None = None
    cosine: float | None = None


class VoiceSplit(_Open):
    """A voice split because two faces seen together were each seen speaking alone in it."""

    voice: str
    into: str
    face: str
    keeper: str
    seconds: float
    keeper_seconds: float | None = None
    clip: int | None = None


class LinkSection(_Open):
    votes: list[Vote]
    weights: list[Vote]
    edges: list[Vote]
    version: str | None = None
    config: str | None = None
    p: float | None = None
    min_weight: float | None = None
    voice_splits: list[VoiceSplit] | None = None  # every split so far in the video
    voice_moved: dict[str, float] | None = None  # this clip's seconds given to each new voice id


class Abstraction(_Open):
    """A summary, a link between facts, or a recorded contradiction; ``evidence`` names what it rests on."""

    id: str
    kind: Literal["character", "relationship", "clip", "global", "link", "conflict"]
    text: str | None = None
    character: str | None = None
    characters: list[str] | None = None
    entities: list[str] | None = None
    evidence: list[str] | None = None
    evidence_count: int | None = None
    source: Literal["llm", "offline"] | None = None
    start: float | None = None
    end: float | None = None
    src: str | None = None
    dst: str | None = None
    relation: Literal["same_character", "temporal", "similar", "causal"] | None = None
    weight: float | None = None
    description: str | None = None
    kept: list[str] | None = None
    dropped: list[str] | None = None
    weights: dict[str, float] | None = None


class Problem(_Open):
    """Something a stage could not do for this clip, recorded instead of stopping the run."""

    stage: str
    error: str
    status: str | None = None
    message: str | None = None
    what: str | None = None


class ClipRecord(_Open):
    """A ``m3.clip/1`` record: the unit that flows through every pipe."""

    schema_: Literal["m3.clip/1"] = Field(alias="schema")
    video: VideoInfo
    clip: ClipInfo
    faces: FacesSection | None = None
    sight: SightSection | None = None
    asr: AsrSection | None = None
    utterances: list[Utterance] | None = None
    turns: list[Turn] | None = None
    voices: VoicesSection | None = None
    memory: MemorySection | None = None
    characters: dict[str, str] | None = None
    link: LinkSection | None = None
    abstractions: list[Abstraction] | None = None
    errors: list[Problem] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON data: sections left unset are omitted, extras kept."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def plain(self, section: str) -> Any:
        """A section as plain JSON data (dicts and lists), for code that folds over raw values."""
        value = getattr(self, section)
        if value is None:
            return None
        if isinstance(value, list):
            return [_plain(v) for v in value]
        return _plain(value)

    @property
    def key(self) -> tuple[str, int]:
        """(video id, clip index): the identity of a clip across stages and reruns."""
        return (self.video.id, self.clip.index)

    @model_validator(mode="after")
    def _clip_within_video(self) -> ClipRecord:
        """Clip bounds must describe a span of this video: stages size their buffers from them."""
        start, end, duration = self.clip.start, self.clip.end, self.video.duration
        if duration > MAX_VIDEO_SECONDS:
            raise ValueError(f"video.duration {duration:g} s is not a plausible video length")
        if start > end:
            raise ValueError(f"clip.start {start:g} is after clip.end {end:g}")
        if end > duration + CLIP_END_SLACK_S:
            raise ValueError(f"clip.end {end:g} is beyond the video's duration ({duration:g} s)")
        return self


class AnswerEvidence(_Open):
    """One clip an answer rests on, with the lines quoted from it. Fields are declared in the order a
    record writes them (``file`` only on retrieval-only answers)."""

    video: str
    file: str | None = None  # the file name of the line's video (retrieval-only answers)
    clip: int
    start: float | None
    end: float | None
    node_ids: list[str]
    quote: str | None
    characters: list[dict[str, Any]]


class AnswerRound(_Open):
    """One round of the search-then-answer loop, as the model saw it (fields in the order written)."""

    round: int = Field(ge=1)
    forced: bool | None = None
    reasoning: str | None
    action: str | None
    tool: str | None
    query: str | None
    results: list[dict[str, Any]]
    error: str | None
    note: str | None = None
    observation: str | None = None
    seconds: float | None = None


class AnswerTokens(_Open):
    prompt: int = Field(ge=0)
    completion: int = Field(ge=0)


class AnswerRecord(_Open):
    """A ``m3.answer/1`` record: one question, its answer, the evidence and the full trajectory.

    The ask loop builds one per question and writes :meth:`to_json`: the fields it set, in the order
    declared here (required first, then the optional ones a question's kind adds), so two runs of one
    question write the same bytes.
    """

    schema_: Literal["m3.answer/1"] = Field(alias="schema")
    id: str | None = None
    question: str
    video: str | None = None
    before_clip: int | None = Field(default=None, ge=0)
    mode: Literal["llm", "retrieval-only"]
    answer: str | None
    evidence: list[AnswerEvidence]
    trajectory: list[AnswerRound]
    rounds: int = Field(ge=0)
    tokens: AnswerTokens
    latency_s: float = Field(ge=0)
    llm_s: float | None = Field(default=None, ge=0)
    model: str | None = None
    prompt_version: str | None = None
    config: dict[str, Any] | None = None
    memory: str | None = None
    error: str | None
    options: list[str] | None = None
    answer_raw: str | None = None
    unnamed: list[str] | None = None
    choice: str | None = None
    choice_support: list[float] | None = None
    cited: list[str] | None = None
    answer_text: str | None = None
    eval: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as plain data for a JSON writer: every field that was set (a null one too), none that
        was not, each value as it was set (no coercion, so the bytes written do not depend on the model)."""
        return self.model_dump(by_alias=True, exclude_unset=True)
