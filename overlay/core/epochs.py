"""A stream's epoch frontier: which epochs are open (and where each began), which are done.

Strymon (seeds/004): an epoch is a group of packets that atomic subscribers see whole or not
at all. The publisher closes an epoch with an EPOCH_CLOSED marker, or aborts it with
EPOCH_ABORTED, *in the root's one total order*, so "where the epoch ends" is a plain packet
number, and so is where it began (``SubscribeData.epoch_first``, set by the root). The
frontier is then just the last closed epoch and the open ones with their first packets.

Every tree node keeps a frontier by observing its packets in order; the root's is the one
that decides (``refusal``): a packet for an epoch already done is refused, because atomic
subscribers have been handed that epoch (or told it aborted) and could never see the packet.

Bounds: at most ``max_open`` open epochs (the root refuses to open more; other nodes forget
the oldest) and at most ``max_done`` remembered done epochs; an epoch older than every
remembered one counts as done, so a forgotten epoch cannot be reopened.
"""

from __future__ import annotations

from collections import OrderedDict
from operator import attrgetter

from overlay.messages import PacketKind, PublishError, SubscribeData

_epoch = attrgetter("epoch")
_NO_EPOCH = frozenset({None})


class Frontier:
    __slots__ = ("_done", "_forgotten", "last_closed", "max_done", "max_open", "open")

    def __init__(self, max_open: int, max_done: int) -> None:
        self.max_open = max_open
        self.max_done = max_done
        self.open: dict[int, int] = {}  # epoch -> number of its first packet
        self.last_closed: int | None = None
        self._done: OrderedDict[int, None] = OrderedDict()
        self._forgotten: int | None = None  # the newest done epoch no longer remembered

    def is_done(self, epoch: int) -> bool:
        """Done: closed or aborted, or not open and no newer than an epoch known done.
        Publishers number epochs upward (a Spark batch id, a counter), so an epoch below the
        last closed one that is not open is an old one whose record was lost (forgotten, or
        closed before this node joined the tree), never a new one."""
        if epoch in self._done:
            return True
        if epoch in self.open:
            return False
        newest = max(
            (e for e in (self._forgotten, self.last_closed) if e is not None), default=None
        )
        return newest is not None and epoch <= newest

    def refusal(self, epoch: int | None, kind: PacketKind) -> PublishError | None:
        """At the root: why a packet with this epoch and kind cannot join the order, if so."""
        if epoch is None:
            return PublishError.BAD_MARKER if kind is not PacketKind.DATA else None
        if self.is_done(epoch):
            return PublishError.EPOCH_DONE
        # Only data opens an epoch: a marker for one never opened closes it empty at once.
        opens = kind is PacketKind.DATA and epoch not in self.open
        if opens and len(self.open) >= self.max_open:
            return PublishError.TOO_MANY_EPOCHS
        return None

    def first_of(self, epoch: int | None, number: int) -> int | None:
        """At the root: the ``epoch_first`` of a new packet ``number`` of ``epoch``."""
        if epoch is None:
            return None
        return self.open.get(epoch, number)

    def observe_run(self, packets: list[SubscribeData]) -> None:
        """``observe`` each of ``packets``, in order: a run with no epoch (most) in one pass."""
        if set(map(_epoch, packets)) != _NO_EPOCH:
            for packet in packets:
                self.observe(packet)

    def observe(self, packet: SubscribeData) -> None:
        """Follow one packet of the stream (in packet order, at any node)."""
        epoch = packet.epoch
        if epoch is None or self.is_done(epoch):
            return
        if packet.kind is PacketKind.DATA:
            first = packet.epoch_first if packet.epoch_first is not None else packet.packet
            self.open.setdefault(epoch, first)
            if len(self.open) > self.max_open:
                oldest = min(self.open, key=self.open.__getitem__)
                del self.open[oldest]
            return
        self.open.pop(epoch, None)
        self._done[epoch] = None
        while len(self._done) > self.max_done:
            forgotten, _ = self._done.popitem(last=False)
            if self._forgotten is None or forgotten > self._forgotten:
                self._forgotten = forgotten
        closes = packet.kind is PacketKind.EPOCH_CLOSED
        if closes and (self.last_closed is None or epoch > self.last_closed):
            self.last_closed = epoch

    def starts(self) -> tuple[tuple[int, int], ...]:
        """The open epochs as (epoch, first packet) pairs, oldest first."""
        return tuple(sorted(self.open.items(), key=lambda item: (item[1], item[0])))

    def learn(self, last_closed: int | None, starts: tuple[tuple[int, int], ...]) -> None:
        """Adopt what a new parent says of the frontier (a joining node knew nothing)."""
        if last_closed is not None and (self.last_closed is None or last_closed > self.last_closed):
            self.last_closed = last_closed
        for epoch, first in starts:
            if not self.is_done(epoch) and len(self.open) < self.max_open:
                self.open.setdefault(epoch, first)


_epoch_first, _kind = attrgetter("epoch_first"), attrgetter("kind")
_DATA_ONLY = frozenset({PacketKind.DATA})


def plain_run(packets: list[SubscribeData]) -> bool:
    """Whether each of ``packets`` is plain data outside any epoch, so none is
    ``malformed`` (False says nothing: look at each)."""
    return (
        set(map(_epoch, packets)) == _NO_EPOCH
        and set(map(_epoch_first, packets)) == _NO_EPOCH
        and set(map(_kind, packets)) == _DATA_ONLY
    )


def malformed(packet: SubscribeData) -> str | None:
    """What is wrong with a packet's epoch fields, as a parent sent them (None: nothing)."""
    if (packet.epoch is None) != (packet.epoch_first is None):
        return "epoch and epoch_first must both be set or both be absent"
    if packet.epoch_first is not None and packet.epoch_first > packet.packet:
        return f"its epoch starts at {packet.epoch_first}, after the packet"
    if packet.kind is not PacketKind.DATA and packet.epoch is None:
        return "an epoch marker without an epoch"
    return None
