"""Events the core delivers to its local clients (the scripts and tools on this node).

Subscribers get ``Subscribed`` once, then the stream in packet-number order: ``Packet`` for
each packet (plain subscribers) or ``Epoch`` for each whole closed epoch (atomic ones), and
``Missed`` wherever packets could not be had, so a gap is never silent. Publishers get one
answer per publish: ``PublishAcked``, ``PublishCollided`` or ``PublishFailed``; the publishes
of a batch that its root numbered in one pass are acknowledged together, in ``BatchAcked``.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlay.messages import PacketKind, PublishError


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The node is in the stream's tree; ``root`` if it is the tree's root.

    The stream's frontier when the client joined: ``last_packet`` the newest packet number
    (None: none yet), ``last_closed`` the newest closed epoch, ``open_epochs`` the epochs
    still open as (epoch, first packet) pairs. A fresh plain subscriber's first packet is
    ``last_packet + 1``.
    """

    key: bytes
    root: bool
    last_packet: int | None = None
    last_closed: int | None = None
    open_epochs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class SubscribeFailed:
    """The node could not join the stream's tree; ``reason`` says why, for a person."""

    key: bytes
    reason: str


@dataclass(frozen=True, slots=True)
class Packet:
    """One packet of the stream, in packet-number order (an epoch marker too, for plain
    subscribers: ``kind`` says which)."""

    key: bytes
    number: int
    data: bytes
    epoch: int | None
    kind: PacketKind


@dataclass(frozen=True, slots=True)
class Missed:
    """Packets ``first..last`` are gone (they left every window on the way); the next event
    is about a later packet."""

    key: bytes
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Epoch:
    """A closed epoch, whole: its data packets in order; ``closed_at`` is the marker's
    number (a resubscribe from there on loses nothing of later epochs)."""

    key: bytes
    epoch: int
    packets: tuple[Packet, ...]
    closed_at: int


@dataclass(frozen=True, slots=True)
class EpochSkipped:
    """An epoch that closed but could not be delivered whole (the client joined after it
    began, or part of it left the window): atomic clients never see a torn epoch."""

    key: bytes
    epoch: int
    reason: str


@dataclass(frozen=True, slots=True)
class EpochAborted:
    """The publisher aborted this epoch; none of its packets will ever be delivered."""

    key: bytes
    epoch: int


@dataclass(frozen=True, slots=True)
class PublishAcked:
    """The root ordered the publish ``uid`` as packet ``number`` (or already had it)."""

    key: bytes
    uid: int
    number: int


@dataclass(frozen=True, slots=True)
class BatchAcked:
    """The root ordered a batch's publishes in one pass: ``numbers`` pairs each uid with its
    packet number, in order. It says what a ``PublishAcked`` for each would, in one event:
    a batch is acknowledged at the cost of one answer, not one per packet."""

    key: bytes
    numbers: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class PublishCollided:
    """The stream holds another packet under the number asked for; ``suggested_next`` is
    free. A signed publisher re-signs for that number and publishes again."""

    key: bytes
    uid: int
    number: int
    suggested_next: int


@dataclass(frozen=True, slots=True)
class PublishFailed:
    """The publish was refused or went unanswered; ``reason`` says why for a person."""

    key: bytes
    uid: int
    error: PublishError
    reason: str


ClientEvent = (
    Subscribed
    | SubscribeFailed
    | Packet
    | Missed
    | Epoch
    | EpochSkipped
    | EpochAborted
    | PublishAcked
    | BatchAcked
    | PublishCollided
    | PublishFailed
)


# What each refusal means, for the person reading a client's error.
EXPLAIN: dict[PublishError, str] = {
    PublishError.NOT_CARRIED: "the node asked is not in this stream's tree",
    PublishError.NOT_CHILD: "the sender is not a child of the node asked",
    PublishError.BAD_SIGNATURE: "a signed stream's packet needs a valid signature",
    PublishError.NEEDS_NUMBER: "a signed packet must name its number (the signature covers it)",
    PublishError.EPOCH_DONE: "the packet's epoch is already closed or aborted",
    PublishError.TOO_MANY_EPOCHS: "the stream has its maximum number of open epochs",
    PublishError.BUSY: "a bounded queue on the way is full; try again later",
    PublishError.TOO_DEEP: "the publish climbed more hops than a tree is deep",
    PublishError.BAD_MARKER: "an epoch marker must name its epoch",
    PublishError.TIMEOUT: "no answer from the stream's root",
    PublishError.INVALID: "the publish request is malformed",
    PublishError.UID_REUSED: (
        "the root holds a packet with other content under this publish uid: an idempotency "
        "id was reused for different data"
    ),
}


def explain(error: int) -> str:
    try:
        return EXPLAIN[PublishError(error)]
    except ValueError:
        return f"refused with unknown reason code {error}"
