"""The Spark sink's packet framing: many rows a packet, read back by ``unpack``; packets are
cut the same way however the rows are split into Arrow batches (what the uids rely on)."""

from __future__ import annotations

import random
import struct

import pytest

pa = pytest.importorskip("pyarrow")

from overlay.messages import MAX_PAYLOAD  # noqa: E402
from overlay.spark.packing import Packer  # noqa: E402
from overlay.spark.rows import HEADER_SIZE, PackingError, Record, unpack  # noqa: E402


def pack_all(
    packer: Packer, values: list[bytes | None], keys: list[str | None] | None, chunks: list[int]
) -> list[bytes]:
    packets: list[bytes] = []
    start = 0
    for size in chunks:
        end = min(len(values), start + size)
        v = pa.array(values[start:end], pa.binary())
        k = None if keys is None else pa.array(keys[start:end], pa.string())
        packets.extend(packer.add(v, k))
        start = end
    last = packer.finish()
    return packets + ([last] if last is not None else [])


def rows(rng: random.Random, n: int) -> list[bytes | None]:
    return [None if rng.random() < 0.1 else rng.randbytes(rng.randrange(0, 60)) for _ in range(n)]


@pytest.mark.parametrize(
    ("rows_per_packet", "bytes_per_packet"), [(1, 128), (7, 300), (10**6, 1000), (3, MAX_PAYLOAD)]
)
@pytest.mark.parametrize("keyed", [False, True])
def test_round_trip_and_independent_of_batch_boundaries(
    rows_per_packet: int, bytes_per_packet: int, keyed: bool
) -> None:
    rng = random.Random(rows_per_packet * 31 + bytes_per_packet)
    values = rows(rng, 700)
    keys = [None if i % 9 == 0 else f"k{i}" for i in range(700)] if keyed else None
    cuts = []
    for chunks in ([700], [1] * 700, [13] * 54, [rng.randrange(0, 90) for _ in range(60)] + [700]):
        packets = pack_all(Packer(rows_per_packet, bytes_per_packet, keyed), values, keys, chunks)
        assert all(len(p) <= bytes_per_packet for p in packets)
        got = [record for p in packets for record in unpack(p)]
        assert all(len(unpack(p)) <= rows_per_packet for p in packets)
        assert [r.value for r in got] == values
        if keys is not None:
            assert [r.key for r in got] == [None if k is None else k.encode() for k in keys]
        else:
            assert all(r.key is None for r in got)
        cuts.append(packets)
    assert all(c == cuts[0] for c in cuts)  # the same packets, byte for byte


def test_packets_are_full() -> None:
    packer = Packer(10**6, 1000, keyed=False)
    packets = pack_all(packer, [b"x" * 96] * 100, None, [100])
    # 9-byte header, then 4 + 96 bytes a row: 9 rows fit in 1000 bytes.
    assert [len(unpack(p)) for p in packets] == [9] * 11 + [1]
    assert packer.rows_packed == 100


def test_string_and_large_columns() -> None:
    packer = Packer(100, 1000, keyed=True)
    values = pa.array(["é", None, "abc"], pa.large_string())
    keys = pa.array([b"k", b"", None], pa.large_binary())
    (packet,) = [*packer.add(values, keys), packer.finish()]
    assert unpack(packet) == [
        Record(b"k", "é".encode()),
        Record(b"", None),
        Record(None, b"abc"),
    ]


def test_a_row_larger_than_a_packet_is_refused_with_its_index() -> None:
    packer = Packer(100, 100, keyed=False)
    with pytest.raises(PackingError, match=r"row 2 needs 104 bytes.*at most 91") as raised:
        list(packer.add(pa.array([b"a", b"b", b"x" * 100])))
    assert "never be published: raise option 'bytesPerPacket' (at most 65536)" in str(raised.value)
    with pytest.raises(PackingError, match="no packet holds more than 65527 bytes of rows"):
        list(Packer(100, 65536, keyed=False).add(pa.array([b"x" * 70_000])))


def test_bad_packer_settings() -> None:
    with pytest.raises(ValueError, match="rows_per_packet"):
        Packer(0, 1000, keyed=False)
    with pytest.raises(ValueError, match="bytes_per_packet"):
        Packer(1, MAX_PAYLOAD + 1, keyed=False)
    with pytest.raises(TypeError, match="binary or string"):
        list(Packer(1, 1000, keyed=False).add(pa.array([1, 2])))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "header"),
        (b"XXXX\x00\x00\x00\x00\x00", "not a packet of rows"),
        (b"OVR1\x00" + struct.pack("<I", 5), "cannot hold 5 rows"),
        (b"OVR1\x00" + struct.pack("<Ii", 1, 10) + b"abc", "runs past"),
        (b"OVR1\x00" + struct.pack("<Ii", 1, -7), "runs past"),
        (b"OVR1\x00" + struct.pack("<Ii", 1, 1) + b"ab", "follow the packet's last row"),
    ],
)
def test_unpack_rejects_what_is_not_a_packet_of_rows(data: bytes, problem: str) -> None:
    with pytest.raises(PackingError, match=problem):
        unpack(data)


def test_empty_packet_and_header_size() -> None:
    assert HEADER_SIZE == 9
    assert unpack(b"OVR1\x00\x00\x00\x00\x00") == []
