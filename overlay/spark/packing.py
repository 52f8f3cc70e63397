"""Cutting a partition's rows into packets (the framing is ``rows.py``), columnar.

Lengths and bytes are cut from the Arrow buffers Spark hands the writer, so there is no
Python work per row, only per packet.

Determinism (what exactly-once rests on, see ``overlay.spark``): the packets cut from a
sequence of rows depend only on those rows and on ``rows_per_packet``/``bytes_per_packet``,
never on how Spark split them into Arrow record batches, because a packet carries on across
a batch boundary. A retried task that sees the same rows in the same order therefore cuts
the same packets, packet ``seq`` for packet ``seq``. A full packet is cut only once the row
that does not fit in it is in hand (or the row limit is reached), so a prefix of the rows
cuts the same full packets as the whole; only ``finish``'s last packet depends on where the
rows ended, which is why a task leaves it to the driver (``publisher``).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from overlay.messages import MAX_PAYLOAD
from overlay.spark.rows import (
    HEADER,
    HEADER_SIZE,
    KEYED,
    LENGTH,
    MAGIC,
    MIN_BYTES_PER_PACKET,
    NULL,
    PackingError,
)


@dataclass(slots=True)
class _Column:
    """One column of one record batch, ready to be cut: lengths (-1 for null) as i32 bytes
    and the row offsets into its data buffer."""

    lengths: memoryview  # count x i32, little-endian
    offsets: memoryview  # (count + 1) x int, native (int32 or int64)
    data: memoryview


@dataclass(slots=True)
class _Segment:
    """Rows [start, end) of one record batch that go into the current packet."""

    columns: tuple[_Column, ...]
    start: int
    end: int


class Packer:
    """Cuts a partition's rows into packets of at most ``rows_per_packet`` rows and
    ``bytes_per_packet`` bytes (header included). Feed record batches to ``add``, which
    yields each packet as it fills; ``finish`` gives the last, partial one."""

    def __init__(self, rows_per_packet: int, bytes_per_packet: int, keyed: bool) -> None:
        if rows_per_packet < 1:
            raise ValueError(f"rows_per_packet must be at least 1, got {rows_per_packet}")
        if not MIN_BYTES_PER_PACKET <= bytes_per_packet <= MAX_PAYLOAD:
            raise ValueError(
                f"bytes_per_packet must be in [{MIN_BYTES_PER_PACKET}, {MAX_PAYLOAD}], "
                f"got {bytes_per_packet}"
            )
        self.rows_per_packet = rows_per_packet
        self.bytes_per_packet = bytes_per_packet
        self.keyed = keyed
        self._budget = bytes_per_packet - HEADER_SIZE
        self._segments: list[_Segment] = []
        self._rows = 0
        self._bytes = 0
        self.rows_packed = 0

    def add(self, values: pa.Array, keys: pa.Array | None = None) -> Iterator[bytes]:
        """Pack one record batch's value column (and key column, if the packer is keyed);
        yields the packets it completes. A row larger than a packet raises PackingError."""
        if (keys is not None) != self.keyed:
            raise ValueError("a keyed packer takes keys with every batch, an unkeyed one none")
        count = len(values)
        if count == 0:
            return
        columns = tuple(_column(a) for a in ((values,) if keys is None else (values, keys)))
        sizes = _row_sizes(values, keys)
        largest = pc.max(sizes).as_py()
        if largest is not None and largest > self._budget:
            row = pc.index(sizes, largest).as_py()
            most = MAX_PAYLOAD - HEADER_SIZE
            fix = (
                f"raise option 'bytesPerPacket' (at most {MAX_PAYLOAD}) or make the row smaller"
                if largest <= most
                else f"no packet holds more than {most} bytes of rows: split or compress the row"
            )
            raise PackingError(
                f"row {self.rows_packed + row} needs {largest} bytes in a packet; a packet "
                f"holds at most {self._budget} bytes of rows (bytesPerPacket "
                f"{self.bytes_per_packet} less its {HEADER_SIZE}-byte header), so it can "
                f"never be published: {fix}"
            )
        ends: list[int] = pc.cumulative_sum(sizes).to_pylist()
        start = 0
        while start < count:
            before = ends[start - 1] if start else 0
            row_room = min(count, start + self.rows_per_packet - self._rows)
            end = bisect_right(ends, before + self._budget - self._bytes, start, row_room)
            if end > start:
                self._segments.append(_Segment(columns, start, end))
                self._rows += end - start
                self._bytes += ends[end - 1] - before
                self.rows_packed += end - start
            if end < count:  # the next row does not fit: this packet is full
                yield self._cut()
            start = end
        if self._rows >= self.rows_per_packet:
            yield self._cut()

    def finish(self) -> bytes | None:
        """The last packet, if any rows are left."""
        return self._cut() if self._rows else None

    def _cut(self) -> bytes:
        segments, self._segments = self._segments, []
        header = HEADER.pack(MAGIC, KEYED if self.keyed else 0, self._rows)
        self._rows = self._bytes = 0
        parts: list[bytes | memoryview] = [header]
        columns = 2 if self.keyed else 1
        for column in range(columns):
            parts.extend(
                s.columns[column].lengths[s.start * LENGTH : s.end * LENGTH] for s in segments
            )
        for column in range(columns):
            for s in segments:
                c = s.columns[column]
                parts.append(c.data[c.offsets[s.start] : c.offsets[s.end]])
        return b"".join(parts)


def _binary(array: pa.Array) -> pa.Array:
    """The column as (large) binary, a zero-copy view for strings; TypeError otherwise."""
    kind = array.type
    if pa.types.is_string(kind):
        return array.view(pa.binary())
    if pa.types.is_large_string(kind):
        return array.view(pa.large_binary())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return array
    raise TypeError(f"a packed column is binary or string, not {kind}")


def _column(array: pa.Array) -> _Column:
    array = _binary(array)
    if array.null_count:
        # A null's slot may span bytes (Arrow allows it); filled, it spans none.
        valid = pc.is_valid(array)
        array = pc.fill_null(array, pa.scalar(b"", array.type))
        lengths = pc.if_else(valid, pc.binary_length(array), NULL)
    else:
        lengths = pc.binary_length(array)
    lengths = lengths.cast(pa.int32())
    _, offsets_buffer, data_buffer = array.buffers()
    width = 8 if pa.types.is_large_binary(array.type) else 4
    first = array.offset
    offsets = memoryview(offsets_buffer)[first * width : (first + len(array) + 1) * width]
    data = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")
    return _Column(_little_endian(lengths), offsets.cast("q" if width == 8 else "i"), data)


def _little_endian(lengths: pa.Array) -> memoryview:
    """An int32 array's values as little-endian bytes (a view, on little-endian hosts)."""
    _, buffer = lengths.buffers()
    raw = memoryview(buffer)[lengths.offset * LENGTH : (lengths.offset + len(lengths)) * LENGTH]
    if sys.byteorder == "little":
        return raw
    swapped = array("i", raw.tobytes())
    swapped.byteswap()
    return memoryview(swapped.tobytes())


def _row_sizes(values: pa.Array, keys: pa.Array | None) -> pa.Array:
    """Bytes each row takes in a packet: its length fields plus its bytes."""
    sizes = pc.add(pc.fill_null(pc.binary_length(_binary(values)), 0), LENGTH)
    if keys is not None:
        key_sizes = pc.add(pc.fill_null(pc.binary_length(_binary(keys)), 0), LENGTH)
        sizes = pc.add(sizes, key_sizes)
    return sizes.cast(pa.int64())
