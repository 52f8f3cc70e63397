"""Fuzzing the decoder: random and mutated frames only ever give a Message or DecodeError.

Seeded, so a failure replays; the value tables come from ``codec_values``.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import cbor2
import pytest
from codec_values import (
    KIND_STRATEGIES,
    LARGEST_VALUE,
    MAX_COUNT,
    RUN_ITEM_KINDS,
    SMALLEST_VALUE,
    messages_of,
    wire_fields,
    wire_value,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.codec import DecodeError, EncodeError, decode, encode
from overlay.messages import (
    BUNDLED,
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_PACKET,
    MAX_U64,
    MAX_WIRE_HTL,
    MESSAGE_TYPES,
    SIGNATURE_SIZE,
    VOUCH_SIZE,
    Kind,
    Message,
    PacketKind,
    field_kinds,
)


def decode_contract(frame: bytes) -> Message | None:
    """Decode ``frame`` and check the contract: a message our encoder accepts, or DecodeError.

    Returns the message, or None when the frame was rejected.
    """
    try:
        message = decode(frame)
    except DecodeError as exc:
        assert str(exc), f"DecodeError without a message for {frame.hex()}"
        return None
    except Exception as exc:
        pytest.fail(f"decode({frame[:200].hex()}) raised {type(exc).__name__}: {exc}")
    assert type(message) in MESSAGE_TYPES, frame.hex()
    try:
        again = encode(message)
    except EncodeError as exc:
        pytest.fail(f"decode({frame[:200].hex()}) returned {message!r} that encode refuses: {exc}")
    assert decode(again) == message
    return message


def random_value(kind: Kind, rng: random.Random) -> object:
    """A valid value of ``kind``, biased toward edges, for building frames to mutate."""
    pick = rng.random()
    if pick < 0.2:
        return SMALLEST_VALUE[kind]
    if pick < 0.3 and kind not in (Kind.DATA, Kind.RUN):
        return LARGEST_VALUE[kind]
    match kind:
        case Kind.UID | Kind.BOOT_ID:
            return rng.randrange(MAX_U64 + 1) >> rng.randrange(64)
        case Kind.KEY:
            return rng.randbytes(KEY_SIZE)
        case Kind.DIGEST:
            return rng.randbytes(DIGEST_SIZE)
        case Kind.HTL:
            return rng.randrange(MAX_WIRE_HTL + 1)
        case Kind.LOCATION:
            return rng.random()
        case Kind.PACKET | Kind.OPT_PACKET:
            return rng.randrange(MAX_PACKET + 1) >> rng.randrange(63)
        case Kind.DATA:
            return rng.randbytes(rng.choice((0, 1, 23, 24, 255, 256, rng.randrange(600))))
        case Kind.OPT_SIGNATURE:
            return rng.randbytes(SIGNATURE_SIZE)
        case Kind.PACKET_KIND:
            return rng.choice(list(PacketKind))
        case Kind.COUNT:
            return rng.randrange(MAX_COUNT + 1)
        case Kind.LOCATIONS:
            return tuple(rng.random() for _ in range(rng.choice((0, 1, 16, 40))))
        case Kind.VOUCHES:
            return tuple(rng.choice((b"", rng.randbytes(VOUCH_SIZE))) for _ in range(3))
        case Kind.OPT_DESCRIPTOR:
            return rng.randbytes(rng.randrange(33, 233))
        case Kind.EPOCH_STARTS:
            return tuple((rng.randrange(2**40), rng.randrange(2**40)) for _ in range(3))
        case Kind.OPT_UID:
            return rng.choice((None, rng.getrandbits(64)))
        case Kind.OPT_LOCATION:
            return rng.choice((None, rng.random()))
        case Kind.OPT_SEEN:
            return rng.choice((None, -1, rng.randrange(MAX_PACKET + 1) >> rng.randrange(63)))
        case Kind.FLAG:
            return rng.random() < 0.5
        case Kind.RUN:
            return tuple(
                tuple(random_value(kind, rng) for kind in RUN_ITEM_KINDS)
                for _ in range(rng.randrange(1, 4))
            )
        case Kind.BUNDLE:
            cls = rng.choice(BUNDLED)
            key = rng.randbytes(KEY_SIZE)
            return tuple(
                dataclasses.replace(random_message(cls, rng), key=key)
                for _ in range(rng.randrange(2, 4))
            )
    raise AssertionError(f"no random values for {kind!r}")


def random_message(cls: type[Message], rng: random.Random) -> Message:
    """A valid ``cls``: random fields of their kinds, drawn again until consistent."""
    while True:
        message = cls(**{name: random_value(kind, rng) for name, kind in field_kinds(cls)})
        if message.inconsistency() is None:
            return message


# Initial bytes that make CBOR parsers branch: headers of every major type with every kind of
# length, tags, simple values and float widths.
_INTERESTING = bytes.fromhex(
    "00 17 18 1b 1c 1f 20 3b 40 58 5a 5b 5f 60 7f 80 81 98 9b 9f"
    "a0 a1 bf c0 c1 c2 c3 c4 d8 d9 db f4 f5 f6 f7 f8 f9 fa fb ff"
)


def flip_bits(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    out = bytearray(frame)
    for _flip in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    return frame[: rng.randrange(len(frame) + 1)]


def splice(frame: bytes, rng: random.Random, corpus: list[bytes]) -> bytes:
    other = rng.choice(corpus)
    return frame[: rng.randrange(len(frame) + 1)] + other[rng.randrange(len(other) + 1) :]


def insert_bytes(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    at = rng.randrange(len(frame) + 1)
    return frame[:at] + rng.randbytes(rng.randint(1, 8)) + frame[at:]


def delete_bytes(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    at = rng.randrange(len(frame) + 1)
    return frame[:at] + frame[at + rng.randint(1, 8) :]


def replace_with_interesting(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    if not frame:
        return frame
    at = rng.randrange(len(frame))
    return frame[:at] + bytes([rng.choice(_INTERESTING)]) + frame[at + 1 :]


def change_length_header(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    """Give a byte/text/array/map header another length or length width (or indefinite)."""
    headers = [i for i, b in enumerate(frame) if b >> 5 in (2, 3, 4, 5)]
    if not headers:
        return frame
    at = rng.choice(headers)
    info = rng.choice((rng.randrange(24), 24, 25, 26, 27, 28, 31))
    return frame[:at] + bytes([(frame[at] & 0xE0) | info]) + frame[at + 1 :]


def duplicate_region(frame: bytes, rng: random.Random, _: list[bytes]) -> bytes:
    start = rng.randrange(len(frame) + 1)
    end = min(len(frame), start + rng.randint(1, 16))
    return frame[:end] + frame[start:end] + frame[end:]


MUTATORS: list[Callable[[bytes, random.Random, list[bytes]], bytes]] = [
    flip_bits,
    truncate,
    splice,
    insert_bytes,
    delete_bytes,
    replace_with_interesting,
    change_length_header,
    duplicate_region,
]


def test_fuzz_random_bytes() -> None:
    rng = random.Random(0x5EED)
    accepted = rejected = 0
    for _ in range(20_000):
        body = rng.randbytes(rng.choice((rng.randrange(8), rng.randrange(64), rng.randrange(300))))
        if rng.random() < 0.5:
            # Start like a message (array header, small code) to get past the first checks.
            body = bytes([0x80 + rng.randint(1, 10), rng.randrange(20)]) + body
        if decode_contract(body) is None:
            rejected += 1
        else:
            accepted += 1
    # Random bytes are almost never a message in canonical encoding; the mutation test below
    # is the one that exercises acceptance. Here every frame must take the rejection path
    # without any other exception (decode_contract fails the test on one).
    assert rejected + accepted == 20_000
    assert rejected > 19_000


def test_fuzz_mutated_valid_frames() -> None:
    rng = random.Random(0xC0DEC)
    corpus = [encode(random_message(cls, rng)) for cls in MESSAGE_TYPES for _ in range(8)]
    accepted: set[type[Message]] = set()
    rejected = 0
    for cls in MESSAGE_TYPES:
        for mutate in MUTATORS:
            for _ in range(100):
                frame = encode(random_message(cls, rng))
                for _ in range(rng.choice((1, 1, 2, 3))):
                    frame = mutate(frame, rng, corpus)
                    if rng.random() < 0.3:
                        frame = rng.choice(MUTATORS)(frame, rng, corpus)
                decoded = decode_contract(frame)
                if decoded is None:
                    rejected += 1
                else:
                    accepted.add(type(decoded))
    assert rejected > 5_000
    # Mutations that keep a frame valid (a flipped data bit) happen for every type.
    assert accepted == set(MESSAGE_TYPES)


@settings(max_examples=1_000, deadline=None)
@given(frame=st.binary(max_size=400))
def test_fuzz_hypothesis_binary(frame: bytes) -> None:
    decode_contract(frame)


CBOR_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.binary(max_size=70)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.integers(0, 3) | st.text(max_size=2), children, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(code=st.integers(-1, len(MESSAGE_TYPES) + 2), fields=st.lists(CBOR_VALUES, max_size=9))
def test_fuzz_hypothesis_arrays_of_arbitrary_values(code: int, fields: list[object]) -> None:
    decode_contract(cbor2.dumps([code, *fields]))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fuzz_hypothesis_one_field_replaced(data: st.DataObject) -> None:
    """A valid frame with one field swapped for an arbitrary CBOR value: the field checks."""
    cls = data.draw(st.sampled_from(MESSAGE_TYPES))
    values = wire_fields(data.draw(messages_of(cls)))
    index = data.draw(st.integers(1, len(values) - 1))
    kind = field_kinds(cls)[index - 1][1]
    values[index] = wire_value(kind, data.draw(CBOR_VALUES | KIND_STRATEGIES[kind]))
    decoded = decode_contract(cbor2.dumps(values))
    if decoded is not None:
        assert type(decoded) is cls
