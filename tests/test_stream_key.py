"""Tests for keyspace.stream_key: keys, addresses, parsing, and packet signatures."""

from __future__ import annotations

import base64
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from keyspace.ed25519 import is_small_order
from keyspace.location import key_location
from keyspace.stream_key import (
    SIGNING_DOMAIN,
    StreamAddressError,
    StreamKey,
    descriptor_matches,
    key_is_signed,
    sign_packet,
    signing_payload,
    verify_packet,
)

# A fixed key pair so that failures reproduce; Ed25519 accepts any 32-byte seed.
PRIVATE = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = PRIVATE.public_key().public_bytes_raw()
OTHER_PUBLIC = (
    Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))).public_key().public_bytes_raw()
)


def _valid_name(name: str) -> bool:
    return not any(c.isspace() for c in name) and 0 < len(name.encode("utf-8")) <= 200


names = st.text(
    alphabet=st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=60,
).filter(_valid_name)
# Small-order points are refused as keys (tests/test_ed25519.py); any other 32 bytes name one.
public_keys = st.binary(min_size=32, max_size=32).filter(lambda b: not is_small_order(b))


def _tagged(digest: bytes, signed: bool) -> bytes:
    return digest[:-1] + bytes(((digest[-1] & 0xFE) | signed,))


def test_open_key_is_sha256_of_the_name() -> None:
    k = StreamKey.open("weather/zurich")
    assert k.key == _tagged(hashlib.sha256(b"weather/zurich").digest(), False)
    assert not key_is_signed(k.key)
    assert not k.is_signed
    assert k.public_key is None
    assert k.location == key_location(k.key)


def test_signed_key_is_sha256_of_public_key_then_name() -> None:
    k = StreamKey.signed(PUBLIC, "prices")
    assert k.key == _tagged(hashlib.sha256(PUBLIC + b"prices").digest(), True)
    assert k.is_signed
    assert key_is_signed(k.key)
    assert k.public_key == PUBLIC
    assert len(k.key) == 32


def test_an_open_name_spelling_a_signed_preimage_is_another_key() -> None:
    # Domain separation: the same hash input as a signed stream, but the kind bit differs.
    name = "x" * 32 + "prices"
    assert StreamKey.open(name).key[:-1] == StreamKey.signed(b"x" * 32, "prices").key[:-1]
    assert StreamKey.open(name).key != StreamKey.signed(b"x" * 32, "prices").key


def test_descriptor_round_trips_and_is_checked_against_the_key() -> None:
    k = StreamKey.signed(PUBLIC, "prices/€")
    assert k.descriptor is not None
    assert StreamKey.from_descriptor(k.descriptor) == k
    assert descriptor_matches(k.key, k.descriptor) == k
    other = StreamKey.signed(OTHER_PUBLIC, "prices/€")
    assert other.descriptor is not None
    assert descriptor_matches(k.key, other.descriptor) is None
    assert StreamKey.open("prices").descriptor is None


@pytest.mark.parametrize(
    "descriptor", [b"", PUBLIC, PUBLIC + b"\xff\xfe", PUBLIC + b" padded ", PUBLIC[:5] + b"x"]
)
def test_malformed_descriptors_never_match(descriptor: bytes) -> None:
    assert descriptor_matches(StreamKey.signed(PUBLIC, "p").key, descriptor) is None
    with pytest.raises(StreamAddressError):
        StreamKey.from_descriptor(descriptor)


def test_open_and_signed_streams_of_the_same_name_differ() -> None:
    assert StreamKey.open("x").key != StreamKey.signed(PUBLIC, "x").key
    assert StreamKey.signed(PUBLIC, "x").key != StreamKey.signed(OTHER_PUBLIC, "x").key


def test_addresses() -> None:
    assert StreamKey.open("news").address == "ovl:open/news"
    signed = StreamKey.signed(PUBLIC, "a/b")
    key_part = base64.b32encode(PUBLIC).decode().rstrip("=").lower()
    assert len(key_part) == 52
    assert signed.address == f"ovl:{key_part}/a/b"
    assert str(signed) == signed.address


@given(names)
def test_open_round_trip(name: str) -> None:
    k = StreamKey.open(name)
    assert StreamKey.parse(k.address) == k
    assert StreamKey.parse(str(k)) == k


@given(public_keys, names)
def test_signed_round_trip(public_key: bytes, name: str) -> None:
    k = StreamKey.signed(public_key, name)
    parsed = StreamKey.parse(k.address)
    assert parsed == k
    assert parsed.key == k.key
    assert hash(parsed) == hash(k)


@given(public_keys, names)
def test_parse_is_case_insensitive_in_prefix_and_key_but_not_name(
    public_key: bytes, name: str
) -> None:
    k = StreamKey.signed(public_key, name)
    shouted = "OVL:" + k.address[len("ovl:") :].split("/", 1)[0].upper() + "/" + name
    assert StreamKey.parse(shouted) == k


def test_parse_open_marker_any_case_and_name_verbatim() -> None:
    assert StreamKey.parse("OVL:Open/MixedCase") == StreamKey.open("MixedCase")
    assert StreamKey.parse("ovl:open/MixedCase") != StreamKey.open("mixedcase")


def test_parse_bare_name_means_open_stream() -> None:
    assert StreamKey.parse("temperature") == StreamKey.open("temperature")
    assert StreamKey.parse("a/b/c") == StreamKey.open("a/b/c")
    assert StreamKey.parse("über-straße") == StreamKey.open("über-straße")


def test_name_is_everything_after_the_first_slash() -> None:
    k = StreamKey.parse("ovl:open/a/b//c/")
    assert k.name == "a/b//c/"
    signed = StreamKey.signed(PUBLIC, "x/y")
    assert StreamKey.parse(signed.address).name == "x/y"


GOOD_KEY_PART = base64.b32encode(PUBLIC).decode().rstrip("=").lower()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "empty"),
        ("ovl:", "no '/'"),
        ("ovl:open", "no '/'"),
        ("ovl:open/", "empty name"),
        (f"ovl:{GOOD_KEY_PART}/", "empty name"),
        ("ovl:/name", "0 characters"),
        ("ovl:abc/name", "3 characters"),
        (f"ovl:{GOOD_KEY_PART}a/name", "53 characters"),
        (f"ovl:{GOOD_KEY_PART[:-1]}1/name", "not base32"),
        (f"ovl:{GOOD_KEY_PART[:-1]}8/name", "not base32"),
        (f"ovl:{GOOD_KEY_PART[:-1]}=/name", "not base32"),
        ("ovl:open/bad\x00name", "control character"),
        ("ovl:open/tab\there", "control character"),
        ("ovl:open/ leading", "whitespace"),
        ("ovl:open/trailing ", "whitespace"),
        (" bare", "whitespace"),
        ("bare\n", "control character"),
        ("ovl:open/" + "x" * 201, "201 UTF-8 bytes"),
        ("ovl:open/" + "é" * 101, "202 UTF-8 bytes"),
        ("ovl:open/\ud800", "not valid Unicode"),
        ("my stream", "contains whitespace \\(U\\+0020\\)"),
        ("ovl:open/a\u00a0b", "contains whitespace \\(U\\+00A0\\)"),
        ("ovl:open/a\u3000b", "contains whitespace"),
        ("http://example/x", "looks like a URL or another system's address \\('http:'\\)"),
        ("kafka:prices", "looks like a URL"),
    ],
)
def test_parse_rejects_garbage(text: str, complaint: str) -> None:
    with pytest.raises(StreamAddressError, match=complaint):
        StreamKey.parse(text)


def test_a_name_that_looks_like_a_url_is_a_name_inside_an_address() -> None:
    assert StreamKey.parse("ovl:open/http://example/x").name == "http://example/x"
    assert StreamKey.parse("a/b:c").name == "a/b:c"  # the ':' follows the first '/'


def test_parse_errors_show_the_expected_forms() -> None:
    for text in ("", "ovl:nope", "ovl:zz/name"):
        with pytest.raises(StreamAddressError, match="expected 'ovl:open/<name>'"):
            StreamKey.parse(text)


def test_parse_rejects_non_canonical_base32() -> None:
    # The last of the 52 characters carries 4 padding bits; a spelling with them set decodes
    # to the same public key and would give one stream two addresses.
    last = GOOD_KEY_PART[-1]
    alphabet = "abcdefghijklmnopqrstuvwxyz234567"
    stray = alphabet[alphabet.index(last) | 1]
    assert stray != last
    with pytest.raises(StreamAddressError, match="canonical"):
        StreamKey.parse(f"ovl:{GOOD_KEY_PART[:-1]}{stray}/name")


@pytest.mark.parametrize("value", [None, b"ovl:open/x", 42, ["ovl:open/x"]])
def test_parse_rejects_non_str(value: object) -> None:
    with pytest.raises(StreamAddressError, match="must be a str"):
        StreamKey.parse(value)  # type: ignore[arg-type]


def test_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        StreamKey.parse("")


def test_name_length_limit_is_in_utf8_bytes() -> None:
    assert StreamKey.open("x" * 200).name == "x" * 200
    assert StreamKey.open("é" * 100).name == "é" * 100
    with pytest.raises(StreamAddressError):
        StreamKey.open("é" * 100 + "x")


@pytest.mark.parametrize("bad", [b"", b"\x00" * 31, b"\x00" * 33, "a" * 32, None])
def test_signed_rejects_bad_public_keys(bad: object) -> None:
    with pytest.raises(StreamAddressError, match="public key"):
        StreamKey.signed(bad, "name")  # type: ignore[arg-type]


def test_constructor_validates_too() -> None:
    with pytest.raises(StreamAddressError):
        StreamKey("")
    with pytest.raises(StreamAddressError):
        StreamKey("ok", b"short")
    with pytest.raises(StreamAddressError, match="must be a str"):
        StreamKey(b"name")  # type: ignore[arg-type]


def test_bytearray_public_key_is_normalised() -> None:
    k = StreamKey.signed(bytearray(PUBLIC), "n")  # type: ignore[arg-type]
    assert type(k.public_key) is bytes
    assert k == StreamKey.signed(PUBLIC, "n")


def test_stream_keys_are_frozen_and_hashable() -> None:
    k = StreamKey.open("x")
    with pytest.raises(AttributeError):
        k.name = "y"  # type: ignore[misc]
    assert {k, StreamKey.open("x")} == {k}


# --- packet signatures -------------------------------------------------------------------

STREAM = StreamKey.signed(PUBLIC, "ticks")


def test_signing_payload_layout() -> None:
    key = STREAM.key
    payload = signing_payload(key, 5, None, 2, b"data")
    assert payload == SIGNING_DOMAIN + key + (5).to_bytes(8, "big") + b"\x00" + b"\x02" + b"data"
    with_epoch = signing_payload(key, 5, 7, 2, b"data")
    assert with_epoch == (
        SIGNING_DOMAIN
        + key
        + (5).to_bytes(8, "big")
        + b"\x01"
        + (7).to_bytes(8, "big")
        + b"\x02"
        + b"data"
    )
    assert payload.startswith(b"ovl-packet-v1\x00")


def test_signing_payload_distinguishes_no_epoch_from_epoch_zero() -> None:
    key = STREAM.key
    assert signing_payload(key, 1, None, 0, b"") != signing_payload(key, 1, 0, 0, b"")


fields = st.tuples(
    st.integers(0, 2**64 - 1),
    st.none() | st.integers(0, 2**64 - 1),
    st.integers(0, 255),
    st.binary(max_size=40),
)


@given(fields, fields)
def test_signing_payload_is_injective(
    a: tuple[int, int | None, int, bytes], b: tuple[int, int | None, int, bytes]
) -> None:
    key = STREAM.key
    if a != b:
        assert signing_payload(key, *a) != signing_payload(key, *b)


@pytest.mark.parametrize(
    ("key", "packet", "epoch", "kind"),
    [
        (b"\x00" * 31, 0, None, 0),
        (b"\x00" * 32, -1, None, 0),
        (b"\x00" * 32, 2**64, None, 0),
        (b"\x00" * 32, 0, -1, 0),
        (b"\x00" * 32, 0, 2**64, 0),
        (b"\x00" * 32, 0, None, 256),
        (b"\x00" * 32, 0, None, -1),
    ],
)
def test_signing_payload_rejects_out_of_range_fields(
    key: bytes, packet: int, epoch: int | None, kind: int
) -> None:
    with pytest.raises(ValueError):
        signing_payload(key, packet, epoch, kind, b"")


def test_sign_and_verify() -> None:
    sig = sign_packet(PRIVATE, STREAM.key, 3, 1, 0, b"payload")
    assert len(sig) == 64
    assert verify_packet(PUBLIC, sig, STREAM.key, 3, 1, 0, b"payload")
    # Deterministic: a resent packet carries the same signature.
    assert sig == sign_packet(PRIVATE, STREAM.key, 3, 1, 0, b"payload")


@pytest.mark.parametrize(
    "tampered",
    [
        {"key": StreamKey.signed(PUBLIC, "other").key},
        {"packet": 4},
        {"epoch": None},
        {"epoch": 2},
        {"kind": 1},
        {"data": b"payloaD"},
        {"data": b"payload\x00"},
        {"data": b""},
    ],
)
def test_verify_fails_on_any_tampered_field(tampered: dict[str, object]) -> None:
    original: dict[str, object] = {
        "key": STREAM.key,
        "packet": 3,
        "epoch": 1,
        "kind": 0,
        "data": b"payload",
    }
    sig = sign_packet(PRIVATE, **original)  # type: ignore[arg-type]
    assert verify_packet(PUBLIC, sig, **original)  # type: ignore[arg-type]
    assert not verify_packet(PUBLIC, sig, **{**original, **tampered})  # type: ignore[arg-type]


def test_verify_fails_for_another_publisher() -> None:
    sig = sign_packet(PRIVATE, STREAM.key, 0, None, 0, b"x")
    assert not verify_packet(OTHER_PUBLIC, sig, STREAM.key, 0, None, 0, b"x")


@pytest.mark.parametrize(
    ("public_key", "signature"),
    [
        (PUBLIC, b""),
        (PUBLIC, b"\x00" * 63),
        (PUBLIC, b"\x00" * 64),
        (PUBLIC, b"\xff" * 64),
        (PUBLIC, b"\x00" * 65),
        (b"", None),
        (b"\x00" * 31, None),
        (b"\xff" * 32, None),
        ("not bytes", None),
    ],
)
def test_verify_never_raises_on_garbage(public_key: bytes, signature: bytes | None) -> None:
    if signature is None:
        signature = sign_packet(PRIVATE, STREAM.key, 0, None, 0, b"x")
    assert not verify_packet(public_key, signature, STREAM.key, 0, None, 0, b"x")


def test_verify_returns_false_for_out_of_range_fields() -> None:
    sig = sign_packet(PRIVATE, STREAM.key, 0, None, 0, b"x")
    assert not verify_packet(PUBLIC, sig, STREAM.key, -1, None, 0, b"x")
    assert not verify_packet(PUBLIC, sig, STREAM.key, 0, None, 999, b"x")
    assert not verify_packet(PUBLIC, sig, b"short", 0, None, 0, b"x")
