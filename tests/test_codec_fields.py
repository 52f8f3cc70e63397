"""The wire codec, field by field: a table of bad values for each field kind is applied to
every field of every message type (derived from ``field_kinds``, so a new type is covered
without editing this file), both ways: a frame carrying one is the peer's fault
(``DecodeError``, naming the field), a message our code built with one is ours
(``EncodeError``). Enum members and fields tied to each other go on the wire as their ints
and their rules.
"""

from __future__ import annotations

import dataclasses
import math

import cbor2
import pytest
from codec_values import (
    KIND_STRATEGIES,
    LARGEST_VALUE,
    MAX_COUNT,
    SAMPLE_VALUE,
    SMALLEST_VALUE,
    decode_error,
    frame_with,
    sample,
    wire_fields,
)

from overlay.codec import DecodeError, EncodeError, decode, encode
from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.messages import (
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_DESCRIPTOR,
    MAX_FRAME,
    MAX_NEIGHBOURS,
    MAX_OPEN_EPOCHS,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_RUN,
    MAX_U64,
    MAX_WIRE_HTL,
    MESSAGE_TYPES,
    SIGNATURE_SIZE,
    VOUCH_SIZE,
    Heartbeat,
    Hello,
    Kind,
    Message,
    PacketKind,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    SubscribeData,
    SubscribeRun,
    field_kinds,
)

# --- Field rejections, for every field of every message type -------------------------------

_TOO_LONG_DATA = b"x" * (MAX_PAYLOAD + 1)
_KEY = bytes(range(KEY_SIZE))

# kind -> (bad value, what the error must say). Each applies to every field of that kind.
BAD_VALUES: dict[Kind, list[tuple[object, str]]] = {
    Kind.UID: [
        (True, "expected an integer, got bool"),
        (False, "expected an integer, got bool"),
        (-1, "-1 is outside [0, 18446744073709551615]"),
        (2**64, "18446744073709551616 is outside"),
        (1.0, "expected an integer, got float"),
        ("1", "expected an integer, got str"),
        (None, "expected an integer, got NoneType"),
    ],
    Kind.KEY: [
        (b"k" * (KEY_SIZE - 1), "expected 32 bytes, got 31"),
        (b"k" * (KEY_SIZE + 1), "expected 32 bytes, got 33"),
        (b"", "expected 32 bytes, got 0"),
        ("k" * KEY_SIZE, "expected bytes, got str"),
        (None, "expected bytes, got NoneType"),
        ([0] * KEY_SIZE, "expected bytes, got list"),
    ],
    Kind.DIGEST: [
        (b"d" * (DIGEST_SIZE - 1), "expected 32 bytes, got 31"),
        (b"d" * (DIGEST_SIZE + 1), "expected 32 bytes, got 33"),
        ("d" * DIGEST_SIZE, "expected bytes, got str"),
        (None, "expected bytes, got NoneType"),
    ],
    Kind.HTL: [
        (MAX_WIRE_HTL + 1, f"{MAX_WIRE_HTL + 1} is outside [0, {MAX_WIRE_HTL}]"),
        (-1, "-1 is outside"),
        (True, "expected an integer, got bool"),
        (5.0, "expected an integer, got float"),
        (None, "expected an integer, got NoneType"),
    ],
    Kind.LOCATION: [
        (0, "expected a float location, got int"),
        (1, "expected a float location, got int"),
        (False, "expected a float location, got bool"),
        (math.nan, "location nan is outside [0, 1)"),
        (math.inf, "location inf is outside [0, 1)"),
        (-math.inf, "location -inf is outside [0, 1)"),
        (1.0, "location 1.0 is outside [0, 1)"),
        (-0.5, "location -0.5 is outside [0, 1)"),
        (1.5, "location 1.5 is outside [0, 1)"),
        (-5e-324, "is outside [0, 1)"),
        ("0.5", "expected a float location, got str"),
        (None, "expected a float location, got NoneType"),
    ],
    Kind.PACKET: [
        (MAX_PACKET + 1, f"{MAX_PACKET + 1} is outside [0, {MAX_PACKET}]"),
        (-1, "-1 is outside"),
        (True, "expected an integer, got bool"),
        (3.0, "expected an integer, got float"),
        (None, "expected an integer, got NoneType"),
    ],
    Kind.OPT_PACKET: [
        (MAX_PACKET + 1, f"{MAX_PACKET + 1} is outside [0, {MAX_PACKET}]"),
        (-1, "-1 is outside"),
        (False, "expected an integer, got bool"),
        (0.0, "expected an integer, got float"),
        (b"", "expected an integer, got bytes"),
    ],
    Kind.OPT_SEEN: [
        (MAX_PACKET + 1, f"{MAX_PACKET + 1} is outside [-1, {MAX_PACKET}]"),
        (-2, "-2 is outside"),
        (True, "expected an integer, got bool"),
        (0.0, "expected an integer, got float"),
    ],
    Kind.FLAG: [
        (0, "expected true or false, got int"),
        (1, "expected true or false, got int"),
        (None, "expected true or false, got NoneType"),
        ("true", "expected true or false, got str"),
    ],
    Kind.DATA: [
        (_TOO_LONG_DATA, f"length {MAX_PAYLOAD + 1} is outside [0, {MAX_PAYLOAD}]"),
        ("text", "expected bytes, got str"),
        (None, "expected bytes, got NoneType"),
        ([], "expected bytes, got list"),
    ],
    Kind.OPT_SIGNATURE: [
        (b"s" * (SIGNATURE_SIZE + 1), "expected 64 bytes, got 65"),
        (b"s" * (SIGNATURE_SIZE - 1), "expected 64 bytes, got 63"),
        (b"", "expected 64 bytes, got 0"),
        ("s" * SIGNATURE_SIZE, "expected bytes, got str"),
        (False, "expected bytes, got bool"),
    ],
    Kind.PACKET_KIND: [
        (3, "unknown packet kind 3"),
        (-1, "unknown packet kind -1"),
        (True, "expected a packet kind, got bool"),
        (1.0, "expected a packet kind, got float"),
        (None, "expected a packet kind, got NoneType"),
        ("DATA", "expected a packet kind, got str"),
    ],
    Kind.BOOT_ID: [
        (True, "expected an integer, got bool"),
        (-1, "-1 is outside"),
        (2**64, "18446744073709551616 is outside"),
        (0.0, "expected an integer, got float"),
    ],
    Kind.COUNT: [
        (2**32, f"{2**32} is outside [0, {MAX_COUNT}]"),
        (-1, "-1 is outside"),
        (True, "expected an integer, got bool"),
        (1.0, "expected an integer, got float"),
    ],
    Kind.LOCATIONS: [
        ((0.5,) * (MAX_NEIGHBOURS + 1), f"exceed the limit of {MAX_NEIGHBOURS}"),
        ((0.5, 1.0), "location 1.0 is outside [0, 1)"),
        ((0.5, 1), "expected a float location, got int"),
        (0.5, "expected an array of locations, got float"),
        (b"ab", "expected an array of locations, got bytes"),
    ],
    Kind.VOUCHES: [
        ((b"",) * (MAX_NEIGHBOURS + 1), f"exceed the limit of {MAX_NEIGHBOURS}"),
        ((b"v" * (VOUCH_SIZE - 1),), f"a vouch is empty or {VOUCH_SIZE} bytes"),
        (("v" * VOUCH_SIZE,), f"a vouch is empty or {VOUCH_SIZE} bytes"),
        (b"ab", "expected an array of vouches, got bytes"),
    ],
    Kind.OPT_DESCRIPTOR: [
        (b"d" * 32, "length 32 is outside [33, 232]"),
        (b"d" * (MAX_DESCRIPTOR + 1), "length 233 is outside [33, 232]"),
        ("d" * 40, "expected bytes, got str"),
    ],
    Kind.EPOCH_STARTS: [
        (((1, 2),) * (MAX_OPEN_EPOCHS + 1), f"exceed the limit of {MAX_OPEN_EPOCHS}"),
        (((1, 2, 3),), "an epoch start is an [epoch, first packet] pair"),
        ((1, 2), "an epoch start is an [epoch, first packet] pair"),
        (((1, -2),), "-2 is outside"),
        (((1.0, 2),), "expected an integer, got float"),
        (5, "expected an array of epoch starts, got int"),
    ],
    Kind.OPT_LOCATION: [
        (1, "expected a float location, got int"),
        (1.0, "location 1.0 is outside [0, 1)"),
        (math.nan, "location nan is outside [0, 1)"),
    ],
    Kind.OPT_UID: [
        (-1, "-1 is outside"),
        (MAX_U64 + 1, "is outside"),
        (1.5, "expected an integer, got float"),
    ],
    Kind.RUN: [
        ((), "a run holds at least one packet"),
        (((b"", None, 0, None, None, None, None),) * (MAX_RUN + 1), "exceed the limit"),
        (((b"", None, 0, None, None, None),), "of 7 fields"),
        (
            ((b"", None, 0, None, None, None, None), (b"", None, 3, None, None, None, None)),
            "packet 1: unknown packet kind 3",
        ),
        (((b"", -1, 0, None, None, None, None),), "packet 0: -1 is outside"),
        (b"ab", "expected an array of packets, got bytes"),
    ],
    Kind.BUNDLE: [
        ((PublishSucceeded(1, _KEY, 1),), "a bundle holds 2 to 1024 messages, not 1"),
        ((PublishSucceeded(1, _KEY, 1),) * 1025, "a bundle holds 2 to 1024 messages, not 1025"),
        ((PublishRejected(1, _KEY, 7),) * 2, "messages of type 15 are not bundled"),
        (
            (PublishNumbered(1, _KEY, 1), PublishNumbered(2, _KEY, -1)),
            "message 1: PublishNumbered.packet: -1 is outside",
        ),
        (
            (PublishData(1, _KEY, None, 0.5, 3, b"", None, PacketKind.DATA, None, False, True),)
            * 2,
            "message 0: PublishData: a claim that is not a push",
        ),
        (b"ab", "expected an array of messages, got bytes"),
    ],
}


def _bad_field_cases() -> list[object]:
    cases: list[object] = []
    for cls in MESSAGE_TYPES:
        for name, kind in field_kinds(cls):
            for bad, says in BAD_VALUES[kind]:
                shown = f"{len(bad)}-bytes" if isinstance(bad, bytes) else repr(bad)[:20]
                cases.append(
                    pytest.param(cls, name, bad, says, id=f"{cls.__name__}.{name}={shown}")
                )
    return cases


BAD_FIELD_CASES = _bad_field_cases()


@pytest.mark.parametrize(("cls", "name", "bad", "says"), BAD_FIELD_CASES)
def test_decode_rejects_a_bad_field(cls: type[Message], name: str, bad: object, says: str) -> None:
    frame = frame_with(cls, name, bad)
    message = decode_error(frame)
    if len(frame) > MAX_FRAME:
        assert "exceeds the limit" in message
    else:
        assert f"{cls.__name__}.{name}: " in message
        assert says in message


@pytest.mark.parametrize(("cls", "name", "bad", "says"), BAD_FIELD_CASES)
def test_encode_rejects_a_bad_field_as_a_local_error(
    cls: type[Message], name: str, bad: object, says: str
) -> None:
    message = sample(cls, **{name: bad})
    with pytest.raises(EncodeError) as info:
        encode(message)
    # Our own bug, not a peer's: it must not look like a DecodeError to a driver.
    assert not isinstance(info.value, DecodeError)
    assert f"{cls.__name__}.{name}: " in str(info.value)
    assert says in str(info.value)


def test_a_runs_packet_kind_member_goes_on_the_wire_as_its_int_and_only_there() -> None:
    """Our code holds a packet's kind as the ``PacketKind`` member; the wire, as its int.
    A run whose packets the fast path leaves to the codec (a list, not a tuple) encodes the
    same; an enum member in any other field of a packet is our bug, refused."""
    item = (b"one", None, PacketKind.EPOCH_CLOSED, None, None, 9, None)
    as_tuple = SubscribeRun(bytes(KEY_SIZE), 5, (item,))
    as_list = SubscribeRun(bytes(KEY_SIZE), 5, [item])  # type: ignore[arg-type]
    assert encode(as_list) == encode(as_tuple) and decode(encode(as_tuple)) == as_tuple
    bad = SubscribeRun(bytes(KEY_SIZE), 5, ((b"one", PacketKind.EPOCH_CLOSED, *item[2:]),))
    with pytest.raises(EncodeError, match="packet 0: expected an integer, got PacketKind"):
        encode(bad)


def test_data_over_max_payload_is_rejected_whichever_check_sees_it_first() -> None:
    """MAX_PAYLOAD + 1 bytes of data still fits a MAX_FRAME frame; either check must hold."""
    for cls in MESSAGE_TYPES:
        for name, kind in field_kinds(cls):
            if kind is Kind.DATA:
                message = decode_error(frame_with(cls, name, _TOO_LONG_DATA))
                assert "exceeds the limit" in message or f"{cls.__name__}.{name}" in message


@pytest.mark.parametrize(
    "message",
    [
        sample(SubscribeData, key=b"k" * (KEY_SIZE - 1)),
        sample(SubscribeData, data=b"x" * (MAX_PAYLOAD + 1)),
        sample(Hello, location=1.0),
        sample(Heartbeat, seq=-1),
    ],
    ids=["short-key", "long-data", "location-1.0", "negative-seq"],
)
def test_encode_error_is_not_a_decode_error(message: Message) -> None:
    with pytest.raises(EncodeError):
        encode(message)
    assert not issubclass(EncodeError, DecodeError)
    assert not issubclass(DecodeError, EncodeError)


def test_errors_say_who_is_at_fault() -> None:
    """A DecodeError drops the peer; an EncodeError is our bug. Neither may pass for the other."""
    assert issubclass(DecodeError, RemoteProtocolError)
    assert issubclass(EncodeError, LocalProtocolError)
    assert not issubclass(DecodeError, LocalProtocolError)
    assert not issubclass(EncodeError, RemoteProtocolError)


def test_encode_rejects_the_base_class_and_unregistered_subclasses() -> None:
    with pytest.raises(EncodeError, match="not a wire message"):
        encode(Message())

    @dataclasses.dataclass(frozen=True, slots=True)
    class Impostor(Heartbeat):
        pass

    with pytest.raises(EncodeError, match="does not match type code"):
        encode(Impostor(seq=1))


# --- Enum values and tied fields -------------------------------------------------------------


def test_an_enum_code_in_a_plain_int_field_encodes_as_its_value() -> None:
    """A root's backlog refuses a child's publish with PublishRejected(reason=BUSY), the
    enum member in the int field ``reason``: it goes on the wire as 7 and decodes equal."""
    message = PublishRejected(5, bytes(KEY_SIZE), PublishError.BUSY)
    frame = encode(message)
    assert frame == encode(PublishRejected(5, bytes(KEY_SIZE), int(PublishError.BUSY)))
    decoded = decode(frame)
    assert isinstance(decoded, PublishRejected)
    assert decoded == message and type(decoded.reason) is int


TIED_FIELDS = [
    (dict(pushed=True, claim=True, packet=None), "a push without its packet number"),
    (dict(pushed=True, claim=False, packet=None), "a push without its packet number"),
    (dict(pushed=False, claim=True, packet=4), "a claim that is not a push"),
]


@pytest.mark.parametrize(("fields", "says"), TIED_FIELDS, ids=["claim", "push", "unpushed"])
def test_a_publish_whose_flags_contradict_its_number_is_refused_both_ways(
    fields: dict[str, object], says: str
) -> None:
    """A child sends PublishData(claim=True, packet=None) during its root's takeover grace:
    a claim names the number an earlier root gave its publish, so one without a number is
    refused as the peer's fault when it arrives, and as our bug if we built it."""
    message = sample(PublishData, **fields)
    with pytest.raises(EncodeError, match=says):
        encode(message)
    values = wire_fields(message)
    with pytest.raises(DecodeError, match=says):
        decode(bytes(cbor2.dumps(values)))


def test_strategies_and_tables_cover_every_kind() -> None:
    for table in (KIND_STRATEGIES, SAMPLE_VALUE, LARGEST_VALUE, SMALLEST_VALUE, BAD_VALUES):
        assert set(table) == set(Kind)
