"""Publishing: packets go up the tree to the root, which orders them, and down to everyone.

Spec (seeds/003): "we send a PublishData to our parent ... It will normally be forwarded up
to the root, which will decide whether it is a collision. If not, it is broadcast to all
nodes in the tree and thereby all subscribers." The rules here, in the order they apply:

* **Up.** A node forwards a PublishData from a child (or a local client) to its parent and
  remembers, in a bounded table, whom to pass the answer back to. A node that already holds
  the numbered packet answers itself: "If we have the key, and already have the packet, we
  return an FNPPublishSucceeded"; a different packet under that number is a collision. A
  node that is joining or restarting holds publishes until it is in the tree again.
* **The root** orders. A uid it remembers gets its original number (idempotent retries: a
  Spark task retry, a client reconnect). A number it holds with the same content is a
  success, with other content a collision with a suggested next number. Numbers are dense:
  the next packet is always ``high + 1``, a publisher that names another number is told
  that one instead (``PublishCollision``), so every node can tell a gap from a delay.
* **Down.** The root stores a new packet and sends it as SubscribeData to every child; each
  node stores what it has not seen and sends it on. Over a FIFO link from one parent the
  numbers arrive in order, so a number past the one expected means the ones between are
  gone: they become a hole, passed down as PacketsMissed, never a silent gap.
* **Catch-up.** A node that adopts a child with ``last_seen`` sends it every later packet it
  holds and PacketsMissed for the rest; a fresh child gets the open epochs it holds from
  their start, so atomic subscribers there can have them whole.
* **Taking over.** A node that becomes root of a tree that already carried packets (the
  root died, or a closer node took its place) learns the newest number from the
  resubscribers' ``last_seen`` and continues above it, so no number is given twice. For
  ``takeover_grace`` it numbers nothing new: the old root's other children are still
  reporting, and one may hold packets nobody else got before the old root died. Such a
  node pushes the packets its new parent lacks up to the root, original uids and numbers
  kept, and the root takes them in order as the next packets; what nobody brings within
  the grace is reported missed. Every packet carries its publish uid, so the new root
  rebuilds the uid table from its window and a publisher's retry is acknowledged with the
  packet's number, not ordered twice. (Those methods live in ``overlay.core.takeover``.)
* **Signatures.** On a signed stream a node checks a packet before it stores or forwards it,
  once (``signatures.py``). A peer that sends a bad one is dropped; the packet is not stored,
  so the genuine packet of that number is still accepted when it comes.

Invariant: a node stores each packet number at most once and sends each stored packet to
each child at most once (plus catch-up, which only a newly adopted child gets), so no tree
link carries a packet twice.
"""

from __future__ import annotations

import dataclasses

from overlay.core.backlog import Backlog
from overlay.core.commits import Commits
from overlay.core.config import NodeConfig
from overlay.core.confirming import Confirming
from overlay.core.delivery import pump
from overlay.core.early_waits import EarlyWaits
from overlay.core.effects import PeerId
from overlay.core.epochs import malformed
from overlay.core.gathering import Gathering
from overlay.core.joining import Joining
from overlay.core.local_publishing import LocalPublishes
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.peers import PeerTable
from overlay.core.pushes import Pushes
from overlay.core.showing import Showing, root_stamp
from overlay.core.signatures import SignatureChecker
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, State, Stream
from overlay.core.takeover import (
    Takeover,
    backfills,
    continues,
    fills_hole,
    gathered,
    in_tail,
    next_number,
)
from overlay.core.timers import TimerQueue
from overlay.core.tokens import Tokens
from overlay.core.uid_table import content_digest
from overlay.core.window import NOTHING_OWED
from overlay.core.witnesses import Relay, Witnesses
from overlay.messages import (
    Committed,
    PacketsMissed,
    PastQuery,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    PublishWitness,
    SubscribeData,
)

Answer = PublishSucceeded | PublishCollision | PublishRejected
# A root's decision: an answer, a number to confirm first, or None (answered later).
Decision = Answer | PublishNumbered | None


class PacketFlow:
    """The publish and broadcast half of a node, a facade over the components that own
    its parts. The node owns the streams and the tree; this object moves packets through
    them, its effects through the node's ``Outbox``. It keeps the routing of publishes up
    the tree, the root's ordering of them, and packets coming down; the rest is its
    components':

    * ``publishes``: the local clients' publishes in flight (``LocalPublishes``), with
      ``credit``, those out per stream (``PublishCredit``); ``early``: the questions to a
      new parent about a gap, and the packets waiting for their answer (``EarlyWaits``);
    * ``takeover``: a root's graces (``Takeover``); ``pushing``: packets pushed up
      (``Pushes``); ``gathering``: questions down for what a root lacks (``Gathering``);
    * ``confirming``: numbers waiting for their publisher's node, and claims
      (``Confirming``); ``witnesses`` and ``peer_witnesses``: the relay table and the
      witness claims in it (``Witnesses``, ``PeerWitnesses``);
    * ``commits``: a root's commit point (``Commits``); ``showing``: the marks
      (``Showing``); ``backlog``: publishes a full root holds back (``Backlog``);
    * ``joining``: what a new child is told and sent, and a node that took a parent
      (``Joining``).

    The node calls the components' methods it needs through this object, bound once here.
    """

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        timers: TimerQueue,
        stats: NodeStats,
        out: Outbox,
        memory: Memory,
        peers: PeerTable | None = None,
    ) -> None:
        self.config = config
        self.streams = streams
        self.timers = timers
        self.stats = stats
        self._send = out.send
        self._deliver = out.deliver
        self._drop = out.drop
        self.memory = memory
        self.signatures = SignatureChecker(config.signature_cache)
        self._signature_ok = self.signatures.packet_ok
        tokens = Tokens()  # (one counter: graces and questions to a parent)

        publishes = self.publishes = LocalPublishes(
            config, streams, stats, timers, out, self._route
        )
        local, credit = publishes.local, publishes.credit
        early = self.early = EarlyWaits(
            config, streams, stats, timers, tokens, self._store, self._missing
        )
        witnesses = self.witnesses = Witnesses(config, stats, local, self._signature_ok)
        peer_witnesses = self.peer_witnesses = PeerWitnesses(
            config, stats, streams, peers, out, witnesses, local, self._signature_ok
        )
        witnesses.unhold = peer_witnesses.unhold
        showing = self.showing = Showing(config, streams, stats, timers, out, self.pump)
        backlog = self.backlog = Backlog(config, streams, stats, local, self._reply, self._route)
        confirming = self.confirming = Confirming(
            config,
            streams,
            stats,
            out,
            local,
            witnesses,
            peer_witnesses,
            backlog.requeue,
            self._store_new,
            self._reply_root,
            self._route,
        )
        commits = self.commits = Commits(
            config,
            streams,
            stats,
            out,
            publishes.answer,
            self._reply,
            self.pump,
            confirming.orphaned_pending,
        )
        pushing = self.pushing = Pushes(config, streams, stats, out)
        gathering = self.gathering = Gathering(
            config, stats, out, pushing.push_one, confirming.push_claims
        )
        takeover = self.takeover = Takeover(
            config,
            streams,
            timers,
            stats,
            memory,
            tokens,
            confirming,
            gathering.ask_down,
            self._missing,
            self._serialize,
            self._reply_root,
            self._wait,
            self.carried,
            self.pump,
            early.release,
        )
        joining = self.joining = Joining(
            out, pushing, confirming, gathering, showing, early.release
        )
        self.credit = credit  # (owned by ``publishes``)
        # Bound once: called for every packet that comes down.
        self.release_early = early.release
        self._stamp = showing.stamp
        self._stored_at_root = commits.stored_at_root
        self._mark_moved = showing.mark_moved
        self._release = commits.release

        # What the node calls (``self.flow.<name>``), the components' own methods.
        self.publish = publishes.publish
        self.join = publishes.join
        self.forget_client = publishes.forget_client
        self.expect_fill = early.expect_fill
        self.became_root = takeover.became_root
        self.reported = takeover.reported
        self.hold = takeover.hold
        self.reserve = takeover.reserve
        self.on_recover_timer = takeover.on_recover_timer
        self.send_mark = showing.send_mark
        self.settle = showing.settle
        self.tell_marks = showing.tell_marks
        self.repeat_marks = showing.repeat_marks
        self.on_held_query = commits.on_held_query
        self.on_held = commits.on_held
        self.children_changed = commits.children_changed
        self.overdue = commits.overdue
        self.confirm_overdue = confirming.confirm_overdue
        self.release_held = credit.release_held
        self.drain = backlog.drain
        self.ask_spans = gathering.ask_spans
        self.success = joining.success
        self.catch_up = joining.catch_up
        self.attached = joining.attached
        self.resume_point = joining.resume_point
        self.subscribed = joining.subscribed
        # The components' state the node reads (forwarder: removed once every caller is a
        # component).
        self.local = local
        self.recovering = takeover.recovering
        self.marks_sent = showing.marks_sent
        self.marks_due = showing.marks_due
        self.released = credit.released
        self.backlogged = backlog.backlogged

    # --- the node's rounds and dispatch ------------------------------------------------------

    def on_beat(self, now: float) -> None:
        """Every heartbeat round (``takeover``, ``witnesses``)."""
        self.pushing.resend_pushes(now)
        self.witnesses.expire_relays(now)

    def on_confirming(
        self,
        now: float,
        peer: PeerId,
        message: PublishNumbered | PublishConfirmed | PublishWitness,
    ) -> None:
        """The node's dispatch for the messages of confirming (one case there)."""
        if isinstance(message, PublishNumbered):
            self.confirming.on_numbered(peer, message)
        elif isinstance(message, PublishConfirmed):
            self.confirming.on_confirmed(peer, message)
        else:
            self.peer_witnesses.on_peer_witness(now, peer, message)

    # --- publishes from peers ---------------------------------------------------------------

    def on_publish(self, now: float, peer: PeerId, message: PublishData) -> None:
        stream = self.streams.get(message.key)
        if stream is None or not stream.carried:
            self._reject(peer, message, PublishError.NOT_CARRIED)
        elif peer not in stream.children:
            self._reject(peer, message, PublishError.NOT_CHILD)
        elif message.htl == 0:
            self._reject(peer, message, PublishError.TOO_DEEP)
        elif stream.signer is not None and message.packet is None:
            self._reject(peer, message, PublishError.NEEDS_NUMBER)
        elif stream.signer is not None and not self._signature_ok(stream, message):
            self.stats.forged += 1
            self._drop(peer, f"forged signature on a publish for packet {message.packet}")
        else:
            self._route(now, stream, peer, message)

    def _route(self, now: float, stream: Stream, source: Source, message: PublishData) -> None:
        """Serialize at the root, answer from what we hold, or pass the publish up."""
        if stream.state is State.ROOT:
            if message.claim and message.pushed and message.packet is not None:
                self.takeover.on_claim(now, stream, source, message)  # (``takeover``)
                return
            number = message.packet
            uids = stream.uids
            if (
                message.pushed
                and number is not None
                and (stream.next_in is None or number > stream.next_in)
                and (uids is None or uids.get(message.uid) != number)
            ):
                # A member pushes up a packet beyond our head: the tree had the numbers
                # before it, though no resubscriber that joined us directly said so (one
                # adopted by a relay of ours claims only there). Number above them, and
                # take this one in its place (chaos: a new root's first look got 1..5
                # pushed up from under a relay, then numbered new publishes 0..5 again).
                # Only a push: a publisher's guessed number says nothing of the past. Past a
                # grace too: a subtree numbered elsewhere joined us, and ``reported`` holds
                # numbering (chaos: a root refused 2..12 from a tree that merged into it).
                # It claims its own number too, so it is among what the grace takes in
                # order at its end: claimed up to the number before it, it stayed queued
                # behind a new publish, which took its number first. Not a number we gave
                # this very publish (a publisher's node that attached to a new parent
                # pushes its claims, ``confirming``): pending here still, it is no news,
                # and a grace for it would stall the stream and drop what is pending.
                self.takeover.reported(now, stream, number)
            if stream.recover_until is not None and not continues(stream, message):
                self._wait(stream, source, message)  # numbered when the grace ends
                return
            if stream.recover_until is None and not gathered(stream, message.packet):
                if message.pushed and number is not None and in_tail(stream, number):
                    # A push past the grace (a resend: ``resend_pushes``) still brings a
                    # packet of the open tail: taken in its place, as at the grace's end,
                    # what it skipped announced missed.
                    self.takeover.open_tail_to(stream, number)
                else:
                    # Past the grace, a publish naming a number in the open tail is a new
                    # one (a signed publisher's guess), not the lost packet: it is missed.
                    self.takeover.close_tail(stream)
            if not self.backlog.held_back(stream, source, message):  # (``backlog``)
                self._reply_root(stream, source, message, self._serialize(stream, message, source))
            return
        if stream.state is not State.JOINED or stream.parent is None:
            if (
                stream.state is State.RESTARTING
                and message.pushed
                and not message.claim  # (a claim says nothing of the past: ``on_claim``)
                and message.packet is not None
            ):
                # A child pushing up what it holds (``push_up``) tells us how far the tree
                # got: if our search makes us root, we number above it (chaos: a relay
                # pushed 5..14 up to a detached node at 4, which became root and numbered
                # 12 again, one push having been lost with a link).
                stream.claim(message.packet)
            self._wait(stream, source, message)
            return
        # A former root (it handed the tree on) still knows the numbers it gave.
        number = None if stream.uids is None else stream.uids.get(message.uid)
        if number is not None:
            if self._reused(stream, message):
                self._reply(source, _rejection(message, PublishError.UID_REUSED))
            else:
                self._reply(source, PublishSucceeded(message.uid, message.key, number))
            return
        # A relay never answers a numbered publish from its window, though it may hold the
        # packet: after a takeover the new root may not, and a publish pushed up to tell
        # it (``push_up``) that was answered here would leave it to give that number to
        # another packet (found by the chaos run: packet 19 acked for two publishes).
        if isinstance(source, bytes) and not self._relay(now, stream, source, message):
            self._reply(source, _rejection(message, PublishError.BUSY))
            return
        self._send(stream.parent, dataclasses.replace(message, htl=max(message.htl - 1, 0)))

    def _wait(self, stream: Stream, source: Source, message: PublishData) -> None:
        """Hold a publish until the stream is in the tree (or out of its grace) again."""
        queued = stream.queued
        for i, (waiting_source, waiting) in enumerate(queued):
            if waiting.uid != message.uid:
                continue
            if waiting.claim and message.claim and waiting_source != source:
                continue  # (a witness and its publisher's claim, two ways: each answered)
            if waiting.pushed or not message.pushed:
                return  # a resend of a publish that already waits
            # A push (a claim, or a packet a member holds) says more than the publisher's
            # plain retry that waited before it: kept, the retry was numbered afresh and
            # the number pushed was announced missed (chaos).
            del queued[i]
            break
        if len(stream.queued) >= self.config.max_queued_publishes:
            self._reply(source, _rejection(message, PublishError.BUSY))
        else:
            stream.queued.append((source, message))

    def _relay(self, now: float, stream: Stream, source: PeerId, message: PublishData) -> bool:
        self.witnesses.expire_relays(now)  # (``witnesses``)
        relayed, room = (
            self.witnesses.relayed,
            self.config.max_relayed_publishes + self.peer_witnesses.peer_count,
        )
        if message.uid not in relayed and len(relayed) >= room:  # (peer witnesses aside)
            return False
        assert stream.parent is not None
        expires = now + self.config.publish_timeout * self.config.publish_attempts
        relay = Relay(message.uid, stream.key, source, stream.parent, expires, message)
        self.witnesses.enter(relay)  # (``witnesses``)
        return True

    def carried(self, now: float, stream: Stream) -> None:
        """``stream`` is in the tree again (joined, reattached or root): send what waited."""
        queued, stream.queued = stream.queued, []
        for source, message in queued:
            if isinstance(source, int) and message.uid not in self.local:
                continue  # the client gave up or went away meanwhile
            self._route(now, stream, source, message)

    def abandon(self, stream: Stream, reason: PublishError) -> None:
        """``stream`` could not be joined: refuse what waited for it."""
        queued, stream.queued = stream.queued, []
        for source, message in queued:
            self._reply(source, _rejection(message, reason))

    # --- answers coming back down -------------------------------------------------------------

    def on_answer(self, now: float, peer: PeerId, answer: Answer) -> None:
        self.pushing.push_answered(peer, answer)
        relay = self.witnesses.relayed.get(answer.uid)
        if relay is not None and relay.upstream == peer and relay.key == answer.key:
            if not self.witnesses.keeps_witness(relay, answer):
                self.witnesses.drop_kept(self.witnesses.relayed.pop(answer.uid))
            self._send(relay.source, answer)
            if answer.uid not in self.local:
                return
            # Our own publish, come back to us through a detached ancestor's queue: our
            # client waits for this answer too.
        entry = self.local.get(answer.uid)
        stream = self.streams.get(answer.key)
        if entry is None or stream is None or stream.parent != peer:
            self.stats.ignored += 1
            return
        if isinstance(answer, PublishRejected) and answer.reason in (
            PublishError.BUSY,
            PublishError.NOT_CARRIED,
        ):
            return  # the tree is changing under us: the timer sends it again
        if (
            isinstance(answer, PublishCollision)
            and stream.claims.get(answer.uid) == answer.packet
            and entry.message.packet is None
        ):
            # The root refused our claim (``Takeover.on_claim``), not a number our client
            # chose: the number is not ours, and the publish goes up again for a new one.
            del stream.claims[answer.uid]
            self.stats.claims_renewed += 1
            self._route(now, stream, entry.client, entry.message)
            return
        if isinstance(answer, PublishCollision) and entry.message.packet is None:
            # A refusal of a claim we hold no more: a relay's witness of it (``witnesses``)
            # or a second push, refused after ours was. Our publish went up afresh.
            return
        self._reply(entry.client, answer)

    def _reply_root(
        self, stream: Stream, source: Source, message: PublishData, answer: Decision
    ) -> None:
        """The root's answer, which may wait until the packet is committed (``commits``) or
        confirmed (``confirming``: None, or PublishNumbered, which goes straight back)."""
        if answer is None:
            return
        if isinstance(answer, PublishNumbered):
            assert isinstance(source, bytes), "a local publish is numbered without asking"
            self._send(source, answer)
            return
        if isinstance(source, bytes):
            self.commits.ack_child(stream, source, message, answer)
        else:
            self.commits.ack_local(stream, source, answer)

    def _reply(self, source: Source, answer: Answer) -> None:
        if isinstance(source, bytes):
            self._send(source, answer)
        else:
            self.publishes.answer(source, answer)

    def _reject(self, peer: PeerId, message: PublishData, error: PublishError) -> None:
        self.stats.publish_rejected += 1
        self._send(peer, _rejection(message, error))

    # --- the root ------------------------------------------------------------------------------

    def _known(self, stream: Stream, message: PublishData) -> Answer | None:
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

    def _serialize(self, stream: Stream, message: PublishData, source: Source) -> Decision:
        """The root's decision on one publish; a new packet is stored and broadcast."""
        uids = stream.uids
        assert uids is not None, "only a root serializes"
        number = uids.get(message.uid)
        if message.pushed and not message.claim and stream.pending and number != message.packet:
            # (not a resend of a push we took already: ``resend_pushes``)
            self.confirming.pushed_over(stream, message)
            number = uids.get(message.uid)
        if fills_hole(stream, message) and number != message.packet:
            # Pushed up under the number a branch holds it as: taken in that place even if
            # its uid has another number here (two roots numbered one publish apart), so
            # every branch sees the same packet under each number, never a hole.
            return self._fill(stream, message)
        if number is not None:
            if self._reused(stream, message):
                return _rejection(message, PublishError.UID_REUSED)
            if number in stream.pending:  # a retry, not yet sent down (``confirming``)
                return self.confirming.renumbered(stream, source, message, number)
            return PublishSucceeded(message.uid, message.key, number)
        if backfills(stream, message):
            return self._backfill(stream, message)
        if message.packet is not None and message.packet != next_number(stream):
            known = self._known(stream, message)
            if isinstance(known, PublishSucceeded):
                self._remember(stream, message, known.packet)
                return known
            return PublishCollision(message.uid, message.key, message.packet, next_number(stream))
        refusal = self.confirming.refusal(stream, message)
        if refusal is not None:
            self.stats.publish_rejected += 1
            return _rejection(message, refusal)
        self.stats.published += 1
        self.takeover.close_tail(stream)
        if message.pushed:
            return self._take(stream, message, next_number(stream))
        number = next_number(stream)
        self.stats.numbered += 1
        self._remember(stream, message, number)
        return self.confirming.number_new(stream, source, message, number)

    def _fill(self, stream: Stream, message: PublishData) -> Answer:
        """Take a packet the old root ordered that this root lacks, in its order. The old
        root accepted it, so the frontier's refusals do not apply."""
        number = message.packet
        assert number is not None
        if stream.signer is not None and not self._signature_ok(stream, message):
            return _rejection(message, PublishError.BAD_SIGNATURE)
        self.stats.refilled += 1
        return self._take(stream, message, number)

    def _backfill(self, stream: Stream, message: PublishData) -> Answer:
        """Keep a packet from before this root took over, which it never had: a child
        waiting to be caught up over it (``refills``) is served from the window. Every
        other child and local client is past it, so it goes nowhere else."""
        number = message.packet
        assert number is not None
        if stream.signer is not None and not self._signature_ok(stream, message):
            return _rejection(message, PublishError.BAD_SIGNATURE)
        self.stats.backfilled += 1
        first = stream.frontier.first_of(message.epoch, number)
        stream.window.add(_numbered(message, number, None if first is None else min(first, number)))
        self.memory.saw(stream.key, number)
        self._remember(stream, message, number)
        return PublishSucceeded(message.uid, message.key, number)

    def _take(self, stream: Stream, message: PublishData, number: int) -> Answer:
        """Store ``message``, numbered elsewhere, as packet ``number``. What is pending
        (``confirming``) was shown to nobody: it is dropped, rather than go down after it."""
        self.confirming.drop_pending(stream)
        self._store_new(stream, message, number)
        self._remember(stream, message, number)
        return PublishSucceeded(message.uid, message.key, number)

    def _store_new(self, stream: Stream, message: PublishData, number: int) -> None:
        """Store ``message`` as packet ``number`` and send it down."""
        first = stream.frontier.first_of(message.epoch, number)
        self._store(stream, _numbered(message, number, first, root_stamp(stream)))

    def _reused(self, stream: Stream, message: PublishData) -> bool:
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

    # --- packets coming down -----------------------------------------------------------------

    def on_data(self, peer: PeerId, packet: SubscribeData, stream: Stream) -> None:
        """A packet from ``stream``'s parent ``peer``."""
        problem = malformed(packet)
        if problem is not None:
            self._drop(peer, f"malformed SubscribeData {packet.packet}: {problem}")
            return
        number = packet.packet
        old = stream.next_in is not None and number < stream.next_in
        if (old and stream.fills is None) or not stream.window.accepts(number):
            self.stats.duplicates += 1
            return
        if stream.signer is not None and not self._signature_ok(stream, packet):
            self.stats.forged += 1
            self._drop(peer, f"forged signature on packet {number}")
            return
        if old:
            # One we never had, asked for (``refills``): kept for the child waiting for it;
            # every other child and local client is past it.
            self.stats.filled += 1
            stream.window.add(packet)
            return
        early = stream.early
        if early is not None and stream.next_in is not None and number > stream.next_in:
            # Above a gap we asked the parent to fill: it waits for the answer.
            if early.covers(stream.next_in) and early.hold(packet):
                return
            self.release_early(stream, give_up=True)  # (past the bounds: as without a wait)
            if stream.next_in is not None and number < stream.next_in:
                self.stats.duplicates += 1
                return
        if stream.next_in is not None and number > stream.next_in:
            self._missing(stream, stream.next_in, number - 1)
        self._store(stream, packet)
        if stream.early is not None:
            self.release_early(stream)

    def from_parent(self, now: float, stream: Stream, message: Committed | PastQuery) -> None:
        """A mark or a question from ``stream``'s parent (the node checked the sender)."""
        if isinstance(message, Committed):
            self.showing.on_committed(now, message, stream)
        else:
            self.gathering.on_past_query(stream, message)

    def on_missed(self, peer: PeerId, message: PacketsMissed, stream: Stream) -> None:
        if message.first > message.last:
            self._drop(peer, f"PacketsMissed with first {message.first} > last {message.last}")
            return
        first = message.first
        if stream.next_in is not None:
            if stream.fills is not None and first < stream.next_in:
                # The answer to a FillRequest (``refills``): the tree lost these too.
                stream.window.mark_missing(first, min(message.last, stream.next_in - 1))
            first = max(first, stream.next_in)
        if first <= message.last:
            self._missing(stream, first, message.last)
        if stream.early is not None:
            self.release_early(stream)  # (the parent's answer: what the gap lacks is lost)

    def _missing(self, stream: Stream, first: int, last: int) -> None:
        self.memory.saw(stream.key, last)  # (first, so a driver keeps it before it is sent)
        for a, b in stream.window.mark_missing(first, last):
            self.stats.gaps += 1
            for child in stream.fed:
                self._send(child, PacketsMissed(stream.key, a, b))
        stream.next_in = max(stream.next_in or 0, last + 1)
        stream.contiguous_from = max(stream.contiguous_from or 0, last + 1)
        if stream.high is None or last > stream.high:
            stream.high = last
        self.pump(stream)

    def _store(self, stream: Stream, packet: SubscribeData) -> None:
        number = packet.packet
        self.memory.saw(stream.key, number)
        self.stats.stored += 1
        packet = self._stamp(stream, packet)  # the mark it brings, and ours (``showing``)
        stream.window.add(packet)
        stream.frontier.observe(packet)
        stream.next_in = number + 1
        if stream.contiguous_from is None:
            stream.contiguous_from = number
        if stream.high is None or number > stream.high:
            stream.high = number
        for child in stream.fed:
            self._send(child, packet)
        if stream.state is State.ROOT:
            self._stored_at_root(stream, number)
        self.pump(stream)

    def pump(self, stream: Stream) -> None:
        """Deliver to every local client of ``stream`` what it can now have: at a root, what
        enough children hold too (``overlay.core.commits``), which it tells its children;
        at a member, what the root said it committed (``overlay.core.showing``)."""
        root = stream.state is State.ROOT
        if root:
            self._mark_moved(stream)
        until = stream.committed if root else stream.shown_upto
        shows = root or until is not None  # (a member with no mark yet shows nothing)
        window, owed = stream.window, NOTHING_OWED
        for client, member in stream.local.items():
            if shows:
                for event in pump(stream.key, member, window, stream.contiguous_from, until):
                    self.stats.delivered += 1
                    self._deliver(client, event)
            if member.receives and member.cursor is not None and member.cursor < owed:
                owed = member.cursor
        window.keep_from = owed  # (kept past the window's bounds: ``showing``)
        if stream.unacked:
            self._release(stream)


def _numbered(
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


def _rejection(message: PublishData, error: PublishError) -> PublishRejected:
    return PublishRejected(message.uid, message.key, int(error))


def _digest(message: PublishData) -> int:
    return content_digest(message.data, message.epoch, message.kind)
