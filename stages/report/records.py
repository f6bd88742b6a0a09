"""The report's records: what the page shows, as plain typed dataclasses, and the caps that bound it.

One job: the shape of the data passed from :mod:`.gather` (which fills it from the memory tables) to
:mod:`.render` and :mod:`.media` (which read it). It is its own module so that the renderers and the media
maker depend on the records alone, not on the table reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m3cli.stages.core.entity_ids import FACE, VOICE, kind_of
from m3cli.stages.people.pages import Person


@dataclass(frozen=True)
class ReportLimits:
    """Caps that keep a page of a huge memory loadable; each cap that bites is reported on the page.

    A video's clips are not capped by default: the page renders them in lazy sections (see
    :mod:`.render`), so a 10-hour video is one page; the memory-line budget decides where a page ends
    for memories larger than one file should hold, and the page then says how to write the next one."""

    max_videos: int = 2_000
    max_listed_videos: int = 2_000  # videos named in the list of those not on the page
    max_clips: int | None = None  # per video and page (--max-clips N pages by hand; --clips FROM:TO)
    max_lines_per_clip: int = 120
    max_characters: int = 60  # per video
    max_facts: int = 40  # per character card
    max_semantic_scan: int = 20_000  # semantic lines read per video for the cards
    max_spans: int = 2_000  # timeline spans per character row (nearby spans are merged beyond this)
    max_answers: int = 500
    crops_per_character: int = 4
    keyframes_per_clip: int = 24  # spread over the clip when it has more
    max_page_keyframes: int = 1_500  # keyframe images embedded in one page (about 10 MB)
    voice_seconds: float = 5.0
    max_voice_samples: int = 40  # per video
    max_page_voice_samples: int = 120  # all videos together (~20 kB each)
    max_page_crops: int = 2_000  # face thumbnails embedded in one page, all videos (~3 kB each)
    max_page_lines: int = 150_000  # memory lines on one page, all videos together (~10 MB packed)


@dataclass
class Line:
    """One memory node as the page shows it."""

    id: str
    video: str
    clip: int
    kind: str
    subkind: str
    text: str
    raw_text: str
    entities: list[str]
    characters: list[str]
    weight: float
    t_start: float | None
    t_end: float | None
    source: str
    evidence: list[str]
    superseded: bool


@dataclass
class Utterance:
    speaker: str | None  # perception id (<voice_j>)
    character: str | None
    start: float
    end: float
    text: str
    node: str


@dataclass
class Crop:
    entity: str
    path: Path | None
    data_uri: str | None  # a crop already stored inline as a data: URI


@dataclass
class Keyframe:
    """A keyframe of a clip (``m3 sight``) as the clips table stores it, its image read from the memory."""

    t: float
    start: float
    end: float
    image: Crop  # path checked to lie inside the memory, like a face crop
    text: list[str]
    tags: list[str]


@dataclass
class Clip:
    video: str
    index: int
    start: float
    end: float
    summary: str
    lines: list[Line] = field(default_factory=list)
    utterances: list[Utterance] = field(default_factory=list)
    lines_total: int = 0
    keyframes: list[Keyframe] = field(default_factory=list)
    keyframes_total: int = 0


@dataclass
class NameFact:
    name: str
    clip: int
    t: float | None
    node: str
    text: str


@dataclass
class Join:
    """A face id and a voice id that `m3 link` joined, and the weight of that link."""

    face: str
    voice: str
    weight: float


@dataclass
class Character:
    video: str
    id: str
    name: str | None
    members: list[str]
    clips: list[int]
    first_seen: float | None
    crops: list[Crop] = field(default_factory=list)
    names: list[NameFact] = field(default_factory=list)
    facts: list[Line] = field(default_factory=list)
    relations: list[Line] = field(default_factory=list)
    joins: list[Join] = field(default_factory=list)
    visible: list[tuple[float, float]] = field(default_factory=list)
    speaking: list[tuple[float, float]] = field(default_factory=list)
    present: list[tuple[float, float]] = field(default_factory=list)  # whole clips, when no finer spans
    voice_sample: tuple[Path, float, float] | None = None
    voice_note: str = ""  # why there is no voice sample, when there is none
    together: dict[str, float] = field(default_factory=dict)  # other character -> co-occurrence lines
    facts_total: int = 0

    @property
    def faces(self) -> list[str]:
        return [m for m in self.members if kind_of(m) == FACE]

    @property
    def voices(self) -> list[str]:
        return [m for m in self.members if kind_of(m) == VOICE]

    @property
    def label(self) -> str:
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclass
class Video:
    id: str
    path: str | None
    start: float
    end: float
    clips: list[Clip]
    characters: list[Character]
    clips_total: int
    global_summary: str | None = None


@dataclass
class OtherVideo:
    """A video of the memory that is not on this page."""

    id: str
    path: str | None
    clips: int


@dataclass
class ReportData:
    memory: str
    meta: dict[str, str]
    counts: dict[str, int]
    videos: list[Video]
    videos_total: int
    notes: list[str] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    others: list[OtherVideo] = field(default_factory=list)  # videos not on this page (listed, capped)
    others_total: int = 0
    people: list[Person] = field(default_factory=list)  # the memory's people (stages.people.pages.Person)
    people_rows: list[dict] = field(default_factory=list)  # their appearances (people table rows)
    with_whom: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # person -> others -> paths
    #: person -> their stored profile across videos (`m3 people summarize`)
    profiles: dict[str, dict] = field(default_factory=dict)
