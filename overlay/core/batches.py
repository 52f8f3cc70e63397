"""A local client's batch of publishes: at the root, numbered as one range in one pass.

A client that has many packets to publish at once (a Spark partition, ``overlay publish``
reading a file) may hand them over as one batch: ``(uid, data)`` pairs for one open
stream. A batch means exactly what its publishes would, made one after another in the
same order: each is numbered once, a retried uid gets its first number, each is
acknowledged (``PublishAcked``) once committed.

Where the node is the stream's root and nothing makes a publish a case of its own, the
batch is numbered in one pass (``Batches.publish``): its uids are remembered, its packets
stored and sent to each child as runs (``Broadcast.store_run``), and its
acknowledgements wait for the commit of its last packet, all together (``BatchAck``).
That is the point of a batch: a root pays its fixed costs per batch, not per packet.

A batch the root could number so but not yet waits, whole, with the stream's later
publishes behind it (``batch_queue``): while the root's window lacks room for it all
uncommitted (``backlog.full``: the back-pressure a fast publisher meets), and while single
publishes made before it wait (for credit, or in the root's backlog).

Anything else takes each publish its own way (``LocalClients.publish``), in the same event:

* a node that is not the root passes each publish up the tree as before (with its credit,
  its retries and its confirmation at the root);
* a root in its takeover grace, or with numbers pending a publisher's confirmation, or a
  tail of numbers it lacks (``Takeover.close_tail``); a batch larger than a window;
* a uid it knows (a retry: answered with its number), one in flight or whose publish
  lapsed, or one given twice in the batch;
* a signed stream (each packet is signed for its own number).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

from overlay.core.backlog import full
from overlay.core.commits import waits_for
from overlay.core.effects import ClientId
from overlay.core.local_publishes import BatchAck, batch_id
from overlay.core.local_publishing import LocalPublishes
from overlay.core.showing import root_stamp
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream, next_number
from overlay.core.uid_table import data_digests
from overlay.messages import (
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    PacketKind,
    RunItem,
    SubscribeData,
    SubscribeRun,
)
from overlay.run_packing import packets_of, runs_of_items

_DATA = PacketKind.DATA


@dataclass(frozen=True, slots=True)
class Batch:
    """A local client's batch and what every attempt to number it in one pass asks of it,
    worked out once (a batch that waits for room is asked again after each event).
    ``plain``: every item is a valid uid and payload (otherwise each goes its own way and
    is refused with its reason: ``LocalClients.publish``); then ``uids`` are its uids in
    order, ``payloads`` its payloads in order and ``size`` their bytes (else empty and 0)."""

    items: Sequence[tuple[int, bytes]]
    plain: bool
    uids: list[int]
    payloads: list[bytes]
    size: int


_TUPLE, _PAIR, _INT, _BYTES = (
    frozenset({tuple}),
    frozenset({2}),
    frozenset({int}),
    frozenset({bytes}),
)


def batch_of(items: Sequence[tuple[int, bytes]]) -> Batch:
    """``items`` as a batch. ``items`` that are not a non-empty sequence of pairs raise
    ValueError: a caller's bug, which a client port checks before it calls."""
    if not isinstance(items, Sequence) or not items:
        raise ValueError("a batch is a non-empty sequence of (uid, data) pairs")
    # Each test is a pass in C over the items (a batch is up to thousands of them); only
    # items that are not all plain tuples take the loop, which says what is wrong.
    if set(map(type, items)) == _TUPLE and set(map(len, items)) == _PAIR:
        uid_column, payload_column = zip(*items, strict=True)
        uids, payloads = list(uid_column), list(payload_column)
        if (
            set(map(type, uids)) == _INT
            and min(uids) >= 0
            and max(uids) <= MAX_U64
            and set(map(type, payloads)) == _BYTES
            and max(map(len, payloads)) <= MAX_PAYLOAD
        ):
            return Batch(items, True, uids, payloads, sum(map(len, payloads)))
        return Batch(items, False, [], [], 0)
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise ValueError("a batch is a non-empty sequence of (uid, data) pairs")
    return Batch(items, False, [], [], 0)  # (tuple subclasses: each goes its own way)


class Batches:
    """Numbering a local batch at the root in one pass (see the notes)."""

    __slots__ = ("_ack", "_publishes", "_store_run", "stats")

    def __init__(
        self,
        stats: NodeStats,
        publishes: LocalPublishes,
        # ``Broadcast.store_run``
        store_run: Callable[[Stream, list[SubscribeData], list[SubscribeRun] | None, bool], None],
        ack: Callable[[Stream, ClientId, BatchAck], None],  # ``Commits.ack_local``
    ) -> None:
        self.stats = stats
        self._publishes = publishes
        self._store_run = store_run
        self._ack = ack

    def publish(self, now: float, stream: Stream, client: ClientId, batch: Batch) -> bool | None:
        """Number ``batch`` as the next packets of ``stream`` and send them down, if this
        node may do that in one pass (True); None if it may once it has room, and the
        publishes before it went (``batch_queue``); False if not (nothing done: each goes
        its own way)."""
        if not batch.plain or not self._takes(stream, batch):
            return False
        if not self._room(stream, batch):
            return None  # (before the uids are checked: a batch waiting asks again often)
        ids = batch.uids
        if not self._fresh(stream, ids):
            return False
        uids = stream.uids
        assert uids is not None, "a root keeps its uids"
        key, first = stream.key, next_number(stream)
        count = len(ids)
        mark = root_stamp(stream)
        # Each packet carries the mark from before it (``showing``): with nobody to wait
        # for, the root commits each as it goes, so packet n carries n - 1.
        stamps: Iterable[int | None]
        if waits_for(stream):
            stamps = repeat(mark, count)
        elif mark is None:
            stamps = range(first - 1, first + count - 1)
        else:
            stamps = [n if n > mark else mark for n in range(first - 1, first + count - 1)]
        numbers = range(first, first + count)
        payloads = batch.payloads
        uids.remember_run(ids, numbers, data_digests(payloads))
        # Each packet as a run holds it (``run_item``), built in one pass in C: the stored
        # packets are built from them, and so are the runs each child is sent.
        items: list[RunItem] = list(
            zip(payloads, repeat(None), repeat(_DATA), repeat(None), repeat(None), ids, stamps)
        )
        packets = packets_of(key, first, items)
        given = list(zip(ids, numbers, strict=True))
        ack = BatchAck(key, batch_id(first), first + count - 1, given, client, now)
        self.stats.published += count
        self.stats.numbered += count
        self.stats.batches += 1
        runs = runs_of_items(key, first, items) if stream.fed else None
        self._store_run(stream, packets, runs, True)
        self._publishes.batched.update(dict.fromkeys(ids, ack))
        self._ack(stream, client, ack)
        return True

    def _takes(self, stream: Stream, batch: Batch) -> bool:
        """Whether ``batch`` may be numbered in one pass here, now or once it has room, as
        far as the stream's state says (see the notes; the uids: ``_fresh``)."""
        root, window = stream.root, stream.window
        return not (
            stream.state is not State.ROOT
            or stream.uids is None
            or stream.signer is not None
            or root.recover_until is not None
            or root.pending
            or root.set_aside  # (a publish goes its own way, and sends them down first)
            or (stream.high is not None and (stream.next_in or 0) <= stream.high)  # a tail
            or len(batch.items) > window.max_packets  # (more than a window: never room)
            or batch.size > window.max_bytes
        )

    def _fresh(self, stream: Stream, ids: list[int]) -> bool:
        """Whether every uid of ``ids`` is new here and given once (see the notes)."""
        uids = stream.uids
        assert uids is not None, "a root keeps its uids"
        publishes = self._publishes
        return (
            len(set(ids)) == len(ids)
            and uids.none_of(ids)
            and publishes.none_in_flight(ids)
            and stream.claims.keys().isdisjoint(ids)
            and publishes.lapsed.keys().isdisjoint(ids)
        )

    def _room(self, stream: Stream, batch: Batch) -> bool:
        """Whether the root may number ``batch`` now: no single publish of the stream waits
        before it (for credit, or in the backlog), and its window has room for it all
        uncommitted, as ``full`` has it for each publish (else some would be held back)."""
        root, window = stream.root, stream.window
        credit = self._publishes.credit.credits.get(stream.key)
        if root.backlog or (credit is not None and credit.held) or full(stream):
            return False
        committed = root.committed
        above = 0
        if committed is not None:
            above = len(window.packets) - window.packets.bisect_right(committed)
        if above + len(batch.items) > window.max_packets:
            return False
        size = batch.size
        return (
            committed is None
            or window.bytes + size <= window.max_bytes  # (else the sum below is more)
            or window.payload_in(committed + 1, MAX_PACKET) + size <= window.max_bytes
        )
