"""The client-port codec: round trips, every class of malformed frame refused with the one
exception type, and a fuzz that decoding hostile bytes never raises anything else."""

from __future__ import annotations

import contextlib

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from overlay.client.protocol import (
    MAX_REQUEST_FRAME,
    ClientProtocolError,
    Describe,
    Description,
    ErrorCode,
    Event,
    Hello,
    ProtocolError,
    Publish,
    PublishWindow,
    Request,
    Subscribe,
    Unsubscribe,
    Unsubscribed,
    Welcome,
    _arity,
    _key,
    _packet,
    _plain_packet,
    decode_event,
    decode_request,
    encode_event,
    encode_request,
)
from overlay.core.events import (
    Epoch,
    EpochAborted,
    EpochSkipped,
    Missed,
    Packet,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    Subscribed,
    SubscribeFailed,
)
from overlay.errors import LocalProtocolError
from overlay.messages import MAX_PACKET, MAX_PAYLOAD, PacketKind, PublishError
from overlay.runtime.framing import PREFIX_SIZE

KEY = bytes(range(32))
DESCRIPTOR = bytes(32) + b"name"

REQUESTS: list[Request] = [
    Hello(0, 1, "script"),
    Subscribe(1, KEY),
    Subscribe(2, KEY, 41, True, DESCRIPTOR),
    Unsubscribe(3, KEY),
    Publish(4, KEY, 2**64 - 1, b"data"),
    Publish(5, KEY, 7, b"", 3, 9, PacketKind.EPOCH_CLOSED, bytes(64), DESCRIPTOR),
    Describe(6),
    Describe(7, KEY),
]

PACKET = Packet(KEY, 5, b"payload", 2, PacketKind.DATA)
EVENTS: list[Event] = [
    Welcome(0, 1, b"\x01" * 32, MAX_REQUEST_FRAME),
    Subscribed(KEY, True),
    Subscribed(KEY, False, 10, 3, ((4, 7), (5, 9))),
    SubscribeFailed(KEY, "too many streams"),
    PACKET,
    Packet(KEY, 6, b"", None, PacketKind.EPOCH_ABORTED),
    Missed(KEY, 1, 4),
    Epoch(KEY, 2, (PACKET, Packet(KEY, 6, b"x", 2, PacketKind.DATA)), 7),
    EpochSkipped(KEY, 3, "joined late"),
    EpochAborted(KEY, 4),
    PublishAcked(KEY, 99, 12),
    PublishCollided(KEY, 99, 12, 13),
    PublishFailed(KEY, 99, PublishError.BUSY, "full"),
    Description(8, {"id": b"x", "streams": [{"high": 3}], "uptime": 1.5}),
    Unsubscribed(9, KEY),
    ProtocolError(None, ErrorCode.TOO_SLOW, "slow"),
    ProtocolError(3, ErrorCode.MALFORMED, "bad"),
    PublishWindow(KEY, 1),
    PublishWindow(KEY, 2**20),
]


def body(framed: bytes) -> bytes:
    assert int.from_bytes(framed[:PREFIX_SIZE], "big") == len(framed) - PREFIX_SIZE
    return framed[PREFIX_SIZE:]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_requests_round_trip(request_: Request) -> None:
    assert decode_request(body(encode_request(request_))) == request_


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip(event: Event) -> None:
    assert decode_event(body(encode_event(event))) == event


def test_long_reasons_are_clipped_not_refused() -> None:
    event = decode_event(body(encode_event(SubscribeFailed(KEY, "x" * 5000))))
    assert isinstance(event, SubscribeFailed)
    assert len(event.reason) == 1000 and event.reason.endswith("...")


def test_an_invalid_request_of_our_own_is_a_local_error() -> None:
    with pytest.raises(LocalProtocolError, match=r"Publish\.key"):
        encode_request(Publish(0, b"short", 1, b""))
    with pytest.raises(LocalProtocolError, match="not a client-port"):
        encode_request(object())  # type: ignore[arg-type]


def test_an_oversized_event_is_refused_when_encoded() -> None:
    with pytest.raises(LocalProtocolError, match="above 100"):
        encode_event(Packet(KEY, 1, b"x" * 200, None, PacketKind.DATA), 100)


def raw(*values: object) -> bytes:
    return bytes(cbor2.dumps(list(values)))


MALFORMED_REQUESTS = {
    "not CBOR": b"\xff\xff",
    "truncated": raw(1, 0, 1, "x")[:-1],
    "trailing bytes": raw(1, 0, 1, "x") + b"\x00",
    "not an array": cbor2.dumps({"a": 1}),
    "empty array": raw(),
    "text type code": raw("hello", 0),
    "unknown type": raw(99, 0),
    "an event sent as a request": raw(72, KEY, 1, 2),
    "too few fields": raw(3, 0),
    "too many fields": raw(3, 0, KEY, 1),
    "negative rid": raw(3, -1, KEY),
    "bool as rid": raw(3, True, KEY),
    "short key": raw(3, 0, b"k"),
    "text key": raw(3, 0, "k" * 32),
    "huge uid": raw(4, 0, KEY, 2**64, b"", None, None, 0, None, None),
    "data too large": raw(4, 0, KEY, 1, b"x" * (64 * 1024 + 1), None, None, 0, None, None),
    "unknown kind": raw(4, 0, KEY, 1, b"", None, None, 7, None, None),
    "short signature": raw(4, 0, KEY, 1, b"", 1, None, 0, b"s", None),
    "atomic not bool": raw(2, 0, KEY, None, 1, None),
    "last_seen out of range": raw(2, 0, KEY, 2**63, False, None),
    "last_seen below -1": raw(2, 0, KEY, -2, False, None),
    "short descriptor": raw(2, 0, KEY, None, False, b"x"),
    "tagged value": cbor2.dumps([3, 0, cbor2.CBORTag(2, KEY)]),
    "bignum": cbor2.dumps([3, 2**70, KEY]),
    "long name": raw(1, 0, 1, "n" * 101),
    "frame over the limit": raw(4, 0, KEY, 1, b"x" * MAX_REQUEST_FRAME),
}


@pytest.mark.parametrize("frame", MALFORMED_REQUESTS.values(), ids=list(MALFORMED_REQUESTS))
def test_malformed_requests_are_refused(frame: bytes) -> None:
    with pytest.raises(ClientProtocolError):
        decode_request(frame)


MALFORMED_EVENTS = {
    "a request sent as an event": raw(1, 0, 1, "x"),
    "unknown type": raw(200, 1),
    "packet with bad kind": raw(67, KEY, 1, b"", None, 9),
    "epoch packet not an array": raw(69, KEY, 1, [b"x"], 2),
    "epoch packet short": raw(69, KEY, 1, [[1, b"x"]], 2),
    "open epochs not pairs": raw(65, KEY, True, None, None, [[1]]),
    "root not bool": raw(65, KEY, 1, None, None, []),
    "unknown publish error": raw(74, KEY, 1, 99, "x"),
    "unknown protocol error code": raw(77, None, 42, "x"),
    "description not a map": raw(75, 1, [1, 2]),
    "description with int keys": raw(75, 1, {1: 2}),
    "reason too long": raw(66, KEY, "r" * 1001),
    "missed numbers negative": raw(68, KEY, -1, 2),
    "publish window of nothing": raw(78, KEY, 0),
    "publish window past the largest": raw(78, KEY, 2**20 + 1),
    "publish window of a short key": raw(78, KEY[:5], 8),
}


@pytest.mark.parametrize("frame", MALFORMED_EVENTS.values(), ids=list(MALFORMED_EVENTS))
def test_malformed_events_are_refused(frame: bytes) -> None:
    with pytest.raises(ClientProtocolError):
        decode_event(frame)


def test_errors_name_the_problem() -> None:
    with pytest.raises(ClientProtocolError, match=r"Publish\.uid: .* is outside"):
        decode_request(raw(4, 0, KEY, -5, b"", None, None, 0, None, None))
    with pytest.raises(ClientProtocolError, match="Unsubscribe needs 2 fields, got 1"):
        decode_request(raw(3, 0))


@given(st.binary(max_size=512))
def test_decoding_garbage_raises_only_the_protocol_error(data: bytes) -> None:
    for decode in (decode_request, decode_event):
        with contextlib.suppress(ClientProtocolError):
            decode(data)


cbor_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.binary(max_size=40)
    | st.text(max_size=20)
    | st.floats(),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(st.integers(min_value=0, max_value=80), st.lists(cbor_values, max_size=10))
def test_decoding_wrong_shaped_arrays_raises_only_the_protocol_error(
    code: int, fields: list[object]
) -> None:
    frame = cbor2.dumps([code, *fields])
    for decode in (decode_request, decode_event):
        with contextlib.suppress(ClientProtocolError):
            decode(frame)


def test_last_seen_minus_one_asks_from_the_first_packet() -> None:
    """-1 is "nothing seen yet": the node sends everything from packet 0 (core semantics)."""
    request = Subscribe(5, KEY, -1)
    assert decode_request(body(encode_request(request))) == request


# A Packet event's fields, and values on and around each one's bounds or of the wrong type.
_VALID_PACKET = (KEY, 7, b"data", None, int(PacketKind.DATA))
_NUMBERS = [-1, 0, 1, MAX_PACKET, MAX_PACKET + 1, True, 1.0, None, b"1"]
_PACKET_FIELD_VALUES = [
    [KEY, KEY[:-1], KEY + b"x", "k" * len(KEY), None],
    _NUMBERS,
    [b"", b"x", b"y" * MAX_PAYLOAD, b"z" * (MAX_PAYLOAD + 1), "x", None],
    _NUMBERS,
    [*(int(kind) for kind in PacketKind), -1, 9, 255, 256, True, None],
]
_ONE_FIELD_CHANGED = [
    (*_VALID_PACKET[:i], value, *_VALID_PACKET[i + 1 :])
    for i, values in enumerate(_PACKET_FIELD_VALUES)
    for value in values
]


@pytest.mark.parametrize(
    "fields",
    [*_ONE_FIELD_CHANGED, _VALID_PACKET[:4], (*_VALID_PACKET, None)],
    ids=lambda fields: repr(fields)[:60],
)
def test_a_packet_event_decodes_alike_on_its_fast_path_and_field_by_field(
    fields: tuple[object, ...],
) -> None:
    """A subscriber's node sends Packet events; the decoder tests a plainly valid one in one
    expression and checks any other field by field: both ways must accept the same frames
    and give the same event (or refuse it)."""
    try:
        _arity("Packet", list(fields), 5)
        checked: object = _packet(_key(fields[0], "Packet.key"), list(fields[1:]), "Packet")
    except ClientProtocolError:
        checked = None
    fast = _plain_packet(list(fields))
    assert fast == checked
    if fast is not None:
        assert type(fast.kind) is PacketKind
    frame = cbor2.dumps([67, *fields])
    if checked is None:
        with pytest.raises(ClientProtocolError):
            decode_event(frame)
    else:
        assert decode_event(frame) == checked
