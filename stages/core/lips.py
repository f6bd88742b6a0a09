"""Lips seen moving: the shot-bounded spread of the mouth opening that `m3 faces` records per track.

Shared by `m3 link`'s face-voice votes and by the seen-speaking fold that splits merged voices, so
both read "this face is speaking now" the same way.
"""

from __future__ import annotations

from typing import Any


def shot_bounds(record: Any) -> list[float]:
    """The clip's ends and every shot change inside it, in order."""
    start, end = record.clip.start, record.clip.end
    shots = (record.faces.shots if record.faces else None) or []
    return [start, *sorted(float(t) for t in shots if start < t < end), end]


def mouth_motion(samples: list[tuple[float, float]], bounds: list[float], smooth: float) -> list[float]:
    """Per sample, the spread (max - min) of the mouth opening within +-``smooth`` s in the same shot.

    Speech opens and closes the lips several times a second; a still or listening face keeps the
    opening nearly constant. The window never crosses a shot change, so a cut is not motion.
    """
    times = [t for t, _ in samples]
    shot = [sum(1 for b in bounds[1:-1] if b <= t) for t in times]
    out = []
    for i, t in enumerate(times):
        near = [
            a for (u, a), k in zip(samples, shot, strict=True) if k == shot[i] and abs(u - t) <= smooth + 1e-6
        ]
        out.append(max(near) - min(near) if len(near) > 1 else 0.0)
    return out


def moving_times(track: Any, bounds: list[float], moving: float, smooth: float) -> list[float]:
    """Sample times at which the track's lips move (spread above ``moving``)."""
    samples = sorted((float(t), float(a)) for t, a in track.mouth or [])
    spreads = mouth_motion(samples, bounds, smooth)
    return [t for (t, _), m in zip(samples, spreads, strict=True) if m > moving]
