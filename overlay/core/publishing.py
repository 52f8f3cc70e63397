"""Publishing: packets go up the tree to the root, which orders them, and down to everyone.

Spec (seeds/003): "we send a PublishData to our parent ... It will normally be forwarded up
to the root, which will decide whether it is a collision. If not, it is broadcast to all
nodes in the tree and thereby all subscribers." The rules, in the order they apply:

* **Up** (here). A node forwards a PublishData from a child (or a local client) to its
  parent and remembers, in a bounded table (``witnesses``), whom to pass the answer back
  to. A node that is joining or restarting holds publishes until it is in the tree again.
* **The root** orders (``ordering``): numbers, collisions, and uids it remembers.
* **Down** (``broadcast``): each node stores what it has not seen and sends it on; a gap
  is passed down as PacketsMissed, never a silent one.
* **Catch-up** (``joining``). A node that adopts a child with ``last_seen`` sends it every
  later packet it holds and PacketsMissed for the rest; a fresh child gets the open epochs
  it holds from their start, so atomic subscribers there can have them whole.
* **Taking over** (``takeover``). A node that becomes root of a tree that already carried
  packets (the root died, or a closer node took its place) learns the newest number from
  the resubscribers' ``last_seen`` and continues above it, so no number is given twice. For
  ``takeover_grace`` it numbers nothing new: the old root's other children are still
  reporting, and one may hold packets nobody else got before the old root died. Such a
  node pushes the packets its new parent lacks up to the root, original uids and numbers
  kept, and the root takes them in order as the next packets; what nobody brings within
  the grace is reported missed. Every packet carries its publish uid, so the new root
  rebuilds the uid table from its window and a publisher's retry is acknowledged with the
  packet's number, not ordered twice.
* **Signatures.** On a signed stream a node checks a publish before it routes it, once
  (``signatures.py``); a peer that sends a bad one is dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overlay.compiled_checks import compile_with
from overlay.core.backlog import Backlog
from overlay.core.batches import Batches
from overlay.core.broadcast import Broadcast
from overlay.core.claims import Claims
from overlay.core.commits import Commits
from overlay.core.config import NodeConfig
from overlay.core.confirming import Confirming
from overlay.core.early_waits import EarlyWaits
from overlay.core.effects import PeerId
from overlay.core.gathering import Gathering
from overlay.core.joining import Joining
from overlay.core.local_publishing import LocalPublishes
from overlay.core.memory import Memory
from overlay.core.ordering import Answer, Decision, Ordering, rejection
from overlay.core.outbox import Outbox
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.peers import PeerTable
from overlay.core.pushes import Pushes
from overlay.core.showing import Showing
from overlay.core.signatures import SignatureChecker
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, State, Stream
from overlay.core.takeover import Takeover, continues, gathered, in_tail
from overlay.core.timers import TimerQueue
from overlay.core.tokens import Tokens
from overlay.core.witnesses import Relay, Witnesses
from overlay.messages import (
    Committed,
    PastQuery,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    PublishWitness,
)

Confirmation = PublishNumbered | PublishConfirmed | PublishWitness  # (``on_confirming``)
# A publish with another HTL, built by its slots (``dataclasses.replace``, a tenth the cost).
_with_htl = compile_with(PublishData, "htl")


class PacketFlow:
    """The publish and broadcast half of a node: the routing of publishes up the tree and
    of their answers back, and a facade over the components that own the rest (each in the
    module named for it): ``ordering`` (the root's numbers, collisions, uids), ``broadcast``
    (packets coming down, gaps, delivery to local clients), ``publishes`` (local clients'
    publishes in flight, with their ``credit``), ``early`` (a gap asked of a new parent),
    ``takeover`` (a root's graces), ``pushing`` (packets pushed up), ``gathering``
    (questions down for what a root lacks), ``confirming`` (numbers waiting for their
    publisher's node, and claims), ``witnesses`` and ``peer_witnesses`` (the relay table
    and its witness claims), ``commits`` (a root's commit point), ``showing`` (the marks),
    ``backlog`` (publishes a full root holds back) and ``joining`` (what a new child is told
    and sent). The node owns the streams and the tree; effects go through its ``Outbox``.

    The node calls the components' methods it needs through this object, bound once here
    (``on_data``, every packet, is ``Broadcast.on_data`` itself).
    """

    __slots__ = (
        "_drop",
        "_local",
        "_send",
        "_signature_ok",
        "_unbuilt",
        "ask_spans",
        "attached",
        "backlog",
        "batches",
        "became_root",
        "broadcast",
        "catch_up",
        "children_changed",
        "claims",
        "commits",
        "config",
        "confirming",
        "credit",
        "early",
        "expect_fill",
        "forget_client",
        "gathering",
        "hold",
        "join",
        "joining",
        "on_data",
        "on_held",
        "on_held_query",
        "on_missed",
        "on_recover_timer",
        "on_run",
        "ordering",
        "peer_witnesses",
        "publish",
        "publish_batch",
        "publishes",
        "pump",
        "pushing",
        "reported",
        "reserve",
        "resume_point",
        "send_mark",
        "settle",
        "showing",
        "signatures",
        "stats",
        "streams",
        "subscribed",
        "success",
        "takeover",
        "witnesses",
    )

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
        self.stats = stats
        # The components are built on first use (``__getattr__``): most nodes of a large
        # network never carry a stream, and the components of this half are 9 KB a node,
        # half of an idle one. Until then the rounds' checks below have nothing to do.
        self._unbuilt: tuple[TimerQueue, Outbox, Memory, PeerTable | None] | None = (
            timers,
            out,
            memory,
            peers,
        )

    if not TYPE_CHECKING:  # (to the type checker, every attribute is the declared one)

        def __getattr__(self, name: str) -> object:
            """A slot not set yet: the first use of the components builds them. Once
            only: a fault while building (memory running out) leaves the flow without
            some components, as it would have left the node unbuilt."""
            if name == "_unbuilt":
                raise AttributeError(name)  # (a copy never initialized: no recursion)
            unbuilt = self._unbuilt
            if unbuilt is None:
                raise AttributeError(name)
            self._unbuilt = None
            self._build(*unbuilt)
            return object.__getattribute__(self, name)

    @property
    def built(self) -> bool:
        """Whether the components exist: this node has used them."""
        return self._unbuilt is None

    def _build(
        self, timers: TimerQueue, out: Outbox, memory: Memory, peers: PeerTable | None
    ) -> None:
        config, streams, stats = self.config, self.streams, self.stats
        self._send = out.send
        self._drop = out.drop
        self.signatures = SignatureChecker(config.signature_cache)
        self._signature_ok = signature_ok = self.signatures.packet_ok
        tokens = Tokens()  # (one counter: graces, questions to a parent, confirmations)

        broadcast = self.broadcast = Broadcast(stats, memory, out, signature_ok)
        ordering = self.ordering = Ordering(stats, memory, signature_ok, broadcast.store)
        publishes = self.publishes = LocalPublishes(
            config, streams, stats, timers, out, self._route
        )
        local, credit = publishes.local, publishes.credit
        self._local = local  # the local publishes in flight, by uid (``publishes``)
        early = self.early = EarlyWaits(
            config, streams, stats, timers, tokens, broadcast.store, broadcast.missing
        )
        witnesses = self.witnesses = Witnesses(config, stats, local, signature_ok)
        peer_witnesses = self.peer_witnesses = PeerWitnesses(
            config, stats, streams, peers, out, witnesses, local, signature_ok
        )
        witnesses.unhold = peer_witnesses.unhold
        showing = self.showing = Showing(config, streams, stats, timers, out, broadcast.pump)
        backlog = self.backlog = Backlog(config, streams, stats, local, self._reply, self._route)
        confirming = self.confirming = Confirming(
            config,
            streams,
            stats,
            out,
            witnesses,
            backlog.requeue,
            ordering.store_new,
            self._reply_root,
            timers,
            tokens,
            peers,
        )
        claims = self.claims = Claims(
            streams, stats, out, local, witnesses, peer_witnesses, self._route
        )
        commits = self.commits = Commits(
            config,
            streams,
            stats,
            out,
            publishes.answer,
            self._reply,
            broadcast.pump,
            confirming.orphaned_pending,
        )
        pushing = self.pushing = Pushes(config, streams, stats, out)
        gathering = self.gathering = Gathering(
            config, stats, out, pushing.push_one, claims.push_claims
        )
        takeover = self.takeover = Takeover(
            config,
            streams,
            timers,
            stats,
            memory,
            tokens,
            confirming,
            claims,
            gathering.ask_down,
            broadcast.missing,
            ordering.serialize,
            self._reply_root,
            self._wait,
            self.carried,
            broadcast.pump,
            early.release,
        )
        joining = self.joining = Joining(out, pushing, claims, gathering, showing, early.release)
        # The ties back: these components were built with ``broadcast``'s and
        # ``ordering``'s methods, and those call theirs.
        broadcast.attach(
            early.release,
            showing.stamp,
            showing.stamp_run,
            showing.mark_moved,
            commits.stored_at_root,
            commits.release,
        )
        ordering.attach(confirming, takeover.close_tail)
        self.credit = credit  # (owned by ``publishes``)
        self.batches = Batches(stats, publishes, broadcast.store_run, commits.ack_local)

        # What the node calls (``self.flow.<name>``), the components' own methods.
        self.on_data = broadcast.on_data  # (every packet: no call in between)
        self.on_run = broadcast.on_run
        self.on_missed = broadcast.on_missed
        self.pump = broadcast.pump
        self.publish = publishes.publish
        self.publish_batch = self.batches.publish
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
        self.on_held_query = commits.on_held_query
        self.on_held = commits.on_held
        self.children_changed = commits.children_changed
        self.ask_spans = gathering.ask_spans
        self.success = joining.success
        self.catch_up = joining.catch_up
        self.attached = joining.attached
        self.resume_point = joining.resume_point
        self.subscribed = joining.subscribed

    # --- the node's rounds and dispatch ------------------------------------------------------

    def after_event(self, now: float) -> None:
        """The node's event is done: held publishes go up if answers made room
        (``credit``), a root's backlog drains if a commit made room (``backlog``), and the
        marks that went down, or are due, are noted and told (``showing``)."""
        if self._unbuilt is not None:
            return
        credit = self.credit
        if credit.samples:
            credit.settle(now)  # (the window first: then what it lets go)
        if credit.released:
            credit.release_held(now)
        if self.backlog.backlogged:
            self.backlog.drain(now)
        showing = self.showing
        if showing.marks_sent or showing.marks_due:
            showing.tell_marks(now)

    def settle_pace(self, now: float) -> None:
        """The end of the node's step: answers in it since ``after_event`` (a root's
        backlog or batches answer at once) tell their streams' pace (``credit``)."""
        if self._unbuilt is None and self.credit.samples:
            self.credit.settle(now)

    def has_event_work(self) -> bool:
        """Whether ``after_event`` would do anything now."""
        if self._unbuilt is not None:
            return False
        showing = self.showing
        return bool(
            self.credit.released
            or self.credit.samples
            or self.backlog.backlogged
            or showing.marks_sent
            or showing.marks_due
        )

    def busy(self) -> bool:
        """Whether a local publish awaits its answer, a root is in its takeover grace, or
        a root's mark is due (``Node.busy``)."""
        if self._unbuilt is not None:
            return False
        publishes = self.publishes
        return bool(
            publishes.local
            or publishes.batched
            or self.takeover.recovering
            or self.showing.marks_due
        )

    def on_beat(self, now: float) -> None:
        """Every heartbeat round (``takeover``, ``witnesses``)."""
        if self._unbuilt is not None:
            return
        self.pushing.resend_pushes(now)
        self.witnesses.expire_relays(now)

    def on_round(self) -> None:
        """A heartbeat round that reached peers: a root repeats its mark, lest a notice was
        lost (``showing``), and asks again what went unanswered: its HeldQuery
        (``commits``), its unconfirmed publishes (``confirming``)."""
        if self._unbuilt is not None:
            return
        self.showing.repeat_marks()
        self.commits.overdue()
        self.confirming.confirm_overdue()

    def on_confirming(self, now: float, peer: PeerId, message: Confirmation) -> None:
        """The node's dispatch for the messages of confirming (one case there)."""
        if isinstance(message, PublishNumbered):
            self.claims.on_numbered(peer, message)
        elif isinstance(message, PublishConfirmed):
            self.confirming.on_confirmed(now, peer, message)
        else:
            self.peer_witnesses.on_peer_witness(now, peer, message)

    def from_parent(self, now: float, stream: Stream, message: Committed | PastQuery) -> None:
        """A mark or a question from ``stream``'s parent (the node checked the sender)."""
        if isinstance(message, Committed):
            self.showing.on_committed(now, message, stream)
        else:
            self.gathering.on_past_query(stream, message)

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
                # take this one in its place, so no number is given twice. Only a push: a
                # publisher's guessed number says nothing of the past. Past a grace too: a
                # subtree numbered elsewhere may have joined us, and ``reported`` holds
                # numbering. It claims its own number too, so it is among what the grace
                # takes in order at its end, not queued behind a new publish that would
                # take its number first. Not a number we gave this very publish (a
                # publisher's node that attached to a new parent pushes its claims,
                # ``confirming``): pending here still, it is no news, and a grace for it
                # would stall the stream and drop what is pending.
                self.takeover.reported(now, stream, number)
            if stream.root.recover_until is not None and not continues(stream, message):
                self._wait(stream, source, message)  # numbered when the grace ends
                return
            if stream.root.recover_until is None and not gathered(stream, message.packet):
                if message.pushed and number is not None and in_tail(stream, number):
                    # A push past the grace (a resend: ``resend_pushes``) still brings a
                    # packet of the open tail: taken in its place, as at the grace's end,
                    # what it skipped announced missed.
                    self.takeover.open_tail_to(stream, number)
                else:
                    # Past the grace, a publish naming a number in the open tail is a new
                    # one (a signed publisher's guess), not the lost packet: it is missed.
                    self.takeover.close_tail(stream)
            if not message.pushed:
                # A publish reached us: numbers set aside go down first (``confirming``),
                # before the backlog, which would hold it behind them for ever.
                self.confirming.resolve(stream)
            if not self.backlog.held_back(stream, source, message):  # (``backlog``)
                self._reply_root(
                    stream, source, message, self.ordering.serialize(now, stream, message, source)
                )
            return
        if stream.state is not State.JOINED or stream.parent is None:
            if (
                stream.state is State.RESTARTING
                and message.pushed
                and not message.claim  # (a claim says nothing of the past: ``on_claim``)
                and message.packet is not None
            ):
                # A child pushing up what it holds (``push_up``) tells us how far the tree
                # got: if our search makes us root, we number above it, so no number is
                # given twice even when another push was lost with a link.
                stream.claim(message.packet)
            self._wait(stream, source, message)
            return
        # A former root (it handed the tree on) still knows the numbers it gave.
        number = None if stream.uids is None else stream.uids.get(message.uid)
        if number is not None:
            if self.ordering.reused(stream, message):
                self._reply(source, rejection(message, PublishError.UID_REUSED))
            else:
                self._reply(source, PublishSucceeded(message.uid, message.key, number))
            return
        # A relay never answers a numbered publish from its window, though it may hold the
        # packet: after a takeover the new root may not, and a publish pushed up to tell
        # it (``push_up``) that was answered here would leave the root to give that number
        # to another packet, one number acknowledged for two publishes.
        if isinstance(source, bytes) and not self._relay(now, stream, source, message):
            self._reply(source, rejection(message, PublishError.BUSY))
            return
        self._send(stream.parent, _with_htl(message, max(message.htl - 1, 0)))

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
            # plain retry that waited before it: the push is kept, else the retry would be
            # numbered afresh and the number pushed announced missed.
            del queued[i]
            break
        if len(stream.queued) >= self.config.max_queued_publishes:
            self._reply(source, rejection(message, PublishError.BUSY))
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
            if isinstance(source, int) and message.uid not in self._local:
                continue  # the client gave up or went away meanwhile
            self._route(now, stream, source, message)

    def abandon(self, stream: Stream, reason: PublishError) -> None:
        """``stream`` could not be joined: refuse what waited for it."""
        queued, stream.queued = stream.queued, []
        for source, message in queued:
            self._reply(source, rejection(message, reason))

    # --- answers coming back down -------------------------------------------------------------

    def on_answer(self, now: float, peer: PeerId, answer: Answer) -> None:
        self.pushing.push_answered(peer, answer)
        relay = self.witnesses.relayed.get(answer.uid)
        if relay is not None and relay.upstream == peer and relay.key == answer.key:
            if not self.witnesses.keeps_witness(relay, answer):
                self.witnesses.drop_kept(self.witnesses.relayed.pop(answer.uid))
            self._send(relay.source, answer)
            if answer.uid not in self._local:
                return
            # Our own publish, come back to us through a detached ancestor's queue: our
            # client waits for this answer too.
        entry = self._local.get(answer.uid)
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
        self._send(peer, rejection(message, error))
