"""Every message two nodes exchange, as frozen, slotted dataclasses.

The same class is sent and received. Each field declares its *kind* in the dataclass metadata
(``uid``, ``key``, ``htl`` ...), and the one codec (``overlay.codec``) validates every decoded
field against its kind, so a message that reaches the core is always well formed: keys are 32
bytes, locations are finite floats in [0, 1), HTL is within the wire bound, and so on.

The message set is the Freenet 0.7 publish/subscribe specification (seeds/003) plus what the
other seeds add. Two deliberate extensions of the spec's field lists:

* ``DataNotFound`` carries ``htl``, the hops-to-live left when the search below the sender
  ended. Freenet's backtracking needs it (its RouteNotFound does the same): the node that
  receives it goes on to its next-closest peer with that budget, so a search costs at most the
  budget however the backtracking branches, instead of starting afresh at every level. It
  also carries ``lost``: a hop below dropped its link before answering, or another tree's
  member refused it only for its restart label, so "not found" may be wrong (a root's look
  then looks again: ``overlay.core.merges``).
* ``PublishData``/``SubscribeData`` carry ``kind`` (plain data, or the marker closing or
  aborting an epoch) so that epoch boundaries travel in the root's one total order (Strymon).
* ``SubscribeData.epoch_first`` is the number of the first packet of the packet's epoch, set
  by the root. With it any node knows, from one packet, where an epoch began, so it can tell
  a whole epoch from a torn one without having watched the stream from the start; and
  ``SubscribeSucceeded`` carries the stream's frontier (the last closed epoch and the open
  ones) so a late joiner learns it at once.
* Subscribe requests of a signed stream carry its descriptor (public key and name), which
  hashes to the key: every node on the way learns the key it must verify packets with.
* ``SubscribeData.mark`` is how far the root has committed, as its sender knows it: a
  member shows its clients only that far, and a standalone ``Committed`` carries it only
  when no packet does (``overlay.core.showing``).
* ``SubscribeRun`` is consecutive ``SubscribeData`` of one stream in one frame: a parent
  sends what one step of its own produced for a child as one message, so a burst costs a
  child one decode and one event, not one per packet (``overlay.runtime.runs``,
  ``overlay.run_packing``).
* ``Bundle`` is several publish-path messages (``BUNDLED``) of one type and stream in one
  frame: what one step of a node sends a peer on the publish path goes as one frame, not
  one per packet (``overlay.runtime.runs``).

Type codes are part of the wire format: never renumber one, only add. A field added to a
message is added last, and every node sends it (a frame without it does not decode): a
frame has exactly one encoding (``overlay.codec``), and all nodes run the same code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, ClassVar

# Wire-level bounds. A node's configured limits sit inside these; the codec enforces these.
KEY_SIZE = 32  # SHA-256 of a stream name (open) or of a public key and a name (signed)
SIGNATURE_SIZE = 64  # Ed25519
MAX_WIRE_HTL = 32  # far above any sane max HTL (about 10) and small enough to bound a search
MAX_PAYLOAD = 64 * 1024  # one packet's data; larger values belong in several packets
MAX_FRAME = MAX_PAYLOAD + 1024  # payload plus every other field of the largest message
MAX_U64 = 2**64 - 1
MAX_PACKET = 2**63 - 1  # packet numbers and epochs: signed-64-bit safe for every consumer
MAX_NEIGHBOURS = 256  # locations one Neighbours message may list; nodes announce fewer
MAX_OPEN_EPOCHS = 256  # open epochs a frontier may list; the root refuses to open more
MAX_DESCRIPTOR = 32 + 200  # an Ed25519 public key and a stream name of at most 200 bytes
MAX_RUN = 1024  # packets one SubscribeRun may carry (a frame's size bounds it too)
MAX_BUNDLE = 1024  # messages one Bundle may carry (a frame's size bounds it too)
NODE_ID_SIZE = 32  # an Ed25519 public key
VOUCH_SIZE = NODE_ID_SIZE + SIGNATURE_SIZE  # a neighbour's id and its vouch for the sender
DIGEST_SIZE = 32  # SHA-256: a location swap's commitments and nonces


class Kind(IntEnum):
    """Field kinds: each names one validation rule in the codec."""

    UID = 1  # int in [0, 2**64)
    KEY = 2  # bytes of length KEY_SIZE
    HTL = 3  # int in [0, MAX_WIRE_HTL]
    LOCATION = 4  # float, finite, in [0, 1)
    PACKET = 5  # int in [0, MAX_PACKET]
    OPT_PACKET = 6  # PACKET or None
    DATA = 7  # bytes of length <= MAX_PAYLOAD
    OPT_SIGNATURE = 8  # bytes of length SIGNATURE_SIZE, or None
    PACKET_KIND = 9  # a PacketKind value
    BOOT_ID = 10  # int in [0, 2**64)
    COUNT = 11  # int in [0, 2**32)
    LOCATIONS = 12  # tuple of at most MAX_NEIGHBOURS LOCATION values
    OPT_DESCRIPTOR = 13  # None, or bytes of length 33..MAX_DESCRIPTOR
    EPOCH_STARTS = 14  # tuple of at most MAX_OPEN_EPOCHS (epoch, first packet) PACKET pairs
    OPT_UID = 15  # UID or None
    OPT_LOCATION = 16  # LOCATION or None
    # None (a fresh subscriber: from the head), or the last packet seen in [-1, MAX_PACKET],
    # where -1 is "nothing seen yet": send everything from packet 0. Without it a node that
    # expected packet 0 and lost its parent before it came would rejoin as fresh and skip the
    # stream's start without a word.
    OPT_SEEN = 17
    FLAG = 18  # CBOR true or false (never a number)
    # tuple of at most MAX_NEIGHBOURS entries, each empty or VOUCH_SIZE bytes
    VOUCHES = 19
    # tuple of 1..MAX_RUN SubscribeData, numbered on from the message's ``first``
    # (``SubscribeRun``, whose codec path checks each as a SubscribeData). On the wire one
    # flat array: each packet's RUN_ITEM_SIZE values after the last's, no array per packet
    # (an array per packet cost the CBOR codec about as much as the packet's other values).
    RUN = 20
    DIGEST = 21  # bytes of length DIGEST_SIZE: a SHA-256 commitment, or a random nonce
    # tuple of 2..MAX_BUNDLE messages of one BUNDLED type and one stream (``Bundle``, whose
    # codec path checks each as that message). On the wire one flat array: the type code,
    # the key, then each message's values but its key, after the last's.
    BUNDLE = 22


def _f(kind: Kind) -> Any:
    """A dataclass field tagged with its validation kind."""
    return field(metadata={"kind": kind})


def _opt(kind: Kind, default: object = None) -> Any:
    """A trailing field with a default (the codec still sends it: defaults are for code)."""
    return field(default=default, metadata={"kind": kind})


class PacketKind(IntEnum):
    """What a stream packet is: data, or the marker that closes or aborts its epoch."""

    DATA = 0
    EPOCH_CLOSED = 1
    EPOCH_ABORTED = 2


class PublishError(IntEnum):
    """Why a publish was refused (``PublishRejected.reason``). ``RETRYABLE`` ones may succeed
    if sent again later; the others will not."""

    NOT_CARRIED = 1  # the receiver is not in this stream's tree
    NOT_CHILD = 2  # the sender is not the receiver's child in the tree
    BAD_SIGNATURE = 3  # a signed stream's packet without a valid signature
    NEEDS_NUMBER = 4  # a signed packet must name its number: the signature covers it
    EPOCH_DONE = 5  # the packet's epoch is already closed or aborted
    TOO_MANY_EPOCHS = 6  # opening one more epoch would exceed the frontier's bound
    BUSY = 7  # a bounded queue or table is full
    TOO_DEEP = 8  # the publish climbed more hops than any tree is deep: a loop
    BAD_MARKER = 9  # an epoch marker without an epoch
    TIMEOUT = 10  # no answer from up the tree (reported to local clients only)
    INVALID = 11  # a local client's malformed request (reported to local clients only)
    UID_REUSED = 12  # the root gave this publish uid to a packet with other content


RETRYABLE = frozenset({PublishError.BUSY, PublishError.TIMEOUT, PublishError.NOT_CARRIED})


@dataclass(frozen=True, slots=True)
class Message:
    """Base of every wire message. ``TYPE`` is its code on the wire."""

    TYPE: ClassVar[int] = 0

    def inconsistency(self) -> str | None:
        """What makes this message's fields contradict each other (None: nothing). Field
        kinds check each field alone; a message class whose fields depend on one another
        says so here, and the codec refuses a message that breaks the rule on the way in
        (``DecodeError``: the peer is at fault) as on the way out (``EncodeError``)."""
        return None


# --- Link ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello(Message):
    """First message on every link, after the link handshake: who we are in the keyspace.

    ``boot_id`` changes every time a node starts; a peer that comes back with a new one has
    lost all its stream state and is dropped from every stream it was in (spec).
    ``vouch``: the sender's signature saying it is linked to the receiver, which the
    receiver may show others when it announces its neighbours
    (``overlay.runtime.neighbour_vouches``); the core neither makes nor reads it.
    """

    TYPE: ClassVar[int] = 1
    location: float = _f(Kind.LOCATION)
    boot_id: int = _f(Kind.BOOT_ID)
    vouch: bytes | None = _opt(Kind.OPT_SIGNATURE)


@dataclass(frozen=True, slots=True)
class Heartbeat(Message):
    """Liveness on an idle link (pub0sub); ``seq`` lets a peer match what it answers."""

    TYPE: ClassVar[int] = 2
    seq: int = _f(Kind.UID)


@dataclass(frozen=True, slots=True)
class Neighbours(Message):
    """The locations of the sender's other peers, for friend-of-a-friend routing.

    Freenet 0.7.5 added this to its greedy routing: a node that knows its peers' peers can
    pick the peer *next to* the closest location, not only the closest peer, which shortens
    routes on a small-world graph from O(log^2 n) toward O(log n) hops. Sent after links
    change, debounced, so a burst of link changes costs one message per peer.
    ``vouches``: empty, or for each location that neighbour's id and its ``Hello.vouch``
    for the sender, so that a receiver need not take the location on the sender's word
    (``overlay.runtime.neighbour_vouches``); the core neither makes nor reads them.
    """

    TYPE: ClassVar[int] = 18
    locations: tuple[float, ...] = _f(Kind.LOCATIONS)
    vouches: tuple[bytes, ...] = _opt(Kind.VOUCHES, ())


# --- Subscribing -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SubscribeRequest(Message):
    """Routed greedily toward the key; coalesces into the tree at the first node that has it.

    ``best_loc`` is the closest location seen so far on the route; ``last_seen`` the newest
    packet the subscriber already holds (None: nothing yet), for catch-up; ``descriptor`` a
    signed stream's public key and name (None for an open stream).
    """

    TYPE: ClassVar[int] = 3
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    htl: int = _f(Kind.HTL)
    best_loc: float = _f(Kind.LOCATION)
    last_seen: int | None = _f(Kind.OPT_SEEN)
    descriptor: bytes | None = _opt(Kind.OPT_DESCRIPTOR)


@dataclass(frozen=True, slots=True)
class ResubscribeRequest(Message):
    """A subtree re-attaching after something broke; only a node closer than ``must_beat``
    that has not seen SubscribeRestarted(uid) may accept it (so a subtree never adopts its
    own member as its parent). ``trail``: a root's look that follows another search's path
    names the key under which that search's relays noted its way (``probes``)."""

    TYPE: ClassVar[int] = 4
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    htl: int = _f(Kind.HTL)
    best_loc: float = _f(Kind.LOCATION)
    must_beat: float = _f(Kind.LOCATION)
    last_seen: int | None = _f(Kind.OPT_SEEN)
    descriptor: bytes | None = _opt(Kind.OPT_DESCRIPTOR)
    trail: int | None = _opt(Kind.OPT_UID)


@dataclass(frozen=True, slots=True)
class Accepted(Message):
    """The sender took the search ``uid`` on and is routing it further (Freenet's
    FNPAccepted). Until it arrives the upstream waits only a short time; after it, as long as
    a search may take. So a silent node costs a few seconds at the hop next to it, not the
    whole branch above it, whose nodes would otherwise all time out together."""

    TYPE: ClassVar[int] = 19
    uid: int = _f(Kind.UID)


@dataclass(frozen=True, slots=True)
class SubscribeSucceeded(Message):
    """The sender has the stream and added the receiver as a child.

    ``last_packet`` is the newest packet number the sender knows of (None: none yet); the
    stream's frontier follows: ``last_closed`` the newest closed epoch, ``open_epochs`` the
    (epoch, first packet) of each open one. Catch-up packets follow this message.
    """

    TYPE: ClassVar[int] = 5
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    last_packet: int | None = _f(Kind.OPT_PACKET)
    last_closed: int | None = _opt(Kind.OPT_PACKET)
    open_epochs: tuple[tuple[int, int], ...] = _opt(Kind.EPOCH_STARTS, ())
    # The sender's restart label (see SubscribeRestarted): if its subtree is detached, the
    # receiver is detached with it from the moment it joins, before any other message.
    restart: int | None = _opt(Kind.OPT_UID)
    origin: float | None = _opt(Kind.OPT_LOCATION)


@dataclass(frozen=True, slots=True)
class SubscribeSucceededNewRoot(Message):
    """The search found no tree; the closest node on the route became the root. Forwarded back
    to the originator just as SubscribeSucceeded is (spec).

    ``last_packet``: the new root's head, None for a new stream. A root that continues a
    numbering (after the resubscriber's ``last_seen``, or what it remembered of the stream,
    ``overlay.core.memory``) names it, so the nodes on the path start their fresh clients
    after it, not at 0.
    """

    TYPE: ClassVar[int] = 6
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    last_packet: int | None = _opt(Kind.OPT_PACKET)


@dataclass(frozen=True, slots=True)
class SubscribeRestarted(Message):
    """Sent down a subtree whose uplink broke; ``uid`` is that of the ResubscribeRequest the
    subtree's top (its origin) is routing, ``origin`` that node's location, the request's
    must-beat. Each receiver relays it and answers RestartConfirmed once its own subtree has.
    Also sent down to relabel a subtree that came to hang below a detached one."""

    TYPE: ClassVar[int] = 7
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    origin: float = _f(Kind.LOCATION)


@dataclass(frozen=True, slots=True)
class RestartConfirmed(Message):
    """Answer to SubscribeRestarted: the sender and its whole subtree know restart ``uid``.
    The origin routes its ResubscribeRequest only then, so no member of its subtree can take
    that request for a stranger's and accept it (a cycle)."""

    TYPE: ClassVar[int] = 20
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    # The newest packet number the sender's subtree holds (None: none, or not a member): an
    # origin that becomes root numbers above it, and gathers what it lacks below it.
    last_seen: int | None = _opt(Kind.OPT_SEEN)


@dataclass(frozen=True, slots=True)
class RestartEnded(Message):
    """The origin of restart ``uid`` is attached to a tree again (or became its root): the
    subtree is no longer detached. Relayed down by every node that holds that restart."""

    TYPE: ClassVar[int] = 21
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)


@dataclass(frozen=True, slots=True)
class DataNotFound(Message):
    """The search below the sender ended without finding the stream or a better root.

    ``htl`` is the budget left (0: exhausted); the receiver backtracks to its next peer with
    it, or, if it is itself the closest node the search saw, becomes the root. ``lost``:
    "not found" may be wrong. Somewhere below, a peer the search was sent to dropped its
    link before it answered, so the search may have succeeded beyond that peer and its
    answer died with the link; or a member of another tree of the stream would have taken
    the resubscribe but for its restart label (that tree is restarting or looking too).
    """

    TYPE: ClassVar[int] = 8
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    htl: int = _f(Kind.HTL)
    lost: bool = _opt(Kind.FLAG, False)


@dataclass(frozen=True, slots=True)
class RejectOverload(Message):
    """The sender already carries its maximum number of streams; try another peer."""

    TYPE: ClassVar[int] = 9
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)


@dataclass(frozen=True, slots=True)
class RejectedLoop(Message):
    """The sender has seen this uid before; try another peer with the same budget."""

    TYPE: ClassVar[int] = 10
    uid: int = _f(Kind.UID)


@dataclass(frozen=True, slots=True)
class Unsubscribe(Message):
    """Remove the sender from the receiver's children of this stream. Also the answer to data
    for a stream the receiver does not carry (lazy pushing, negative subscription)."""

    TYPE: ClassVar[int] = 11
    key: bytes = _f(Kind.KEY)


# --- Publishing ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PublishData(Message):
    """A packet travelling up the tree to the root, which numbers and broadcasts it.

    ``packet`` None asks the root to choose the next number. ``uid`` is the idempotency id: a
    retried publish carries the same uid and is acknowledged with its original number.
    ``pushed``: a tree member sends up a packet it holds under the number its branch got it
    as (``push_one``), not a publisher naming a number; a root in its grace takes it as a
    claim on the stream's past, which a publisher's guess must never be.
    ``claim`` (with ``pushed``): the publisher's node pushes its own publish under the
    number a root gave it (``push_claims``). The tree may never have held it (that root may
    have dropped the number unsent), so it says nothing of the past: a root takes it only
    where it continues what the tree had without a hole, and refuses it otherwise.
    """

    TYPE: ClassVar[int] = 12
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    packet: int | None = _f(Kind.OPT_PACKET)
    best_loc: float = _f(Kind.LOCATION)
    htl: int = _f(Kind.HTL)
    data: bytes = _f(Kind.DATA)
    epoch: int | None = _f(Kind.OPT_PACKET)
    kind: PacketKind = _f(Kind.PACKET_KIND)
    sig: bytes | None = _f(Kind.OPT_SIGNATURE)
    pushed: bool = _opt(Kind.FLAG, False)
    claim: bool = _opt(Kind.FLAG, False)

    def inconsistency(self) -> str | None:
        # A push is a packet under the number its branch got it as, and a claim is a push
        # (``push_claims``): without a number neither says anything a root could take in
        # its place (a root's grace would take a numberless claim as the next number).
        if self.claim and not self.pushed:
            return "a claim that is not a push"
        if self.pushed and self.packet is None:
            return "a push without its packet number"
        return None


@dataclass(frozen=True, slots=True)
class PublishSucceeded(Message):
    """The root stored (or already held) the publish with this uid as ``packet``."""

    TYPE: ClassVar[int] = 13
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class PublishNumbered(Message):
    """The root gave the publish with this uid the number ``packet``, and holds it unsent
    until the publisher's node says it knows (PublishConfirmed). Not an acknowledgement:
    the publisher's client is told only by the PublishSucceeded that follows the packet
    down the tree (``overlay.core.confirming``)."""

    TYPE: ClassVar[int] = 28
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class PublishConfirmed(Message):
    """The publisher's node, up the tree to the root: it holds the publish ``uid`` as
    packet ``packet`` and will push it up to any root that takes the tree over, so the root
    may send it down (``overlay.core.confirming``)."""

    TYPE: ClassVar[int] = 29
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class PublishWitness(Message):
    """A publisher's node, to a few direct peers that are not the stream's parent, as it
    confirms its own publish: the publish, under the number ``packet`` the root gave it.
    Each keeps it as a witness claim and pushes it to a new root like the publisher's node
    would, should that node die before its claim gets there (``overlay.core.peer_witnesses``).
    The fields are the publish's (``PublishData``); on a signed stream ``sig`` covers
    ``packet``."""

    TYPE: ClassVar[int] = 31
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)
    data: bytes = _f(Kind.DATA)
    epoch: int | None = _f(Kind.OPT_PACKET)
    kind: PacketKind = _f(Kind.PACKET_KIND)
    sig: bytes | None = _f(Kind.OPT_SIGNATURE)


@dataclass(frozen=True, slots=True)
class PublishCollision(Message):
    """The root holds a different packet under that number; ``suggested_next`` is free."""

    TYPE: ClassVar[int] = 14
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)
    suggested_next: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class PublishRejected(Message):
    """The publish cannot be taken here (the stream is not carried, the payload is bad...).

    The spec's "we return an error message"; ``reason`` is a ``PublishError`` code (kept an
    int on the wire, so a newer peer's codes still decode) and the publisher's client can
    say exactly why.
    """

    TYPE: ClassVar[int] = 15
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    reason: int = _f(Kind.COUNT)


@dataclass(frozen=True, slots=True)
class SubscribeData(Message):
    """A numbered packet broadcast down the tree, from parent to child.

    ``epoch_first`` (set by the root) is the number of the first packet of ``epoch``; it is
    None exactly when ``epoch`` is None. It is not signed: only the root can know it.
    ``uid`` is the publish uid the root numbered the packet for, so that whichever node
    becomes root after this one can still acknowledge a retry of it with its number
    instead of ordering it twice. ``mark`` is the sender's commit mark: the root has
    committed every packet up to it (None: the sender knows of no mark yet). A member shows
    its local clients only that far (``overlay.core.showing``); it rides every packet, so a
    standalone ``Committed`` is needed only when the stream is quiet. Not signed either.
    """

    TYPE: ClassVar[int] = 16
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)
    data: bytes = _f(Kind.DATA)
    epoch: int | None = _f(Kind.OPT_PACKET)
    kind: PacketKind = _f(Kind.PACKET_KIND)
    sig: bytes | None = _f(Kind.OPT_SIGNATURE)
    epoch_first: int | None = _opt(Kind.OPT_PACKET)
    uid: int | None = _opt(Kind.OPT_UID)
    mark: int | None = _opt(Kind.OPT_PACKET)


@dataclass(frozen=True, slots=True)
class SubscribeRun(Message):
    """Packets ``first``, ``first + 1``, ... of stream ``key`` in one frame. It means exactly
    what the SubscribeData it stands for would, sent one after another: ``packets[i]`` is
    packet ``first + i``'s ``(data, epoch, kind, sig, epoch_first, uid, mark)``, the fields
    a SubscribeData carries after its key and number (``overlay.run_packing`` converts)."""

    TYPE: ClassVar[int] = 32
    key: bytes = _f(Kind.KEY)
    first: int = _f(Kind.PACKET)
    packets: tuple[RunItem, ...] = _f(Kind.RUN)

    def inconsistency(self) -> str | None:
        if self.first + len(self.packets) - 1 > MAX_PACKET:
            return f"its last packet is past {MAX_PACKET}"
        return None


# One packet of a ``SubscribeRun``: SubscribeData's fields from ``data`` on.
RunItem = tuple[bytes, int | None, PacketKind, bytes | None, int | None, int | None, int | None]
RUN_ITEM_SIZE = 7  # (the values of a RunItem)


@dataclass(frozen=True, slots=True)
class PacketsMissed(Message):
    """Catch-up could not cover packets ``first..last`` (inclusive): they left the window.

    Sent instead of a silent gap, so a subscriber always knows exactly what it missed.
    """

    TYPE: ClassVar[int] = 17
    key: bytes = _f(Kind.KEY)
    first: int = _f(Kind.PACKET)
    last: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class FillRequest(Message):
    """Send me again what you hold of packets ``first..last`` (inclusive): I never had them.

    A node that joined the tree late (as a relay, from the middle of the stream) has nothing
    below the point it joined at; a child that coalesces there with an older ``last_seen``
    needs those packets, which the tree above still holds. The receiver, the sender's
    parent, answers in order with SubscribeData for each number it holds and PacketsMissed
    for the rest, after asking its own parent for what it never had either.
    """

    TYPE: ClassVar[int] = 22
    key: bytes = _f(Kind.KEY)
    first: int = _f(Kind.PACKET)
    last: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class RootProbe(Message):
    """A root asking, routed toward the key like a search (greedy, HTL, backtracking),
    whether another root of the same stream closer to the key than ``must_beat`` (the
    asker's location) exists: a split tree, such as two sides of a healed partition leave.
    Only such a root answers it; every other node passes it on, member or not."""

    TYPE: ClassVar[int] = 23
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    htl: int = _f(Kind.HTL)
    best_loc: float = _f(Kind.LOCATION)
    must_beat: float = _f(Kind.LOCATION)


@dataclass(frozen=True, slots=True)
class ProbeAnswer(Message):
    """The answer to RootProbe ``uid``, relayed back the way it came: ``root`` is the
    location of the root that answered, or None if the probe found none below the sender;
    then ``htl`` is the budget left, with which the receiver tries its next peer (as
    DataNotFound does for a search)."""

    TYPE: ClassVar[int] = 24
    uid: int = _f(Kind.UID)
    key: bytes = _f(Kind.KEY)
    root: float | None = _f(Kind.OPT_LOCATION)
    htl: int = _f(Kind.HTL)


@dataclass(frozen=True, slots=True)
class HeldQuery(Message):
    """A root asking a child to say once it holds ``packet`` (it answers with Held). Until
    two children do (or its only one), the root's own clients are not shown the packet
    nor told it is acknowledged, nor is a child that published it itself: were the root to
    die first, the next root would give that number to another packet
    (``overlay.core.commits``)."""

    TYPE: ClassVar[int] = 25
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class Held(Message):
    """The answer to HeldQuery: the sender has processed every packet up to ``packet``."""

    TYPE: ClassVar[int] = 26
    key: bytes = _f(Kind.KEY)
    packet: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class Committed(Message):
    """A parent to its children: the root has committed every packet up to ``upto`` (two
    of its children hold it, or it gave up waiting: ``overlay.core.commits``). A member
    shows its local clients only that far (``overlay.core.showing``): a packet shown
    before, that the tree then lost, could be given to another publish. Packets carry the
    same mark (``SubscribeData.mark``); this goes only when none took it down."""

    TYPE: ClassVar[int] = 30
    key: bytes = _f(Kind.KEY)
    upto: int = _f(Kind.PACKET)


@dataclass(frozen=True, slots=True)
class PastQuery(Message):
    """A parent asking a child to push up (as PublishData, with the original uids and
    numbers) what it holds of packets ``first..last``, and to pass the question on to its
    own children for the rest: the root above never had them (``overlay.core.gathering``).
    ``htl`` is the hops the question may still go down, as a publish's HTL is up."""

    TYPE: ClassVar[int] = 27
    key: bytes = _f(Kind.KEY)
    first: int = _f(Kind.PACKET)
    last: int = _f(Kind.PACKET)
    htl: int = _f(Kind.HTL)


# --- Location swapping (``overlay.core.swaps``) --------------------------------------------


@dataclass(frozen=True, slots=True)
class SwapRequest(Message):
    """A location swap's random walk (Freenet 0.7): each hop passes it to a random peer
    until ``htl`` runs out, and the node where it ends is the partner. ``commitment`` is the
    starter's SHA-256 over the swap's uid, its nonce, its location and its neighbours'
    locations, which it reveals only once the partner has committed likewise."""

    TYPE: ClassVar[int] = 33
    uid: int = _f(Kind.UID)
    htl: int = _f(Kind.HTL)
    commitment: bytes = _f(Kind.DIGEST)


@dataclass(frozen=True, slots=True)
class SwapReply(Message):
    """The partner's commitment to swap ``uid``, back along the walk."""

    TYPE: ClassVar[int] = 34
    uid: int = _f(Kind.UID)
    commitment: bytes = _f(Kind.DIGEST)


@dataclass(frozen=True, slots=True)
class SwapCommit(Message):
    """The starter's reveal, forward along the walk: what its commitment covered.
    ``away``: where the keys of the streams it keeps lie (the middle of each one's arc,
    ``overlay.core.swaps.away_cell``), which it may not move toward."""

    TYPE: ClassVar[int] = 35
    uid: int = _f(Kind.UID)
    nonce: bytes = _f(Kind.DIGEST)
    location: float = _f(Kind.LOCATION)
    neighbours: tuple[float, ...] = _f(Kind.LOCATIONS)
    away: tuple[float, ...] = _opt(Kind.LOCATIONS, ())


@dataclass(frozen=True, slots=True)
class SwapComplete(Message):
    """The partner's reveal, back along the walk. With both reveals each side computes the
    same decision; on yes each takes the other's location. ``away`` as in ``SwapCommit``."""

    TYPE: ClassVar[int] = 36
    uid: int = _f(Kind.UID)
    nonce: bytes = _f(Kind.DIGEST)
    location: float = _f(Kind.LOCATION)
    neighbours: tuple[float, ...] = _f(Kind.LOCATIONS)
    away: tuple[float, ...] = _opt(Kind.LOCATIONS, ())


@dataclass(frozen=True, slots=True)
class SwapRejected(Message):
    """Swap ``uid`` ends without a swap: a loop, a node busy or not swapping, a full table.
    Sent back toward the starter, or on toward the partner, by whoever ends it."""

    TYPE: ClassVar[int] = 37
    uid: int = _f(Kind.UID)


# --- Bundles ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bundle(Message):
    """Several messages of one type in ``BUNDLED`` and of one stream, in one frame. It means
    exactly what those messages would, sent one after another in this order: the receiver
    handles each as if it had come alone. A publish and each of its answers travel the
    tree once per packet and hop; a node sends what one step produced for a peer as one
    frame (``overlay.runtime.runs``), so a burst of publishes costs each hop one frame to
    open and decode, not one per packet. The codec checks every message in it as it checks
    that message alone."""

    TYPE: ClassVar[int] = 38
    messages: tuple[Message, ...] = _f(Kind.BUNDLE)

    @property
    def key(self) -> bytes:
        """The stream every message in the bundle is about."""
        key: bytes = self.messages[0].key  # type: ignore[attr-defined]
        return key


# The messages a Bundle may carry: the publish path's, each keyed by its stream as its
# second field (the codec keeps that key once per bundle).
BUNDLED: tuple[type[Message], ...] = (
    PublishData,
    PublishNumbered,
    PublishConfirmed,
    PublishSucceeded,
    PublishWitness,
)


MESSAGE_TYPES: tuple[type[Message], ...] = (
    Hello,
    Heartbeat,
    SubscribeRequest,
    ResubscribeRequest,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
    SubscribeRestarted,
    RestartConfirmed,
    RestartEnded,
    DataNotFound,
    RejectOverload,
    RejectedLoop,
    Unsubscribe,
    PublishData,
    PublishSucceeded,
    PublishCollision,
    PublishRejected,
    SubscribeData,
    SubscribeRun,
    PacketsMissed,
    Neighbours,
    Accepted,
    FillRequest,
    RootProbe,
    ProbeAnswer,
    HeldQuery,
    Held,
    PastQuery,
    PublishNumbered,
    PublishConfirmed,
    Committed,
    PublishWitness,
    SwapRequest,
    SwapReply,
    SwapCommit,
    SwapComplete,
    SwapRejected,
    Bundle,
)


def field_kinds(cls: type[Message]) -> tuple[tuple[str, Kind], ...]:
    """The (name, kind) of each wire field of ``cls``, in wire order."""
    return tuple((f.name, Kind(f.metadata["kind"])) for f in dataclasses.fields(cls))
