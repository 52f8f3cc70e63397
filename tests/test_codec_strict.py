"""The codec's strictness beyond field checks: CBOR features no message uses (tags, trailing
bytes, deep nesting, huge headers) are refused; and a relay's forwarded frames (encode hands
back the frame decode saw). Messages and their fields are ``test_codec`` and
``test_codec_fields``."""

from __future__ import annotations

import datetime
import decimal
import math
import uuid

import cbor2
import pytest
from codec_values import decode_error

from overlay import codec
from overlay.codec import decode, encode
from overlay.messages import (
    MAX_FRAME,
    Heartbeat,
    PacketKind,
    SubscribeData,
)

MAX_COUNT = 2**32 - 1
LARGEST_LOCATION = math.nextafter(1.0, 0.0)  # 0.9999999999999999, the top of [0, 1)


# --- CBOR features no message uses -----------------------------------------------------------


def test_unknown_tag_inside_the_array_is_rejected() -> None:
    frame = b"\x82\x02" + cbor2.dumps(cbor2.CBORTag(4000, 1))
    assert "tag 4000" in decode_error(frame)


@pytest.mark.parametrize(
    "frame",
    [
        cbor2.dumps([cbor2.CBORTag(4000, 2), 5]),
        cbor2.dumps(cbor2.CBORTag(4000, [2, 5])),
        cbor2.dumps([2, cbor2.CBORTag(4000, cbor2.CBORTag(4001, 5))]),
    ],
    ids=["around-type-code", "around-array", "nested"],
)
def test_unknown_tags_anywhere_are_rejected(frame: bytes) -> None:
    assert "tag 400" in decode_error(frame)


@pytest.mark.parametrize(
    "value",
    [
        datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),  # tag 0, string form
        cbor2.CBORTag(1, 1_700_000_000),  # tag 1, epoch form
        cbor2.CBORTag(1, 1e300),  # an epoch no datetime can hold
        cbor2.CBORTag(1, math.nan),
        decimal.Decimal("1.5"),  # tag 4
        cbor2.CBORTag(5, [2**64, 1]),  # bigfloat with a huge exponent
        cbor2.CBORTag(30, [1, 0]),  # rational with a zero denominator
        cbor2.CBORTag(35, "("),  # an invalid regular expression
        uuid.UUID(int=5),  # tag 37
        cbor2.CBORTag(37, b"abc"),  # a UUID of the wrong length
        cbor2.CBORTag(258, [1, 2]),  # a set
        cbor2.CBORTag(260, b"abc"),  # an IP address of the wrong length
        cbor2.CBORTag(29, 5),  # a shared reference to nothing
        cbor2.CBORTag(25, 5),  # a string reference outside any namespace
        cbor2.CBORTag(24, b"\xff"),  # embedded CBOR that is not CBOR
    ],
    ids=repr,
)
def test_tagged_values_in_an_integer_field_are_rejected(value: object) -> None:
    frame = cbor2.dumps([Heartbeat.TYPE, value])
    message = decode_error(frame)
    assert "Heartbeat.seq" in message or "not valid CBOR" in message


@pytest.mark.parametrize(
    "frame",
    [
        b"\x82\x02" + cbor2.dumps(cbor2.CBORTag(2, b"\x05")),  # bignum 5 as the seq
        b"\xd8\x1c" + encode(Heartbeat(seq=5)),  # shareable tag around the array
    ],
    ids=["bignum-seq", "shareable-array"],
)
def test_known_tags_that_decode_to_valid_values_are_rejected(frame: bytes) -> None:
    decode_error(frame)


@pytest.mark.parametrize("trailer", [b"\x00", b"\xff", b"\x82\x02\x05"], ids=repr)
def test_trailing_bytes_after_the_array_are_rejected(trailer: bytes) -> None:
    decode_error(encode(Heartbeat(seq=5)) + trailer)


@pytest.mark.parametrize(
    "frame",
    [
        b"\x81" * 100_000,
        b"\x81" * (MAX_FRAME - 1) + b"\x00",
        b"\x82\x02" + b"\x81" * 60_000 + b"\x00",
        b"\x9f" * 60_000,
        b"\xa1\x00" * 30_000 + b"\x00",
        b"\xa1" * 60_000 + b"\x00",
        b"\xd8\x1c" * 30_000 + b"\x00",
        b"\xda\x00\x00\x0f\xa0" * 13_000 + b"\x00",
    ],
    ids=[
        "arrays-over-limit",
        "arrays",
        "arrays-in-field",
        "indefinite-arrays",
        "map-values",
        "map-keys",
        "shareable-tags",
        "unknown-tags",
    ],
)
def test_deep_nesting_is_rejected(frame: bytes) -> None:
    decode_error(frame)


@pytest.mark.parametrize(
    "frame",
    [
        b"\x9b" + b"\xff" * 8,  # array of 2**64 - 1 items
        b"\x9b\x00\x00\x00\xff\xff\xff\xff\xff",
        b"\xbb" + b"\xff" * 8,  # map of 2**64 - 1 pairs
        b"\x5b" + b"\xff" * 8,  # byte string of 2**64 - 1 bytes
        b"\x7b\x00\x00\x00\xff\xff\xff\xff\xff",  # text of 2**40 - 1 bytes
        b"\x82\x02\x5b\x00\x00\x00\x01\x00\x00\x00\x00",  # a 4 GiB field
        b"\x83\x0b\x5a\xff\xff\xff\xff",  # Unsubscribe claiming a 4 GiB key
    ],
    ids=["array", "array-2**40", "map", "bytes", "text", "bytes-in-field", "key"],
)
def test_huge_length_headers_are_rejected_without_allocating(frame: bytes) -> None:
    assert "not valid CBOR" in decode_error(frame)


def test_huge_bignum_field_is_rejected() -> None:
    frame = b"\x82\x02\xc2\x59\xff\xff" + b"\xff" * 0xFFFF  # a 2**524280-scale bignum
    assert "Heartbeat.seq" in decode_error(frame)


# --- a relay's forwarded frames ------------------------------------------------------------


def test_a_decoded_subscribe_data_encodes_to_its_own_frame() -> None:
    """A relay forwards the SubscribeData it decoded: encode returns that very frame."""
    message = SubscribeData(bytes(32), 5, b"payload", None, PacketKind.DATA, None, None, 77)
    frame = encode(message)
    decoded = decode(frame)
    assert decoded == message and decoded is not message
    assert encode(decoded) is frame  # the very bytes: not validated and encoded again


def test_the_remembered_frames_are_bounded_and_only_for_the_same_object() -> None:
    frames = [
        encode(SubscribeData(bytes(32), n, b"x", None, PacketKind.DATA, None, None, None))
        for n in range(50)
    ]
    decoded = [decode(f) for f in frames]
    assert len(codec._recent) <= codec._RECENT_SIZE
    # An equal but distinct object is encoded afresh, and gives the same canonical bytes.
    fresh = SubscribeData(bytes(32), 49, b"x", None, PacketKind.DATA, None, None, None)
    assert fresh == decoded[-1] and encode(fresh) == frames[-1]
    # Old entries left the table; their messages still encode correctly the long way.
    assert all(encode(m) == f for m, f in zip(decoded, frames, strict=True))
