"""The Spark sink's node-facing half without Spark: a partition's publish and the driver's
epoch markers, against a real node on loopback (``client_node``). These are the steps of
the exactly-once argument (``overlay.spark``) one at a time: a republished partition is
answered from the root's uid table, a replayed close is too, an attempt whose input ended
short publishes nothing its retry cuts differently, an epoch kept open after a failure is
completed by its replay, and a finished epoch refuses new data with a message that says
what to do."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

pa = pytest.importorskip("pyarrow")

from client_node import node_in_thread  # noqa: E402

from overlay.client import Client, SignedStream  # noqa: E402
from overlay.client.blocking import BlockingSubscription  # noqa: E402
from overlay.client.connection import StreamEvent  # noqa: E402
from overlay.core.config import NodeConfig  # noqa: E402
from overlay.core.events import Epoch, EpochAborted, Packet  # noqa: E402
from overlay.messages import PacketKind  # noqa: E402
from overlay.runtime.identity import Identity  # noqa: E402
from overlay.spark import OverlaySinkError, parse_options, unpack  # noqa: E402
from overlay.spark.options import SinkOptions  # noqa: E402
from overlay.spark.publisher import (  # noqa: E402
    PartitionReport,
    commit_write,
    finish_epoch,
    probe_nodes,
    publish_partition,
)

TIMEOUT = 30.0


def options(address: str, stream: str, **extra: str) -> SinkOptions:
    raw = {"stream": stream, "node": address, "bytesPerPacket": "200", "timeout": "10", **extra}
    return parse_options(raw, streaming=False)


def batches(values: list[str], size: int = 10) -> list[pa.RecordBatch]:
    return [
        pa.record_batch([pa.array(values[i : i + size], pa.string())], names=["value"])
        for i in range(0, len(values), size)
    ]


def failing_after(items: list[pa.RecordBatch], count: int) -> Iterator[pa.RecordBatch]:
    yield from items[:count]
    raise RuntimeError("the task died")


def read_until(
    subscription: BlockingSubscription, done: Callable[[StreamEvent], bool]
) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    while not events or not done(events[-1]):
        events.append(subscription.next(TIMEOUT))
    return events


def rows_of(events: list[StreamEvent]) -> list[bytes | None]:
    packets = [e for e in events if isinstance(e, Packet) and e.kind is PacketKind.DATA]
    return [record.value for p in packets for record in unpack(p.data)]


def tails(*reports: PartitionReport) -> list[tuple[int, bytes]]:
    return [r.tail for r in reports if r.tail is not None]


def test_a_republished_partition_is_answered_from_the_uid_table() -> None:
    values = [f"row-{i:03}" for i in range(120)]
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as watcher:
        opts = options(address, "ovl:open/again")
        plain = watcher.subscribe(opts.stream, event_timeout=TIMEOUT)
        first = publish_partition(
            opts, batches(values), job="run:a", batch=None, partition=0, epoch=None
        )
        # The task publishes its full packets; the last goes to the driver's commit.
        assert (first.rows, first.first_packet) == (120, 0)
        assert first.last_packet == first.packets - 2 and first.tail is not None
        assert commit_write(opts, tails(first), None) is None
        with pytest.raises(RuntimeError, match="died"):
            publish_partition(
                opts, failing_after(batches(values), 5), job="run:a", batch=None, partition=0,
                epoch=None,
            )  # fmt: skip
        again = publish_partition(
            opts, batches(values), job="run:a", batch=None, partition=0, epoch=None
        )
        assert again == first  # the same packets, the same numbers: nothing stored twice
        commit_write(opts, tails(again), None)  # a replayed commit stores nothing either
        marker = watcher.publish(opts.stream, b"end")
        assert marker == first.packets  # the stream's next number: no packet was added
        events = read_until(plain, lambda e: isinstance(e, Packet) and e.number == marker)
        assert rows_of(events[:-1]) == [v.encode() for v in values]


def test_an_attempt_whose_input_ended_short_publishes_nothing_its_retry_cuts_differently() -> None:
    """Spark closes a writer's input at a batch boundary when an upstream stage fails, so
    the failed attempt sees its rows end normally, early. It publishes only full packets,
    which the complete input cuts the same way under the same uids; the partial last packet
    of the attempt Spark commits goes out with the driver's commit. Every row arrives once:
    had the short attempt published its partial last packet, the retry's fuller packet
    under that uid would have been answered with it, and the rows between lost."""
    values = [f"row-{i:03}" for i in range(120)]
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as watcher:
        opts = options(address, "ovl:open/short")
        plain = watcher.subscribe(opts.stream, event_timeout=TIMEOUT)
        short = publish_partition(
            opts, batches(values)[:7], job="run:s", batch=None, partition=0, epoch=None
        )
        assert short.rows == 70 and short.tail is not None  # never committed: dropped
        full = publish_partition(
            opts, batches(values), job="run:s", batch=None, partition=0, epoch=None
        )
        assert full.first_packet == short.first_packet  # its first packets were answered
        commit_write(opts, tails(full), None)
        marker = watcher.publish(opts.stream, b"end")
        assert marker == full.packets  # each packet of the full run stored once, no other
        events = read_until(plain, lambda e: isinstance(e, Packet) and e.number == marker)
        assert rows_of(events[:-1]) == [v.encode() for v in values]


def test_a_retry_that_cuts_other_rows_fails_loudly() -> None:
    """A retry that saw the partition's rows in another order (a nondeterministic plan)
    cuts other packets under the same uids: the root refuses them, and the task fails
    saying why, rather than being acknowledged with the first attempt's packets."""
    values = [f"row-{i:03}" for i in range(120)]
    with node_in_thread() as (_, address):
        opts = options(address, "ovl:open/reordered")
        publish_partition(opts, batches(values), job="run:r", batch=None, partition=0, epoch=None)
        with pytest.raises(OverlaySinkError, match="nondeterministic plan"):
            publish_partition(
                opts, batches(values[::-1]), job="run:r", batch=None, partition=0, epoch=None
            )


def test_an_epoch_kept_open_after_a_failure_is_completed_by_its_replay() -> None:
    values = [f"v{i}" for i in range(200)]
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as watcher:
        opts = options(address, "ovl:open/replay")
        atomic = watcher.subscribe(opts.stream, atomic=True, event_timeout=TIMEOUT)
        for partition in (0, 1):  # partition 1 dies half way; the batch is "aborted"
            items = batches(values[partition::2])
            source = failing_after(items, 5) if partition else iter(items)
            with contextlib.suppress(RuntimeError):
                publish_partition(opts, source, job="q", batch=7, partition=partition, epoch=7)
        # onAbort=keep: nothing at the root. The replay (a restarted query) runs it all again.
        reports = [
            publish_partition(opts, batches(values[p::2]), job="q", batch=7, partition=p, epoch=7)
            for p in (0, 1)
        ]
        closed = commit_write(opts, tails(*reports), 7)
        assert closed is not None
        assert commit_write(opts, tails(*reports), 7) == closed  # a replayed commit
        (epoch,) = read_until(atomic, lambda e: isinstance(e, Epoch))
        assert isinstance(epoch, Epoch) and epoch.epoch == 7 and epoch.closed_at == closed
        got = [r.value for p in epoch.packets for r in unpack(p.data)]
        assert sorted(got) == sorted(v.encode() for v in values)  # every row, once


def test_a_close_the_root_has_forgotten_is_still_already_done() -> None:
    core = NodeConfig(publish_uids=4)
    with node_in_thread(core=core) as (_, address), Client(address, timeout=TIMEOUT) as other:
        opts = options(address, "ovl:open/forgotten")
        # A subscriber keeps the stream carried: a root with no members forgets a stream,
        # its numbers and its uid table with it (see the report in overlay.spark).
        other.subscribe(opts.stream)
        report = publish_partition(
            opts, batches(["a", "b"]), job="j", batch=1, partition=0, epoch=1
        )
        assert commit_write(opts, tails(report), 1) is not None
        for i in range(6):  # push the marker's uid out of the root's table
            other.publish(opts.stream, b"%d" % i)
        assert finish_epoch(opts, 1, PacketKind.EPOCH_CLOSED) is None  # EPOCH_DONE: done
        # ...and new data for that epoch is refused with what to do about it.
        with pytest.raises(OverlaySinkError, match="epochOffset"):
            rows = batches(["c" * 50] * 10)  # more than one packet: the task publishes some
            publish_partition(opts, rows, job="k", batch=1, partition=0, epoch=1)


def test_on_abort_abort_tells_atomic_subscribers() -> None:
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as watcher:
        opts = options(address, "ovl:open/aborted", epoch="3", onAbort="abort")
        atomic = watcher.subscribe(opts.stream, atomic=True, event_timeout=TIMEOUT)
        publish_partition(opts, batches(["x"] * 30), job="j", batch=None, partition=0, epoch=3)
        assert finish_epoch(opts, 3, PacketKind.EPOCH_ABORTED) is not None
        assert finish_epoch(opts, 3, PacketKind.EPOCH_CLOSED) is None  # refused: done
        events = read_until(atomic, lambda e: isinstance(e, EpochAborted))
        assert events == [EpochAborted(opts.stream.key, 3)]


def test_signed_stream(tmp_path: pytest.TempPathFactory) -> None:
    identity = Identity.generate()
    path = f"{tmp_path}/stream.key"
    identity.save(path)
    signed = SignedStream.from_private_bytes(identity.private_bytes(), "signed-spark")
    values = [f"s{i}" for i in range(100)]
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as watcher:
        opts = options(address, signed.address, keyFile=path)
        probe_nodes(opts)
        atomic = watcher.subscribe(signed.address, atomic=True, event_timeout=TIMEOUT)
        reports = []
        for partition in (0, 1):
            items = batches(values[partition::2])
            publish_partition(opts, items, job="j", batch=0, partition=partition, epoch=0)
            reports.append(
                publish_partition(opts, items, job="j", batch=0, partition=partition, epoch=0)
            )
        commit_write(opts, tails(*reports), 0)
        (epoch,) = read_until(atomic, lambda e: isinstance(e, Epoch))
        assert isinstance(epoch, Epoch)
        got = [r.value for p in epoch.packets for r in unpack(p.data)]
        assert sorted(got) == sorted(v.encode() for v in values)


def test_unreachable_node_and_bad_key_file(tmp_path: pytest.TempPathFactory) -> None:
    with pytest.raises(OverlaySinkError, match=r"option 'node': cannot connect.*127\.0\.0\.1:1"):
        probe_nodes(options("127.0.0.1:1", "ovl:open/x"))
    signed = SignedStream.generate("x")
    with node_in_thread() as (_, address):
        opts = options(address, signed.address, keyFile=f"{tmp_path}/missing.key")
        with pytest.raises(OverlaySinkError, match="option 'keyFile'"):
            probe_nodes(opts)
