"""A root taking over a tree that already carried packets, and the packets it needs back.

A component of ``PacketFlow`` (``overlay.core.publishing``; see its "Taking over" notes). A
node that becomes root of an existing tree (its root died, or a closer node took its place),
or a root that lost a child, holds numbering for ``takeover_grace`` (``hold``): the old
root's other children are still reporting what they have seen (``reported``), and restarted
subtrees push up, with their original uids and numbers, the packets their new parent lacks
(``pushes``); the root also asks its whole subtree for what it lacks (``gathering``). When
the grace ends (``on_recover_timer``) the root takes what was brought in order, each hole
before a packet brought announced as missed, and numbers what waited. The root continues
numbering above the newest number any child reported, so no number is given twice; what it
still lacks below that is announced missed just before it numbers the next packet
(``close_tail``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from overlay.core.claims import Claims
from overlay.core.config import NodeConfig
from overlay.core.confirming import Confirming
from overlay.core.memory import Memory
from overlay.core.stats import NodeStats
from overlay.core.streams import LAST_CLAIM, Source, State, Stream, next_number
from overlay.core.timers import TimerQueue
from overlay.core.tokens import Tokens
from overlay.core.uid_table import UidTable, content_digest
from overlay.messages import (
    PublishCollision,
    PublishData,
    PublishSucceeded,
)

RECOVER_TIMER = "recover"


class Takeover:
    """A root's graces, by timer token, and what it takes in at their end."""

    __slots__ = (
        "ask_down",
        "carried",
        "claims",
        "config",
        "confirming",
        "memory",
        "missing",
        "pump",
        "recovering",
        "release_early",
        "reply_root",
        "serialize",
        "stats",
        "streams",
        "timers",
        "tokens",
        "wait",
    )

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        timers: TimerQueue,
        stats: NodeStats,
        memory: Memory,
        tokens: Tokens,
        confirming: Confirming,
        claims: Claims,
        ask_down: Callable[[Stream], None],
        missing: Callable[[Stream, int, int], None],
        serialize: Callable[[float, Stream, PublishData, Source], Any],
        reply_root: Callable[[Stream, Source, PublishData, Any], None],
        wait: Callable[[Stream, Source, PublishData], None],
        carried: Callable[[float, Stream], None],
        pump: Callable[[Stream], None],
        release_early: Callable[[Stream, bool], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.timers = timers
        self.stats = stats
        self.memory = memory
        self.tokens = tokens
        self.confirming = confirming
        self.claims = claims
        self.ask_down = ask_down
        self.missing = missing
        self.serialize = serialize
        self.reply_root = reply_root
        self.wait = wait
        self.carried = carried
        self.pump = pump
        self.release_early = release_early
        self.recovering: dict[int, bytes] = {}  # roots in their takeover grace, by token

    def became_root(
        self,
        now: float,
        stream: Stream,
        last_seen: int | None,
        takeover: bool,
        ours: bool = False,
    ) -> None:
        """``stream`` is rooted here now. ``last_seen`` is what the search that made us root
        had seen; ``takeover``: the tree existed before (a restart made us root); ``ours``:
        that search started here (no peer asked)."""
        self.release_early(stream, True)  # (nobody above us answers a question now)
        stream.root.committed = stream.root.asked = None  # what it holds is shown (``commits``)
        stream.root.holds.clear()
        if stream.uids is None:
            # The uids of the packets we hold: a retry of one of them is acknowledged.
            uids = stream.uids = UidTable(self.config.publish_uids)
            for number, packet in stream.window.packets.items():
                if packet.uid is not None:
                    digest = content_digest(packet.data, packet.epoch, packet.kind)
                    uids.remember(packet.uid, number, digest)
        stream.root.remembered = None
        remembered = self.memory.last(stream.key) if stream.next_in is None else None
        if stream.next_in is None and last_seen is not None and 0 <= last_seen <= LAST_CLAIM:
            # (a search's word, as a child's report is: beyond ``LAST_CLAIM`` it is ignored,
            # or numbering and the questions a grace asks would run past MAX_PACKET)
            self.continue_after(stream, last_seen)
        if stream.next_in is None:
            stream.next_in = next_number(stream)
        if stream.contiguous_from is None:
            stream.contiguous_from = stream.next_in
        high = -1 if stream.high is None else stream.high
        if (
            remembered is not None
            and high < remembered <= LAST_CLAIM
            and remembered >= stream.next_in
        ):
            # We hold none of its packets, but saw it numbered this far before (``memory``):
            # a stream coming back numbers on, never from 0 again. What went down up to
            # there may be held below us, so it is a claim, as a resubscriber's is
            # (``reported``): holes to be filled by pushes in a grace, the rest announced
            # missed, new packets numbered after it. Taken as a head instead, the packets
            # below it pushed up would be kept as a past its members had, sent to nobody.
            # Numbers it gave that never went down are not remembered; a publisher's node
            # that confirmed one pushes it up as a claim.
            stream.high = stream.root.recover_base = stream.root.remembered = remembered
            # A search of our own, and no child: nobody below can hold any of it, so no
            # grace (a lone node restarted numbers its first publish at once).
            takeover = takeover or not ours or bool(stream.children)
        if takeover:
            stream.root.look_due = True  # before numbering, look for another tree (merges)
            stream.root.relooks = 0
            # Crossing looks' backoff starts again: two roots that take over from one dead
            # root look in step, and the farther one must follow the first crossing (probes).
            stream.root.cross_misses, stream.root.crossed_at = 0, None
            self.gather(now, stream)
        self.claims.own_claims(now, stream)  # (``claims``)
        self.pump(stream)  # a member's clients waited for marks; a root's are its own

    def reported(self, now: float, stream: Stream, last_seen: int | None) -> None:
        """A child we adopted has seen up to ``last_seen``. At a root that is behind it (it
        took over a tree, and this subtree got packets it did not), numbering continues
        above it, after a grace in which the child brings what it holds. A claim far
        beyond our own head moves it by at most one window: a peer cannot make the root
        skip an unbounded range of numbers."""
        if stream.state is not State.ROOT or last_seen is None or not 0 <= last_seen <= LAST_CLAIM:
            return  # (a claim so near the end of the numbers leaves no room to go on)
        high = stream.high
        if high is not None and last_seen <= high:
            return
        if high is None:
            if stream.next_in is not None and stream.next_in > last_seen:
                return  # we are past it already (we joined at ``next_in`` and hold nothing)
            if stream.next_in is None:
                self.continue_after(stream, last_seen)
            else:
                # Our tree has had none of ``next_in..last_seen`` (a merge: the other side
                # numbered while we were apart). They are holes, filled by the child's push
                # in order and sent down to every branch, as after any other takeover.
                stream.high = last_seen
            stream.root.recover_base = last_seen
        else:
            if stream.root.recover_until is None:
                stream.root.recover_base = high
            # Measured from the head before this grace, so repeated claims cannot walk it.
            limit = (stream.root.recover_base or 0) + self.config.window_packets
            if high >= limit:
                return
            stream.high = min(last_seen, limit)
        self.gather(now, stream)

    def continue_after(self, stream: Stream, last_seen: int) -> None:
        """Nothing held yet: continue the stream's numbering after ``last_seen``."""
        stream.high = last_seen
        stream.next_in = stream.contiguous_from = last_seen + 1

    def gather(self, now: float, stream: Stream) -> None:
        """Hold numbering for a grace and ask the subtree for what we lack; ask again
        halfway through, for what is still lacking then. A question has no answer of its
        own when a member holds nothing of it, so a lost one (the simulator drops frames; a
        link can break under it) is noticed by nobody, and the claims and packets below it
        would come up only if that member attached anew."""
        self.hold(now, stream)
        self.ask_down(stream)
        self.timers.add(
            now + self.config.takeover_grace / 2, (RECOVER_TIMER, stream.root.recover_token, 1)
        )

    def hold(self, now: float, stream: Stream, grace: float | None = None) -> None:
        """Number nothing new until ``grace`` (by default ``takeover_grace``) from now (see
        the module notes)."""
        until = now + (self.config.takeover_grace if grace is None else grace)
        self.reserve(stream)
        stream.root.recover_until = max(until, stream.root.recover_until or until)
        self.timers.add(stream.root.recover_until, (RECOVER_TIMER, stream.root.recover_token, 0))

    def reserve(self, stream: Stream) -> None:
        """Give ``stream`` a grace of its own (a token its timers name), if it has none: its
        caller sets how long it lasts (``hold``, or a new root's look)."""
        if stream.root.recover_until is None:
            token = stream.root.recover_token = self.tokens.take()
            self.recovering[token] = stream.key

    def on_recover_timer(self, now: float, token: int, again: int = 0) -> None:
        """A root's takeover grace may be over: give up what nobody brought (reported as
        missed, never silent) and number what waited. ``again``: the halfway timer of a
        grace, which asks the subtree once more (``gather``)."""
        key = self.recovering.get(token)
        stream = None if key is None else self.streams.get(key)
        if (
            stream is None
            or stream.root.recover_token != token
            or stream.root.recover_until is None
        ):
            self.recovering.pop(token, None)
            return
        if now < stream.root.recover_until:
            if again and stream.state is State.ROOT:
                self.ask_down(stream)
            return  # extended, or halfway: a later timer ends it
        del self.recovering[token]
        stream.root.recover_until = None
        if stream.state is not State.ROOT:
            return
        # Packets brought up past a hole waited; take them in order, each hole before
        # them announced as missed, so every branch sees the same numbers.
        high = stream.high
        held = [
            (source, message)
            for source, message in stream.queued
            if message.packet is not None
            and not message.claim
            and high is not None
            and stream.next_in is not None
            and stream.next_in <= message.packet <= high
        ]
        held.sort(key=lambda item: item[1].packet or 0)
        stream.queued = [item for item in stream.queued if item not in held]
        for source, message in held:
            assert message.packet is not None and stream.next_in is not None
            if message.packet > stream.next_in:
                self.missing(stream, stream.next_in, message.packet - 1)
            self.reply_root(stream, source, message, self.serialize(now, stream, message, source))
        # Then the claims beyond the head, in number order, so that a run of them is taken
        # whole (``on_claim``); then what waited.
        claims = sorted(
            (item for item in stream.queued if item[1].claim), key=lambda item: item[1].packet or 0
        )
        stream.queued = [item for item in stream.queued if not item[1].claim]
        for source, message in claims:
            self.on_claim(now, stream, source, message)
        # What is still lacking at the end (``next_in..high``) stays open until we number
        # a new packet (``close_tail``): nothing after it waits, and a tree this one merges
        # into later may hold it: a root cut off by a partition must not tell its
        # subscribers a packet was missed that the other side acknowledged.
        self.carried(now, stream)

    def on_claim(self, now: float, stream: Stream, source: Any, message: PublishData) -> None:
        """A publisher's node pushes its claim (``PublishData.claim``, ``push_claims``): its
        publish, under the number an earlier root gave it. That root may have sent it
        down, and then every number before it too (packets go down in number order,
        ``confirming``), or it dropped the number unsent and perhaps gave it again. So a
        claim is taken only as the next new number, which continues what the tree had
        without a hole; below it, only if the packet there is this publish. A number the
        tree has had but we lack (the open tail) may be another root's packet (a tree that
        joined ours), and one beyond the next would leave a hole: the claim is refused with
        a collision, and the publisher's node publishes it afresh (``PacketFlow.on_answer``).
        Had the old root sent it down, a member would hold the numbers before it, or their
        publishers would claim them. Unlike a held packet's push, a claim never moves the
        head: taken as one, a claim on a number its root had dropped would announce every
        number before it missed. In a grace it waits for the held packets, and the grace's
        end takes the claims in number order."""
        number, uids = message.packet, stream.uids
        assert number is not None and uids is not None
        known = uids.get(message.uid)
        refused = False
        if known is not None and known in stream.root.set_aside:
            # A number given up here: the claim speaks for it alone (``Confirming.release``:
            # the lowest goes down), or waits out a grace; otherwise it is refused, and its
            # node's fresh publish, reaching us, sends all set aside down.
            if known == number and self.confirming.release(stream, known):
                known = uids.get(message.uid)  # (forgotten if the tree held it after all)
            elif stream.root.recover_until is not None:
                self.wait(stream, source, message)  # (weighed at the grace's end)
                return
            else:
                refused = True
        if known is not None and known != number and not refused:
            # Numbered here already, under the number a retry got: that one stands.
            if known in stream.root.pending:
                answer: Any = self.confirming.renumbered(stream, source, message, known)
            else:
                answer = PublishSucceeded(message.uid, message.key, known)
            self.reply_root(stream, source, message, answer)
            return
        if stream.root.recover_until is not None:
            self.wait(stream, source, message)
            return
        next_in = stream.next_in
        if refused or (
            known is None
            and next_in is not None
            and number >= next_in
            and (stream.root.pending or stream.root.set_aside or number != next_number(stream))
        ):
            answer = PublishCollision(message.uid, message.key, number, next_number(stream))
        else:
            answer = self.serialize(now, stream, message, source)
        if isinstance(answer, PublishCollision):
            self.stats.claims_refused += 1
            if not isinstance(source, bytes):
                self.claims.renew_claim(now, stream, message)  # our own (``own_claims``)
                return
        self.reply_root(stream, source, message, answer)

    def open_tail_to(self, stream: Stream, number: int) -> None:
        """A packet of the open tail came after the grace: what it skipped is missed, so it
        is the next in order (``fills_hole``)."""
        if stream.next_in is not None and number > stream.next_in:
            self.missing(stream, stream.next_in, number - 1)

    def close_tail(self, stream: Stream) -> None:
        """We are about to number a new packet: whatever the tree had before it that we
        lack is reported missed first, so every branch sees the same numbers."""
        high, next_in = stream.high, stream.next_in
        if high is not None and next_in is not None and next_in <= high:
            self.missing(stream, next_in, high)


# --- what a root in (or after) a takeover takes from a publish ------------------------------


def fills_hole(stream: Stream, message: PublishData) -> bool:
    """A root that took over lacks packets ``next_in..high``; this publish brings the first."""
    return (
        message.packet is not None
        and message.packet == stream.next_in
        and stream.high is not None
        and message.packet <= stream.high
    )


def backfills(stream: Stream, message: PublishData) -> bool:
    """A root in its takeover grace, which continued numbering after a resubscriber's
    ``last_seen`` holding nothing, is brought one of the packets before that (``push_up``);
    or, past its grace, one a waiter asked for, which it asked its subtree for (``refills``).
    Only a push: a publisher that names a number below the head guesses, and a guess is
    never a claim on the stream's past (it was stored there as the packet that number had)."""
    number = message.packet
    return (
        message.pushed
        and not message.claim  # (a claim says nothing of the past: ``on_claim``)
        and (stream.root.recover_until is not None or gathered(stream, number))
        and number is not None
        and stream.next_in is not None
        and number < stream.next_in
        and stream.window.accepts(number)
    )


def in_tail(stream: Stream, number: int | None) -> bool:
    """Whether ``number`` lies in a root's open tail: claimed (``high``), not yet in."""
    next_in, high = stream.next_in, stream.high
    return (
        number is not None
        and next_in is not None
        and high is not None
        and next_in <= number <= high
    )


def gathered(stream: Stream, number: int | None) -> bool:
    """Whether this root asked its subtree for packet ``number``: for a waiter, or again
    after recording it lost (``refills``)."""
    if number is None:
        return False
    spans = [fill.asked for fill in stream.fills or ()] + (stream.root.reopened or [])
    return any(first <= number <= last for first, last in spans)


def continues(stream: Stream, message: PublishData) -> bool:
    """Whether a root in its takeover grace can answer this publish now: one that brings
    the next packet in order (a pushed-up packet) or names one already processed. Not a
    publisher's number before the head that we do not hold: a member may yet push that
    packet up, so it waits (a signed publisher retrying one whose acknowledgement it lost
    is then told its number; a guess collides once the grace is over)."""
    number, next_in = message.packet, stream.next_in
    if number is None or next_in is None or number > next_in:
        return False
    return message.pushed or number == next_in or stream.window.get(number) is not None
