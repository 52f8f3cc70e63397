"""Gathering: a root asks its subtree for the packets it never had, in its takeover grace
and whenever a waiter needs them (``overlay.core.refills``).

Why. A root that took over holds what reached it, and a subtree that restarts pushes up what
its new parent lacks (``push_up``). But a packet the old root numbered, and acknowledged, may
survive only further down: at a leaf of a branch whose path to the root died, or below a
relay that joined after it. Such nodes are not resubscribers, so they push nothing; refills
ask only up the tree; and when the grace ends the root would announce the packet missed to
every branch, though a node of the tree holds it (after a merge, a node of the other side).

How. When a root's grace begins, or a child's claim moves its head and extends the grace
(``Takeover.reported``), the root sends each child one PastQuery per span of numbers it
lacks: not held, not yet announced missed, within one window below its head, the lowest
``_SPANS`` spans, and one more for the window beyond its head; and again halfway through
the grace, for what it still lacks (``Takeover.gather``: a member holding nothing of a
question answers nothing, so a lost one would go unnoticed). A member that gets one from
its parent pushes up what it holds of the span (``push_one``), and its own publishes an
earlier root numbered in the span that it does not hold (``push_claims``), and passes on
to its children only the parts it does not hold, so each packet comes up from the first
holder on each branch. What comes up is a push like any other: the root takes it in its
place during the grace, or acknowledges it has it; a claim only where it continues the
tree's numbers without a hole (``Takeover.on_claim``). Past
the grace, a waiter's need asks the same way (``ask_spans``), for just the numbers it
lacks, and the root takes in only those (``refills``). A member that reattaches after a
restart asks the same way when its subtree claims more than it and its new parent hold
(``ask_claimed``): the pushes that come up are the only way that claim reaches the root.

Bounds. A query costs a member at most one window of pushes and ``_SPANS`` queries per
child. It goes down only from parent to child, with a hop budget (``htl``, as a publish's
going up), so even a tree with a passing cycle carries it a bounded number of times. A
query from a peer that is not our parent is answered with Unsubscribe, as its packets are.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.fills import Span, gaps
from overlay.core.outbox import Outbox
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.messages import MAX_PACKET, MAX_WIRE_HTL, PastQuery

# Spans one query round asks for, per child: a root's lacks come in a few runs (what one
# lost branch had), so the first few cover them; the rest is announced missed as before.
_SPANS = 8


class Gathering:
    """The questions (``PastQuery``) for packets a root lacks, down its subtree."""

    __slots__ = ("config", "push_claims", "push_one", "send", "stats")

    def __init__(
        self,
        config: NodeConfig,
        stats: NodeStats,
        out: Outbox,
        push_one: Callable[[Stream, PeerId, int], None],
        push_claims: Callable[[Stream, int | None, int | None], None],
    ) -> None:
        self.config = config
        self.stats = stats
        self.send = out.send
        self.push_one = push_one
        self.push_claims = push_claims

    def ask_down(self, stream: Stream) -> None:
        """At a root in its grace: ask every child for what we lack below our head, and for
        what lies one window beyond it."""
        if stream.state is not State.ROOT or not stream.children or stream.next_in is None:
            return
        top = stream.next_in - 1 if stream.high is None else max(stream.high, stream.next_in - 1)
        lacking: list[Span] = []
        if top >= 0:
            bottom = max(0, top - self.config.window_packets + 1)
            if stream.next_in > 0:
                lacking = gaps(stream.window, bottom, stream.next_in - 1)
            if stream.high is not None and stream.high >= stream.next_in:
                lacking.append((stream.next_in, stream.high))  # claimed, not in yet
        # And one window beyond the head: a packet the old root sent down may have reached
        # a member no resubscriber spoke for, and the publisher's node of one it numbered
        # keeps a claim on it (``push_claims``), which it brings up only when asked.
        # (Never past MAX_PACKET: a number near it, however it came, asks for none beyond.)
        spans = _merged(lacking)[: _SPANS - 1]
        if top < MAX_PACKET:
            spans.append((top + 1, min(top + self.config.window_packets, MAX_PACKET)))
        self.ask_spans(stream, spans)

    def ask_spans(self, stream: Stream, spans: list[Span], child: PeerId | None = None) -> None:
        """Ask every child (or just ``child``) for the packets of ``spans`` (the lowest
        ``_SPANS`` of them)."""
        for peer in stream.children if child is None else (child,):
            for first, last in _merged(spans)[:_SPANS]:
                self.stats.past_queries += 1
                self.send(peer, PastQuery(stream.key, first, last, MAX_WIRE_HTL))

    def ask_claimed(self, stream: Stream, theirs: int | None) -> None:
        """We (re)attached under a parent that has processed up to ``theirs``, while our
        subtree has more than it: packets our subtree claims beyond what we hold
        (``Stream.claim``: a resubscriber we adopted, a confirmation), or ones we count as
        processed and never held. Those packets are down there, and only pushes carry
        them, and so the claim, up to the root: ask our children for them. Otherwise a new
        root that hears only our head numbers on from it, over packets our subtree holds.
        At most one window of each."""
        if not stream.children:
            return
        after = -1 if theirs is None else theirs
        head = -1 if stream.next_in is None else stream.next_in - 1
        window = self.config.window_packets
        spans: list[Span] = []
        if head > after:
            # What we count as processed but never held: we joined on a resubscriber's word
            # that the tree had it (``attached``), so the parent, which lacks it, hears of
            # it only from our subtree (else a root that numbered nothing yet numbers those
            # packets again).
            spans += gaps(stream.window, max(after + 1, head - window + 1), head)
        claim = stream.subtree_high
        first = max(after, head) + 1
        if claim is not None and claim >= first:
            spans.append((first, min(claim, first + window - 1)))
        if spans:
            self.ask_spans(stream, spans)

    def on_past_query(self, stream: Stream, query: PastQuery) -> None:
        """Our parent asks for ``first..last``: push up what we hold of it, and ask our
        children for the rest."""
        parent = stream.parent
        if parent is None or query.first > query.last:
            self.stats.ignored += 1
            return
        held = stream.window.packets
        rest: list[Span] = []
        start = query.first
        for number in held.irange(query.first, query.last):
            self.push_one(stream, parent, number)
            if number > start:
                rest.append((start, number - 1))
            start = number + 1
        if start <= query.last:
            rest.append((start, query.last))
        # Our own publishes an earlier root numbered in the span, beyond what we hold, and
        # those we passed the confirmation of up (``witnesses``): the root that asks may have
        # been told nothing of them (``push_claims``, which sends nothing if we have none).
        held_to = -1 if stream.next_in is None else stream.next_in - 1
        self.push_claims(stream, max(query.first - 1, held_to), query.last)
        if query.htl <= 1:
            return
        for child in stream.children:
            for first, last in rest[:_SPANS]:
                self.stats.past_queries += 1
                self.send(child, PastQuery(stream.key, first, last, query.htl - 1))


def _merged(spans: list[Span]) -> list[Span]:
    """``spans`` sorted, with touching or overlapping ones joined."""
    out: list[Span] = []
    for first, last in sorted(spans):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out
