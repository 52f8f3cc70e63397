"""Confirming: a root sends a packet down only once its publisher's node knows its number.

A root with ``NodeConfig.confirm_publishes`` (on by default) holds packets back;
one configured without it sends each down as soon as it is numbered, and takes the race
below. A publisher's node answers a ``PublishNumbered`` whichever way it is configured.

Why. A root numbers a publish and sends it down its tree. If a partition cuts the root (and
part of its tree) off from the publisher just then, the acknowledgement is lost on the way,
and the publishers' side of the cut never hears of that number: its new root gives it to
another publish, which it acknowledges. The side that was cut off has delivered the first
packet under that number, and nothing can take a delivery back: the subscribers cut off with
the root hold one content under that number, the acknowledged packet has another.

How. The number reaches the publisher's side before the packet reaches anyone:

1. The root numbers a publish from a peer and holds it *pending*, unsent, and tells the
   publisher's node its number (``PublishNumbered``, back the way the publish came).
2. That node keeps the publish as a *claim* on its number and answers
   ``PublishConfirmed`` up the tree. From then on, were the root to be lost, it pushes the
   claim up to whichever root takes the tree over (``push_claims``: on attaching, and when
   that root asks beyond its head), which takes it under that number if it is its next
   (``Takeover.on_claim``): both sides of any cut now agree on it. A publisher's node that
   takes the tree over itself weighs its own claims the same way (``own_claims``). That
   side is ``overlay.core.claims``.
3. The root, confirmed, stores the packet and sends it down; once another child holds it
   too (``commits``), the acknowledgement (``PublishSucceeded``) goes down the way the
   publish came. Only then is the publisher's client told.

A number goes down only along relays still in the tree (the sender is the relay's parent,
the publish's source still its child), as a confirmation comes back up: a number that
crosses a change of the tree is dropped, and the root gives its pending packet up (at
once, if it lost that child; past its deadline and a silent half deadline more, if others
wait behind it; else after ``confirm_timeout``; below). Otherwise stale relay entries can
close a cycle that a number goes round for ever.

Packets go down in number order, so a confirmed packet waits for the pending ones before
it. A local publisher at the root needs no confirmation, but its packet waits behind
pending ones too. So one child that never confirms would hold the stream: a pending packet
with another behind it, whose child is still heard from, waits ``confirm_deadline`` (1 s)
at most, then goes down unconfirmed (``release_overdue``), a lapse of that child, which is
then not waited for at all on that stream for a while (``confirm_lapses``). A pending
packet whose child fell silent (it may be cut off, holding the number as a claim) is not
passed over: the root asks that child something it answers at once (HeldQuery), and
without a sign of life within half a deadline gives the packet up with every pending
packet after it (``_fell_silent``), and the child lapses; their nodes are told to publish
afresh at once. A lone pending packet, which holds nobody up, is given up when its
confirmation has not come within ``confirm_timeout`` (its publisher died, or is cut off),
and so is one whose publish came through a child the root has lost since, at once: its
confirmation could only come back that way.

Giving up. The number was told to the publisher's node, which may hold it as a claim
beyond a cut; and a relay that passed its confirmation up, cut off with it just after,
roots its side of the cut and takes the claim as its next number (``witnesses``). So a
number given up is given to no fresh publish: it is set aside, with everything
pending after it (``give_up``), and nothing is shown under those numbers while the root
hears from no publisher. A root cut off from every publisher shows nothing there, and the
packets the other side's tree holds under them come up to it when the cut heals. A publish
that reaches it (a fresh one, or the retry of one set aside) shows that its side of any
cut has a publisher: then what is set aside goes down, in order and unconfirmed
(``resolve``; not in a grace, whose end weighs what waited), under the numbers its
publishers' nodes were told, the ones a claim on the other side names. A claim, a push or
a late confirmation of one set aside is no such sign (a relay's witness, a member or a
relay cut off below may speak for a publisher beyond a cut): it speaks for its own number
alone, which goes down if it is the lowest set aside (``release``). The other side giving
such a number to another publish is the race of a partition with publishers on both sides
(README, known limits).

What is dropped outright, its number free again: what is pending or set aside at a root
that stops being root; everything pending, and set aside up to its number, when a packet
pushed up from another root's numbering (it may have gone down there) arrives, which is
then weighed as if nothing were pending: it takes its number if that is the next, or
collides (in a grace, a push of a packet set aside here too); and a pending number, or one
set aside, that a claim or a report shows the tree had already, when its turn comes: what
was published under it is weighed afresh, never acknowledged under a number not stored.
What lies above the number the tree holds stays, set aside: the tree said nothing of it,
and its publisher's node was told it. At most
``max_queued_publishes`` wait at once; past that, a publish is refused BUSY.

The cost is one round trip between the root and the publisher's node before a packet goes
down (about twice the delivery latency of the simulator's main job, see the README); a
publisher at the root pays nothing. A publisher's node that dies, or a child that falls
silent, stalls the packets numbered after its publish a deadline and a half at most.

What it does not close: a packet sent down past its deadline, or through a child not waited
for since a lapse, reopens the race above for that packet, should a cut (below that child,
for the first) come before the publisher's node learned its number (a node that did learn
it holds the claim, which names the same packet). And: the publisher's node confirms, the
root sends the packet down, the cut comes, and the publisher's node dies before its side
learns the number from it. Two failures at one moment. A relay that passed the confirmation
up is a second witness on the publisher's side (``witnesses``): it pushes the claim too,
and weighs it if it becomes root. A publisher that was the root's own child has no such
relay; so the publisher's node also tells the number to a few direct peers other than its
parent as it confirms, and they witness it the same way (``peer_witnesses``). What is left:
every witness dies or is cut off too.

``Confirming`` is a component of ``PacketFlow`` (``overlay.core.publishing``); the claims of
step 2 are ``Claims`` (``overlay.core.claims``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from overlay.core.config import NodeConfig
from overlay.core.confirm_lapses import ConfirmLapses
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.stats import NodeStats
from overlay.core.streams import Pending, Source, State, Stream, next_number
from overlay.core.timers import TimerQueue
from overlay.core.tokens import Tokens
from overlay.core.witnesses import Witnesses
from overlay.messages import (
    HeldQuery,
    PacketKind,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishSucceeded,
)

CONFIRM_TIMER = "confirm"


class Confirming:
    """Numbers that wait for their publisher's confirmation at a root (``RootState.pending``),
    and the confirmations on their way up to it; the publisher's side keeps its claims in
    ``overlay.core.claims``."""

    __slots__ = (
        "config",
        "due",
        "lapses",
        "peers",
        "reply_root",
        "requeue",
        "send",
        "stats",
        "store_new",
        "streams",
        "timers",
        "tokens",
        "witnesses",
    )

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        out: Outbox,
        witnesses: Witnesses,
        requeue: Callable[[Stream, list[tuple[Source, PublishData]]], None],
        store_new: Callable[[Stream, PublishData, int], None],
        reply_root: Callable[[Stream, Source, PublishData, Any], None],
        timers: TimerQueue,
        tokens: Tokens,
        peers: PeerTable | None = None,
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.send = out.send
        self.witnesses = witnesses
        self.requeue = requeue
        self.store_new = store_new
        self.reply_root = reply_root
        self.timers = timers
        self.tokens = tokens
        self.peers = peers
        self.due: dict[int, bytes] = {}  # confirm timer token -> its stream's key
        self.lapses = ConfirmLapses(config.confirm_deadline)
        timers.on(CONFIRM_TIMER, self.on_confirm_timer)

    # --- at the root ---------------------------------------------------------------------

    def number_new(
        self, now: float, stream: Stream, source: Source, message: PublishData, number: int
    ) -> PublishSucceeded | PublishNumbered | None:
        """A new publish numbered ``number`` at the root: sent down at once if nothing is
        pending and its publisher is local, or the root does not confirm publishes, or
        does not wait for the child it came through on this stream since a lapse
        (``confirm_lapses``); otherwise held until confirmed, or until
        ``confirm_deadline`` has passed for every pending packet before it
        (``release_overdue``)."""
        local = not isinstance(source, bytes)
        # A child that let a number lapse is not waited for, for a while (``confirm_lapses``).
        unwaited = isinstance(source, bytes) and not self.lapses.waits_for(now, stream.key, source)
        pending = stream.root.pending
        if (local or unwaited or not self.config.confirm_publishes) and not pending:
            self.stats.released_unconfirmed += unwaited
            self.store_new(stream, message, number)
            return PublishSucceeded(message.uid, message.key, number)
        pending[number] = Pending(
            source, message, confirmed=local or unwaited, at=now, waited=not unwaited
        )
        if len(pending) == 1:
            stream.root.pending_rounds = 0
        self.release_overdue(now, stream)  # (it may have been all that was lacking)
        if local:
            return None  # answered when it goes down (``_flush``)
        return PublishNumbered(message.uid, message.key, number)

    def release_overdue(self, now: float, stream: Stream, timer: bool = False) -> None:
        """Send down, unconfirmed, each oldest pending packet whose confirmation is
        ``confirm_deadline`` overdue while a later one waits behind it and its child still
        talks to us (heard from since half its deadline), and arm the timer that weighs
        the oldest next.

        Why not wait ``confirm_timeout``: packets go down in number order, so one child
        that never confirms would hold the whole stream that long per publish. Why send
        it rather than drop it: its publisher's node may hold the number as a claim by
        now (only the confirmation is missing), and would push it to a later root, which
        takes it where a dropped number had gone to another publish. Sent, the number
        has one content on the root's side, and the claim (if any) names that same one.
        Why only a child still heard from: one cut off from us falls silent, and its
        side of the cut may hold the number as a claim or give it again; a chaos replay
        (two publishers across a cut) numbered twice when such a packet was passed over.
        A silent one is asked for a sign of life (HeldQuery, which a child answers at
        once) and given half a deadline to show one; then it is given up (``_fell_silent``).
        What it still gives up is the race confirmation closes (module notes) for a cut
        below a relay child, in this very deadline, before the publisher's node learned
        the number. A lone pending packet holds nobody up, so it waits
        ``confirm_timeout`` (``confirm_overdue``)."""
        pending = stream.root.pending
        deadline = self.config.confirm_deadline
        poll = False
        while len(pending) > 1 and stream.state is State.ROOT:
            number = next(iter(pending))
            entry = pending[number]
            if entry.confirmed or now < entry.at + deadline:
                break
            # (Unconfirmed, so a peer's: a local publish is confirmed when numbered.)
            assert isinstance(entry.source, bytes)
            if self._heard_since(entry.source, entry.at + deadline / 2):
                self._lapsed(now, stream, entry.source)  # (this entry among the child's)
                self._flush(stream)
                continue
            # Cut off, maybe: ask it something it answers at once, and wait half a
            # deadline for the answer (or any other sign of life). Only the timer asks and
            # drops: a publish being numbered (``number_new``) must not see its own number
            # dropped before it is told it, nor a backlog being drained be requeued.
            if not timer:
                poll = True
                break
            if entry.asked is None:
                entry.asked = now
                asked = 0 if stream.next_in is None else max(stream.next_in - 1, 0)
                self.send(entry.source, HeldQuery(stream.key, asked))
            if now < entry.asked + deadline / 2:
                poll = True
                break
            self._fell_silent(now, stream, number, entry.source)
        if pending and stream.root.confirm_token is None:
            first = pending[next(iter(pending))]
            if first.at + deadline > now:
                at = first.at + deadline
            else:
                at = now + (deadline / 4 if poll else deadline)
            token = stream.root.confirm_token = self.tokens.take()
            self.due[token] = stream.key
            self.timers.add(at, (CONFIRM_TIMER, token, 0))

    def _fell_silent(self, now: float, stream: Stream, number: int, child: PeerId) -> None:
        """The oldest pending ``number`` came through ``child``, which said nothing since
        half its deadline nor answered our question, while later packets wait behind it:
        it is given up with them (``give_up``, which has their nodes publish afresh at
        once), and ``child`` lapses, so its publishes are not waited for a while.

        Why not send it down now: ``child`` may be cut off before its publisher's node heard
        the number, its side of the cut giving the number to another publish, while this
        side has no publisher to show anything more (a chaos replay numbered twice when
        such a packet was sent down). Why not give the number to the next publish: the
        publisher's node may have confirmed it, and a relay below ``child`` that passed the
        confirmation up, cut off with it, takes it under that number as root of its side
        (module notes, giving up). Why not wait ``confirm_timeout`` as for a lone one: it
        holds every packet behind it, and waiting buys nothing for a cut longer than the
        wait. A link that comes back sooner brings its late confirmation, or its
        publisher's retry, and what was set aside goes down."""
        self.stats.silent_drops += 1
        self.give_up(stream, number, renew=True)
        self._lapsed(now, stream, child)  # (after: nothing of it is left pending to mark)

    def give_up(self, stream: Stream, first: int, renew: bool) -> None:
        """Set aside the pending packet ``first`` and every pending one after it (module
        notes, giving up): their numbers stay theirs, each to go down unconfirmed in its
        turn once ``resolve`` finds a publisher on this side. With ``renew``, outside a
        grace, a peer's node is told at once to publish afresh (as a refused claim is:
        ``PublishCollision``), and its retry, reaching us, sends them down under the
        numbers they have. A local publish among them is this side's publisher already:
        they go down at once. On a signed stream, whose publisher signs a number it
        chose, they are dropped instead (``drop_pending``)."""
        if stream.signer is not None:
            self.drop_pending(stream, first, renew=renew)
            return
        renew = renew and stream.root.recover_until is None
        after = next_number(stream)
        renewals: list[tuple[PeerId, int, int]] = []
        local = False
        for number, entry in self._aside(stream, [n for n in stream.root.pending if n >= first]):
            self.stats.set_aside += 1
            source = entry.source
            if not isinstance(source, bytes):
                local = True
            elif renew and entry.message.packet is None and source in stream.children:
                renewals.append((source, entry.message.uid, number))
        for source, uid, number in renewals:
            self.stats.renewed += 1
            self.send(source, PublishCollision(uid, stream.key, number, after))
        if local:
            self.resolve(stream)

    @staticmethod
    def _aside(stream: Stream, numbers: list[int]) -> list[tuple[int, Pending]]:
        """Move the pending ``numbers`` among those set aside, in number order, each to go
        down unconfirmed when they are resolved; the entries moved, with their numbers."""
        pending, aside = stream.root.pending, stream.root.set_aside
        moved = []
        for number in numbers:
            entry = pending.pop(number)
            entry.confirmed, entry.waited = True, False
            aside[number] = entry
            moved.append((number, entry))
        if list(aside) != sorted(aside):  # (set aside again below earlier ones: rare)
            stream.root.set_aside = dict(sorted(aside.items()))
        return moved

    def resolve(self, stream: Stream) -> None:
        """A publish (fresh, or a retry) reached us while numbers are set aside
        (``give_up``): this side of any cut has a publisher, so they go down, in order and
        unconfirmed, under the numbers their publishers' nodes were told, after what is
        pending before them."""
        aside = stream.root.set_aside
        if not aside or stream.root.recover_until is not None:
            return  # (in a grace the root numbers nothing: its end serializes what waited)
        self.stats.resolved += len(aside)
        stream.root.pending.update(aside)  # (all above every pending number: in order)
        aside.clear()
        self._flush(stream)

    def release(self, stream: Stream, number: int) -> bool:
        """A claim, a push or a late confirmation names ``number``, set aside here, with the
        publish set aside under it. It speaks for that number alone (a relay's witness, a
        member, or a relay cut off below may speak for a publisher beyond a cut, so it is
        no sign of a publisher on this side): ``number`` goes down if it is the lowest set
        aside, out of a grace, the rest still waiting. True if it did."""
        aside = stream.root.set_aside
        if stream.root.recover_until is not None or next(iter(aside), None) != number:
            return False
        self.stats.claimed_back += 1
        stream.root.pending[number] = aside.pop(number)  # (above every pending number)
        self._flush(stream)
        return True

    def _heard_since(self, source: Source, since: float) -> bool:
        """Whether the child ``source`` (a local client: always) sent us anything at or
        after ``since``: a child cut off from us falls silent, one that ignores our number
        does not."""
        if not isinstance(source, bytes) or self.peers is None:
            return True
        peer = self.peers.get(source)
        return peer is not None and peer.heard >= since

    def on_confirm_timer(self, now: float, token: int, attempt: int) -> None:
        key = self.due.pop(token, None)
        stream = None if key is None else self.streams.get(key)
        if stream is None or stream.root.confirm_token != token:
            return
        stream.root.confirm_token = None
        self.release_overdue(now, stream, timer=True)

    def _lapsed(self, now: float, stream: Stream, peer: PeerId) -> None:
        """A number that came through child ``peer`` lapsed: it is not waited for on this
        stream for a while, so what is pending from it goes down as its turn comes."""
        self.lapses.lapsed(now, stream.key, peer)
        self.stats.lapses += 1
        for entry in stream.root.pending.values():
            if entry.source == peer and not entry.confirmed:
                entry.confirmed = True
                entry.waited = False

    def refusal(self, stream: Stream, message: PublishData) -> PublishError | None:
        """Why the root cannot order ``message`` next, counting the pending packets before
        it: the frontier follows only packets sent down (an epoch closed by a pending
        marker is closed for the publishes after it)."""
        if len(stream.root.pending) >= self.config.max_queued_publishes:
            return PublishError.BUSY  # a child flooding publishes it never confirms
        frontier, epoch = stream.frontier, message.epoch
        if not stream.root.pending or epoch is None:
            return frontier.refusal(epoch, message.kind)
        # The frontier as it will be once the pending packets go down, in order. An epoch
        # not open and no newer than one a pending marker closes is done then, as
        # ``Frontier.is_done`` has it. Otherwise an older epoch's data, numbered after a
        # pending marker that closes a newer epoch, is passed over and its epoch delivered
        # empty.
        opened = set(frontier.open)
        closed: set[int] = set()
        newest: int | None = None

        def done(e: int) -> bool:
            if e in closed:
                return True
            if e in opened:
                return False
            return frontier.is_done(e) or (newest is not None and e <= newest)

        for entry in stream.root.pending.values():
            other = entry.message.epoch
            if other is None or done(other):
                continue
            if entry.message.kind is PacketKind.DATA:
                opened.add(other)
            else:
                closed.add(other)
                opened.discard(other)
                if entry.message.kind is PacketKind.EPOCH_CLOSED:  # (as ``last_closed``)
                    newest = other if newest is None else max(newest, other)
        if done(epoch):
            return PublishError.EPOCH_DONE
        opens = message.kind is PacketKind.DATA and epoch not in opened
        if opens and len(opened) >= frontier.max_open:
            return PublishError.TOO_MANY_EPOCHS
        return None

    def renumbered(
        self, stream: Stream, source: Source, message: PublishData, number: int
    ) -> PublishSucceeded | PublishNumbered | None:
        """A publish retried while pending as ``number``: told its number again, unless the
        retry comes from here (our own publish had come back to us through a peer), which
        confirms it."""
        if isinstance(source, bytes):
            return PublishNumbered(message.uid, message.key, number)
        self._confirm(stream, stream.root.pending[number])
        uids = stream.uids
        if number in stream.root.pending or uids is None or uids.get(message.uid) != number:
            # Still waiting (answered when it goes down), or dropped while we flushed (its
            # number was the tree's already): the publish's retry is numbered afresh.
            return None
        return PublishSucceeded(message.uid, message.key, number)

    def pushed_over(self, stream: Stream, message: PublishData) -> None:
        """A packet pushed up while publishes are pending or set aside here. Under a pending
        number by the same publish (its node pushes its claim), it confirms it. Anything
        else was numbered by another root and may have gone down there: everything pending,
        and set aside up to its number, is dropped before the push is weighed like any
        other, so it is judged against what this root really sent down (a push beyond that
        collides, as without pending), and nothing pending goes down after it. What is set
        aside above it stays: the push says nothing of those numbers, which their
        publishers' nodes were told."""
        number = message.packet
        pending = stream.root.pending.get(number) if number is not None else None
        if pending is not None and pending.message.uid == message.uid:
            self._confirm(stream, pending)
        else:
            self.drop_pending(stream, keep_above=number)

    def on_confirmed(self, now: float, peer: PeerId, message: PublishConfirmed) -> None:
        """A publisher's node holds its publish under the number we gave it; a relay passes
        that up to its parent. At the root, one that comes past its deadline while later
        packets wait is a lapse of the child all the same: else a child could hold every
        publish behind its own for almost a deadline and a half, each time, by confirming
        just before it is dropped (``release_overdue``)."""
        stream = self.streams.get(message.key)
        if stream is None or peer not in stream.children:
            self.stats.ignored += 1
            return
        if stream.state is State.JOINED and stream.parent is not None:
            self.witnesses.witness(peer, message)  # (``witnesses``: should its publisher die)
            self.send(stream.parent, message)
            return
        root = stream.state is State.ROOT
        aside = stream.root.set_aside.get(message.packet) if root else None
        if aside is not None and aside.message.uid == message.uid:
            self.release(stream, message.packet)  # (a late confirmation: its number alone)
            return
        pending = stream.root.pending.get(message.packet) if root else None
        if pending is None or pending.message.uid != message.uid:
            self.stats.ignored += 1  # dropped meanwhile, or not ours: the publisher retries
            return
        waiting = next(reversed(stream.root.pending)) > message.packet
        late = now >= pending.at + self.config.confirm_deadline
        if pending.waited and waiting and late and not pending.confirmed:
            pending.confirmed = True
            self.stats.confirmed += 1
            self._lapsed(now, stream, peer)  # (its later numbers: not waited for either)
        self._confirm(stream, pending)

    def _confirm(self, stream: Stream, pending: Pending) -> None:
        if not pending.confirmed:
            pending.confirmed = True
            self.stats.confirmed += 1
        self._flush(stream)

    def _flush(self, stream: Stream) -> None:
        """Send down, in order, the pending packets that are confirmed."""
        pending = stream.root.pending
        while pending:
            number = next(iter(pending))
            entry = pending[number]
            if stream.high is not None and number <= stream.high:
                # While it waited, a claim or a push told us the tree had this number
                # already (``Takeover.reported``): it is another packet's. Those above
                # the tree's head are set aside, not freed: their nodes were told them.
                self.drop_pending(stream, keep_above=stream.high)
                return
            if not entry.confirmed:
                return
            del pending[number]
            stream.root.pending_rounds = 0
            self.stats.released_unconfirmed += not entry.waited
            self.store_new(stream, entry.message, number)
            answer = PublishSucceeded(entry.message.uid, entry.message.key, number)
            self.reply_root(stream, entry.source, entry.message, answer)

    def drop_pending(
        self,
        stream: Stream,
        first: int | None = None,
        renew: bool = False,
        keep_above: int | None = None,
    ) -> None:
        """Forget the pending packets from ``first`` on (all of them by default, with those
        set aside): their numbers are free again, and their publishers, retrying, are
        numbered afresh. With ``keep_above`` (the tree holds packets up to that number,
        or its own packet is about to take it), those above it are kept, set aside
        (``give_up``): the tree said nothing of them, and their nodes were told them. With
        ``renew``, a peer's node is told so at once (below), rather than retry after
        ``publish_timeout``. Not by default, nor in a grace: a root that holds numbering
        (a push from another root, a takeover) asks for claims and refuses them at the
        grace's end, and a fresh publish sent meanwhile under a claim's uid waits behind
        the claim as a plain retry would, to be answered only after ``publish_timeout``."""
        renew = renew and stream.root.recover_until is None
        if first is None and keep_above is not None:
            self._aside(stream, [n for n in stream.root.pending if n > keep_above])
        aside = stream.root.set_aside
        if first is None and aside:
            below = [n for n in aside if keep_above is None or n <= keep_above]
            stream.root.pending.update((n, aside.pop(n)) for n in below)
        uids = stream.uids
        dropped = []
        renewals: list[tuple[PeerId, int, int]] = []
        for number in [n for n in stream.root.pending if first is None or n >= first]:
            entry = stream.root.pending.pop(number)
            self.stats.unconfirmed += 1
            if uids is not None and uids.get(entry.message.uid) == number:
                uids.forget(entry.message.uid)
            dropped.append((entry.source, entry.message))
            source = entry.source
            signed = entry.message.packet is not None
            if renew and isinstance(source, bytes) and not signed and source in stream.children:
                renewals.append((source, entry.message.uid, number))
        self.requeue(stream, dropped)  # local ones, numbered again first (``backlog``)
        if renewals:
            # A peer's node holds the number as a claim, or will once our PublishNumbered
            # reaches it (it went first, the same way): refused as a claim is
            # (``Takeover.on_claim``), its node publishes afresh at once, rather than
            # after ``publish_timeout``. (A signed publish names its own number: its
            # node retries it as before.)
            after = next_number(stream)
            for source, uid, number in renewals:
                self.stats.renewed += 1
                self.send(source, PublishCollision(uid, stream.key, number, after))

    def orphaned_pending(self, stream: Stream) -> None:
        """A child left, or we stopped being root: what is pending from the first publish
        that came through a child no longer ours is given up now (``give_up``), not after
        ``confirm_timeout``. Its confirmation can only come through that child (one from
        elsewhere is ignored), and a root that holds numbers nobody can confirm both stalls
        the stream and, gone idle, is kept as if it had numbered something.

        A child that left holding later packets up lapses (from when it was numbered),
        or it could leave and join again to stall the stream without ever lapsing; and
        the nodes of what is given up behind it are told to publish afresh at once. A root
        that stops being root drops what is pending or set aside: it numbers nothing
        more."""
        if stream.state is not State.ROOT:
            self.drop_pending(stream)
            return
        pending = stream.root.pending
        for number, entry in pending.items():
            source = entry.source
            if (
                isinstance(source, bytes)
                and not entry.confirmed  # (sent down as its turn comes: needs nothing more)
                and source not in stream.children
            ):
                held_up = entry.waited and next(reversed(pending)) > number
                self.give_up(stream, number, renew=True)
                if held_up:
                    self._lapsed(entry.at, stream, source)  # (after, as above)
                return

    def confirm_overdue(self) -> None:
        """One heartbeat round passed: a root whose oldest pending packet has waited
        ``confirm_timeout`` for its publisher gives it up with everything after it (a
        lone one: with others behind it, ``release_overdue`` sent it down or gave it up
        long before)."""
        rounds = math.ceil(self.config.confirm_timeout / self.config.heartbeat_interval)
        for stream in self.streams.values():
            if not stream.root.pending:
                continue
            stream.root.pending_rounds += 1
            if stream.root.pending_rounds > rounds:
                # Not a lapse of its child (``confirm_lapses``): its publisher died, or is
                # cut off, and that is when waiting for the others matters most.
                self.give_up(stream, next(iter(stream.root.pending)), renew=False)
