"""Hand-built clip records for unit tests of the memory stages' pure logic.

Perception's record shapes are fixed by schemas/clip.v1.json; these builders fill them in directly so
memorize/link/abstract/index can be tested without running the perception models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m3cli.schemas.records import ClipRecord

FIXTURE = Path(__file__).parent / "data" / "fixture.mp4"
VIDEO = "0123456789abcdef"


def clip(
    index: int,
    faces: dict[str, list[tuple[float, float]]] | None = None,
    says: list[tuple[str | None, float, float, str]] | None = None,
    *,
    length: float = 30.0,
    duration: float | None = None,
    video: str = VIDEO,
    path: Path = FIXTURE,
    crops: dict[str, str] | None = None,
    memory: dict[str, Any] | None = None,
    **extra: Any,
) -> ClipRecord:
    """A record of clip ``index`` with face spans ``{"<face_1>": [(s, e)]}`` and utterances
    ``[(speaker or None, start, end, text)]`` (times absolute)."""
    start = index * length
    data: dict[str, Any] = {
        "schema": "m3.clip/1",
        "video": {"id": video, "path": str(path), "duration": duration or 100 * length},
        "clip": {"index": index, "start": start, "end": start + length},
        "faces": {
            "backend": "test",
            "tracks": [
                {
                    "face_id": fid,
                    "detections": 3,
                    "spans": [list(s) for s in spans],
                    "quality": 0.9,
                    **({"crop": crops[fid]} if crops and fid in crops else {}),
                }
                for fid, spans in (faces or {}).items()
            ],
        },
        "utterances": [
            {"start": s, "end": e, "text": text, **({"speaker": who} if who else {})}
            for who, s, e, text in (says or [])
        ],
    }
    if memory is not None:
        data["memory"] = memory
    data.update(extra)
    return ClipRecord.model_validate(data)
