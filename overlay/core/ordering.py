"""The root's ordering of publishes: numbering, collision detection and uid idempotency.

Spec (seeds/003): a publish "will normally be forwarded up to the root, which will decide
whether it is a collision. If not, it is broadcast to all nodes in the tree". The rules:

* **Numbers are dense.** The next packet is always ``high + 1``; a publisher that names
  another number is told that one instead (``PublishCollision``), so every node can tell a
  gap from a delay.
* **Collisions.** spec: "If we have the key, and already have the packet, we return an
  FNPPublishSucceeded. If we have the key, and have a packet with the same number but
  different contents, we return an FNPPublishCollision with a suggested next packet
  number." (``Ordering.known``)
* **Uid idempotency.** A uid the root remembers (``uid_table``) gets its original number: a
  Spark task retry, a client reconnect. A fresh publish under a uid given to other content
  is refused (``Ordering.reused``).
* **Packets numbered elsewhere.** After a takeover, a packet the tree already holds under a
  number is taken under that number (``takeover``: ``fills_hole``, ``backfills``).

A new packet is stored and sent down by ``broadcast`` (``Broadcast.store``); a number may
first wait for its publisher's node to confirm it (``confirming``).
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.confirming import Confirming
from overlay.core.memory import Memory
from overlay.core.showing import root_stamp
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, Stream, next_number
from overlay.core.takeover import backfills, fills_hole
from overlay.core.uid_table import content_digest
from overlay.messages import (
    PublishCollision,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    SubscribeData,
)

Answer = PublishSucceeded | PublishCollision | PublishRejected
# A root's decision: an answer, a number to confirm first, or None (answered later).
Decision = Answer | PublishNumbered | None


class Ordering:
    """A root's decision on each publish that reaches it, and the uids it gave numbers.

    ``confirming`` and ``close_tail`` (``Takeover.close_tail``) are given by ``attach``
    after construction: those components take ``store_new`` and ``serialize`` from this
    one."""

    __slots__ = ("_close_tail", "_confirming", "_signature_ok", "_store", "memory", "stats")

    def __init__(
        self,
        stats: NodeStats,
        memory: Memory,
        signature_ok: Callable[[Stream, PublishData | SubscribeData], bool],
        store: Callable[[Stream, SubscribeData], None],  # store and send down (broadcast)
    ) -> None:
        self.stats = stats
        self.memory = memory
        self._signature_ok = signature_ok
        self._store = store
        self._confirming: Confirming
        self._close_tail: Callable[[Stream], None]

    def attach(self, confirming: Confirming, close_tail: Callable[[Stream], None]) -> None:
        self._confirming = confirming
        self._close_tail = close_tail

    def known(self, stream: Stream, message: PublishData) -> Answer | None:
        """The answer for a numbered publish this node can give from its window, if any."""
        number = message.packet
        if number is None:
            return None
        held = stream.window.get(number)
        if held is None:
            return None
        if (held.data, held.epoch, held.kind) == (message.data, message.epoch, message.kind):
            return PublishSucceeded(message.uid, message.key, number)
        return PublishCollision(message.uid, message.key, number, next_number(stream))

    def serialize(
        self, now: float, stream: Stream, message: PublishData, source: Source
    ) -> Decision:
        """The root's decision on one publish; a new packet is stored and broadcast."""
        uids = stream.uids
        assert uids is not None, "only a root serializes"
        confirming = self._confirming
        number = uids.get(message.uid)
        if number is not None and number in stream.root.set_aside:
            if not message.pushed:
                # Its retry reached us: this side has its publisher, and what was set aside
                # goes down (``confirming``), unless the tree turned out to hold those
                # numbers (then its uid is forgotten, and it is weighed afresh).
                confirming.resolve(stream)
            elif not confirming.release(stream, number):
                # A push of it, not the lowest set aside, or in a grace: the tree's word on
                # that number, weighed as any push once what is pending, and set aside up
                # to it, is dropped (``pushed_over``).
                confirming.drop_pending(stream, keep_above=number)
            number = uids.get(message.uid)
        if (
            message.pushed
            and not message.claim
            and (stream.root.pending or stream.root.set_aside)
            and number != message.packet
        ):
            # (not a resend of a push we took already: ``resend_pushes``)
            confirming.pushed_over(stream, message)
            number = uids.get(message.uid)
        if fills_hole(stream, message) and number != message.packet:
            # Pushed up under the number a branch holds it as: taken in that place even if
            # its uid has another number here (a former root gave it one number, this root
            # another), so every branch sees the same packet under each number, never a
            # hole.
            return self._fill(stream, message)
        if number is not None:
            if self.reused(stream, message):
                return rejection(message, PublishError.UID_REUSED)
            if number in stream.root.pending:  # a retry, not yet sent down (``confirming``)
                return confirming.renumbered(stream, source, message, number)
            return PublishSucceeded(message.uid, message.key, number)
        if backfills(stream, message):
            return self._backfill(stream, message)
        if not message.pushed:
            confirming.resolve(stream)  # (a fresh publish: this side has a publisher)
        if message.packet is not None and message.packet != next_number(stream):
            known = self.known(stream, message)
            if isinstance(known, PublishSucceeded):
                self._remember(stream, message, known.packet)
                return known
            return PublishCollision(message.uid, message.key, message.packet, next_number(stream))
        refusal = confirming.refusal(stream, message)
        if refusal is not None:
            self.stats.publish_rejected += 1
            return rejection(message, refusal)
        self.stats.published += 1
        self._close_tail(stream)
        if message.pushed:
            return self._take(stream, message, next_number(stream))
        number = next_number(stream)
        self.stats.numbered += 1
        self._remember(stream, message, number)
        return confirming.number_new(now, stream, source, message, number)

    def _fill(self, stream: Stream, message: PublishData) -> Answer:
        """Take a packet the old root ordered that this root lacks, in its order. The old
        root accepted it, so the frontier's refusals do not apply."""
        number = message.packet
        assert number is not None
        if stream.signer is not None and not self._signature_ok(stream, message):
            return rejection(message, PublishError.BAD_SIGNATURE)
        self.stats.refilled += 1
        return self._take(stream, message, number)

    def _backfill(self, stream: Stream, message: PublishData) -> Answer:
        """Keep a packet from before this root took over, which it never had: a child
        waiting to be caught up over it (``refills``) is served from the window. Every
        other child and local client is past it, so it goes nowhere else."""
        number = message.packet
        assert number is not None
        if stream.signer is not None and not self._signature_ok(stream, message):
            return rejection(message, PublishError.BAD_SIGNATURE)
        self.stats.backfilled += 1
        first = stream.frontier.first_of(message.epoch, number)
        stream.window.add(numbered(message, number, None if first is None else min(first, number)))
        self.memory.saw(stream.key, number)
        self._remember(stream, message, number)
        return PublishSucceeded(message.uid, message.key, number)

    def _take(self, stream: Stream, message: PublishData, number: int) -> Answer:
        """Store ``message``, numbered elsewhere, as packet ``number``. What is pending
        (``confirming``) was shown to nobody: it is dropped, rather than go down after it;
        of what is set aside, what lies above ``number`` stays (its publishers' nodes were
        told those numbers)."""
        self._confirming.drop_pending(stream, keep_above=number)
        self.store_new(stream, message, number)
        self._remember(stream, message, number)
        return PublishSucceeded(message.uid, message.key, number)

    def store_new(self, stream: Stream, message: PublishData, number: int) -> None:
        """Store ``message`` as packet ``number`` and send it down."""
        first = stream.frontier.first_of(message.epoch, number)
        self._store(stream, numbered(message, number, first, root_stamp(stream)))

    def reused(self, stream: Stream, message: PublishData) -> bool:
        """Whether ``message`` is a fresh publish under a uid we gave a packet with other
        content (``uid_table``): refused, not answered with that packet's number, which
        would acknowledge content nobody stored. Packets the tree pushes or claims come
        with the content they were numbered for, and are not fresh publishes."""
        uids = stream.uids
        if message.pushed or uids is None or not uids.reused(message.uid, _digest(message)):
            return False
        self.stats.uids_reused += 1
        return True

    def _remember(self, stream: Stream, message: PublishData, number: int) -> None:
        uids = stream.uids
        assert uids is not None
        uids.remember(message.uid, number, _digest(message))


def numbered(
    message: PublishData, number: int, epoch_first: int | None, mark: int | None = None
) -> SubscribeData:
    """The packet a root stores for ``message`` as ``number``, carrying ``mark``."""
    return SubscribeData(
        message.key,
        number,
        message.data,
        message.epoch,
        message.kind,
        message.sig,
        epoch_first,
        message.uid,
        mark,
    )


def rejection(message: PublishData, error: PublishError) -> PublishRejected:
    return PublishRejected(message.uid, message.key, int(error))


def _digest(message: PublishData) -> int:
    return content_digest(message.data, message.epoch, message.kind)
