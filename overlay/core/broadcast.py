"""Packets coming down the tree: storing, gaps announced missed, and delivery to local clients.

Spec (seeds/003): a packet the root accepts "is broadcast to all nodes in the tree and
thereby all subscribers". The rules:

* **Down.** The root stores a new packet (``ordering``) and sends it as SubscribeData to
  every child; each node stores what it has not seen and sends it on. Over a FIFO link from
  one parent the numbers arrive in order, so a number past the one expected means the ones
  between are gone: they become a hole, passed down as PacketsMissed, never a silent gap.
* **Signatures.** On a signed stream a node checks a packet before it stores or forwards
  it, once (``signatures.py``). A peer that sends a bad one is dropped; the packet is not
  stored, so the genuine packet of that number is still accepted when it comes.
* **Runs.** A ``SubscribeRun`` means what its packets would, one by one (``on_run``). One
  that continues the stream with nothing to wait for (the common case of a burst) is
  stored in one pass and sent on as one run per child, so a relay's cost for a burst is
  one event and one send per child, not one per packet.
* **Delivery.** A local client is given what it can have (``pump``): at a root, what
  enough children hold too (``commits``); at a member, what the root said it committed
  (``showing``).

Invariant: a node stores each packet number at most once and sends each stored packet to
each child at most once (plus catch-up, which only a newly adopted child gets, ``joining``),
so no tree link carries a packet twice.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter, is_

from overlay.core.delivery import pump
from overlay.core.effects import PeerId
from overlay.core.epochs import malformed, plain_run
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.stats import NodeStats
from overlay.core.streams import LAST_CLAIM, State, Stream
from overlay.core.window import NOTHING_OWED
from overlay.messages import (
    PacketsMissed,
    PublishData,
    SubscribeData,
    SubscribeRun,
)
from overlay.run_packing import note_held, runs_of, unrun

_data = attrgetter("data")  # (a packet's payload, for sums taken in C)


class Broadcast:
    """What a node does with each SubscribeData and PacketsMissed from a stream's parent,
    and with each packet its root stores.

    The components that take ``store``, ``missing`` and ``pump`` from this one (``showing``,
    ``commits``, ``early_waits``) give it their per-packet methods by ``attach``, after
    construction; they are bound once, since every packet uses them."""

    __slots__ = (
        "_deliver_all",
        "_drop",
        "_mark_moved",
        "_release",
        "_release_early",
        "_send",
        "_signature_ok",
        "_stamp",
        "_stamp_run",
        "_stored_at_root",
        "memory",
        "stats",
    )

    def __init__(
        self,
        stats: NodeStats,
        memory: Memory,
        out: Outbox,
        signature_ok: Callable[[Stream, PublishData | SubscribeData], bool],
    ) -> None:
        self.stats = stats
        self.memory = memory
        self._send = out.send
        self._deliver_all = out.deliver_all
        self._drop = out.drop
        self._signature_ok = signature_ok
        self._release_early: Callable[[Stream, bool], None]
        self._stamp: Callable[[Stream, SubscribeData], SubscribeData]
        self._stamp_run: Callable[[Stream, list[SubscribeData]], list[SubscribeData]]
        self._mark_moved: Callable[[Stream], None]
        self._stored_at_root: Callable[[Stream, int, int], None]
        self._release: Callable[[Stream], None]

    def attach(
        self,
        release_early: Callable[[Stream, bool], None],  # ``EarlyWaits.release``
        stamp: Callable[[Stream, SubscribeData], SubscribeData],  # ``Showing.stamp``
        stamp_run: Callable[[Stream, list[SubscribeData]], list[SubscribeData]],  # its run's
        mark_moved: Callable[[Stream], None],  # ``Showing.mark_moved``
        stored_at_root: Callable[[Stream, int, int], None],  # ``Commits.stored_at_root``
        release: Callable[[Stream], None],  # ``Commits.release``
    ) -> None:
        self._release_early = release_early
        self._stamp = stamp
        self._stamp_run = stamp_run
        self._mark_moved = mark_moved
        self._stored_at_root = stored_at_root
        self._release = release

    def on_run(self, peer: PeerId, run: SubscribeRun, stream: Stream) -> None:
        """A run of packets from ``stream``'s parent ``peer``: what its packets would do
        one by one (``on_data``), in one pass when the run is the stream's next packets and
        nothing waits (no gap held for a fill, no signature to check), sent on as one run
        to each child; the same run object if no mark changed on the way, so its frame is
        not encoded again."""
        packets = unrun(run)
        if not self._continues(stream, packets):
            for packet in packets:
                if not self.on_data(peer, packet, stream):
                    return  # the parent is dropped: nothing more of it counts
            return
        self.store_run(stream, packets, [run])

    def store_run(
        self,
        stream: Stream,
        packets: list[SubscribeData],
        runs: list[SubscribeRun] | None = None,
        made_here: bool = False,
    ) -> None:
        """Store ``packets``, the next in order and each accepted, and send them to every
        child as runs (``runs``, if they hold ``packets`` and these still carry what we
        would stamp; ``made_here``: this node made them of values it checked, a root's
        batch, not a parent's run): ``store`` for each, in one pass."""
        window = stream.window
        window.keep_from = owed = _owed_from(stream)  # (as ``pump`` leaves it)
        data_bytes = sum(map(len, map(_data, packets)))  # (the marks do not change them)
        if owed != NOTHING_OWED and (
            len(window) + len(packets) > 2 * window.max_packets
            or window.bytes + data_bytes > 2 * window.max_bytes
        ):
            # A local client is owed packets, and the run pushes the window past twice its
            # bounds, where packets still owed are evicted too (``Window.add``). One by
            # one, each would be shown as it came (``pump`` raises ``keep_from``) before a
            # later one pushed it out; in one pass some would be evicted unshown. So each
            # is stored as it would be alone (the driver gathers them into runs again:
            # ``overlay.runtime.runs``). Within twice the bounds nothing owed is evicted,
            # and one pass shows the client what one by one would, in the same order.
            for packet in packets:
                self.store(stream, packet)
            return
        first, last = packets[0].packet, packets[-1].packet
        self.memory.saw(stream.key, last)
        self.stats.stored += len(packets)
        stamped = self._stamp_run(stream, packets)
        window.add_run(stamped, data_bytes)
        stream.frontier.observe_run(stamped)
        _took(stream, first)  # (where a contiguous stream starts)
        _took(stream, last)
        if stream.fed:
            # The runs as they came (a relay's: its frame reused), if no mark changed on
            # the way (``stamp_run`` hands back the very list it left as it was).
            if runs is None or not (stamped is packets or all(map(is_, stamped, packets))):
                runs = runs_of(stamped)  # (noted as held: ``held_run_of``)
            elif made_here:
                note_held(runs)
            for each in runs:
                for child in stream.fed:
                    self._send(child, each)
        if stream.state is State.ROOT:
            self._stored_at_root(stream, first, last)
        self.pump(stream)

    def _continues(self, stream: Stream, packets: list[SubscribeData]) -> bool:
        """Whether ``packets`` are the stream's next, each valid and new, with nothing
        that handles a packet of its own (a fill's wait, a signature, a root's commits)."""
        if (
            (stream.next_in is not None and stream.next_in != packets[0].packet)
            or stream.early is not None
            or stream.signer is not None
            or stream.state is State.ROOT
            or packets[-1].packet > LAST_CLAIM
        ):
            return False
        window = stream.window
        if window.accepts_run(packets[0].packet, len(packets)) and plain_run(packets):
            return True  # (the common case, in a few passes in C)
        accepts = window.accepts
        return all(malformed(p) is None and accepts(p.packet) for p in packets)

    def on_data(self, peer: PeerId, packet: SubscribeData, stream: Stream) -> bool:
        """A packet from ``stream``'s parent ``peer``. False: the parent is dropped for it."""
        problem = malformed(packet)
        if problem is None and packet.packet > LAST_CLAIM:
            # (No stream gets there; taken, it would leave its numbering no room.)
            problem = f"its number is past {LAST_CLAIM}"
        if problem is not None:
            self._drop(peer, f"malformed SubscribeData {packet.packet}: {problem}")
            return False
        number = packet.packet
        old = stream.next_in is not None and number < stream.next_in
        if (old and stream.fills is None) or not stream.window.accepts(number):
            self.stats.duplicates += 1
            return True
        if stream.signer is not None and not self._signature_ok(stream, packet):
            self.stats.forged += 1
            self._drop(peer, f"forged signature on packet {number}")
            return False
        if old:
            # One we never had, asked for (``refills``): kept for the child waiting for it;
            # every other child and local client is past it.
            self.stats.filled += 1
            stream.window.add(packet)
            return True
        early = stream.early
        if early is not None and stream.next_in is not None and number > stream.next_in:
            # Above a gap we asked the parent to fill: it waits for the answer.
            if early.covers(stream.next_in) and early.hold(packet):
                return True
            self._release_early(stream, True)  # (give up: past the bounds, as without a wait)
            if stream.next_in is not None and number < stream.next_in:
                self.stats.duplicates += 1
                return True
        if stream.next_in is not None and number > stream.next_in:
            self.missing(stream, stream.next_in, number - 1)
        self.store(stream, packet)
        if stream.early is not None:
            self._release_early(stream, False)
        return True

    def on_missed(self, peer: PeerId, message: PacketsMissed, stream: Stream) -> None:
        if message.first > message.last:
            self._drop(peer, f"PacketsMissed with first {message.first} > last {message.last}")
            return
        if message.last > LAST_CLAIM:
            self._drop(peer, f"PacketsMissed up to {message.last}, past {LAST_CLAIM}")
            return
        first = message.first
        if stream.next_in is not None:
            if stream.fills is not None and first < stream.next_in:
                # The answer to a FillRequest (``refills``): the tree lost these too.
                stream.window.mark_missing(first, min(message.last, stream.next_in - 1))
            first = max(first, stream.next_in)
        if first <= message.last:
            self.missing(stream, first, message.last)
        if stream.early is not None:
            # (the parent's answer: what the gap lacks is lost)
            self._release_early(stream, False)

    def missing(self, stream: Stream, first: int, last: int) -> None:
        """Packets ``first``..``last`` are lost: a hole here, announced to every child."""
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

    def store(self, stream: Stream, packet: SubscribeData) -> None:
        """Store ``packet``, the next in order, and send it to every child."""
        number = packet.packet
        self.memory.saw(stream.key, number)
        self.stats.stored += 1
        packet = self._stamp(stream, packet)  # the mark it brings, and ours (``showing``)
        stream.window.add(packet)
        stream.frontier.observe(packet)
        _took(stream, number)
        for child in stream.fed:
            self._send(child, packet)
        if stream.state is State.ROOT:
            self._stored_at_root(stream, number, number)
        self.pump(stream)

    def pump(self, stream: Stream) -> None:
        """Deliver to every local client of ``stream`` what it can now have: at a root, what
        enough children hold too (``overlay.core.commits``), which it tells its children;
        at a member, what the root said it committed (``overlay.core.showing``)."""
        root = stream.state is State.ROOT
        if root:
            self._mark_moved(stream)
        until = stream.root.committed if root else stream.shown_upto
        shows = root or until is not None  # (a member with no mark yet shows nothing)
        window = stream.window
        if shows:
            for client, member in stream.local.items():
                events = pump(stream.key, member, window, stream.contiguous_from, until)
                if events:
                    self.stats.delivered += len(events)
                    self._deliver_all(client, events)
        window.keep_from = _owed_from(stream)  # (kept past the window's bounds: ``showing``)
        if stream.root.unacked:
            self._release(stream)


def _took(stream: Stream, number: int) -> None:
    """``stream`` took packet ``number``, the next in order: what it has processed."""
    stream.next_in = number + 1
    if stream.contiguous_from is None:
        stream.contiguous_from = number
    if stream.high is None or number > stream.high:
        stream.high = number


def _owed_from(stream: Stream) -> int:
    """The lowest number a local client of ``stream`` is owed (``NOTHING_OWED``: none):
    what ``pump`` keeps in the window for them (``Window.keep_from``)."""
    owed = NOTHING_OWED
    for member in stream.local.values():
        if member.receives and member.cursor is not None and member.cursor < owed:
            owed = member.cursor
    return owed
