"""A signed stream for the core tests: fixed keys (its owner's and an intruder's), packets
signed as its owner would sign them, and the publishing tree of that stream."""

from __future__ import annotations

from corenet import CoreNet
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from publish_tree import tree

from keyspace.stream_key import StreamKey, sign_packet
from overlay.messages import PacketKind

DATA, CLOSED, ABORTED = PacketKind.DATA, PacketKind.EPOCH_CLOSED, PacketKind.EPOCH_ABORTED

# Fixed private keys: the tests replay exactly.
PRIVATE = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
INTRUDER = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
STREAM = StreamKey.signed(PRIVATE.public_key().public_bytes_raw(), "telemetry")
SKEY = STREAM.key
DESCRIPTOR = STREAM.descriptor


def sign(
    number: int,
    data: bytes,
    epoch: int | None = None,
    kind: PacketKind = DATA,
    private: Ed25519PrivateKey = PRIVATE,
) -> bytes:
    return sign_packet(private, SKEY, number, epoch, int(kind), data)


def signed_tree() -> CoreNet:
    """The test tree, of the signed stream SKEY."""
    return tree(SKEY, descriptor=DESCRIPTOR)
