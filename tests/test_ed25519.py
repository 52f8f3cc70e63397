"""keyspace.ed25519: the small-order blocklist, checked against the curve's own arithmetic,
and the forgery it prevents in node identities and signed streams alike."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from keyspace.ed25519 import (
    KEY_TEXT_LENGTH,
    SMALL_ORDER_Y,
    KeyTextError,
    is_small_order,
    key_text,
    parse_key_text,
    verify,
)
from keyspace.stream_key import StreamAddressError, StreamKey, sign_packet, verify_packet
from overlay.runtime.identity import Identity

ALICE = Identity.from_private_bytes(bytes(range(32)))
BOB = Identity.from_private_bytes(bytes(range(1, 33)))

# -- the blocklist -----------------------------------------------------------------------------

P = 2**255 - 19
D = (-121665 * pow(121666, -1, P)) % P
IDENTITY_POINT = (1).to_bytes(32, "little")


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Twisted Edwards addition on Ed25519 (a = -1), affine, for an independent check."""
    (x1, y1), (x2, y2) = a, b
    t = D * x1 * x2 * y1 * y2
    return (
        (x1 * y2 + x2 * y1) * pow(1 + t, -1, P) % P,
        (y1 * y2 + x1 * x2) * pow(1 - t, -1, P) % P,
    )


def _x_for(y: int) -> list[int]:
    """Every x with (x, y) on the curve: x^2 = (y^2 - 1) / (d y^2 + 1)."""
    u = (y * y - 1) * pow(D * y * y + 1, -1, P) % P
    for x in (pow(u, (P + 3) // 8, P), pow(u, (P + 3) // 8, P) * pow(2, (P - 1) // 4, P) % P):
        if x * x % P == u:
            return sorted({x, (P - x) % P})
    return []


def test_the_small_order_set_is_exactly_the_8_torsion() -> None:
    # Independently: the points whose 8th multiple is the neutral element (0, 1) are exactly
    # those whose y the module lists; there are 8 of them.
    torsion: list[tuple[int, int]] = []
    for y in SMALL_ORDER_Y:
        for x in _x_for(y):
            point = (x, y)
            multiple = point
            for _ in range(7):
                multiple = _add(multiple, point)
            assert multiple == (0, 1), (x, y)
            torsion.append(point)
    assert len(torsion) == 8


def test_small_order_keys_are_detected_in_every_spelling() -> None:
    for y in SMALL_ORDER_Y:
        encoded = y.to_bytes(32, "little")
        assert is_small_order(encoded)
        assert is_small_order(encoded[:31] + bytes([encoded[31] | 0x80]))  # sign bit set
        if y + P < 2**255:  # a non-canonical spelling y + p exists
            assert is_small_order((y + P).to_bytes(32, "little"))
    assert not is_small_order(ALICE.public)
    assert not is_small_order(BOB.public)


def test_openssl_accepts_a_forgery_by_a_small_order_key_and_verify_does_not() -> None:
    # Why the check exists: with A the neutral point, R = A and S = 0 satisfy the verification
    # equation for every message, and the library does not refuse such keys.
    forged = IDENTITY_POINT + bytes(32)
    Ed25519PublicKey.from_public_bytes(IDENTITY_POINT).verify(forged, b"anything at all")
    assert not verify(IDENTITY_POINT, forged, b"anything at all")


# -- signed streams ------------------------------------------------------------------------------


def test_a_forged_packet_of_a_small_order_stream_key_is_refused() -> None:
    """Before keyspace.ed25519, verify_packet accepted this forgery over any packet."""
    key = bytes(32)
    forged = IDENTITY_POINT + bytes(32)
    assert not verify_packet(IDENTITY_POINT, forged, key, 7, None, 0, b"forged")


def test_no_stream_can_be_named_by_a_small_order_key() -> None:
    for y in SMALL_ORDER_Y:
        with pytest.raises(StreamAddressError, match="small-order"):
            StreamKey.signed(y.to_bytes(32, "little"), "news")


def test_a_genuine_signed_packet_still_verifies() -> None:
    private = Ed25519PrivateKey.generate()
    stream = StreamKey.signed(private.public_key().public_bytes_raw(), "news")
    sig = sign_packet(private, stream.key, 3, None, 0, b"data")
    assert stream.public_key is not None
    assert verify_packet(stream.public_key, sig, stream.key, 3, None, 0, b"data")
    assert not verify_packet(stream.public_key, sig, stream.key, 4, None, 0, b"data")


# -- printable keys ------------------------------------------------------------------------------


def test_key_text_round_trips_and_refuses_each_broken_rule() -> None:
    text = key_text(ALICE.public)
    assert len(text) == KEY_TEXT_LENGTH and parse_key_text(text.upper()) == ALICE.public
    cases = {
        "length": text[:-1],
        "alphabet": "1" + text[1:],  # '1' is not base32
        "canonical": text[:-1] + chr(ord(text[-1]) + 1),  # a spare low bit set
    }
    for problem, bad in cases.items():
        with pytest.raises(KeyTextError) as info:
            parse_key_text(bad)
        assert info.value.problem == problem, bad
