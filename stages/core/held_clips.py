"""One video's finished clip records, held as the JSON lines a pipe would carry.

Why: a clip record after ``abstract`` is about 43 KB of JSON but about 390 KB as Python objects (its
face embeddings, word times and abstractions are lists of floats and small dicts). A 4-hour video
held as objects until ``index`` would cost ~190 MB more than a 10-minute one; held as JSON it costs
~20 MB. Each access parses one record, so a reader that walks the clips (``index``, writing the
records out, counting characters) holds one record's objects at a time. The bytes are the ones
:func:`~m3cli.stages.pipeline.roundtrip` gives, so a parsed record equals the one that was held.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import overload

import orjson

from m3cli.schemas.records import ClipRecord


def _dumps(record: ClipRecord) -> bytes:
    return orjson.dumps(record.to_json(), option=orjson.OPT_SERIALIZE_NUMPY)


class HeldClips(Sequence[ClipRecord]):
    """The clips of one video in clip order, each kept as its JSON and parsed again when read."""

    def __init__(self, records: Iterable[ClipRecord] = ()) -> None:
        self._lines: list[bytes] = []
        self._last: tuple[str, int] | None = None
        self.extend(records)

    @classmethod
    def from_lines(
        cls, lines: Iterable[bytes], amend: Callable[[ClipRecord], None] | None = None
    ) -> HeldClips:
        """The clips of ``lines`` (:meth:`lines` of another process's held clips), each validated and
        first changed in place by ``amend`` when given (`m3 batch` adds a manifest's time)."""
        held = cls()
        for line in lines:
            record = ClipRecord.model_validate(orjson.loads(line))
            if amend is not None:
                amend(record)
            held.append(record)
        return held

    def append(self, record: ClipRecord) -> None:
        """Keep ``record``; it must be a later clip of the same video as the ones kept (readers such as
        ``index`` take a held video as one group already in clip order)."""
        if self._last is not None and (
            record.video.id != self._last[0] or record.clip.index <= self._last[1]
        ):
            raise ValueError(
                f"held clips are one video in clip order: clip {record.clip.index} of {record.video.id} "
                f"after clip {self._last[1]} of {self._last[0]}"
            )
        self._lines.append(_dumps(record))
        self._last = record.key

    def extend(self, records: Iterable[ClipRecord]) -> None:
        for record in records:
            self.append(record)

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, index: int) -> ClipRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[ClipRecord]: ...

    def __getitem__(self, index: int | slice) -> ClipRecord | list[ClipRecord]:
        if isinstance(index, slice):
            return [ClipRecord.model_validate(orjson.loads(line)) for line in self._lines[index]]
        return ClipRecord.model_validate(orjson.loads(self._lines[index]))

    def __iter__(self) -> Iterator[ClipRecord]:
        for line in self._lines:
            yield ClipRecord.model_validate(orjson.loads(line))

    def lines(self) -> list[bytes]:
        """The records' JSON, one ``bytes`` per clip without a newline (to hand to another process)."""
        return list(self._lines)

    @property
    def nbytes(self) -> int:
        """What the held records cost: the size of their JSON."""
        return sum(len(line) for line in self._lines)
