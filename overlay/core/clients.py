"""The local-client half of a node's API: subscribe, publish, unsubscribe, and clients leaving.

These calls come from the driver on behalf of the scripts and tools connected to this node
(the client port), so their arguments are checked here as input from outside: a malformed
publish gets a ``PublishFailed`` saying what is wrong, never an exception, and touches no
state. ``Node`` offers these calls to its driver (``Node.subscribe`` and so on, which hand
back the effects); the tree and packet machinery they use lives in ``overlay.core.node`` and
``overlay.core.publishing``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from keyspace.stream_key import descriptor_matches, key_is_signed
from overlay.core.batch_queue import BatchQueue
from overlay.core.batches import Batch, batch_of
from overlay.core.config import NodeConfig
from overlay.core.delivery import Member
from overlay.core.effects import ClientId, PeerId
from overlay.core.events import EXPLAIN, PublishFailed, SubscribeFailed
from overlay.core.outbox import Outbox
from overlay.core.publishing import PacketFlow
from overlay.core.streams import State, Stream
from overlay.messages import (
    KEY_SIZE,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    MAX_WIRE_HTL,
    SIGNATURE_SIZE,
    PacketKind,
    PublishData,
    PublishError,
)

# A publish's fields past its data: packet, epoch, kind, signature, descriptor.
Fields = tuple[int | None, int | None, PacketKind, bytes | None, bytes | None]
PLAIN: Fields = (None, None, PacketKind.DATA, None, None)


class LocalClients:
    """The local client calls (see the module notes). Each puts its effects in the node's
    outbox; the node hands them to its driver."""

    __slots__ = (
        "_config",
        "_deferred",
        "_flow",
        "_has_room",
        "_new_stream",
        "_out",
        "_prune",
        "_start_own_search",
        "_streams",
        "_unkeep",
        "location",
    )

    def __init__(
        self,
        location: float,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        out: Outbox,
        flow: PacketFlow,
        new_stream: Callable[[bytes, State, PeerId | None, bytes | None], Stream],
        start_own_search: Callable[[float, Stream, float | None, int | None], None],
        prune: Callable[[float, Stream], None],
        unkeep: Callable[[Stream], None],
        has_room: Callable[[bytes], bool],
    ) -> None:
        self.location = location
        self._config = config
        self._streams = streams
        self._out = out
        self._flow = flow
        self._new_stream = new_stream  # (``Membership.new_stream``)
        self._start_own_search = start_own_search  # (``Subscribing.start_own_search``)
        self._prune = prune  # (``leaving``)
        self._unkeep = unkeep  # (``keeping``)
        self._has_room = has_room  # (``keeping``)
        # Publishes waiting at a root behind a batch (``batch_queue``).
        self._deferred = BatchQueue(config.max_relayed_publishes)

    def subscribe(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        *,
        last_seen: int | None = None,
        atomic: bool = False,
        descriptor: bytes | None = None,
    ) -> None:
        """Subscribe a local client. It gets Subscribed once the node is in the tree (then
        the stream's packets after ``last_seen``, -1 meaning from the first, or from the head
        for a fresh client), or SubscribeFailed if the node cannot join. ``atomic`` clients
        get closed epochs whole. A signed stream needs its ``descriptor``
        (``StreamKey.descriptor``)."""
        if last_seen is not None and not -1 <= last_seen < MAX_PACKET:
            self._out.deliver(
                client, SubscribeFailed(key, f"last_seen {last_seen} is out of range")
            )
            return
        member = Member(atomic=atomic)
        if last_seen is not None:
            member.cursor = member.since = last_seen + 1
        existing = self._streams.get(key)
        was_carried = existing is not None and existing.carried
        stream, problem = self._join_for(now, key, client, member, descriptor)
        if stream is None:
            self._out.deliver(client, SubscribeFailed(key, problem))
        elif was_carried and stream is existing:
            # (A new search tells its clients itself when it ends, maybe at once.)
            root = stream.state is State.ROOT
            self._out.deliver(client, self._flow.subscribed(stream, root))
            self._flow.pump(stream)

    def publish(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        uid: int,
        data: bytes,
        *,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
        sig: bytes | None = None,
        descriptor: bytes | None = None,
    ) -> None:
        """Publish ``data`` for a local client; ``uid`` is its idempotency id (the same uid
        again is answered with the original packet number, never stored twice). ``packet``
        None lets the root choose the number; a signed stream's publisher names it and signs
        it (``keyspace.stream_key.sign_packet``). The client gets PublishAcked,
        PublishCollided or PublishFailed. The node joins the stream's tree first if it must
        (the client then counts as a member that receives nothing)."""
        fields = (packet, epoch, kind, sig, descriptor)
        if isinstance(key, bytes) and self._deferred.waits(key):
            # (behind a batch waiting for room: ``batch_queue``)
            if not self._deferred.room(1):
                self._busy(key, client, uid)
                return
            self._deferred.add(key, partial(self._publish_after, key, client, uid, data, fields), 1)
            return
        self._publish_now(now, key, client, uid, data, fields)

    def _publish_after(
        self, key: bytes, client: ClientId, uid: int, data: bytes, fields: Fields, now: float
    ) -> bool:
        self._publish_now(now, key, client, uid, data, fields)
        return True

    def _publish_now(
        self, now: float, key: bytes, client: ClientId, uid: int, data: bytes, fields: Fields
    ) -> None:
        packet, epoch, kind, sig, descriptor = fields
        problem = _bad_publish(key, uid, data, packet, epoch, kind, sig)
        if problem is not None:
            self._out.deliver(client, PublishFailed(key, uid, PublishError.INVALID, problem))
            return
        error = None
        if key_is_signed(key) and packet is None:
            error = PublishError.NEEDS_NUMBER
        elif key_is_signed(key) and sig is None:
            error = PublishError.BAD_SIGNATURE
        elif kind is not PacketKind.DATA and epoch is None:
            error = PublishError.BAD_MARKER
        if error is not None:
            self._out.deliver(client, PublishFailed(key, uid, error, EXPLAIN[error]))
            return
        if self._flow.publishes.in_flight(uid):
            # Already in flight (a retry, or another client with the same uid, such as a
            # speculative Spark task): one publish, and every one of them gets its answer.
            self._flow.join(uid, client)
            return
        if len(self._flow.publishes.local) >= self._config.max_relayed_publishes:
            # Local publishes in flight share the relay table's bound: memory stays bounded
            # however fast clients publish without waiting for answers.
            error = PublishError.BUSY
            self._out.deliver(client, PublishFailed(key, uid, error, EXPLAIN[error]))
            return
        if (
            key_is_signed(key)
            and key not in self._streams
            and (descriptor is None or descriptor_matches(key, descriptor) is None)
        ):
            reason = "a signed stream needs its descriptor (public key and name)"
            self._out.deliver(client, PublishFailed(key, uid, PublishError.INVALID, reason))
            return
        if key_is_signed(key) and not self._signed_by_owner(
            key, descriptor, data, packet, epoch, kind, sig
        ):
            # Checked before joining: a forged publish must not pull this node into a tree.
            error = PublishError.BAD_SIGNATURE
            self._out.deliver(client, PublishFailed(key, uid, error, EXPLAIN[error]))
            return
        stream, reason = self._join_for(now, key, client, Member(receives=False), descriptor)
        if stream is None:
            self._out.deliver(client, PublishFailed(key, uid, PublishError.NOT_CARRIED, reason))
            return
        message = PublishData(uid, key, packet, self.location, MAX_WIRE_HTL, data, epoch, kind, sig)
        self._flow.publish(now, stream, client, message)

    def publish_batch(
        self, now: float, key: bytes, client: ClientId, items: Sequence[tuple[int, bytes]]
    ) -> None:
        """Publish ``items``, ``(uid, data)`` pairs of plain packets, for a local client:
        what ``publish`` of each in turn would do, in one pass where this node is the
        stream's root (``batches``). ``items`` that are not a non-empty sequence of pairs
        raise ValueError: a caller's bug, which a client port checks before it calls."""
        batch = batch_of(items)  # (ValueError for what is not a batch)
        deferred = self._deferred
        waits = isinstance(key, bytes) and deferred.waits(key)
        if waits or self._batch_now(now, key, client, batch) is None:
            # It waits for room at the root, behind the stream's publishes waiting there
            # already, if any (``batch_queue``).
            if not deferred.room(len(items)):
                for uid, _ in items:
                    self._busy(key, client, uid)
                return
            deferred.add(key, partial(self._batch_after, key, client, batch), len(items))

    def _batch_now(self, now: float, key: bytes, client: ClientId, batch: Batch) -> bool | None:
        """Number ``items`` at the root in one pass (True), or publish each on its own
        (False); None: the root will once it has room (nothing done)."""
        stream = self._streams.get(key) if isinstance(key, bytes) else None
        if stream is not None and stream.carried:
            taken = self._flow.publish_batch(now, stream, client, batch)
            if taken is None:
                return None
            if taken:
                self._join_for(now, key, client, Member(receives=False), None)  # (as ``publish``)
                return True
        for uid, data in batch.items:
            self._publish_now(now, key, client, uid, data, PLAIN)
        return False

    def _batch_after(self, key: bytes, client: ClientId, batch: Batch, now: float) -> bool:
        return self._batch_now(now, key, client, batch) is not None

    @property
    def waiting(self) -> bool:
        """Whether publishes wait at a root behind a batch (``batch_queue``)."""
        return bool(self._deferred)

    def run_deferred(self, now: float) -> None:
        """After an event: the publishes waiting behind a batch go, while they may."""
        if self._deferred:
            self._deferred.run(now)

    def _busy(self, key: bytes, client: ClientId, uid: int) -> None:
        error = PublishError.BUSY
        self._out.deliver(client, PublishFailed(key, uid, error, EXPLAIN[error]))

    def _signed_by_owner(
        self,
        key: bytes,
        descriptor: bytes | None,
        data: bytes,
        packet: int | None,
        epoch: int | None,
        kind: PacketKind,
        sig: bytes | None,
    ) -> bool:
        """Whether a local publish on a signed stream carries the owner's signature. The
        one check of it on this node: the packet flow trusts a local publish that passed, and
        the cache spares the packet's return trip down the tree a second verification."""
        stream = self._streams.get(key)
        signer = stream.signer if stream is not None else None
        if signer is None and descriptor is not None and descriptor_matches(key, descriptor):
            signer = descriptor[:32]
        if signer is None or packet is None:
            return False
        return self._flow.signatures.check(signer, sig, key, packet, epoch, kind, data)

    def unsubscribe(self, now: float, key: bytes, client: ClientId) -> None:
        """Remove a local client; the node leaves the tree if nobody else needs it."""
        stream = self._streams.get(key)
        if stream is not None and client in stream.local:
            del stream.local[client]
            self._prune(now, stream)

    def remove_client(self, now: float, client: ClientId) -> None:
        """A local client went away: drop it from every stream and forget its publishes."""
        self._flow.forget_client(client)
        for stream in list(self._streams.values()):
            if client in stream.local:
                del stream.local[client]
                self._prune(now, stream)

    def _join_for(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        member: Member,
        descriptor: bytes | None,
    ) -> tuple[Stream | None, str]:
        """The stream ``client`` joins as ``member`` (a subscriber that was only publishing
        becomes a full one), starting our search if we are not in the tree yet."""
        stream = self._streams.get(key)
        if stream is None:
            if key_is_signed(key):
                if descriptor is None or descriptor_matches(key, descriptor) is None:
                    return None, "a signed stream needs its descriptor (public key and name)"
            else:
                descriptor = None
            if not self._has_room(key):
                limit = self._config.max_streams
                return None, f"this node already carries its limit of {limit} streams"
            stream = self._new_stream(key, State.JOINING, None, descriptor)
            stream.local[client] = member
            self._start_own_search(now, stream, None, None)
            return stream, ""
        old = stream.local.get(client)
        if old is None or (member.receives and not old.receives):
            stream.local[client] = member
            self._unkeep(stream)
        return stream, ""


def _bad_publish(
    key: object,
    uid: object,
    data: object,
    packet: object,
    epoch: object,
    kind: object,
    sig: object,
) -> str | None:
    """What is wrong with a local client's publish request, in words (None: nothing).
    Typed ``object``: the values come from a client, whatever the annotations promise.
    Bytes are plain ``bytes`` exactly: a subclass may say anything of its length, and the
    packet is not checked again on its way out (``codec.note_checked``)."""
    if type(key) is not bytes or len(key) != KEY_SIZE:
        return f"a stream key is {KEY_SIZE} bytes"
    if type(uid) is not int or not 0 <= uid <= MAX_U64:
        return "a publish uid is an integer in [0, 2**64)"
    if type(data) is not bytes or len(data) > MAX_PAYLOAD:
        return f"a packet's data is bytes, at most {MAX_PAYLOAD} of them"
    for name, value in (("packet", packet), ("epoch", epoch)):
        if value is not None and (type(value) is not int or not 0 <= value <= MAX_PACKET):
            return f"{name} must be None or an integer in [0, {MAX_PACKET}]"
    if not isinstance(kind, PacketKind):
        return "kind must be a PacketKind"
    if sig is not None and (type(sig) is not bytes or len(sig) != SIGNATURE_SIZE):
        return f"a signature is {SIGNATURE_SIZE} bytes"
    return None
