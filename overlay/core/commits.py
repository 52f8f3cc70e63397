"""Commits: a root lets a packet count as delivered only once other nodes hold it too.

A root numbers a packet, stores it and sends it to its children. Were it to tell a publisher
at once that the packet is acknowledged, and show it to its own subscribers, the root might
be the only node that holds it: if the root dies then, the next root knows nothing of that
number and gives it to another packet, so a subscriber at the root would hold one content
under that number and the rest of the tree another. So a packet counts as committed once two
children hold it (one, if the root has only one child), and until then:

* the root's local subscribers are not shown it, nor are any other member's: the root
  tells its children how far it has committed (``overlay.core.showing``);
* a local publisher at the root is not told it is acknowledged;
* a child's publish (its node's, or one it relayed up) is not answered either, while the
  root has another child: until then the packet is held only by the root and the one
  branch it came up, and a root's death with one cut or crash in that branch loses it
  (a partition cuts the rest of the tree off, the root and the publisher's node die, and
  the cut-off subscribers never get the acknowledged packet). A relayed publish gets no
  exception for the relays holding the packet too: the root can die, a partition cut the
  relay off with its branch, and the publisher's node die, and the rest of the tree would
  give the acknowledged number to another publish.

The root asks three of its children (``HeldQuery``) to say what they hold, and keeps each
one's answer (``Held``, cumulative). One question is outstanding at a time; once it is
answered the root asks about its newest packet again, so under load one round trip covers
many packets. A child adopted after the question counts from the next one, and one whose
catch-up is held back (``refills``) from the first question after it is sent. A root with
nobody to wait for does not ask; one with children asks even with no client of its own,
since every member's clients wait for its commits. A child that never answers costs at
most ``confirm_timeout`` (counted in heartbeat rounds), or until liveness drops it: then
the root goes on without it, rather than let a silent or hostile child stall its
clients. Such a child is ``silent`` until it answers again, and nothing waits for it; it is
asked only when fewer than three others are left, so it may stay silent while they
answer. When an asked child goes, the question goes again, to three of those left.
Were it waited for afresh at every question, one child that heartbeats but never answers
would hold every acknowledgement of a root with one or two children back by
``confirm_timeout``; now it costs that once per answer it gives. Forgiving it on its next
answer matters as much: a child that was slow once (a loaded link) would otherwise stop
counting for good, and a root whose only child it is would commit what only it holds.

``Commits`` is a component of ``PacketFlow`` (``overlay.core.publishing``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from overlay.core.config import NodeConfig
from overlay.core.effects import ClientId, PeerId
from overlay.core.local_publishes import BatchAck
from overlay.core.outbox import Outbox
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, State, Stream
from overlay.messages import Held, HeldQuery, PublishData, PublishSucceeded

# Children that must hold a packet before it is committed (fewer if the root has fewer).
HOLDERS = 2
# Children asked at once: one more than needed, so one slow child does not hold up the rest.
ASKED = HOLDERS + 1


def held_by_enough(stream: Stream) -> int | None:
    """The newest packet that ``HOLDERS`` of the children asked (or all, if fewer) hold;
    -1 if none was asked, None if every child asked went silent (nobody to wait for).
    A silent child's answer counts when it comes, but it is not among those needed."""
    asked = [(child, mark) for child, mark in stream.root.holds.items() if child in stream.children]
    if not asked:
        return -1
    needed = min(HOLDERS, sum(1 for child, _ in asked if child not in stream.root.silent))
    if needed == 0:
        return None
    return sorted((mark for _, mark in asked), reverse=True)[needed - 1]


def _to_ask(stream: Stream) -> list[PeerId]:
    """The children a question goes to: ``ASKED`` of them, those that answer first, then
    silent ones if too few answer. Not a child whose catch-up is held back (``refills``):
    live packets wait for it, so it could not say it holds this one until that catch-up
    is sent. Asking every child cost a root with many of them a HeldQuery and a Held per
    child for nearly every packet, once every publish waited for a second branch."""
    fed = list(stream.fed)
    chosen = [child for child in fed if child not in stream.root.silent][:ASKED]
    if len(chosen) < ASKED:
        chosen += [child for child in fed if child in stream.root.silent][: ASKED - len(chosen)]
    return chosen


def waits_for(stream: Stream, child: PeerId | None = None) -> bool:
    """Whether a child other than ``child`` is one the root waits for (not silent)."""
    children, silent = stream.children, stream.root.silent
    if not silent:  # (the common case, asked once per packet: no loop over the children)
        return len(children) > 1 or (bool(children) and child not in children)
    return any(c != child and c not in silent for c in children)


class Commits:
    """A root's commit point: what enough children hold, and the answers that wait for it.
    Its state is the streams' (``holds``, ``silent``, ``committed``, ``asked``, ``unacked``)."""

    __slots__ = (
        "answer_local",
        "config",
        "orphaned_pending",
        "pump",
        "reply",
        "send",
        "stats",
        "streams",
    )

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        out: Outbox,
        answer_local: Callable[[ClientId, Any], None],
        reply: Callable[[Source, Any], None],
        pump: Callable[[Stream], None],
        orphaned_pending: Callable[[Stream], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.send = out.send
        self.answer_local = answer_local
        self.reply = reply
        self.pump = pump
        self.orphaned_pending = orphaned_pending

    def stored_at_root(self, stream: Stream, first: int, last: int) -> None:
        """The root stored packets ``first``..``last`` and sent them to its children. It
        waits for them even with no client of its own to shield: every member's clients
        are shown only what it commits (``showing``)."""
        if not waits_for(stream):
            # Nobody to wait for. Children that are all silent are asked anyway, so that
            # one that answers is waited for again (``on_held``); the commit forgets the
            # question.
            if stream.children:
                self._ask(stream, last)
            self._commit(stream)
            return
        if stream.root.committed is None:
            stream.root.committed = first - 1
        if stream.root.asked is None or stream.root.asked <= stream.root.committed:
            self._ask(stream, last)

    def ack_local(self, stream: Stream, client: ClientId, answer: Any) -> None:
        """Tell a local publisher at the root its publish is acknowledged, once committed
        (a batch numbered in one pass: every publish of it, once its last is)."""
        committed = stream.root.committed
        if (
            isinstance(answer, PublishSucceeded | BatchAck)
            and stream.state is State.ROOT
            and committed is not None
            and answer.packet > committed
        ):
            self._hold_back(stream, client, answer)
        else:
            self.answer_local(client, answer)

    def ack_child(self, stream: Stream, child: PeerId, message: PublishData, answer: Any) -> None:
        """Answer a child's publish; a success waits until another child holds the packet
        too (see the module docstring). Packets pushed up in a takeover are answered at
        once: the pusher's branch held them. Not a publisher's node's claim, which may never
        have gone down anywhere (``Takeover.on_claim``)."""
        if (
            not isinstance(answer, PublishSucceeded)
            or (message.pushed and not message.claim)
            or stream.state is not State.ROOT
            or stream.next_in is None
            or not waits_for(stream, child)
        ):
            self.send(child, answer)
            return
        if stream.root.committed is None:
            if answer.packet != stream.next_in - 1:
                # Not the packet just numbered (a retry of an older one): it spread long
                # ago, or the wait for it timed out.
                self.send(child, answer)
                return
            stream.root.committed = answer.packet - 1
        if answer.packet <= stream.root.committed:
            self.send(child, answer)
            return
        self._hold_back(stream, child, answer)  # a retry's answer replaces the first
        if stream.root.asked is None or stream.root.asked <= stream.root.committed:
            self._ask(stream, stream.next_in - 1)

    def on_held_query(self, peer: PeerId, query: HeldQuery) -> None:
        """Our parent, a root, asks what we hold: everything we processed."""
        stream = self.streams.get(query.key)
        if stream is None or stream.parent != peer or not stream.next_in:
            self.stats.ignored += 1  # the root's question times out; it shows its clients
            return
        self.send(peer, Held(query.key, stream.next_in - 1))

    def on_held(self, peer: PeerId, message: Held) -> None:
        """A child holds everything up to ``message.packet``."""
        stream = self.streams.get(message.key)
        if stream is None or stream.state is not State.ROOT or peer not in stream.children:
            self.stats.ignored += 1
            return
        stream.root.silent.discard(peer)  # it answers: waited for again from the next question
        if stream.next_in is None or peer not in stream.root.holds:
            return  # not asked: it counts from the next question
        stream.root.holds[peer] = max(
            stream.root.holds[peer], min(message.packet, stream.next_in - 1)
        )
        self._advance(stream)

    def children_changed(self, stream: Stream) -> None:
        """A root lost a child or stopped being root: it may have fewer to wait for, or
        nobody, and commits all."""
        if stream.root.pending or stream.root.set_aside:
            self.orphaned_pending(stream)  # ``confirming``
        gone = [c for c in stream.root.holds if c not in stream.children]
        for child in gone:
            del stream.root.holds[child]
        stream.root.silent.intersection_update(stream.children)
        if stream.root.committed is None:
            return
        if stream.state is not State.ROOT or not waits_for(stream):
            self._commit(stream)
            return
        asked = stream.root.asked
        if gone and asked is not None and asked > stream.root.committed:
            # Only some children are asked (``_to_ask``): others take the place of those
            # that went, or what the one left answers would be enough (a publisher's own
            # branch alone), and with none left nobody would ask again until the timeout.
            self._ask(stream, asked)
        self._advance(stream)
        if stream.root.unacked:
            self.release(stream, lost_child=True)  # a publisher may be the only child left

    def overdue(self) -> None:
        """One heartbeat round passed: a question unanswered for ``confirm_timeout`` is
        given up, and the root shows what it holds."""
        rounds = math.ceil(self.config.confirm_timeout / self.config.heartbeat_interval)
        for stream in self.streams.values():
            asked, committed = stream.root.asked, stream.root.committed
            if asked is None or committed is None or asked <= committed:
                continue
            stream.root.ask_rounds += 1
            if stream.root.ask_rounds > rounds:
                self.stats.commit_timeouts += 1
                stream.root.silent.update(
                    child
                    for child, mark in stream.root.holds.items()
                    if mark < asked and child in stream.children
                )
                self._commit(stream)

    def _advance(self, stream: Stream) -> None:
        """Move the commit point up to what enough children hold; ask about the newest
        packet if the question was answered and something still waits."""
        committed = stream.root.committed
        if committed is None or stream.next_in is None:
            return
        number = held_by_enough(stream)
        if number is None:
            self._commit(stream)  # only silent children were asked
            return
        if number <= committed:
            return
        stream.root.committed = number
        head = stream.next_in - 1
        if head > number and (stream.root.asked is None or stream.root.asked <= number):
            self._ask(stream, head)
        self.pump(stream)

    def _ask(self, stream: Stream, number: int) -> None:
        stream.root.asked = number
        stream.root.ask_rounds = 0
        query = HeldQuery(stream.key, number)
        chosen = _to_ask(stream)
        for child in [c for c in stream.root.holds if c not in chosen]:
            del stream.root.holds[child]  # not asked now: neither counted nor found silent
        for child in chosen:
            stream.root.holds.setdefault(child, -1)
            self.send(child, query)
            self.stats.held_queries += 1

    def _commit(self, stream: Stream) -> None:
        """Everything held may be shown: deliver it and release the held acknowledgements.
        The next packet with someone to wait for asks afresh."""
        stream.root.holds.clear()
        if stream.root.committed is None:
            return  # no bound: everything already is
        stream.root.committed = None
        stream.root.asked = None
        self.pump(stream)

    def release(self, stream: Stream, lost_child: bool = False) -> None:
        """Send the acknowledgements that are committed now, and (``lost_child``) a
        publishing child's once no other child is left to hold its packet."""
        committed = stream.root.committed if stream.state is State.ROOT else None
        low = stream.root.unacked_low
        if not lost_child and committed is not None and low is not None and low > committed:
            return  # called for every packet stored: nothing to scan
        held, stream.root.unacked, stream.root.unacked_low = stream.root.unacked, {}, None
        for (source, _), answer in held.items():
            alone = isinstance(source, bytes) and not waits_for(stream, source)
            if committed is not None and answer.packet > committed and not alone:
                self._hold_back(stream, source, answer)
            else:
                self.reply(source, answer)

    def _hold_back(self, stream: Stream, source: Source, answer: Any) -> None:
        stream.root.unacked[(source, answer.uid)] = answer
        if stream.root.unacked_low is None or answer.packet < stream.root.unacked_low:
            stream.root.unacked_low = answer.packet
