"""Where a member that joins the tree starts: what a parent tells a new child, what the
child catches up on, and where a node's fresh clients are placed.

A component of ``PacketFlow`` (``overlay.core.publishing``). A parent answers a new child
with the newest packet it has processed (``success``) and sends it what it lacks after its
``last_seen`` (``catch_up``). A node that took a parent learns the tree's head from that
answer (``attached``), a new root's answer included: a root that continues numbering (after
a resubscriber's ``last_seen``, or what it remembered, ``memory``) names where, and the
nodes on its path start their fresh clients after it. A restarted node holding more than its
new parent sends it up (``push_up``, ``push_claims``). A child told a head below its
``last_seen`` resumes there, and is owed what lies between (``owed_after``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from overlay.core.claims import Claims
from overlay.core.effects import PeerId
from overlay.core.events import Subscribed
from overlay.core.fills import gaps
from overlay.core.gathering import Gathering
from overlay.core.outbox import Outbox
from overlay.core.pushes import Pushes
from overlay.core.showing import Showing
from overlay.core.streams import LAST_CLAIM, State, Stream, next_number
from overlay.messages import PacketsMissed, SubscribeData, SubscribeSucceeded


class Joining:
    """What a parent tells and sends a new child, and what a node that took a parent does."""

    __slots__ = ("claims", "gathering", "pushes", "release_early", "send", "showing")

    def __init__(
        self,
        out: Outbox,
        pushes: Pushes,
        claims: Claims,
        gathering: Gathering,
        showing: Showing,
        release_early: Callable[[Stream, bool], None],
    ) -> None:
        self.send = out.send
        self.pushes = pushes
        self.claims = claims
        self.gathering = gathering
        self.showing = showing
        self.release_early = release_early

    def success(
        self,
        uid: int,
        stream: Stream,
        last_seen: int | None = None,
        head_known: bool = True,
    ) -> SubscribeSucceeded:
        """The SubscribeSucceeded that tells a new child where the stream is: the newest
        packet we have processed (a restarted child that holds more sends it up). With
        ``head_known`` False it names none, so the child sends up all it holds: a root the
        child's own search just made is above us, and holds none of the tree's past."""
        frontier = stream.frontier
        if not head_known:
            last = None
        elif stream.next_in is None:
            last = stream.high
        else:
            last = stream.next_in - 1 if stream.next_in > 0 else None
            if last is not None and last_seen is not None and stream.root.recover_until is not None:
                # A root in its takeover grace that continued numbering after someone's
                # ``last_seen`` lacks the tree's past. A resubscriber is told where that gap
                # starts, so it pushes up what it holds from there (kept by ``_backfill``).
                # Told our head instead, the only holder of the packets below it pushes
                # nothing, and a side merging later is told they were missed.
                lacking = gaps(stream.window, 0, min(last, last_seen))
                if lacking:
                    last = lacking[0][0] - 1 if lacking[0][0] > 0 else None
        claim = claimed(stream) if last_seen is None and head_known else None
        if claim is not None:
            last = claim  # a fresh child starts after it, as our own fresh clients do
        return SubscribeSucceeded(
            uid,
            stream.key,
            last,
            frontier.last_closed,
            frontier.starts(),
            stream.restart_uid,
            stream.restart_origin,
        )

    def catch_up(self, stream: Stream, child: PeerId, last_seen: int | None) -> None:
        """Send a newly adopted child what it lacks of what we have processed: everything
        after ``last_seen``, or for a fresh child the open epochs we hold whole."""
        span = catch_up_span(stream, last_seen)
        if span is None:
            return
        for item in stream.window.replay(*span):
            if isinstance(item, SubscribeData):
                self.send(child, item)
            else:
                self.send(child, PacketsMissed(stream.key, item[0], item[1]))

    def attached(
        self,
        stream: Stream,
        reply: SubscribeSucceeded | None,
        last_seen: int | None,
        root_head: int | None = None,
    ) -> None:
        """We took a parent; ``reply`` is its SubscribeSucceeded (None: a new root's, which
        numbers on after ``root_head`` if it names one), and ``last_seen`` what our search
        asked to resume after."""
        if reply is not None and reply.last_packet is not None and reply.last_packet > LAST_CLAIM:
            reply = dataclasses.replace(reply, last_packet=None)  # (not believed: ``LAST_CLAIM``)
        if root_head is not None and root_head > LAST_CLAIM:
            root_head = None
        if last_seen is not None and last_seen > LAST_CLAIM:
            last_seen = None  # (the requester's word, which may be a hostile child's)
        theirs = None if reply is None else reply.last_packet
        self.release_early(stream, True)  # (a question to the old parent is over)
        self.showing.settle(stream)  # (``showing``; the new parent's mark follows its catch-up)
        if stream.next_in is not None:
            # A new root's answer (None) says nothing of what it holds: one that took the
            # tree over from our search holds nothing of it, so it gets all we have.
            self.pushes.push_up(stream, theirs)
        self.claims.push_claims(stream, theirs)  # (ours and our witnesses': ``claims``)
        self.gathering.ask_claimed(stream, theirs)
        if reply is not None:
            if reply.last_packet is not None and (
                stream.high is None or reply.last_packet > stream.high
            ):
                stream.high = reply.last_packet
            stream.frontier.learn(reply.last_closed, reply.open_epochs)
        if stream.next_in is None and last_seen is None:
            head = root_head if reply is None else reply.last_packet
            stream.start = 0 if head is None else head + 1
            if head is not None and (stream.high is None or head > stream.high):
                stream.high = head
        elif stream.next_in is None and last_seen is not None:
            # We start where the search asked to resume, but never past what the parent
            # has: a relay that claimed the requester's newest packet would tell it, in its
            # own success, that the tree has it, and it would push nothing up.
            start = last_seen
            if reply is not None:
                if reply.last_packet is None:
                    stream.start = last_seen + 1  # nothing yet: the search's point holds
                    return
                start = min(last_seen, reply.last_packet)
            stream.next_in = stream.contiguous_from = start + 1
            if start >= 0 and (stream.high is None or start > stream.high):
                # The tree numbered up to ``start`` at least. A relay on a new root's path
                # that kept no head would, becoming root itself, number from 0 again and
                # acknowledge the same numbers twice, for different publishes.
                stream.high = start

    def resume_point(self, stream: Stream) -> int | None:
        """The ``last_seen`` our own search for ``stream`` asks to resume after."""
        if stream.next_in is not None:
            claim = claimed(stream, former=True)
            if claim is not None:
                # A root holding nothing but a claim (``memory``) that merges into another
                # tree or hands its own on to a closer node: that tree must number above
                # the claim too, or numbers this stream gave before are given again.
                return claim
            return stream.next_in - 1  # -1: we expect packet 0 and have nothing yet
        wanted = [m.cursor - 1 for m in stream.local.values() if m.cursor is not None]
        if stream.start is not None:
            # A relay whose parent was lost before any packet came: its children were told
            # the stream starts there. Resuming "anywhere" would tell their subscribers
            # that the packets published meanwhile were missed.
            wanted.append(stream.start - 1)
        return min(wanted) if wanted else None

    def subscribed(self, stream: Stream, root: bool) -> Subscribed:
        """Place the clients waiting for a position at the stream's head, and the event that
        tells them where that is."""
        head = next_number(stream)
        for member in stream.local.values():
            if member.cursor is None:
                member.cursor = head
        frontier = stream.frontier
        return Subscribed(stream.key, root, stream.high, frontier.last_closed, frontier.starts())


def claimed(stream: Stream, *, former: bool = False) -> int | None:
    """The number a root founded on what it remembered (``memory``), while it holds no
    packet: where a fresh child starts, and (``former``: also once it is handing its tree
    on, restarting or looking) what a search of ours reports, so the tree it joins numbers
    above it. None otherwise. Only a remembered claim: a claim a resubscriber or a push
    made names packets the subtree is still owed, and reporting it as seen would cost
    them: the root that takes its tree would keep the claimed packets pushed up to it as a
    past its members already had, and send them to nobody."""
    if (
        stream.root.remembered is None
        or stream.high != stream.root.remembered
        or len(stream.window)
    ):
        return None  # (a claim beyond it, a parent's head, or packets: ours is old news)
    if not former and stream.state is not State.ROOT:
        return None
    return stream.root.remembered


def catch_up_span(stream: Stream, last_seen: int | None) -> tuple[int, int] | None:
    """The numbers a new child's catch-up replays (``catch_up``; None: nothing): after
    ``last_seen`` up to what we have processed, or for a fresh child (None) from the
    oldest open epoch we hold whole."""
    if stream.next_in is None:
        return None  # nothing processed yet: what comes from our parent reaches it too
    end = stream.next_in - 1
    if last_seen is not None:
        return (last_seen + 1, end)
    whole_from = max(stream.window.floor, stream.contiguous_from or 0)
    starts = [first for first in stream.frontier.open.values() if first >= whole_from]
    return (min(starts), end) if starts else None


def owed_after(reply: SubscribeSucceeded | None, last_seen: int | None) -> int | None:
    """Where a new child's catch-up starts: after its ``last_seen``, unless ``reply`` (our
    ``success``) named a head below it, where the child then resumes (``attached``). A root
    in its grace that lacks the tree's past names where that gap starts, so that the
    resubscriber pushes up what it holds; but a relay on its path, or a resubscriber whose
    ``last_seen`` is a claim (its subtree's, or remembered) more than packets, then expects
    the packets after the named head, and what comes up is kept as a past every child is
    beyond (``_backfill``). So it is owed them, and its catch-up waits for them as a
    search's does (``refills``). Otherwise a root that named a low head to the branch
    holding the tree's past, and then took later packets in from another resubscriber,
    sends them down to nobody on that branch: the next new packet reaches its subscribers
    as a gap, and they are told the packets between were missed."""
    if reply is None or reply.last_packet is None or last_seen is None:
        return last_seen  # (told no head, it resumes after ``last_seen``)
    return min(last_seen, reply.last_packet)
