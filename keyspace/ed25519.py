"""Ed25519 checks shared by stream signatures and node identities.

OpenSSL's Ed25519 verification (what ``cryptography`` uses) accepts a trivial signature by a
*small-order* "public key" over any message: with A the neutral point, R = A and S = 0
satisfy the verification equation. No one holds a private key for such a point, so a signed
stream or a node identity named by one could be "signed for" by anyone. Every verification
in the project therefore goes through :func:`verify`, which refuses those keys first (the
same rule as libsodium's blocklist).
"""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64

# Field prime of Curve25519/Ed25519, and the y-coordinates of the eight points of small order
# (the 8-torsion: y = 1, -1, 0 and the two order-8 values).
P = 2**255 - 19
_ORDER_8_Y = 2707385501144840649318225287225658788936804267575313519463743609750303402022
SMALL_ORDER_Y = frozenset({0, 1, P - 1, _ORDER_8_Y, P - _ORDER_8_Y})


def is_small_order(public: bytes) -> bool:
    """True if ``public`` encodes one of Ed25519's small-order points (in any spelling).

    The sign bit is ignored and y is reduced mod p, so the non-canonical encodings of these
    points (y >= p) are caught as well.
    """
    y = int.from_bytes(public, "little") & ((1 << 255) - 1)
    if y >= P:
        y -= P
    return y in SMALL_ORDER_Y


def verify(public: bytes, sig: bytes, data: bytes) -> bool:
    """True only if ``sig`` is the Ed25519 signature of ``data`` by the key ``public``.

    Never raises for bad input (it may all come from a hostile peer): a key or signature of
    the wrong length, a small-order key or a key that is no curve point is simply not valid.
    """
    if len(public) != PUBLIC_KEY_SIZE or len(sig) != SIGNATURE_SIZE or is_small_order(public):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(sig, data)
    except (InvalidSignature, ValueError):
        return False
    return True


# --- printable keys -------------------------------------------------------------------------

KEY_TEXT_LENGTH = 52  # 32 bytes in unpadded base32


class KeyTextError(ValueError):
    """Text that is not a key's printable form; ``problem`` says which rule it breaks
    ("length", "alphabet" or "canonical"), so each caller can say it in its own words."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def key_text(public: bytes) -> str:
    """The printable form of a 32-byte public key (a node id, a signed stream's key):
    lowercase, unpadded base32."""
    return base64.b32encode(public).decode("ascii").rstrip("=").lower()


def parse_key_text(text: str) -> bytes:
    """The key :func:`key_text` printed as ``text`` (either case). Only the canonical
    spelling: 52 characters carry 260 bits, and if the 4 spare ones are not zero the text is
    a second spelling of another key, which would give one key two names."""
    if len(text) != KEY_TEXT_LENGTH:
        raise KeyTextError("length")
    try:
        raw = base64.b32decode(text.upper() + "====")
    except (binascii.Error, ValueError):
        raise KeyTextError("alphabet") from None
    if key_text(raw) != text.lower():
        raise KeyTextError("canonical")
    return raw
