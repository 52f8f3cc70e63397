"""The wire codec: every message round-trips, and every malformed frame is a DecodeError.

``decode`` faces hostile peers, so its contract is checked three ways: unit tests pin each
rejection of a frame as a whole and the message it gives (here); tables of bad values are
applied to every field of every message type (``test_codec_fields``); and seeded fuzzing
shows that no byte string makes ``decode`` raise anything but ``DecodeError``, nor return a
message that our own encoder would refuse.
"""

from __future__ import annotations

import dataclasses

import cbor2
import pytest
from codec_values import (
    LARGEST_VALUE,
    SMALLEST_VALUE,
    build,
    decode_error,
    frame_with,
    messages_of,
    sample,
    wire_fields,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overlay.codec import decode, encode
from overlay.messages import (
    KEY_SIZE,
    MAX_FRAME,
    MAX_PAYLOAD,
    MAX_U64,
    MESSAGE_TYPES,
    Heartbeat,
    Hello,
    Kind,
    Message,
    PacketKind,
    SubscribeData,
    field_kinds,
)


def by_name(cls: type[Message]) -> str:
    return cls.__name__


def kinds_of(cls: type[Message]) -> dict[str, Kind]:
    return dict(field_kinds(cls))


# --- Round trips ---------------------------------------------------------------------------


def assert_round_trips(message: Message) -> bytes:
    cls = type(message)
    frame = encode(message)
    assert type(frame) is bytes
    assert len(frame) <= MAX_FRAME
    decoded = decode(frame)
    assert type(decoded) is cls
    assert decoded == message
    for name, kind in field_kinds(cls):
        got, sent = getattr(decoded, name), getattr(message, name)
        if kind is Kind.PACKET_KIND:
            # PacketKind.DATA == 0, so equality alone would let a bare int through.
            assert type(got) is PacketKind, name
        else:
            assert type(got) is type(sent), name
    assert encode(decoded) == frame
    return frame


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_message_type_round_trips(cls: type[Message], data: st.DataObject) -> None:
    assert_round_trips(data.draw(messages_of(cls), label=cls.__name__))


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_largest_message_round_trips_and_fits_the_frame(cls: type[Message]) -> None:
    """Every field at its wire maximum, DATA at exactly MAX_PAYLOAD: MAX_FRAME must hold it."""
    frame = assert_round_trips(build(cls, LARGEST_VALUE))
    if Kind.DATA in kinds_of(cls).values():
        assert len(frame) > MAX_PAYLOAD


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_smallest_message_round_trips(cls: type[Message]) -> None:
    assert_round_trips(build(cls, SMALLEST_VALUE))


@pytest.mark.parametrize(
    "cls", [c for c in MESSAGE_TYPES if Kind.DATA in kinds_of(c).values()], ids=by_name
)
def test_data_of_exactly_max_payload_round_trips(cls: type[Message]) -> None:
    message = dataclasses.replace(
        sample(cls),
        **{n: b"\xa5" * MAX_PAYLOAD for n, k in field_kinds(cls) if k is Kind.DATA},
    )
    assert_round_trips(message)


@pytest.mark.parametrize("kind", list(PacketKind), ids=lambda k: k.name)
def test_packet_kind_decodes_to_the_enum_member(kind: PacketKind) -> None:
    frame = frame_with(SubscribeData, "kind", int(kind))
    decoded = decode(frame)
    assert isinstance(decoded, SubscribeData)
    assert decoded.kind is kind


def test_encoder_accepts_plain_int_packet_kind_and_decoder_returns_the_member() -> None:
    message = sample(SubscribeData, kind=2)
    decoded = decode(encode(message))
    assert isinstance(decoded, SubscribeData)
    assert decoded.kind is PacketKind.EPOCH_ABORTED


# --- Golden frames: the wire format itself ---------------------------------------------------


@pytest.mark.parametrize(
    ("message", "hex_frame"),
    [
        (Hello(location=0.5, boot_id=7), "8401fb3fe000000000000007f6"),
        (Heartbeat(seq=MAX_U64), "82021bffffffffffffffff"),
        (
            SubscribeData(
                key=bytes(KEY_SIZE),
                packet=1,
                data=b"hi",
                epoch=None,
                kind=PacketKind.EPOCH_CLOSED,
                sig=None,
            ),
            "8a105820" + "00" * KEY_SIZE + "01426869f601f6f6f6f6",
        ),
        (
            SubscribeData(bytes(KEY_SIZE), 1, b"hi", None, PacketKind.DATA, None, None, 9, 0),
            "8a105820" + "00" * KEY_SIZE + "01426869f600f6f60900",
        ),
    ],
    ids=["Hello", "Heartbeat", "SubscribeData", "SubscribeData-marked"],
)
def test_golden_frames(message: Message, hex_frame: str) -> None:
    assert encode(message).hex() == hex_frame
    assert decode(bytes.fromhex(hex_frame)) == message


def test_location_is_accepted_only_in_the_canonical_float_width() -> None:
    """The wire format is canonical (one encoding per message): our encoder writes locations
    as double-precision floats, so the same 0.5 as a half or single float is refused."""
    assert decode(bytes.fromhex("8401fb3fe000000000000007f6")) == Hello(location=0.5, boot_id=7)
    for narrow in ("f93800", "fa3f000000"):
        assert "canonical" in decode_error(bytes.fromhex("8401" + narrow + "07f6"))


# --- Frame-level rejections ----------------------------------------------------------------


def test_frame_over_max_frame_is_rejected_before_parsing() -> None:
    message = decode_error(b"\x00" * (MAX_FRAME + 1))
    assert "exceeds the limit" in message
    assert str(MAX_FRAME) in message


def test_frame_of_exactly_max_frame_reaches_the_field_checks() -> None:
    """The limit is inclusive: a MAX_FRAME-byte frame is parsed, and here fails on its data."""
    values = wire_fields(sample(SubscribeData))
    data_index = 1 + [n for n, _ in field_kinds(SubscribeData)].index("data")
    values[data_index] = b""
    overhead = len(cbor2.dumps(values)) + 4  # a data length >= 2**16 takes a 5-byte header
    values[data_index] = b"x" * (MAX_FRAME - overhead)
    frame = cbor2.dumps(values)
    assert len(frame) == MAX_FRAME
    message = decode_error(frame)
    assert "SubscribeData.data" in message
    assert decode_error(frame + b"\x00").startswith("frame of")


@pytest.mark.parametrize(
    "frame",
    [b"", b"\xff", b"\x1c", b"\x82\x02\xff", b"\x61\xff", b"\x5f\x01\xff", b"\xf8\x00"],
    ids=["empty", "break", "reserved-info", "break-in-array", "bad-utf8", "bad-chunk", "simple"],
)
def test_not_cbor_is_rejected(frame: bytes) -> None:
    assert "not valid CBOR" in decode_error(frame)


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_every_truncation_of_a_valid_frame_is_rejected(cls: type[Message]) -> None:
    frame = encode(sample(cls))
    for cut in range(len(frame)):
        assert "not valid CBOR" in decode_error(frame[:cut]), cut


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ({1: 2}, "dict"),
        ({}, "dict"),
        (5, "int"),
        ([], "list"),
        (b"\x82\x02\x05", "bytes"),
        ("Heartbeat", "str"),
        (None, "NoneType"),
        (True, "bool"),
        (0.5, "float"),
    ],
    ids=["map", "empty-map", "int", "empty-array", "bytes", "text", "null", "true", "float"],
)
def test_anything_but_a_non_empty_array_is_rejected(value: object, got: str) -> None:
    message = decode_error(cbor2.dumps(value))
    assert "expected a non-empty CBOR array" in message
    assert got in message


@pytest.mark.parametrize(
    "code",
    [
        0,
        -1,
        max(c.TYPE for c in MESSAGE_TYPES) + 1,
        999,
        MAX_U64,
        2**64,
        True,
        False,
        1.0,
        "1",
        None,
        b"\x01",
        [1],
    ],
    ids=repr,
)
def test_unknown_or_mistyped_type_code_is_rejected(code: object) -> None:
    # The rest looks like a Hello, so a code that slipped through as 1 would decode.
    message = decode_error(cbor2.dumps([code, 0.5, 7]))
    assert "unknown message type" in message
    assert repr(code) in message


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_too_few_fields_are_rejected(cls: type[Message]) -> None:
    values = wire_fields(sample(cls))
    for keep in range(1, len(values)):
        message = decode_error(cbor2.dumps(values[:keep]))
        assert f"{cls.__name__} needs {len(values) - 1} fields, got {keep - 1}" in message


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_too_many_fields_are_rejected(cls: type[Message]) -> None:
    values = wire_fields(sample(cls))
    for extra in ([None], [0], [b"", 1, 2]):
        message = decode_error(cbor2.dumps(values + extra))
        assert f"{cls.__name__} needs {len(values) - 1} fields" in message
        assert f"got {len(values) - 1 + len(extra)}" in message
