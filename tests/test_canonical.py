"""The canonical check in C (``overlay/_canonical.c``): it only ever accepts what encoding
again would give back, it accepts every frame the encoder makes, and ``decode`` decides every
frame alike with it and without it."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

import cbor2
import pytest
from codec_values import SMALLEST_VALUE, build, messages_of, sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from overlay import codec
from overlay.codec import DecodeError, decode, encode
from overlay.messages import MESSAGE_TYPES, Message

canonical = pytest.importorskip("overlay._canonical", reason="installed without a C compiler")
is_canonical: Callable[[bytes], bool] = canonical.is_canonical


def gives_back(frame: bytes) -> bool:
    """What the codec's own path asks: encoding the frame's value again gives the frame."""
    try:
        value = cbor2.loads(frame)
    except Exception:
        return False
    try:
        return bool(cbor2.dumps(value) == frame)
    except Exception:
        return False


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=lambda cls: cls.__name__)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_frame_the_encoder_makes_is_accepted(cls: type[Message], data: st.DataObject) -> None:
    frame = encode(data.draw(messages_of(cls), label=cls.__name__))
    assert is_canonical(frame)


# Values of the forms the check knows, nested: what cbor2 writes for them is canonical.
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64 - 1)
    | st.binary(max_size=300)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=30),
    max_leaves=60,
)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES)
def test_what_cbor2_writes_of_the_known_forms_is_accepted(value: object) -> None:
    assert is_canonical(cbor2.dumps(value))


@settings(max_examples=1000, deadline=None)
@given(frame=st.binary(max_size=64))
def test_any_bytes_it_accepts_encode_back_to_themselves(frame: bytes) -> None:
    if is_canonical(frame):
        assert gives_back(frame)


def test_mutations_of_real_frames_it_accepts_encode_back_to_themselves() -> None:
    """Every byte of encoded messages changed at random, cut short or extended: wherever the
    check says yes, encoding again gives the mutated frame back, and the codec's decision
    with the check is its decision without it."""
    rng = random.Random(7)
    frames = [encode(sample(cls)) for cls in MESSAGE_TYPES]
    frames += [encode(build(cls, SMALLEST_VALUE)) for cls in MESSAGE_TYPES]
    tried = accepted = 0
    for frame in frames:
        for _ in range(100):
            mutated = bytearray(frame)
            what = rng.randrange(4)
            if what == 0 and mutated:
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            elif what == 1 and mutated:
                del mutated[rng.randrange(len(mutated)) :]
            elif what == 2:
                mutated.insert(rng.randrange(len(mutated) + 1), rng.randrange(256))
            else:
                mutated += bytes([rng.randrange(256)])
            candidate = bytes(mutated)
            tried += 1
            if is_canonical(candidate):
                accepted += 1
                assert gives_back(candidate), candidate.hex()
            assert decided(candidate, with_check=True) == decided(candidate, with_check=False)
    assert tried > 1000 and accepted > 0


def decided(frame: bytes, *, with_check: bool) -> object:
    """What ``decode`` makes of ``frame``: the message, or its error's text."""
    kept = codec._is_canonical
    codec._is_canonical = canonical.is_canonical if with_check else None
    try:
        return decode(frame)
    except DecodeError as error:
        return str(error)
    finally:
        codec._is_canonical = kept


def head(major: int, argument: int, size: int) -> bytes:
    """An item header of ``major`` with ``argument`` written in ``size`` bytes (0: in the
    initial byte)."""
    if size == 0:
        return bytes([major << 5 | argument])
    code = {1: 24, 2: 25, 4: 26, 8: 27}[size]
    return bytes([major << 5 | code]) + argument.to_bytes(size, "big")


@pytest.mark.parametrize(
    "frame",
    [
        head(0, 5, 1),  # an int that fits in the initial byte, in one more
        head(0, 200, 2),
        head(0, 60000, 4),
        head(1, 2**32 - 1, 8),  # a negative int, in twice the bytes it needs
        head(2, 3, 1) + b"abc",  # a byte string's length, in one byte more
        head(4, 1, 2) + b"\x00",  # an array's length, likewise
        b"\x9f\x00\xff",  # an indefinite-length array
        b"\x5f\x41a\xff",  # an indefinite-length byte string
        b"\xc2\x41\x01",  # a tag (a bignum)
        b"\x63abc",  # a text string
        b"\xa1\x00\x00",  # a map
        b"\xf9\x3c\x00",  # a half-precision float
        b"\xfa\x3f\x80\x00\x00",  # a single-precision float
        b"\xfb" + struct.pack(">d", float("nan")),
        b"\xfb" + struct.pack(">d", float("-inf")),
        bytes.fromhex("fb7ff0000000000000"),  # +inf
        bytes.fromhex("fb7ff0000000000001"),  # a NaN whose payload is only in its last bit
        bytes.fromhex("fbfff8000000000000"),  # a negative NaN
        bytes.fromhex("fb7fffffffffffffff"),
        head(2, 2**64 - 1, 8),  # byte strings longer than any frame, or than a signed size
        head(2, 2**63, 8),
        b"\x82" + head(2, 2**63, 8) + b"\x00",
        head(4, 2**32, 8),  # arrays of more items than any frame holds
        head(4, 2**64 - 1, 8),
        b"\xf7",  # undefined
        b"\xf8\x20",  # a simple value in two bytes
        b"\x1c",  # a reserved length
        b"\x82\x00",  # an array short of an item
        b"\x42a",  # a byte string short of a byte
        b"\x00\x00",  # a byte after the item
        b"",
        b"\x81" * 40 + b"\x00",  # nested deeper than the check follows
        b"\x81" * 33 + b"\x00",  # one level deeper than it follows
    ],
)
def test_what_it_does_not_accept(frame: bytes) -> None:
    assert not is_canonical(frame)


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00",
        b"\x17",
        head(0, 24, 1),
        head(0, 255, 1),
        head(0, 256, 2),
        head(0, 2**32, 8),
        head(1, 2**64 - 1, 8),
        b"\x40",
        head(2, 24, 1) + bytes(24),
        b"\x80",
        b"\x83\xf4\xf5\xf6",
        b"\xfb" + struct.pack(">d", -0.0),
        b"\xfb" + struct.pack(">d", 0.1),
        b"\x81" * 31 + b"\x00",  # nested as deep as the check follows
    ],
)
def test_what_it_accepts_is_what_cbor2_writes(frame: bytes) -> None:
    assert is_canonical(frame)
    assert gives_back(frame)


def test_it_reads_any_buffer() -> None:
    assert is_canonical(bytearray(b"\x80")) and is_canonical(memoryview(b"\x80"))
    with pytest.raises(TypeError):
        is_canonical("\x80")  # type: ignore[arg-type]


def test_decode_uses_it() -> None:
    assert codec._is_canonical is (None if codec.PURE_PYTHON_FORCED else is_canonical)
