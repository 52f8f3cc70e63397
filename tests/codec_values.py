"""Values of every wire field kind for the codec tests: hypothesis strategies of valid ones,
the largest and smallest, valid messages of a type built from them, a message's CBOR array
as a plain list (for frames built by hand), and the DecodeError a frame gets; a sample
valid message of each type, and its frame with one field replaced."""

from __future__ import annotations

import dataclasses
import math

import cbor2
import pytest
from hypothesis import strategies as st

from overlay.codec import DecodeError, decode
from overlay.messages import (
    BUNDLED,
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_BUNDLE,
    MAX_DESCRIPTOR,
    MAX_NEIGHBOURS,
    MAX_OPEN_EPOCHS,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    MAX_WIRE_HTL,
    SIGNATURE_SIZE,
    VOUCH_SIZE,
    Kind,
    Message,
    PacketKind,
    PublishNumbered,
    PublishSucceeded,
    SubscribeData,
    field_kinds,
)

MAX_COUNT = 2**32 - 1
LARGEST_LOCATION = math.nextafter(1.0, 0.0)  # 0.9999999999999999, the top of [0, 1)


KIND_STRATEGIES: dict[Kind, st.SearchStrategy[object]] = {
    Kind.UID: st.integers(0, MAX_U64),
    Kind.KEY: st.binary(min_size=KEY_SIZE, max_size=KEY_SIZE),
    Kind.DIGEST: st.binary(min_size=DIGEST_SIZE, max_size=DIGEST_SIZE),
    Kind.HTL: st.integers(0, MAX_WIRE_HTL),
    Kind.LOCATION: st.floats(
        min_value=0.0,
        max_value=1.0,
        exclude_max=True,
        allow_nan=False,
        allow_infinity=False,
    )
    | st.sampled_from([0.0, 5e-324, 0.5, LARGEST_LOCATION]),
    Kind.PACKET: st.integers(0, MAX_PACKET),
    Kind.OPT_PACKET: st.none() | st.integers(0, MAX_PACKET),
    Kind.OPT_SEEN: st.none() | st.integers(-1, MAX_PACKET),
    Kind.FLAG: st.booleans(),
    # Modest sizes keep the run fast; MAX_PAYLOAD itself has explicit tests in test_codec.
    Kind.DATA: st.binary(max_size=2000),
    Kind.OPT_SIGNATURE: st.none() | st.binary(min_size=SIGNATURE_SIZE, max_size=SIGNATURE_SIZE),
    Kind.PACKET_KIND: st.sampled_from(PacketKind),
    Kind.BOOT_ID: st.integers(0, MAX_U64),
    Kind.COUNT: st.integers(0, MAX_COUNT),
    Kind.OPT_DESCRIPTOR: st.none() | st.binary(min_size=33, max_size=MAX_DESCRIPTOR),
    Kind.EPOCH_STARTS: st.lists(
        st.tuples(st.integers(0, MAX_PACKET), st.integers(0, MAX_PACKET)), max_size=5
    ).map(tuple),
    Kind.OPT_UID: st.none() | st.integers(0, MAX_U64),
    Kind.OPT_LOCATION: st.none()
    | st.floats(
        min_value=0.0, max_value=1.0, exclude_max=True, allow_nan=False, allow_infinity=False
    ),
    Kind.LOCATIONS: st.lists(
        st.floats(0.0, 1.0, exclude_max=True, allow_nan=False, allow_infinity=False),
        max_size=20,
    ).map(tuple),
    Kind.VOUCHES: st.lists(
        st.sampled_from((b"", b"v" * VOUCH_SIZE))
        | st.binary(min_size=VOUCH_SIZE, max_size=VOUCH_SIZE),
        max_size=20,
    ).map(tuple),
}
# One packet of a run: SubscribeData's fields after its key and number.
RUN_ITEM_KINDS = tuple(kind for _, kind in field_kinds(SubscribeData))[2:]
KIND_STRATEGIES[Kind.RUN] = st.lists(
    st.tuples(*(KIND_STRATEGIES[kind] for kind in RUN_ITEM_KINDS)), min_size=1, max_size=4
).map(tuple)


LARGEST_VALUE: dict[Kind, object] = {
    Kind.UID: MAX_U64,
    Kind.KEY: b"\xff" * KEY_SIZE,
    Kind.DIGEST: b"\xff" * DIGEST_SIZE,
    Kind.HTL: MAX_WIRE_HTL,
    Kind.LOCATION: LARGEST_LOCATION,
    Kind.PACKET: MAX_PACKET,
    Kind.OPT_PACKET: MAX_PACKET,
    Kind.OPT_SEEN: MAX_PACKET,
    Kind.DATA: bytes(range(256)) * (MAX_PAYLOAD // 256),
    Kind.OPT_SIGNATURE: b"\xff" * SIGNATURE_SIZE,
    Kind.PACKET_KIND: PacketKind.EPOCH_ABORTED,
    Kind.BOOT_ID: MAX_U64,
    Kind.COUNT: MAX_COUNT,
    Kind.LOCATIONS: tuple(i / MAX_NEIGHBOURS for i in range(MAX_NEIGHBOURS)),
    Kind.VOUCHES: (b"v" * VOUCH_SIZE,) * MAX_NEIGHBOURS,
    Kind.OPT_DESCRIPTOR: b"\xff" * MAX_DESCRIPTOR,
    Kind.EPOCH_STARTS: tuple((MAX_PACKET, MAX_PACKET) for _ in range(MAX_OPEN_EPOCHS)),
    Kind.OPT_UID: MAX_U64,
    Kind.OPT_LOCATION: LARGEST_LOCATION,
    Kind.FLAG: True,
}
LARGEST_VALUE[Kind.RUN] = (tuple(LARGEST_VALUE[kind] for kind in RUN_ITEM_KINDS),)

SMALLEST_VALUE: dict[Kind, object] = {
    Kind.UID: 0,
    Kind.KEY: bytes(KEY_SIZE),
    Kind.DIGEST: bytes(DIGEST_SIZE),
    Kind.HTL: 0,
    Kind.LOCATION: 0.0,
    Kind.PACKET: 0,
    Kind.OPT_PACKET: None,
    Kind.OPT_SEEN: None,
    Kind.DATA: b"",
    Kind.OPT_SIGNATURE: None,
    Kind.PACKET_KIND: PacketKind.DATA,
    Kind.BOOT_ID: 0,
    Kind.COUNT: 0,
    Kind.LOCATIONS: (),
    Kind.VOUCHES: (),
    Kind.OPT_DESCRIPTOR: None,
    Kind.EPOCH_STARTS: (),
    Kind.OPT_UID: None,
    Kind.OPT_LOCATION: None,
    Kind.FLAG: False,
}
SMALLEST_VALUE[Kind.RUN] = (tuple(SMALLEST_VALUE[kind] for kind in RUN_ITEM_KINDS),)
# A bundle's largest is the most messages, of answers (of publishes, a frame holds fewer).
LARGEST_VALUE[Kind.BUNDLE] = tuple(
    PublishSucceeded(MAX_U64, b"\xff" * KEY_SIZE, MAX_PACKET) for _ in range(MAX_BUNDLE)
)
SMALLEST_VALUE[Kind.BUNDLE] = (PublishSucceeded(0, bytes(KEY_SIZE), 0),) * 2


def messages_of(cls: type[Message]) -> st.SearchStrategy[Message]:
    """Valid messages of ``cls``: each field of its kind, the fields consistent."""
    fields = {name: KIND_STRATEGIES[kind] for name, kind in field_kinds(cls)}
    return st.builds(cls, **fields).filter(lambda m: m.inconsistency() is None)


def _bundle_of(cls: type[Message]) -> st.SearchStrategy[object]:
    """2 to 3 valid messages of ``cls``, of one stream."""
    return st.tuples(
        KIND_STRATEGIES[Kind.KEY], st.lists(messages_of(cls), min_size=2, max_size=3)
    ).map(lambda drawn: tuple(dataclasses.replace(m, key=drawn[0]) for m in drawn[1]))


KIND_STRATEGIES[Kind.BUNDLE] = st.sampled_from(BUNDLED).flatmap(_bundle_of)


def wire_fields(message: Message) -> list[object]:
    """The CBOR array for ``message`` as a plain list, for building frames by hand."""
    values: list[object] = [message.TYPE]
    for name, kind in field_kinds(type(message)):
        values.append(wire_value(kind, getattr(message, name)))
    return values


def wire_value(kind: Kind, value: object) -> object:
    """``value`` of ``kind`` as a frame holds it: a packet kind as its int, a run's packets
    as one flat array (an array that is not of packets as it is)."""
    if isinstance(value, PacketKind):
        return int(value)
    packets = isinstance(value, tuple | list) and all(isinstance(p, tuple | list) for p in value)
    if kind is Kind.RUN and packets:
        return [wire_value(Kind.PACKET_KIND, f) for item in value for f in item]  # type: ignore[union-attr]
    messages = isinstance(value, tuple) and value and all(isinstance(m, Message) for m in value)
    if kind is Kind.BUNDLE and messages:
        first = wire_fields(value[0])  # type: ignore[index]
        flat = [first[0], first[2]]  # (the type code and the key, once)
        for each in value:  # type: ignore[union-attr]
            fields = wire_fields(each)
            flat += [fields[1], *fields[3:]]
        return flat
    return value


def decode_error(frame: bytes) -> str:
    with pytest.raises(DecodeError) as info:
        decode(frame)
    return str(info.value)


# A valid value of each kind, and a valid message of any type made of them.
SAMPLE_VALUE: dict[Kind, object] = {
    Kind.UID: 7,
    Kind.KEY: bytes(range(KEY_SIZE)),
    Kind.DIGEST: bytes(range(1, DIGEST_SIZE + 1)),
    Kind.HTL: 5,
    Kind.LOCATION: 0.25,
    Kind.PACKET: 3,
    Kind.OPT_PACKET: 11,
    Kind.OPT_SEEN: -1,
    Kind.DATA: b"payload",
    Kind.OPT_SIGNATURE: b"s" * SIGNATURE_SIZE,
    Kind.PACKET_KIND: PacketKind.EPOCH_CLOSED,
    Kind.BOOT_ID: 2**40,
    Kind.COUNT: 1,
    Kind.LOCATIONS: (0.25, 0.5),
    Kind.VOUCHES: (b"", b"v" * VOUCH_SIZE),
    Kind.OPT_DESCRIPTOR: b"d" * 40,
    Kind.EPOCH_STARTS: ((4, 10), (5, 12)),
    Kind.OPT_UID: 2**63 + 5,
    Kind.OPT_LOCATION: 0.75,
    Kind.FLAG: True,
    Kind.RUN: (
        (b"one", None, PacketKind.DATA, None, None, 9, None),
        (b"two", 4, PacketKind.EPOCH_CLOSED, b"s" * SIGNATURE_SIZE, 2, None, 3),
    ),
    Kind.BUNDLE: (
        PublishNumbered(7, bytes(range(KEY_SIZE)), 3),
        PublishNumbered(2**63 + 5, bytes(range(KEY_SIZE)), 4),
    ),
}


def build(cls: type[Message], values: dict[Kind, object]) -> Message:
    return cls(**{name: values[kind] for name, kind in field_kinds(cls)})


def sample(cls: type[Message], **changes: object) -> Message:
    """A valid ``cls``, with ``changes`` applied unchecked (dataclasses do not validate)."""
    return dataclasses.replace(build(cls, SAMPLE_VALUE), **changes)


def frame_with(cls: type[Message], name: str, raw: object) -> bytes:
    """A frame of ``cls`` whose field ``name`` is ``raw`` and every other field valid."""
    values = wire_fields(sample(cls))
    index = 1 + [n for n, _ in field_kinds(cls)].index(name)
    values[index] = wire_value(field_kinds(cls)[index - 1][1], raw)
    return bytes(cbor2.dumps(values))
