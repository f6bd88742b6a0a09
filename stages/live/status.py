"""What ``m3 watch`` reports: the status ``--status`` writes (and the stderr lines say), where a
round's time went, and the stretches the memory misses.

Why it is separate: the status is read by other processes and by ``m3 watch``'s progress line, so its
shape (``m3.watch-status/1``) is kept in one place, apart from the rounds that fill it in
(:mod:`~m3cli.stages.live.stage`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from m3cli.stages.core import media_probe
from m3cli.stages.core.heap import resident_mb
from m3cli.stages.live import source as live_source


@dataclass
class WatchStatus:
    """Progress as ``--status`` writes it (and the stderr lines say)."""

    source: str
    stream_id: str
    state: str = "starting"
    clips_committed: int = 0
    last_clip: int | None = None
    last_commit: str | None = None
    live_edge: float = 0.0  # media seconds arrived
    committed_until: float = 0.0
    latencies: list[float] = field(default_factory=list)  # clip complete -> committed, seconds
    pending: int = 0
    skipped: list[int] = field(default_factory=list)
    gaps: list[dict] = field(default_factory=list)
    #: drop-folder files that failed (names relative to the folder)
    failed: list[str] = field(default_factory=list)
    reconnects: int = 0
    error: str | None = None
    #: the last round's clips and where its time went (see :class:`RoundClock`)
    last_round: dict | None = None

    @property
    def lag(self) -> float:
        return round(max(0.0, self.live_edge - self.committed_until), 3)

    def to_json(self) -> dict:
        lat = sorted(self.latencies)

        def q(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))], 3) if lat else None

        return {
            "schema": "m3.watch-status/1",
            "source": self.source,
            "stream_id": self.stream_id,
            "state": self.state,
            "clips_committed": self.clips_committed,
            "last_clip": self.last_clip,
            "last_commit": self.last_commit,
            "lag_s": self.lag,
            "live_edge_s": round(self.live_edge, 3),
            "committed_until_s": round(self.committed_until, 3),
            "latency_s": {"last": self.latencies[-1] if lat else None, "p50": q(0.5), "p95": q(0.95)},
            "pending": self.pending,
            "skipped": self.skipped,
            "gaps": self.gaps,
            "failed": self.failed,
            "reconnects": self.reconnects,
            "rss_mb": resident_mb(),
            "last_round": self.last_round,
            "error": self.error,
        }


class RoundClock:
    """Where a round's time went: seconds from the previous mark to each stage's end, in order.

    The pipeline reports a stage when it has finished. Faces runs beside diarize and voices and sight
    in whichever thread is free first (:func:`m3cli.stages.pipeline.perceive_side_by_side`), so the
    critical path reads: diarize, voices, then sight when it followed voices, then "faces", the wait
    for the faces thread (with sight in it when it ran there, and then "sight" is ~0)."""

    def __init__(self, began: float) -> None:
        self.last = began
        self.spans: dict[str, float] = {}

    def stage(self, name: str, _clips: int = 0) -> None:
        now = time.monotonic()
        self.spans[name] = round(now - self.last, 3)
        self.last = now


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # datetime.UTC is 3.11+


def _gaps(recorder: live_source.Recorder | None, probe: media_probe.Probe | None) -> list[dict]:
    """The stretches the memory misses: the source away (a stream's drops and restarts) and packets
    of the recording left out as damaged (their media times: ``at`` to ``until``)."""
    gaps = [g.to_json() for g in recorder.gaps] if recorder is not None else []
    for a, b in probe.damaged if probe is not None else ():
        gap = {"lost_at": None, "resumed_at": None, "reason": "damaged packets left out"}
        gaps.append({**gap, "at": a, "until": b})
    return gaps
