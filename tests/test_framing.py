"""Framing: bodies come back whole and in order however the stream is cut; too-large frames
are refused as soon as their length is known; a sealed frame's records split back into
exactly the messages packed, and anything else in a plaintext is the peer's fault."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.messages import MAX_FRAME
from overlay.runtime import framing
from overlay.runtime.framing import (
    MAX_PLAINTEXT,
    PREFIX_SIZE,
    SEALED_MAX,
    FrameReader,
    FrameTooLarge,
    frame,
    record,
    split_records,
)


def test_frame_is_a_big_endian_length_then_the_body() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"
    assert frame(bytes(300))[:PREFIX_SIZE] == b"\x00\x00\x01\x2c"


def test_sealed_max_leaves_room_for_one_largest_record_and_the_aead_tag() -> None:
    assert MAX_PLAINTEXT == PREFIX_SIZE + MAX_FRAME
    assert SEALED_MAX == MAX_PLAINTEXT + 16


def test_records_split_back_into_the_bodies_packed() -> None:
    bodies = [b"\x81\x01", bytes(1024), b"x" * 70, b"\x80"]
    assert split_records(b"".join(record(body) for body in bodies)) == bodies
    assert split_records(record(bytes(MAX_FRAME))) == [bytes(MAX_FRAME)]


@pytest.mark.parametrize(
    ("plaintext", "fault"),
    [
        (b"", "holds no message"),
        (b"\x00\x00\x00\x00", "holds no message"),
        (record(b"ab") + b"\x00\x00", "2 bytes after the last record"),
        (record(b"ab") + b"\x00\x00\x00\x09abc", "a record of 9 bytes where the frame has 3"),
        (b"\xff\xff\xff\xff" + bytes(10), "a record of 4294967295 bytes"),
    ],
)
def test_a_plaintext_that_is_not_whole_records_is_refused(plaintext: bytes, fault: str) -> None:
    with pytest.raises(RemoteProtocolError, match=fault):
        split_records(plaintext)


def test_frame_refuses_a_body_the_prefix_cannot_describe(monkeypatch: pytest.MonkeyPatch) -> None:
    # A real 4 GiB body is too costly for a unit test; the check is the same with a small bound.
    monkeypatch.setattr(framing, "MAX_ENCODABLE", 10)
    assert frame(bytes(10))
    with pytest.raises(LocalProtocolError, match="11 bytes"):
        frame(bytes(11))


def test_one_frame_round_trips() -> None:
    reader = FrameReader(100)
    assert reader.feed(frame(b"hello")) == [b"hello"]
    assert reader.pending == 0


def test_empty_bodies_are_frames_too() -> None:
    reader = FrameReader(100)
    assert reader.feed(frame(b"") + frame(b"x") + frame(b"")) == [b"", b"x", b""]


def test_many_frames_in_one_read_come_back_in_order() -> None:
    bodies = [i.to_bytes(4, "big") * (i % 7) for i in range(1000)]
    reader = FrameReader(100)
    assert reader.feed(b"".join(frame(b) for b in bodies)) == bodies
    assert reader.pending == 0


def test_one_byte_at_a_time() -> None:
    bodies = [b"alpha", b"", b"beta" * 10]
    stream = b"".join(frame(b) for b in bodies)
    reader = FrameReader(100)
    out: list[bytes] = []
    for i in range(len(stream)):
        out += reader.feed(stream[i : i + 1])
    assert out == bodies
    assert reader.pending == 0


def test_pending_counts_the_partial_frame() -> None:
    reader = FrameReader(100)
    assert reader.feed(frame(b"done") + frame(b"partial")[:6]) == [b"done"]
    assert reader.pending == 6
    assert reader.feed(frame(b"partial")[6:]) == [b"partial"]
    assert reader.pending == 0


@settings(max_examples=300)
@given(
    bodies=st.lists(st.binary(max_size=64), max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
)
def test_any_split_of_the_stream_yields_the_same_bodies(
    bodies: list[bytes], cuts: list[int]
) -> None:
    stream = b"".join(frame(b) for b in bodies)
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    reader = FrameReader(64)
    out: list[bytes] = []
    for start, end in itertools.pairwise(points):
        out += reader.feed(stream[start:end])
        # Everything received and not yet returned is pending, and nothing else.
        assert reader.pending == end - sum(PREFIX_SIZE + len(b) for b in out)
    assert out == bodies
    assert reader.pending == 0


def test_a_body_of_exactly_max_body_is_accepted() -> None:
    reader = FrameReader(10)
    assert reader.feed(frame(bytes(10))) == [bytes(10)]


def test_an_oversized_prefix_is_refused_before_its_body_arrives() -> None:
    reader = FrameReader(10)
    with pytest.raises(FrameTooLarge, match="11 bytes; at most 10"):
        reader.feed(frame(bytes(11))[:PREFIX_SIZE])  # the prefix alone: no body sent at all


def test_an_oversized_prefix_split_across_reads_is_refused_when_complete() -> None:
    reader = FrameReader(10)
    prefix = (2**32 - 1).to_bytes(4, "big")
    assert reader.feed(prefix[:3]) == []
    with pytest.raises(FrameTooLarge):
        reader.feed(prefix[3:])


def test_an_oversized_frame_after_good_ones_is_refused() -> None:
    reader = FrameReader(10)
    with pytest.raises(FrameTooLarge):
        reader.feed(frame(b"ok") + frame(bytes(11)))


def test_frame_too_large_is_the_peers_fault() -> None:
    assert issubclass(FrameTooLarge, RemoteProtocolError)


def test_max_body_can_be_raised_between_frames_with_pop() -> None:
    # The responder's case: the handshake's last message and the first sealed frames arrive
    # in one read; the small handshake limit must apply only to the handshake message.
    reader = FrameReader(8)
    reader.push(frame(b"finish") + frame(bytes(100)) + frame(b"x"))
    assert reader.pop() == b"finish"
    reader.max_body = 1000
    assert reader.feed(b"") == [bytes(100), b"x"]
    assert reader.pop() is None


def test_pop_under_the_old_limit_would_have_refused_the_sealed_frame() -> None:
    reader = FrameReader(8)
    reader.push(frame(b"finish") + frame(bytes(100)))
    assert reader.pop() == b"finish"
    with pytest.raises(FrameTooLarge):
        reader.pop()


def test_pop_on_an_empty_or_partial_buffer_is_none() -> None:
    reader = FrameReader(8)
    assert reader.pop() is None
    reader.push(b"\x00\x00")
    assert reader.pop() is None
    assert reader.pending == 2


def test_many_tiny_frames_are_handled_in_linear_time() -> None:
    # 300,000 frames (2.1 MB) in one read. Cutting each frame off the front of the buffer
    # would copy the whole remaining buffer per frame (about 300 GB in all) and run for
    # minutes; the offset reader copies each byte about once.
    count = 300_000
    stream = frame(b"abc") * count
    reader = FrameReader(8)
    out = reader.feed(stream)
    assert len(out) == count and out[0] == out[-1] == b"abc"
    assert reader.pending == 0


def test_the_buffer_is_compacted_after_each_read() -> None:
    reader = FrameReader(8)
    for _ in range(1000):
        reader.feed(frame(b"abcdefgh") + frame(b"xy")[:3])
        reader.feed(frame(b"xy")[3:])
    # Nothing consumed is kept: the buffer holds no more than the partial frame (none here).
    assert len(reader._buffer) == 0


@pytest.mark.parametrize("bad", [-1, 2**32])
def test_max_body_must_fit_the_prefix(bad: int) -> None:
    with pytest.raises(ValueError, match="max_body"):
        FrameReader(bad)
