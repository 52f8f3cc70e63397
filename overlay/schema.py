"""The wire schema's fingerprint: eight bytes that differ between builds whose links differ.

Two nodes can only talk if they encode and validate every message alike. The codec is
strict on purpose (a frame it cannot decode drops the link), so a node of an older build
would link with a newer one and then lose the link, without a word of why, at the first
message that had gained a field. So the link handshake (``overlay.runtime.handshake``)
carries this fingerprint in its hello, and a node refuses a peer whose fingerprint differs,
naming both.

It is computed, not maintained by hand, so that no change can forget to bump it: the
SHA-256 of every message's type code, name and field kinds, the enums and bounds the codec
checks, and the codec's actual encoding of one sample of each message. A new field, a
renamed kind, a changed bound or a changed encoding all change it; code that does not touch
the wire does not.
"""

from __future__ import annotations

import hashlib
from typing import Any

from overlay import codec
from overlay.messages import (
    BUNDLED,
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_BUNDLE,
    MAX_DESCRIPTOR,
    MAX_FRAME,
    MAX_NEIGHBOURS,
    MAX_OPEN_EPOCHS,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_RUN,
    MAX_WIRE_HTL,
    MESSAGE_TYPES,
    SIGNATURE_SIZE,
    VOUCH_SIZE,
    Kind,
    Message,
    PacketKind,
    PublishError,
    PublishSucceeded,
    field_kinds,
)

SCHEMA_SIZE = 8  # bytes: a chance collision between two builds is 1 in 2**64

# One valid value of each field kind, to encode a sample of every message. A kind added to
# ``Kind`` without a sample here fails at import, in every test run.
_SAMPLES: dict[Kind, Any] = {
    Kind.UID: 1,
    Kind.KEY: bytes(KEY_SIZE),
    Kind.HTL: 1,
    Kind.LOCATION: 0.5,
    Kind.PACKET: 1,
    Kind.OPT_PACKET: 1,
    Kind.DATA: b"d",
    Kind.OPT_SIGNATURE: bytes(SIGNATURE_SIZE),
    Kind.PACKET_KIND: PacketKind.DATA,
    Kind.BOOT_ID: 1,
    Kind.COUNT: 1,
    Kind.LOCATIONS: (0.5,),
    Kind.OPT_DESCRIPTOR: bytes(KEY_SIZE + 1),
    Kind.EPOCH_STARTS: ((1, 1),),
    Kind.OPT_UID: 1,
    Kind.OPT_LOCATION: 0.5,
    Kind.OPT_SEEN: 1,
    Kind.FLAG: True,
    Kind.VOUCHES: (bytes(VOUCH_SIZE),),
    Kind.RUN: ((b"d", 1, PacketKind.DATA, None, 1, 1, 1),),
    Kind.DIGEST: bytes(DIGEST_SIZE),
    Kind.BUNDLE: (PublishSucceeded(1, bytes(KEY_SIZE), 1), PublishSucceeded(2, bytes(KEY_SIZE), 2)),
}
if set(_SAMPLES) != set(Kind):
    raise ImportError(f"overlay.schema has no sample for {sorted(set(Kind) - set(_SAMPLES))}")


def _sample(cls: type[Message]) -> Message:
    return cls(*(_SAMPLES[kind] for _, kind in field_kinds(cls)))


def schema_text(types: tuple[type[Message], ...] = MESSAGE_TYPES) -> bytes:
    """Everything the fingerprint covers, one line each, for ``types``."""
    lines = [
        f"bounds {KEY_SIZE} {SIGNATURE_SIZE} {MAX_WIRE_HTL} {MAX_PAYLOAD} {MAX_FRAME} "
        f"{MAX_PACKET} {MAX_NEIGHBOURS} {MAX_OPEN_EPOCHS} {MAX_DESCRIPTOR} {VOUCH_SIZE} "
        f"{DIGEST_SIZE} {MAX_RUN} {MAX_BUNDLE}",
        "kinds " + " ".join(f"{k.name}={k.value}" for k in Kind),
        "packet-kinds " + " ".join(f"{k.name}={k.value}" for k in PacketKind),
        "publish-errors " + " ".join(f"{e.name}={e.value}" for e in PublishError),
        "bundled " + " ".join(str(cls.TYPE) for cls in BUNDLED),
    ]
    for cls in types:
        fields = " ".join(f"{name}:{kind.name}" for name, kind in field_kinds(cls))
        lines.append(f"{cls.TYPE} {cls.__name__} {fields} {codec.encode(_sample(cls)).hex()}")
    return "\n".join(lines).encode()


def fingerprint(types: tuple[type[Message], ...] = MESSAGE_TYPES) -> bytes:
    return hashlib.sha256(b"overlay wire schema\n" + schema_text(types)).digest()[:SCHEMA_SIZE]


WIRE_SCHEMA = fingerprint()
