"""The delivery checker: what every subscriber received, against what the roots ordered.

It listens to every client event of a run (``Simulator.on_deliver``) and keeps, without
storing the packets themselves:

* the *truth*: for each stream, packet number -> (uid, epoch, kind, data digest), from the
  publishers' PublishAcked answers and what they published under each uid;
* for each subscriber (node, client): the order it was told about numbers in.

``problems`` then checks the guarantees of the publishing issue for every subscriber:

* plain: every event names the next number owed (a ``Packet`` exactly that number, a
  ``Missed`` a range starting there), so numbers come in order, exactly once, and no gap is
  silent; each packet is the one the root ordered under that number;
* atomic: an ``Epoch`` holds exactly the epoch's data packets, in order; no packet of an
  epoch is delivered outside its ``Epoch``; an aborted epoch is never delivered; an epoch at
  most once;
* with ``complete=True`` additionally: the subscriber got every packet from its start to
  the stream's last, with no ``Missed`` at all (what a run without faults must give).

Latency is the time from ``publish`` to each delivery, in virtual seconds.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from overlay.core.effects import ClientId
from overlay.core.events import (
    BatchAcked,
    ClientEvent,
    Epoch,
    EpochAborted,
    EpochSkipped,
    Missed,
    Packet,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    Subscribed,
)
from overlay.messages import PacketKind

# (uid, epoch, kind, digest of data): what one packet number stands for.
Truth = tuple[int, int | None, PacketKind, int]


def digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


@dataclass(slots=True)
class Sub:
    """What one subscriber client was told. Order is checked as events come; content,
    latency and epoch completeness at the end (a subscriber near the root often has a
    packet before its publisher has the acknowledgement that names its number)."""

    key: bytes
    atomic: bool
    cursor: int | None = None  # the next number owed (plain), or the lowest allowed next
    start: int | None = None  # the first number owed: after its last_seen, or its frontier's
    missed: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)  # each Missed range, in order
    # Every packet delivered, compactly: number, virtual time, data digest.
    numbers: array[int] = field(default_factory=lambda: array("q"))
    times: array[float] = field(default_factory=lambda: array("d"))
    digests: array[int] = field(default_factory=lambda: array("Q"))
    kinds: bytearray = field(default_factory=bytearray)
    epochs: dict[int, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    skipped: set[int] = field(default_factory=set)
    aborted: set[int] = field(default_factory=set)
    # Each broken guarantee found as events came, with the packet numbers it is about.
    problems: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)


class DeliveryLog:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.truth: dict[bytes, dict[int, Truth]] = {}
        # uid -> (key, when published, epoch, kind, data digest), as the publisher sent it.
        self.published: dict[int, tuple[bytes, float, int | None, PacketKind, int]] = {}
        self.publisher: dict[int, int] = {}  # uid -> the publisher's node
        self.publish_time: dict[tuple[bytes, int], float] = {}  # (key, number) -> when
        self.publish_node: dict[tuple[bytes, int], int] = {}  # (key, number) -> node
        self.subs: dict[tuple[int, ClientId], Sub] = {}
        self.retired: list[tuple[int, ClientId, Sub]] = []  # replaced by a resubscription
        self.acks = 0
        self.answered: Counter[int] = Counter()  # uid -> answers its publisher got
        self.conflicts: list[str] = []
        self.conflicted: list[tuple[bytes, int]] = []  # (stream, number) of each conflict

    # --- feeding --------------------------------------------------------------------------

    def expect(
        self, node: int, client: ClientId, key: bytes, atomic: bool, last_seen: int | None
    ) -> None:
        """Register a subscriber before it subscribes (again: the old record is kept)."""
        old = self.subs.get((node, client))
        if old is not None:
            self.retired.append((node, client, old))
        sub = Sub(key, atomic)
        if last_seen is not None:
            sub.cursor = sub.start = last_seen + 1
        self.subs[(node, client)] = sub

    def published_as(
        self, node: int, uid: int, key: bytes, epoch: int | None, kind: PacketKind, data: bytes
    ) -> None:
        """Record what the publisher at ``node`` sends under ``uid`` (before it sends it;
        a retry under the same uid keeps the first time)."""
        self.published.setdefault(uid, (key, self._now(), epoch, kind, digest(data)))
        self.publisher.setdefault(uid, node)

    def on_event(self, node: int, client: ClientId, event: ClientEvent) -> None:
        if isinstance(event, BatchAcked):  # (what a PublishAcked for each would say)
            for uid, number in event.numbers:
                self.on_event(node, client, PublishAcked(event.key, uid, number))
            return
        if isinstance(event, PublishAcked | PublishCollided | PublishFailed):
            self.answered[event.uid] += 1
            if isinstance(event, PublishAcked):
                self._acked(event)
            return
        sub = self.subs.get((node, client))
        if sub is None:
            return
        if isinstance(event, Subscribed):
            if sub.cursor is None:
                sub.cursor = 0 if event.last_packet is None else event.last_packet + 1
                sub.start = sub.cursor
        elif isinstance(event, Packet):
            if self._owed(sub, event.number, "packet"):
                sub.cursor = event.number + 1
            if sub.atomic and event.epoch is not None:
                problem = f"atomic client got packet {event.number} of an epoch alone"
                sub.problems.append((problem, (event.number,)))
            self._record(sub, event)
        elif isinstance(event, Missed):
            if self._owed(sub, event.first, "missed range from"):
                sub.cursor = event.last + 1
            sub.missed += event.last - event.first + 1
            sub.gaps.append((event.first, event.last))
        elif isinstance(event, Epoch):
            numbers = tuple(p.number for p in event.packets)
            if event.epoch in sub.epochs or event.epoch in sub.skipped:
                sub.problems.append((f"epoch {event.epoch} delivered twice", numbers))
            sub.epochs[event.epoch] = (event.closed_at, numbers)
            for packet in event.packets:
                self._record(sub, packet)
            self._owed(sub, event.closed_at, "epoch closed at")
            sub.cursor = event.closed_at + 1
        elif isinstance(event, EpochAborted):
            sub.aborted.add(event.epoch)
        elif isinstance(event, EpochSkipped):
            sub.skipped.add(event.epoch)

    def _acked(self, event: PublishAcked) -> None:
        self.acks += 1
        sent = self.published.get(event.uid)
        if sent is None:
            return
        key, at, epoch, kind, data = sent
        entry = (event.uid, epoch, kind, data)
        known = self.truth.setdefault(key, {}).get(event.number)
        if known is not None and known[1:] != entry[1:]:
            self.conflicts.append(f"packet {event.number} acked for two different publishes")
            self.conflicted.append((key, event.number))
        self.truth[key].setdefault(event.number, entry)
        self.publish_time.setdefault((key, event.number), at)
        self.publish_node.setdefault((key, event.number), self.publisher[event.uid])

    def _owed(self, sub: Sub, number: int, what: str) -> bool:
        """Plain clients are owed exactly ``cursor`` next; atomic ones anything from it on
        (an epoch's packets are held back, so their numbers are passed over)."""
        if sub.cursor is None:
            sub.problems.append((f"{what} {number} before Subscribed", (number,)))
            return False
        if number < sub.cursor or (number > sub.cursor and not sub.atomic):
            problem = f"{what} {number} while {sub.cursor} was owed"
            sub.problems.append((problem, (number, sub.cursor)))
            return False
        return True

    def _record(self, sub: Sub, packet: Packet) -> None:
        sub.numbers.append(packet.number)
        sub.times.append(self._now())
        sub.digests.append(digest(packet.data))
        sub.kinds.append(int(packet.kind))

    # --- checking -------------------------------------------------------------------------

    def problems(
        self, complete: bool, contested: Mapping[bytes, AbstractSet[int]] | None = None
    ) -> Iterator[str]:
        """Every broken guarantee, as text naming the subscriber. ``complete``: the run had
        no faults, so every plain subscriber must have every packet from its start on.
        ``contested``: per stream, the packet numbers two roots may both have given (one
        cut off by a partition numbered publishes afresh): a problem about one of those
        numbers is not reported; every other one is."""
        spared = contested or {}
        for (key, number), conflict in zip(self.conflicted, self.conflicts, strict=True):
            if number not in spared.get(key, ()):
                yield conflict
        every = [(n, c, s) for (n, c), s in self.subs.items()] + self.retired
        for node, client, sub in every:
            who = f"node {node} client {client}"
            ignored = spared.get(sub.key, frozenset())
            for problem, numbers in sub.problems:
                if ignored.isdisjoint(numbers):
                    yield f"{who}: {problem}"
            for problem, number in self._content_problems(sub):
                if number not in ignored:
                    yield f"{who}: {problem}"
            yield from (f"{who}: {p}" for p in self._epoch_problems(sub))
            if not complete or sub.atomic or self.subs.get((node, client)) is not sub:
                continue
            last = max(self.truth.get(sub.key, {}), default=-1)
            if sub.cursor is None:
                yield f"{who}: never subscribed"
            elif sub.missed:
                yield f"{who}: missed {sub.missed} packets"
            elif sub.cursor != last + 1:
                yield f"{who}: got up to {sub.cursor - 1} of {last}"

    def _content_problems(self, sub: Sub) -> Iterator[tuple[str, int]]:
        truth = self.truth.get(sub.key, {})
        for number, data, kind in zip(sub.numbers, sub.digests, sub.kinds, strict=True):
            known = truth.get(number)
            if known is not None and (known[3], int(known[2])) != (data, kind):
                yield f"packet {number} is not the one the root ordered", number

    def _epoch_problems(self, sub: Sub) -> Iterator[str]:
        truth = self.truth.get(sub.key, {})
        for epoch, (closed_at, numbers) in sub.epochs.items():
            if epoch in sub.aborted:
                yield f"aborted epoch {epoch} delivered"
            marker = truth.get(closed_at)
            if marker is not None and (marker[1], marker[2]) != (epoch, PacketKind.EPOCH_CLOSED):
                yield f"epoch {epoch} delivered at {closed_at}, which does not close it"
            expected = tuple(
                number
                for number, (_, e, kind, _) in sorted(truth.items())
                if e == epoch and kind is PacketKind.DATA and number < closed_at
            )
            if numbers != expected:
                yield f"epoch {epoch} is torn: got {list(numbers)}, ordered {list(expected)}"

    def latencies(
        self, direct: Callable[[int, int], float] | None = None
    ) -> tuple[list[float], list[float]]:
        """Publish-to-delivery time of every delivered packet whose publish was seen, and,
        given ``direct(a, b)`` (the one-way latency of the direct path), each delivery's
        relative delay penalty: tree latency over direct latency, publisher to subscriber.
        A subscriber on the publisher's own node has no direct path and no penalty."""
        latency: list[float] = []
        penalty: list[float] = []
        for (node, _), sub in self.subs.items():
            for number, at in zip(sub.numbers, sub.times, strict=True):
                published = self.publish_time.get((sub.key, number))
                if published is None:
                    continue
                latency.append(at - published)
                source = self.publish_node[(sub.key, number)]
                if direct is not None and source != node:
                    penalty.append((at - published) / direct(source, node))
        return latency, penalty
