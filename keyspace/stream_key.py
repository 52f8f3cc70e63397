"""Stream keys: open and signed streams, their printable addresses, and packet signatures.

Theory of operation (after Freenet's KSK and SSK keys):

* An *open* stream is named by a UTF-8 name; its key is ``SHA-256(name)``. Anyone who knows the
  name may subscribe and publish. A name is 1 to 200 UTF-8 bytes with no control character
  and no whitespace (one rule for every way in: the CLI, the clients, the Spark sink, and the
  descriptors peers send).
* A *signed* stream is named by an Ed25519 public key and a name; its key is
  ``SHA-256(public_key || name)``. Only the holder of the private key can publish: every packet
  carries a signature over :func:`signing_payload`, and every node verifies it before it stores
  or forwards the packet.
* The lowest bit of a key's last byte says which kind it is (1: signed), so a node that sees
  only the 32-byte key knows whether its packets must be signed. Without that bit a hostile
  first subscriber could call a signed stream open and have the tree carry unsigned packets.
  The bit also separates the two kinds' hash domains: an open name that happens to spell
  ``public_key || name`` still names a different key.
* Nodes verify signatures with the public key, which the key only hashes. A signed stream's
  subscribe requests therefore carry its :attr:`StreamKey.descriptor` (``public_key || name``);
  a node accepts one only if it hashes to the key (:func:`descriptor_matches`).
* The key (32 bytes) hashes to the stream's location on the keyspace circle, which is where
  subscriptions are routed to.

Printable addresses, which are all a subscriber needs::

    ovl:open/<name>                      an open stream
    ovl:<52 base32 chars>/<name>         a signed stream (lowercase, unpadded public key)
    <name>                               shorthand for an open stream, when typed by a person

Invariants: a constructed :class:`StreamKey` always has a valid name and, if signed, a 32-byte
public key; ``StreamKey.parse(k.address) == k`` for every key; every address maps to exactly one
key and every key to exactly one canonical address.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from keyspace.ed25519 import KeyTextError, is_small_order, key_text, parse_key_text, verify
from keyspace.location import key_location

# URI-scheme style prefix of every full address. Like a URI scheme it is matched without regard
# to case, so "OVL:open/x" is the same address as "ovl:open/x".
ADDRESS_PREFIX = "ovl:"

# The key part of an open stream's address.
OPEN_MARKER = "open"

# Ed25519 public keys are 32 bytes in their raw encoding (RFC 8032).
PUBLIC_KEY_BYTES = 32

# 32 bytes in base32 take 52 characters once the "====" padding is dropped.
PUBLIC_KEY_BASE32_CHARS = 52

# Names are bounded so that every message carrying one has a bounded size; 200 bytes is ample
# for a human-readable topic name and small next to a packet.
MAX_NAME_BYTES = 200

# Separates packet signatures from any other Ed25519 signature the same key might make (a key
# reused for another protocol, or a future version of this one): a signature made for one
# purpose can never be replayed as a valid signature for another. The NUL ends the prefix so no
# longer prefix can start with it.
SIGNING_DOMAIN = b"ovl-packet-v1\0"

_UINT64_LIMIT = 2**64

_EXPECTED_FORMS = (
    "expected 'ovl:open/<name>', 'ovl:<52-char base32 public key>/<name>' or a bare <name>"
)


# Unicode's space, line and paragraph separators: whitespace whatever str.isspace says.
_SEPARATORS = frozenset({"Zs", "Zl", "Zp"})

# A bare name that starts like a URI scheme ("http:", "kafka:") is more likely a URL or
# another system's address pasted by mistake than a stream name; an address is "ovl:...".
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


class StreamAddressError(ValueError):
    """A stream address, name or public key that cannot be used. The message says why."""


def _check_name(name: object) -> str:
    """Return ``name`` if it is a valid stream name, else raise StreamAddressError saying why."""
    if not isinstance(name, str):
        raise StreamAddressError(f"a stream name must be a str, got {type(name).__name__}")
    if not name:
        raise StreamAddressError(f"the stream name is empty; {_EXPECTED_FORMS}")
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Lone surrogates are valid in a Python str but have no UTF-8 encoding.
        raise StreamAddressError(f"stream name {name!r} is not valid Unicode: {exc}") from None
    if len(encoded) > MAX_NAME_BYTES:
        raise StreamAddressError(
            f"stream name is {len(encoded)} UTF-8 bytes, at most {MAX_NAME_BYTES} allowed: "
            f"{name[:40]!r}..."
        )
    for char in name:
        if unicodedata.category(char) == "Cc":
            raise StreamAddressError(
                f"stream name {name!r} contains control character U+{ord(char):04X}"
            )
    # Names are typed, copied and printed by people and tools: whitespace would make names
    # that look alike (two spaces or one, a no-break space or a space) different streams, and
    # splits a name wherever an address is one word (a shell argument, a log line). Joining
    # words takes '-', '_', '.' or '/'.
    if name != name.strip():
        raise StreamAddressError(
            f"stream name {name!r} has leading or trailing whitespace, which is not allowed"
        )
    for char in name:
        if char.isspace() or unicodedata.category(char) in _SEPARATORS:
            raise StreamAddressError(
                f"stream name {name!r} contains whitespace (U+{ord(char):04X}); join words "
                "with '-', '_', '.' or '/'"
            )
    return name


def _check_public_key(public_key: object) -> bytes:
    """Return ``public_key`` as bytes if it is 32 bytes long, else raise StreamAddressError."""
    if not isinstance(public_key, bytes | bytearray | memoryview):
        raise StreamAddressError(f"a public key must be bytes, got {type(public_key).__name__}")
    raw = bytes(public_key)
    if len(raw) != PUBLIC_KEY_BYTES:
        raise StreamAddressError(
            f"an Ed25519 public key is {PUBLIC_KEY_BYTES} bytes, got {len(raw)} bytes"
        )
    if is_small_order(raw):
        # No one holds its private key, and a trivial signature verifies for it (see
        # keyspace.ed25519): a stream named by it could be published to by anyone.
        raise StreamAddressError("the public key is a small-order point: no one can own it")
    return raw


def _encode_public_key(public_key: bytes) -> str:
    return key_text(public_key)


def _decode_public_key(text: str) -> bytes:
    """Decode the base32 key part of an address, accepting only the canonical spelling."""
    try:
        raw = parse_key_text(text)  # only the canonical spelling: addresses stay canonical
    except KeyTextError as error:
        if error.problem == "length":
            problem = (
                f"is {len(text)} characters; a public key is {PUBLIC_KEY_BASE32_CHARS} "
                f"base32 characters or the word {OPEN_MARKER!r}; {_EXPECTED_FORMS}"
            )
        elif error.problem == "alphabet":
            problem = f"is not base32 (letters a-z and digits 2-7); {_EXPECTED_FORMS}"
        else:
            problem = "is not a canonical base32 public key (its last character has stray low bits)"
        raise StreamAddressError(f"the key part {text!r} {problem}") from None
    return raw


@dataclass(frozen=True, slots=True)
class StreamKey:
    """The identity of a stream: a name, plus a public key if the stream is signed.

    Build one with :meth:`open`, :meth:`signed` or :meth:`parse`; the fields are validated on
    construction either way, raising StreamAddressError.
    """

    name: str
    public_key: bytes | None = None

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.public_key is not None:
            # Normalise bytearray/memoryview to bytes so equality and hashing behave.
            object.__setattr__(self, "public_key", _check_public_key(self.public_key))

    @classmethod
    def open(cls, name: str) -> StreamKey:
        """An open stream: anyone who knows ``name`` may publish to it."""
        return cls(name, None)

    @classmethod
    def signed(cls, public_key: bytes, name: str) -> StreamKey:
        """A signed stream: only the holder of the private key for ``public_key`` may publish.

        ``public_key`` is the raw 32-byte Ed25519 key, as returned by
        ``Ed25519PublicKey.public_bytes_raw()``.
        """
        return cls(name, _check_public_key(public_key))

    @property
    def is_signed(self) -> bool:
        """True for a signed stream, whose packets must carry a valid signature."""
        return self.public_key is not None

    @property
    def key(self) -> bytes:
        """The 32-byte routing key: SHA-256(name) or SHA-256(public_key || name), with the
        last bit set for a signed stream and cleared for an open one (see the module notes).

        The public key has a fixed length, so the concatenation is unambiguous: no two
        (public key, name) pairs give the same input to the hash.
        """
        prefix = self.public_key if self.public_key is not None else b""
        return _tag(hashlib.sha256(prefix + self.name.encode("utf-8")).digest(), prefix != b"")

    @property
    def descriptor(self) -> bytes | None:
        """What a signed stream's subscribe requests carry so that every node on the way
        learns the public key: ``public_key || UTF-8 name``. None for an open stream."""
        if self.public_key is None:
            return None
        return self.public_key + self.name.encode("utf-8")

    @classmethod
    def from_descriptor(cls, descriptor: bytes) -> StreamKey:
        """The signed stream a descriptor names; StreamAddressError if it is malformed."""
        if len(descriptor) <= PUBLIC_KEY_BYTES:
            raise StreamAddressError(
                f"a descriptor is a {PUBLIC_KEY_BYTES}-byte public key and a name, got "
                f"{len(descriptor)} bytes"
            )
        try:
            name = descriptor[PUBLIC_KEY_BYTES:].decode("utf-8")
        except UnicodeDecodeError:
            raise StreamAddressError("the descriptor's name is not UTF-8") from None
        return cls.signed(descriptor[:PUBLIC_KEY_BYTES], name)

    @property
    def location(self) -> float:
        """The keyspace location subscriptions to this stream are routed toward."""
        return key_location(self.key)

    @property
    def address(self) -> str:
        """The canonical printable address; :meth:`parse` turns it back into this key."""
        if self.public_key is None:
            return f"{ADDRESS_PREFIX}{OPEN_MARKER}/{self.name}"
        return f"{ADDRESS_PREFIX}{_encode_public_key(self.public_key)}/{self.name}"

    def __str__(self) -> str:
        return self.address

    @classmethod
    def parse(cls, text: str) -> StreamKey:
        """Parse a printable address, or a bare name meaning an open stream.

        The prefix ``ovl:``, the word ``open`` and the base32 key are matched without regard
        to case; the name is taken verbatim and is everything after the first ``/`` that
        follows the key part, so names may contain ``/``. Text without the ``ovl:`` prefix is a
        bare open-stream name, unless it starts like another scheme (``http://...``): that is
        refused as a URL pasted by mistake (``ovl:open/http:x`` names such a stream). Raises
        StreamAddressError for anything else, saying what is wrong and which forms are
        expected.
        """
        if not isinstance(text, str):
            raise StreamAddressError(
                f"a stream address must be a str, got {type(text).__name__}; {_EXPECTED_FORMS}"
            )
        if not text:
            raise StreamAddressError(f"the stream address is empty; {_EXPECTED_FORMS}")
        if text[: len(ADDRESS_PREFIX)].lower() != ADDRESS_PREFIX:
            scheme = _SCHEME.match(text)
            if scheme is not None:
                raise StreamAddressError(
                    f"{text!r} looks like a URL or another system's address "
                    f"({scheme.group()!r}), not a stream; {_EXPECTED_FORMS} (a bare name "
                    "has no ':' before its first '/')"
                )
            return cls.open(text)
        rest = text[len(ADDRESS_PREFIX) :]
        key_part, slash, name = rest.partition("/")
        if not slash:
            raise StreamAddressError(
                f"stream address {text!r} has no '/' between key and name; {_EXPECTED_FORMS}"
            )
        if not name:
            raise StreamAddressError(
                f"stream address {text!r} has an empty name; {_EXPECTED_FORMS}"
            )
        if key_part.lower() == OPEN_MARKER:
            return cls.open(name)
        return cls.signed(_decode_public_key(key_part), name)


def _tag(digest: bytes, signed: bool) -> bytes:
    last = (digest[-1] & 0xFE) | int(signed)
    return digest[:-1] + bytes((last,))


def key_is_signed(key: bytes) -> bool:
    """Whether the stream with this 32-byte key is signed (its packets need signatures)."""
    return bool(key[-1] & 1)


def descriptor_matches(key: bytes, descriptor: bytes) -> StreamKey | None:
    """The signed stream ``descriptor`` names if its key is ``key``; else None. Never
    raises: the descriptor comes from a peer."""
    try:
        stream = StreamKey.from_descriptor(descriptor)
    except StreamAddressError:
        return None
    return stream if stream.key == key else None


def signing_payload(key: bytes, packet: int, epoch: int | None, kind: int, data: bytes) -> bytes:
    """The exact bytes a publisher signs for one packet of a signed stream.

    Layout: ``SIGNING_DOMAIN``, the 32-byte stream key, the packet number as 8 bytes big-endian,
    a presence byte for the epoch (0 for none; 1 followed by the epoch as 8 bytes big-endian),
    the kind as one byte, then the data.

    Why this shape: the domain prefix keeps these signatures from being valid for anything
    else; every field before ``data`` has a fixed width (or a presence byte that fixes it), so
    the payload decodes in exactly one way and no two different packets share a payload;
    ``data`` comes last so it needs no length. Covering the key binds the packet to its stream,
    and covering the packet number and epoch stops a node from replaying old data under a new
    number or moving it into another epoch.

    Raises ValueError if a field is out of range (a bug in the caller, not a peer's fault).
    """
    if len(key) != 32:
        raise ValueError(f"a stream key is 32 bytes, got {len(key)} bytes")
    if not 0 <= packet < _UINT64_LIMIT:
        raise ValueError(f"packet number must fit in 64 unsigned bits, got {packet}")
    if epoch is not None and not 0 <= epoch < _UINT64_LIMIT:
        raise ValueError(f"epoch must be None or fit in 64 unsigned bits, got {epoch}")
    if not 0 <= kind <= 255:
        raise ValueError(f"kind must fit in one byte, got {kind}")
    epoch_field = b"\x00" if epoch is None else b"\x01" + epoch.to_bytes(8, "big")
    return b"".join(
        (
            SIGNING_DOMAIN,
            bytes(key),
            packet.to_bytes(8, "big"),
            epoch_field,
            kind.to_bytes(1, "big"),
            bytes(data),
        )
    )


def sign_packet(
    private_key: Ed25519PrivateKey,
    key: bytes,
    packet: int,
    epoch: int | None,
    kind: int,
    data: bytes,
) -> bytes:
    """Sign one packet of a signed stream; returns the 64-byte Ed25519 signature.

    Ed25519 signatures are deterministic, so signing the same packet twice gives the same
    bytes, which keeps a resent PublishData idempotent at the root.
    """
    return private_key.sign(signing_payload(key, packet, epoch, kind, data))


def verify_packet(
    public_key: bytes,
    signature: bytes,
    key: bytes,
    packet: int,
    epoch: int | None,
    kind: int,
    data: bytes,
) -> bool:
    """True only if ``signature`` is the publisher's signature over exactly these fields.

    Never raises: a malformed public key, a signature of the wrong length or fields out of
    range all return False, because every input here may come from a hostile peer and the
    caller's only decision is whether to accept the packet.
    """
    try:
        payload = signing_payload(key, packet, epoch, kind, data)
        return verify(bytes(public_key), bytes(signature), payload)
    except (ValueError, TypeError):
        return False
