"""Typed records mirroring ``clip.v1.json``.

Stages read and write :class:`ClipRecord`. Every model allows extra fields so that a stage passes
sections it does not know (a later stage's output, a user's own annotations) through unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    """Base for record sections: unknown fields are kept and written back out."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


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
    size_bytes: int | None = Field(default=None, ge=0)


class ClipInfo(_Open):
    """One fixed-length window of the video, in presentation time (seconds)."""

    index: int = Field(ge=0)
    start: float = Field(ge=0)
    end: float = Field(ge=0)
    fps: float | None = Field(default=None, ge=0)
    frames: int | None = Field(default=None, ge=0)
    has_audio: bool | None = None
    width: int | None = Field(default=None, ge=0)
    height: int | None = Field(default=None, ge=0)

    @property
    def duration(self) -> float:
        return self.end - self.start


class ClipRecord(_Open):
    """A ``m3.clip/1`` record: the unit that flows through every pipe."""

    schema_: Literal["m3.clip/1"] = Field(default="m3.clip/1", alias="schema")
    video: VideoInfo
    clip: ClipInfo
    faces: dict[str, Any] | None = None
    utterances: list[dict[str, Any]] | None = None
    voices: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    characters: dict[str, str] | None = None
    link: dict[str, Any] | None = None
    abstractions: list[dict[str, Any]] | None = None
    errors: list[dict[str, Any]] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON data: sections left unset are omitted, extras kept."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    @property
    def key(self) -> tuple[str, int]:
        """(video id, clip index): the identity of a clip across stages and reruns."""
        return (self.video.id, self.clip.index)
