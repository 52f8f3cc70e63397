"""A paced publisher and recording subscribers, real clients on real client ports, and the
report of what each subscriber got: the measuring instrument of the demo, the chaos run and
the latency benchmark.

Every packet's payload carries its sequence number and the publisher's send time
(``trio.current_time()``); publisher and subscribers run in one trio loop, so one clock
stamps both ends and a latency is simply arrival minus send time. The publisher sends at a
fixed rate, one publish at a time, and retries a publish the node gives up on (a
retryable refusal, e.g. while the root is being replaced) under the same uid, so a retry is
never ordered twice. What counts is what the root acknowledged: ``expected`` is the set of
acknowledged packet numbers above the subscriber's join frontier, and a subscriber has
lost the ones it never received, duplicated the ones it received twice, and reordered any
that came after a higher number.

Repair time, from a subscriber's view, after a kill at time t: how long until it receives
a packet that was published after t (fresh data flows again). Under normal operation that
is one publish interval plus one latency; a repair shows up as the excess.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from overlay.client.aio import Client, open_client
from overlay.client.connection import PublishRejectedError, fresh_uid
from overlay.core.events import Missed, Packet

_PAYLOAD = struct.Struct(">Qd")  # sequence number, send time

# Publishes unanswered at once: enough that a stream keeps its pace through
# acknowledgements as slow as ``ACK_PATIENCE`` (a loaded 1,000-node testnet, a repair),
# and at least ``MIN_IN_FLIGHT``, a bound that keeps a retry storm small at low rates but
# alone would hold a 200/s stream to 32 per acknowledgement time (180/s at the 175 ms a
# loaded 1,000-node testnet takes).
ACK_PATIENCE = 0.6  # seconds
MIN_IN_FLIGHT = 32


def in_flight_for(rate: float) -> int:
    """Publishes a publisher at ``rate`` a second (0: as fast as acks come) keeps
    unanswered at most."""
    return max(MIN_IN_FLIGHT, math.ceil(rate * ACK_PATIENCE))


# Subscribers listed one per line up to this many; beyond, only those that failed.
SHOW_EACH = 12

# A publish refused as retryable (no root yet, root changing) is sent again this many
# times, ~one node publish_timeout apart: far longer than any repair should take.
MAX_PUBLISH_RETRIES = 30
RETRY_PAUSE = 0.05  # seconds before the first retry, doubling up to MAX_RETRY_PAUSE
MAX_RETRY_PAUSE = 1.0


@dataclass(slots=True)
class Recorder:
    """One subscriber: everything it received, in arrival order."""

    node: int
    address: str
    numbers: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    sent: list[float] = field(default_factory=list)  # publisher's send time per arrival
    missed: list[tuple[int, int]] = field(default_factory=list)
    frontier: int | None = None  # the stream's last packet when it joined
    changed: trio.Event = field(default_factory=trio.Event)

    async def run(self, stream: str, *, task_status: trio.TaskStatus[None]) -> None:
        """Subscribe (reported through ``task_status`` once in the tree), then record until
        cancelled."""
        async with open_client(self.address, name=f"recorder-{self.node}") as client:
            subscription = await client.subscribe(stream)
            self.frontier = subscription.subscribed.last_packet
            task_status.started()
            async for event in subscription:
                now = trio.current_time()
                if isinstance(event, Packet):
                    self.numbers.append(event.number)
                    self.arrivals.append(now)
                    if len(event.data) == _PAYLOAD.size:
                        self.sent.append(_PAYLOAD.unpack(event.data)[1])
                    else:
                        self.sent.append(math.nan)
                elif isinstance(event, Missed):
                    self.missed.append((event.first, event.last))
                self.changed.set()
                self.changed = trio.Event()

    def has(self, numbers: set[int]) -> bool:
        return numbers <= set(self.numbers)

    async def wait_for(self, numbers: set[int]) -> None:
        """Return once every number in ``numbers`` has arrived (event-driven)."""
        while not self.has(numbers):
            await self.changed.wait()


@dataclass(slots=True)
class Publisher:
    node: int
    address: str
    acked: dict[int, int] = field(default_factory=dict)  # sequence -> packet number
    sent_at: dict[int, float] = field(default_factory=dict)
    retries: int = 0
    failed: list[str] = field(default_factory=list)
    progress: trio.Event = field(default_factory=trio.Event)

    def answered(self) -> int:
        """How many publishes were answered so far: acknowledged or refused for good."""
        return len(self.acked) + len(self.failed)

    async def run(
        self, stream: str, count: int, rate: float, *, in_flight: int | None = None
    ) -> None:
        """Publish ``count`` packets at ``rate`` per second (0: as fast as acks come), with
        at most ``in_flight`` (by default ``in_flight_for(rate)``) unanswered at once: the
        pace holds while acknowledgements take longer than one interval (a busy testnet, a
        root being replaced)."""
        room = trio.Semaphore(in_flight_for(rate) if in_flight is None else in_flight)
        async with (
            open_client(self.address, name=f"publisher-{self.node}") as client,
            trio.open_nursery() as nursery,
        ):
            start = trio.current_time()
            for seq in range(count):
                if rate > 0:
                    await trio.sleep_until(start + seq / rate)
                await room.acquire()
                nursery.start_soon(self._publish, client, stream, seq, room)

    async def _publish(self, client: Client, stream: str, seq: int, room: trio.Semaphore) -> None:
        uid = fresh_uid()
        now = trio.current_time()
        self.sent_at[seq] = now
        data = _PAYLOAD.pack(seq, now)
        try:
            for attempt in range(MAX_PUBLISH_RETRIES):
                try:
                    self.acked[seq] = await client.publish(stream, data, uid=uid)
                    return
                except PublishRejectedError as error:
                    if not error.retryable:
                        self.failed.append(f"packet {seq}: {error}")
                        return
                    self.retries += 1
                    # A refusal the node gives at once (BUSY) would come back at once too:
                    # each of the publishes in flight waits a little longer each time.
                    await trio.sleep(min(RETRY_PAUSE * 2**attempt, MAX_RETRY_PAUSE))
            self.failed.append(f"packet {seq}: refused {MAX_PUBLISH_RETRIES} times")
        finally:
            room.release()
            self.progress.set()
            self.progress = trio.Event()

    async def wait_acked(self, count: int) -> None:
        while len(self.acked) + len(self.failed) < count:
            await self.progress.wait()


@dataclass(frozen=True, slots=True)
class SubscriberReport:
    node: int
    expected: int
    received: int
    lost: int
    duplicates: int
    reordered: int
    missed_events: int

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.reordered or self.missed_events)


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    published: int  # distinct packet numbers acknowledged by the root
    failed: int  # publishes the overlay refused for good
    double_acked: tuple[tuple[int, tuple[int, ...]], ...]  # number -> the publishes given it
    retries: int
    subscribers: tuple[SubscriberReport, ...]
    latencies: tuple[float, ...]  # seconds, every delivery of every subscriber
    repairs: tuple[float, ...]  # seconds, per kill: until every subscriber had fresh data

    @property
    def lost(self) -> int:
        return sum(s.lost for s in self.subscribers)

    @property
    def duplicates(self) -> int:
        return sum(s.duplicates for s in self.subscribers)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.double_acked and all(s.ok for s in self.subscribers)

    def percentile(self, p: float) -> float:
        return percentile(self.latencies, p)

    def lines(self) -> list[str]:
        out = [
            f"published {self.published} packets ({self.retries} publish retries, "
            f"{self.failed} refused for good)",
        ]
        for number, seqs in self.double_acked[:5]:
            out.append(
                f"  ACK BUG: packet number {number} was acknowledged for {len(seqs)} different "
                f"publishes (sequence {', '.join(map(str, seqs))}): one of them is lost"
            )
        many = len(self.subscribers) > SHOW_EACH
        for s in self.subscribers:
            if many and s.ok:
                continue  # a long list shows only the subscribers that failed
            mark = "ok" if s.ok else "FAIL"
            out.append(
                f"  subscriber on node {s.node}: {s.received}/{s.expected} received, "
                f"lost {s.lost}, duplicates {s.duplicates}, out of order {s.reordered}"
                + (f", missed ranges {s.missed_events}" if s.missed_events else "")
                + f"  [{mark}]"
            )
        if many:
            good = sum(s.ok for s in self.subscribers)
            out.append(
                f"  {good} of {len(self.subscribers)} subscribers got every packet once, in order"
            )
        if self.latencies:
            out.append(
                f"latency publish->subscriber: p50 {1000 * self.percentile(50):.1f} ms, "
                f"p99 {1000 * self.percentile(99):.1f} ms, max "
                f"{1000 * max(self.latencies):.1f} ms ({len(self.latencies)} deliveries)"
            )
        if self.repairs:
            out.append(
                f"repair (kill -> fresh data at every subscriber): median "
                f"{percentile(self.repairs, 50):.2f} s, max {max(self.repairs):.2f} s "
                f"over {len(self.repairs)} kills"
            )
        out.append(f"lost {self.lost}, duplicates {self.duplicates}")
        return out


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (no interpolation: an observed value)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(0, math.ceil(p / 100 * len(ordered)) - 1)
    return ordered[rank]


def report(
    publisher: Publisher, recorders: Sequence[Recorder], kills: Sequence[float] = ()
) -> DeliveryReport:
    """What every subscriber got, against what the root acknowledged."""
    numbers = set(publisher.acked.values())
    subscribers = []
    latencies: list[float] = []
    for r in recorders:
        expected = {n for n in numbers if r.frontier is None or n > r.frontier}
        counts = Counter(r.numbers)
        reordered = sum(1 for a, b in zip(r.numbers, r.numbers[1:], strict=False) if b <= a)
        subscribers.append(
            SubscriberReport(
                node=r.node,
                expected=len(expected),
                received=len(set(r.numbers) & expected),
                lost=len(expected - set(r.numbers)),
                duplicates=sum(c - 1 for c in counts.values()),
                reordered=reordered,
                missed_events=len(r.missed),
            )
        )
        latencies.extend(a - s for a, s in zip(r.arrivals, r.sent, strict=True) if s == s)
    repairs = [_repair(kill, recorders) for kill in kills]
    given: dict[int, list[int]] = {}
    for seq, number in sorted(publisher.acked.items()):
        given.setdefault(number, []).append(seq)
    return DeliveryReport(
        published=len(numbers),
        failed=len(publisher.failed),
        double_acked=tuple((n, tuple(s)) for n, s in sorted(given.items()) if len(s) > 1),
        retries=publisher.retries,
        subscribers=tuple(subscribers),
        latencies=tuple(latencies),
        repairs=tuple(r for r in repairs if r is not None),
    )


def _repair(kill: float, recorders: Sequence[Recorder]) -> float | None:
    """Seconds from ``kill`` until every subscriber received a packet sent after it."""
    worst = 0.0
    for r in recorders:
        fresh = [a for a, s in zip(r.arrivals, r.sent, strict=True) if s > kill]
        if not fresh:
            return None  # publishing ended before fresh data came: not measured
        worst = max(worst, fresh[0] - kill)
    return worst
