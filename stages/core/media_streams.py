"""Reading a container's streams the way a lossy recording needs: demuxing and decoding past damage,
leaving out packets with damaged timestamps, and the clock and seeks every reader shares.

Policies of every decoded sample:

* Time zero is the container's start time, so audio and video stay in sync whatever the streams'
  own offsets are (negative ones included, as MPEG-TS often has). A clip's ``start`` is the
  presentation time of its first frame (frame-accurate), except that the first clip starts at the
  earliest sample of any stream and the last ends with the last one: no sample falls outside every clip.
* Nothing reads a whole video into memory: probing only demuxes packets of the video stream, and
  frame/audio reads seek to the clip and decode just that span.

Why it is separate: the probe (:mod:`~m3cli.stages.core.media_probe`), the frame and audio readers
(:mod:`~m3cli.stages.core.media_frames`, :mod:`~m3cli.stages.core.media_audio`) and the live source's
scanner all read packets through these, so a damaged stream is handled the same way by each.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import Any

import av

from m3cli.stages.core.errors import InputError

log = logging.getLogger(__name__)

#: Part of every decoded-media cache key; the suffix changes when how frames or samples are cut changes
#: (2: seeks before the container's zero and display rotation; 3: a seek that lands after a clip's start
#: in a file without an index starts again further back).
DECODER_VERSION = f"pyav-{av.__version__}/3"


def demux(container: av.container.InputContainer, *streams: av.stream.Stream) -> Iterator[av.Packet]:
    """``container.demux(*streams)``, robust to a damaged stream announcing new streams.

    Why: a lossy MPEG-TS recording (a UDP stream's spool) can carry a damaged program table that makes
    FFmpeg add a stream mid-file; PyAV knows only the streams it found on opening and raises
    ``IndexError`` when it flushes the new one, after the last packet. Nothing of the streams asked
    for is lost by ending there."""
    packets = container.demux(*streams)
    while True:
        try:
            packet = next(packets)
        except StopIteration:
            return
        except IndexError:
            log.info("%s: a stream appeared mid-file (a damaged program table); ignored", container.name)
            return
        yield packet


def decode(container: av.container.InputContainer, stream: av.stream.Stream, name: str) -> Iterator[Any]:
    """The decoded frames of ``stream``, and None where a packet the decoder rejects was skipped.

    Why: ``container.decode`` ends at the first packet the decoder rejects, so one damaged packet of a
    lossy recording (a dropped UDP datagram, a cut PES) ended the clip's pictures or sound there. As
    ``ffmpeg`` does, the packet is skipped and decoding goes on (the codec conceals what it can);
    every other error still ends the stream."""
    for packet in demux(container, stream):
        try:
            frames = packet.decode()
        except av.error.InvalidDataError as exc:
            at = float(packet.pts * packet.time_base) if packet.pts is not None and packet.time_base else None
            log.warning("%s: a damaged %s packet near %s s skipped (%s)", name, stream.type, at, exc)
            yield None
            continue
        yield from frames


class TimestampFilter:
    """Leaves out packets whose timestamps jump away from their stream's recent ones, one at a time.

    Why: a damaged PES header can carry any timestamp; one such packet among good ones made a 50-s
    recording "last" 11,904 s (thousands of empty clips). A timestamp further than ``tolerance``
    seconds from the median of the last ``window`` accepted ones is left out, unless ``confirm`` such
    packets in a row agree with each other (a real jump of the stream's clock: they start the new
    timeline). B-frame reordering moves timestamps by fractions of a second, so good packets are never
    left out. It only looks back, so the watcher following a growing file (packet by packet) and the
    probe of the finished file leave out the same packets and plan the same clips.

    ``damaged`` collects where left-out packets sat: from the accepted timestamp before them to the
    one after."""

    def __init__(self, tolerance: float = 5.0, window: int = 7, confirm: int = 4) -> None:
        self.tolerance, self.window, self.confirm = tolerance, window, confirm
        self.recent: list[float] = []
        self.pending: list[float] = []
        self.left_out = 0
        self.damaged: list[tuple[float, float]] = []
        self._since: float | None = None  # the last accepted time before left-out packets

    def accept(self, t: float) -> bool:
        if self.recent and abs(t - _median(self.recent)) > self.tolerance:
            if self._since is None:
                self._since = self.recent[-1]
            self.pending = [*self.pending[-(self.confirm - 1) :], t]
            agree = max(self.pending) - min(self.pending) <= self.tolerance
            if len(self.pending) < self.confirm or not agree:
                self.left_out += 1
                return False
            self.recent = self.pending[:-1]  # a new timeline: the ones before this were left out
        if self._since is not None:
            span = (round(min(self._since, t), 3), round(max(self._since, t), 3))
            if self.damaged and span[0] <= self.damaged[-1][1]:
                span = (self.damaged[-1][0], max(span[1], self.damaged[-1][1]))
                self.damaged.pop()
            self.damaged.append(span)
            self._since = None
        self.pending = []
        self.recent.append(t)
        del self.recent[: -self.window]
        return True


def _median(values: list[float]) -> float:
    """The median of a few floats, as ``np.median`` gives it to the bit (the mean of the two middle ones
    for an even count), without its cost: called once per packet, ``np.median`` on 7 values was two
    thirds of a restarted watcher's rescan of its recording (3.3 of 5.0 s over 12.5 minutes)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _origin(container: av.container.InputContainer) -> float:
    return (container.start_time or 0) / av.time_base


def _seek_to(
    container: av.container.InputContainer, stream: av.stream.Stream, t: float, origin: float
) -> None:
    """Seek so that decoding ``stream`` yields its samples from time ``t`` (container time) on.

    A target at or before the stream's first sample is no seek at all: a freshly opened container is
    already there, and clamping the target to timestamp 0 would skip every sample with a negative
    timestamp (MPEG-TS starting below zero, audio primed before the first frame).
    """
    if stream.time_base is None:
        raise InputError(f"{container.name}: its {stream.type} stream has no time base to seek by")
    tb = float(stream.time_base)
    target = int(math.floor((t + origin) / tb))
    first = stream.start_time
    if first is None or target <= first:
        return
    container.seek(target, stream=stream, backward=True, any_frame=False)
