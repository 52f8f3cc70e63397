"""The framing of many rows in one packet: what the Spark sink publishes, and ``unpack``.

One publish a row would cost a client-port round of framing, a uid, a root decision and a
window slot for every ~100 bytes; packing a few hundred rows a packet costs one of each for
60 KB. The framing is plain so any subscriber can read it (all integers little-endian)::

    magic   4 bytes  b"OVR1"
    flags   1 byte   bit 0: rows carry a key
    count   u32      rows in this packet
    vlen    count x i32   each row's value length; -1 is a null value
    klen    count x i32   each row's key length, -1 a null key (only with flag bit 0)
    values  the values' bytes, back to back, in row order
    keys    the keys' bytes, back to back (only with flag bit 0)

A string column travels as its UTF-8 bytes. This module needs neither Spark nor Arrow, so a
subscriber can ``from overlay.spark import unpack`` with the base install; the packing side
is ``packing.py``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

MAGIC = b"OVR1"
KEYED = 0x01
HEADER = struct.Struct("<4sBI")
HEADER_SIZE = HEADER.size  # 9
LENGTH = 4  # each length field (i32) per row and column
NULL = -1

# The defaults: a packet as full as a client-port request allows (MAX_PAYLOAD, 64 KiB) less
# room to spare, and no row limit beyond that. 60,000 bytes carry ~580 rows of 100 bytes.
DEFAULT_BYTES_PER_PACKET = 60_000
DEFAULT_ROWS_PER_PACKET = 100_000
MIN_BYTES_PER_PACKET = 64  # header plus a few small rows; less is surely a typo


class Record(NamedTuple):
    """One row as published: ``key`` is None for a sink without a key column (or a null
    key); ``value`` None is a null value."""

    key: bytes | None
    value: bytes | None


class PackingError(ValueError):
    """A row cannot be packed (larger than a packet) or a packet is not this framing."""


def unpack(data: bytes) -> list[Record]:
    """The rows of one packet the Spark sink published, in their order. PackingError if
    ``data`` is not such a packet (for example an epoch marker's empty data)."""
    if len(data) < HEADER_SIZE:
        raise PackingError(f"a packet of rows has a {HEADER_SIZE}-byte header; got {len(data)}")
    magic, flags, count = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise PackingError(f"not a packet of rows: it starts {magic!r}, not {MAGIC!r}")
    keyed = bool(flags & KEYED)
    columns = 2 if keyed else 1
    end_of_lengths = HEADER_SIZE + count * LENGTH * columns
    if end_of_lengths > len(data):
        raise PackingError(f"a packet of {len(data)} bytes cannot hold {count} rows")
    lengths = struct.unpack_from(f"<{count * columns}i", data, HEADER_SIZE)
    position = end_of_lengths
    values: list[bytes | None] = []
    keys: list[bytes | None] = []
    for column, out in ((0, values), (1, keys))[:columns]:
        for length in lengths[column * count : (column + 1) * count]:
            if length == NULL:
                out.append(None)
                continue
            if length < 0 or position + length > len(data):
                raise PackingError(f"row length {length} runs past the packet's end")
            out.append(data[position : position + length])
            position += length
    if position != len(data):
        raise PackingError(f"{len(data) - position} bytes follow the packet's last row")
    if not keyed:
        return [Record(None, value) for value in values]
    return [Record(key, value) for key, value in zip(keys, values, strict=True)]
