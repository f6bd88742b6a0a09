"""Live sources for `m3 watch`: a recorder that spools a stream to a file, and a scanner that follows it.

Why a spool: clips of a live stream are decoded from a recording (MPEG-TS in the watch state folder),
never from the socket, so every stage reads a clip the way it reads a finished file, a restart finds
the frames it had not processed yet, and the recording is the file ``m3 run`` can be compared with.

* :class:`Recorder` copies a stream URL (udp, tcp, rtsp, rtmp, srt, http(s)/HLS) or a capture device
  into the spool without re-encoding (devices, whose raw frames MPEG-TS cannot carry, are encoded to
  MPEG-2). A dropped connection is retried with exponential backoff (0.5 s doubling to 8 s); the time
  without data is recorded as a gap (wall times, and the spool time where it falls) and the next
  packets continue the spool's clock where it stopped, so clips are decoded the same before and after
  the recording is complete.
* :class:`Scanner` demuxes the growing file through :class:`Growing` (a file object whose reads wait
  for the writer), keeping each video packet's timestamp and how far audio and video have arrived.
  That is all the clip plan needs (:func:`m3cli.stages.segment.plan_clips`), so clips are planned
  exactly as ``m3 segment`` plans the finished file.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import numpy as np

from m3cli.stages.core import media, media_probe, media_streams
from m3cli.stages.live.timeline import CountMedian, Marks, SortedTimes

log = logging.getLogger(__name__)

URL_SCHEMES = (
    "udp://",
    "tcp://",
    "rtp://",
    "rtsp://",
    "rtsps://",
    "rtmp://",
    "rtmps://",
    "srt://",
    "http://",
    "https://",
)
TS_PACKET = 188
#: sound codecs MPEG-TS carries as they are; others are encoded to AAC in the spool
TS_AUDIO_CODECS = frozenset({"aac", "mp3", "mp2", "ac3", "eac3", "opus"})


def is_url(source: str) -> bool:
    return source.lower().startswith(URL_SCHEMES)


def is_device(source: str) -> bool:
    return source.startswith("/dev/video")


#: How much of a recording's start identifies it (its program tables and first pictures).
HEAD_BYTES = 64 * 1024
_CHANGED_HINT = (
    "the watch ends here and the clips committed so far stay in the memory; to watch what the file "
    "holds now as a new recording, give a new --state folder"
)


class SourceChanged(Exception):
    """The followed file is no longer the recording that was being read (one line for the user)."""


def head_digest(head: bytes) -> str:
    """The digest that identifies a recording by its first bytes (:func:`settled_head` of them)."""
    import hashlib

    return hashlib.sha256(settled_head(head)).hexdigest()


def settled_head(head: bytes) -> bytes:
    """A recording's first bytes with the fields its writer fills in only when it closes the file
    zeroed, so that closing is not taken for a rewrite.

    A WAV recorder writes the RIFF header with placeholder sizes and, when it stops, goes back to write
    the file's and the sound's real sizes (the ``RIFF`` size at bytes 4-8, the ``data`` chunk's size,
    and an RF64 file's ``ds64`` sizes); nothing else of the head changes. Other formats are returned
    as they are."""
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RF64") or head[8:12] != b"WAVE":
        return head
    settled = bytearray(head)
    settled[4:8] = bytes(4)
    at = 12
    while at + 8 <= len(head):
        chunk, size = head[at : at + 4], int.from_bytes(head[at + 4 : at + 8], "little")
        if chunk == b"data":
            settled[at + 4 : at + 8] = bytes(4)
            break
        if chunk == b"ds64":  # RF64: the 64-bit RIFF, data and sample counts
            settled[at + 8 : min(len(head), at + 8 + 24)] = bytes(min(24, max(0, len(head) - at - 8)))
        at += 8 + size + (size & 1)
    return bytes(settled)


def check_same_recording(path: Path, head_bytes: int, digest: str) -> None:
    """Fail with one line when ``path`` no longer starts with the bytes a watch state recorded.

    Why: a restart after the file was truncated, rewritten or replaced would plan the new content's
    clips under the old recording's stream id, skip the indexes already committed and leave a gap
    nobody is told about."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(head_bytes)
    except FileNotFoundError:
        return  # waited for, as a recorder about to start
    if len(head) < head_bytes or head_digest(head) != digest:
        raise SourceChanged(
            f"{media.display_name(path)}: not the recording this watch state was made from (it was "
            "truncated, rewritten or replaced since it was watched); to watch it as a new recording, "
            "give a new --state folder"
        )


class Growing:
    """A read-only file object over a file another writer is still appending to (``tail -f``).

    ``read`` waits for more bytes while the writer may still write: until ``finished()`` is true (the
    recorder stopped), until the file has not grown for ``idle`` seconds (``None``: no limit), or until
    ``stop`` is set; then it returns what is left and the empty string (end of file).

    The file must stay the recording it was (:meth:`check`, whenever a read waits and at least once a
    second while data flows): replaced by another file (another inode at the path), shrunk below what
    was read (truncated: a writer that keeps writing leaves zeros before its offset) or rewritten (its
    first bytes differ) raises :class:`SourceChanged`; nothing after that is read."""

    def __init__(
        self,
        path: Path,
        stop: threading.Event,
        finished: Any = None,
        idle: float | None = None,
        poll: float = 0.05,
    ) -> None:
        self.path = Path(path)
        self.stop = stop
        self.finished = finished or (lambda: False)
        self.idle = idle
        self.poll = poll
        self.fh = self.path.open("rb")
        self.last_growth = time.monotonic()
        self.head = b""  # the file's first HEAD_BYTES, as read
        self.read_bytes = 0
        self._checked = time.monotonic()

    def check(self) -> None:
        """Raise :class:`SourceChanged` when the path no longer holds the recording being read."""
        if self.fh.closed:
            return
        name = media.display_name(self.path)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise SourceChanged(f"{name}: removed while it was watched; {_CHANGED_HINT}") from None
        own = os.fstat(self.fh.fileno())
        if (st.st_ino, st.st_dev) != (own.st_ino, own.st_dev):
            raise SourceChanged(f"{name}: replaced by another file while it was watched; {_CHANGED_HINT}")
        if st.st_size < self.read_bytes:
            raise SourceChanged(
                f"{name}: shrank from {self.read_bytes} to {st.st_size} bytes while it was watched "
                f"(truncated or rewritten by its writer); {_CHANGED_HINT}"
            )
        if self.head and settled_head(os.pread(self.fh.fileno(), len(self.head), 0)) != settled_head(
            self.head
        ):
            raise SourceChanged(
                f"{name}: rewritten while it was watched (its first bytes changed); {_CHANGED_HINT}"
            )
        self._checked = time.monotonic()

    def read(self, n: int = -1) -> bytes:
        while True:
            if time.monotonic() - self._checked >= 1.0:
                self.check()
            data = self.fh.read(n)
            if data:
                if len(self.head) < HEAD_BYTES:
                    self.head += data[: HEAD_BYTES - len(self.head)]
                self.read_bytes += len(data)
                self.last_growth = time.monotonic()
                return data
            self.check()
            if self.stop.is_set() or self.finished():
                return self.fh.read(n)
            if self.idle is not None and time.monotonic() - self.last_growth >= self.idle:
                return b""
            time.sleep(self.poll)

    def close(self) -> None:
        self.fh.close()


@dataclass
class Arrival:
    """How far the spool has been read: the demuxed timestamps the clip plan needs, and when each
    stretch of media arrived (monotonic seconds), for clip latency."""

    #: the video packets' timestamps (stream time base) and durations, kept incrementally (timeline.py)
    pts: SortedTimes = field(default_factory=SortedTimes)
    durations: CountMedian = field(default_factory=CountMedian)
    time_base: float = 0.0
    origin: float = 0.0
    fps: float | None = None
    width: int | None = None
    height: int | None = None
    has_audio: bool = False
    #: False for a recording of sound alone (a call, a radio feed): clips are planned by time
    has_video: bool = True
    audio_first: float = math.inf
    audio_end: float = -math.inf
    video_end: float = -math.inf
    #: (media seconds covered by both streams, monotonic time it was reached), increasing
    marks: Marks = field(default_factory=Marks)
    #: packets with damaged timestamps are left out as :func:`media_probe.probe` leaves them out
    video_clock: media_streams.TimestampFilter = field(default_factory=media_streams.TimestampFilter)
    audio_clock: media_streams.TimestampFilter = field(default_factory=media_streams.TimestampFilter)

    @property
    def damaged(self) -> list[tuple[float, float]]:
        """Where packets with damaged timestamps were left out (media seconds)."""
        return sorted(self.video_clock.damaged + self.audio_clock.damaged)

    @property
    def covered(self) -> float:
        """Media time up to which every stream has arrived."""
        if not self.has_video:
            return self.audio_end
        if self.has_audio:
            return min(self.video_end, self.audio_end)
        return self.video_end

    def arrived_at(self, t: float) -> float | None:
        """When media time ``t`` was first covered (None: not yet), to within
        :data:`~m3cli.stages.live.timeline.MARK_STEP`. The marks increase, so this is a binary search:
        the watcher asks for every clip at each poll, and a linear scan over a long stream's marks
        cost a growing share of a core."""
        return self.marks.arrived_at(t)

    def probe(self) -> media_probe.Probe | None:
        """A :class:`~m3cli.stages.core.media_probe.Probe` of what has arrived, computed as the file's
        probe is."""
        if not self.has_video:
            return self._sound_probe()
        if not len(self.pts):
            return None
        times = self.pts.array() * self.time_base - self.origin
        if len(self.durations):
            frame_duration = self.durations.median() * self.time_base
        elif self.fps:
            frame_duration = 1.0 / self.fps
        else:
            frame_duration = float(np.median(np.diff(times))) if len(times) > 1 else 0.0
        return media_probe.Probe(
            duration=max(float(times[-1] + frame_duration), self.audio_end),
            fps=self.fps,
            width=self.width,
            height=self.height,
            has_audio=self.has_audio,
            frame_times=times,
            frame_duration=frame_duration,
            start=max(0.0, min(float(times[0]), self.audio_first)),
            damaged=tuple(self.damaged),
        )

    def _sound_probe(self) -> media_probe.Probe | None:
        """The probe of a recording of sound alone, as :func:`media_probe.probe` makes an audio file's."""
        if not math.isfinite(self.audio_first) or self.audio_end <= self.audio_first:
            return None
        return media_probe.Probe.of_sound(self.audio_first, self.audio_end, tuple(self.damaged))


class Scanner(threading.Thread):
    """Demuxes the growing spool in a thread, filling an :class:`Arrival` under ``lock``."""

    def __init__(self, path: Path, stop: threading.Event, finished: Any = None, idle: float | None = None):
        super().__init__(name="m3-watch-scan", daemon=True)
        self.path = Path(path)
        self.stop = stop
        self.finished = finished
        self.idle = idle
        self.lock = threading.Lock()
        self.arrival = Arrival()
        self.error: str | None = None
        self.done = threading.Event()
        self.source: Growing | None = None
        self.format = ""  # the container format FFmpeg found

    def _not_growable(self, exc: av.error.FFmpegError) -> str:
        name = media.display_name(self.path)
        return (
            f"{name}: cannot be followed as a growing recording ({exc.strerror or exc}): an MP4, MOV, MKV "
            f"or AVI file can be read only once it is complete; for a finished file use `m3 run {name} "
            "-o MEMORY`, and to watch a recording while it grows, have the recorder write MPEG-TS "
            "(ffmpeg ... -f mpegts FILE.ts)"
        )

    def verify(self) -> None:
        """Raise :class:`SourceChanged` when the file followed is no longer the recording read so far
        (the watcher asks before each commit: a round decodes its clips from the path)."""
        if self.source is not None:
            self.source.check()

    def run(self) -> None:
        try:
            self._scan()
        except SourceChanged as exc:
            self.error = str(exc)
        except av.error.FFmpegError as exc:
            if any(f in self.format for f in ("mov", "mp4", "matroska", "avi")):
                self.error = self._not_growable(exc)
                return
            self.error = f"{media.display_name(self.path)}: cannot read the recording: {exc}"
        except OSError as exc:
            self.error = f"{media.display_name(self.path)}: cannot read: {exc.strerror or exc}"
        finally:
            self.done.set()

    def _scan(self) -> None:
        while not self.path.exists() or self.path.stat().st_size == 0:
            if self.stop.is_set() or (self.finished and self.finished()):
                return
            time.sleep(0.05)
        source = self.source = Growing(self.path, self.stop, self.finished, self.idle)
        try:
            container: Any = av.open(source, mode="r")
        except av.error.FFmpegError as exc:
            self.error = self._not_growable(exc)
            return
        self.format = container.format.name or ""
        try:
            with container:
                if not container.streams.video and not container.streams.audio:
                    self.error = (
                        f"{media.display_name(self.path)}: neither a video nor an audio stream "
                        "(a data or subtitle file?)"
                    )
                    return
                vs = container.streams.video[0] if container.streams.video else None
                audio = container.streams.audio[0] if container.streams.audio else None
                a = self.arrival
                with self.lock:
                    a.origin = (container.start_time or 0) / av.time_base
                    a.has_audio = audio is not None
                    a.has_video = vs is not None
                    if vs is not None:
                        a.time_base = float(vs.time_base)
                        a.fps = float(vs.average_rate) if vs.average_rate else None
                        a.width = vs.codec_context.width or None
                        a.height = vs.codec_context.height or None
                for packet in media_streams.demux(container, *(s for s in (vs, audio) if s is not None)):
                    if packet.pts is None or packet.size == 0:
                        continue
                    with self.lock:
                        t = float(packet.pts * packet.time_base) - a.origin
                        end = t + float((packet.duration or 0) * packet.time_base)
                        is_video = vs is not None and packet.stream.index == vs.index
                        clock = a.video_clock if is_video else a.audio_clock
                        if not clock.accept(t):
                            continue
                        if not is_video:
                            a.audio_first = min(a.audio_first, t)
                            a.audio_end = max(a.audio_end, end)
                        else:
                            a.pts.add(packet.pts)
                            if packet.duration:
                                a.durations.add(packet.duration)
                            a.video_end = max(a.video_end, end)
                        a.marks.reach(a.covered, time.monotonic())
        finally:
            pass  # the file stays open: the watcher asks :meth:`verify` until its last commit


# ------------------------------------------------------------------------------------- recording
@dataclass
class Gap:
    """A stretch without data: wall-clock times and where the spool's clock resumed."""

    lost_at: float
    resumed_at: float | None = None
    reason: str = ""
    at: float | None = None  # the spool's time (container clock) where the stream resumed

    def to_json(self) -> dict:
        return {"lost_at": self.lost_at, "resumed_at": self.resumed_at, "reason": self.reason, "at": self.at}


def spool_end(path: Path) -> float | None:
    """The last timestamp (s, container clock, not shifted to zero) in an existing spool, or None.

    A spool cut by ``kill -9`` may end in a partial 188-byte packet: it is cut off first, so appended
    packets start on a packet boundary."""
    if not path.exists():
        return None
    size = path.stat().st_size
    if size % TS_PACKET:
        os.truncate(path, size - size % TS_PACKET)
    if size < TS_PACKET:
        return None
    end = None
    try:
        with av.open(os.fsdecode(path)) as container:
            for packet in media_streams.demux(container):
                if packet.pts is not None and packet.time_base is not None:
                    t = float((packet.pts + (packet.duration or 0)) * packet.time_base)
                    end = t if end is None else max(end, t)
    except av.error.FFmpegError:
        pass
    return end


class Recorder(threading.Thread):
    """Copies a live source into the spool; reconnects with backoff and records gaps.

    ``connect_timeout``: a source that has never delivered a packet within it is given up (one error);
    once connected, a drop is retried until ``stop`` is set or ``give_up`` seconds pass without data."""

    def __init__(
        self,
        source: str,
        spool: Path,
        stop: threading.Event,
        connect_timeout: float = 15.0,
        give_up: float = 60.0,
        read_timeout: float = 3.0,
    ) -> None:
        super().__init__(name="m3-watch-record", daemon=True)
        self.source = source
        self.spool = Path(spool)
        self.stop = stop
        self.connect_timeout = connect_timeout
        self.give_up = give_up
        self.read_timeout = read_timeout
        self.gaps: list[Gap] = []
        self.reconnects = 0
        self.packets = 0
        #: the spool already held a recording (a restart): a source that does not come back is a drop
        #: to give up on, not a stream that never delivered a frame
        self.resumed = False
        self.error: str | None = None
        self.finished = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        try:
            self._record()
        except Exception as exc:  # noqa: BLE001 - reported by the runner as one line
            self.error = f"{self.source}: recording failed: {exc}"
        finally:
            self.finished.set()

    def _open(self) -> Any:
        if is_device(self.source):
            return av.open(self.source, format="v4l2", timeout=(self.connect_timeout, self.read_timeout))
        options = {"rw_timeout": str(int(self.read_timeout * 1e6))}
        if self.source.startswith(("udp://", "tcp://", "srt://")):
            options = {"timeout": str(int(self.read_timeout * 1e6))}
        return av.open(self.source, options=options, timeout=(self.connect_timeout, self.read_timeout))

    def _record(self) -> None:
        base = spool_end(self.spool)  # a restart appends after what the spool holds
        if base is not None:
            self.resumed = True
            self.gaps.append(Gap(lost_at=time.time(), reason="restart"))
        backoff = 0.5
        started = time.monotonic()
        last_data = time.monotonic()
        while not self.stop.is_set():
            try:
                container = self._open()
            except (av.error.FFmpegError, OSError) as exc:
                fresh = self.packets == 0 and not self.resumed
                waited = time.monotonic() - (started if fresh else last_data)
                limit = self.connect_timeout if fresh else self.give_up
                if waited >= limit:
                    what = "never delivered a frame" if fresh else "did not come back"
                    self.error = f"{self.source}: the stream {what} in {waited:.0f} s ({exc})"
                    return
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 8.0)
                continue
            if self.gaps and self.gaps[-1].resumed_at is None:
                self.gaps[-1].resumed_at = time.time()
                self.reconnects += 1
            backoff = 0.5
            try:
                base = self._copy(container, base)
            finally:
                container.close()
            last_data = time.monotonic()
            if self.stop.is_set():
                break
            if self.packets == 0 and not self.resumed and time.monotonic() - started >= self.connect_timeout:
                self.error = f"{self.source}: the stream never delivered a frame"
                return
            self.gaps.append(Gap(lost_at=time.time(), reason="stream ended or dropped"))
            if self.source.startswith(("/", "file:")):
                return

    def _copy(self, container: Any, base: float | None) -> float | None:
        """Packets of one connection into the spool, shifted to start after ``base`` plus the wall time
        the source was away; the new end of the spool is returned."""
        vin = container.streams.video[0] if container.streams.video else None
        ain = container.streams.audio[0] if container.streams.audio else None
        if vin is None and ain is None:  # an FFmpeg error, as a failed open
            raise av.error.InvalidDataError(0, "neither a video nor an audio stream", "")
        encode = is_device(self.source)
        # The spool's clock does not count the time away: the decoder joins a stream's samples end to
        # end, so a hole in the timestamps would shift a clip's later sound by the hole's length (and
        # differently while the recording is still short of it). The gap's wall times are recorded.
        away = 0.0
        if self.gaps and base is not None:
            self.gaps[-1].at = base
        end = base
        shift: float | None = None
        with self.spool.open("ab") as fh:
            out = av.open(fh, mode="w", format="mpegts")
            try:
                if vin is None:
                    vout = None  # a stream of sound alone
                elif encode:
                    vout = out.add_stream("mpeg2video", rate=vin.average_rate or 25)
                    vout.width, vout.height, vout.pix_fmt = vin.width, vin.height, "yuv420p"
                else:
                    vout = out.add_stream_from_template(vin)
                # sound MPEG-TS cannot carry (a WAV's PCM, FLAC, Vorbis) is encoded to AAC
                encode_sound = ain is not None and ain.codec_context.name not in TS_AUDIO_CODECS
                if ain is None:
                    aout = None
                elif encode_sound:
                    aout = out.add_stream("aac", rate=ain.codec_context.sample_rate or 48000)
                else:
                    aout = out.add_stream_from_template(ain)
                streams = [s for s in (vin, ain) if s is not None]
                for packet in container.demux(*streams):
                    if self.stop.is_set():
                        break
                    if packet.dts is None or packet.pts is None:
                        continue
                    tb = float(packet.time_base)
                    t = packet.pts * tb
                    if shift is None:
                        # the first packet of this connection lands just after the spool's end
                        shift = 0.0 if base is None else base + away - t
                    offset = int(round(shift / tb))
                    pend = (packet.pts + offset + (packet.duration or 0)) * tb
                    pictures = vin is not None and packet.stream is vin
                    into = vout if pictures else aout
                    assert into is not None  # a packet of the streams demuxed, each with its output
                    if encode if pictures else encode_sound:
                        for frame in packet.decode():
                            frame.pts = (frame.pts or 0) + offset
                            for p in into.encode(frame):
                                out.mux(p)
                    else:
                        packet.pts += offset
                        packet.dts += offset
                        packet.stream = into
                        out.mux(packet)
                    with self.lock:
                        self.packets += 1
                    end = pend if end is None else max(end, pend)
                    fh.flush()
            except av.error.FFmpegError as exc:
                log.info("%s: connection dropped: %s", self.source, exc)
            finally:
                try:
                    for encoder in {
                        o for o in (vout if encode else None, aout if encode_sound else None) if o
                    }:
                        for p in encoder.encode(None):  # what the encoder still holds
                            out.mux(p)
                    out.close()
                except av.error.FFmpegError:
                    pass
        return end
