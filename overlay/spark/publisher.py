"""The two halves of a write that talk to nodes: one task's partition, and the driver's
commit. No Spark in here (``source.py`` is the Spark side), so both run in tests against a
node without a SparkSession.

A task (``publish_partition``) connects to its node (``nodes[partition % len(nodes)]``),
cuts its rows into packets (``packing.py``) and publishes each *full* packet with its
``data_uid`` (``uids.py``), pipelined: up to ``max_in_flight`` publishes are unanswered at
once, and the task returns only when the root has answered every one. The partition's last,
partial packet is not published by the task: it goes back to the driver in the task's
commit message (``PartitionReport.tail``), and the driver's commit publishes the tails of
the tasks Spark committed (``commit_write``), then the epoch's EPOCH_CLOSED marker, which
the root therefore orders after every data packet of the epoch: atomic subscribers get the
micro-batch whole.

Why the tail waits for the commit. When an upstream stage fails (a UDF raising in another
Python worker, an executor lost), Spark closes the writer's input at a batch boundary, and
the writer sees its rows end normally, short (measured: a partition of 100,000 rows ended
after 90,200, then the task failed). A full packet is cut only when the row after it is in
hand (``Packer``), so a short input still cuts every full packet exactly as a complete one
does; only the last packet depends on where the input ended. Published from the task, the
failed attempt's short last packet and the retry's fuller one would share a uid, the root
would answer the retry with the first one's number, and the rows between would be lost
while Spark reported success. A commit message reaches the driver only from an attempt
Spark committed, whose input was complete.

Retries inside a task: a refusal the protocol calls retryable (BUSY, TIMEOUT, NOT_CARRIED:
the tree was changing) is published again under the same uid after a short pause, up to
``RETRY_ATTEMPTS`` times; such a packet may then be ordered after later packets of its
partition. Anything else fails the task with a message that says why; Spark's retry of the
task republishes under the same uids, so the packets stored before the failure are answered
from the root's uid table, not stored twice.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa

from overlay.client.blocking import Client
from overlay.client.connection import (
    ClientError,
    NodeUnreachable,
    NotAClientPort,
    PublishRejectedError,
    SignedStream,
    StreamLike,
)
from overlay.messages import PacketKind, PublishError
from overlay.spark.options import OverlaySinkError, SinkOptions, Unpublishable
from overlay.spark.packing import Packer
from overlay.spark.rows import PackingError
from overlay.spark.uids import data_uid, marker_uid

log = logging.getLogger("overlay.spark")

# A retryable refusal means the tree is changing (a root takeover, a parent lost): the core
# itself resends for publish_timeout x publish_attempts; a few more rounds here, a second
# apart and growing, cover a takeover's grace without hiding a node that stays down.
RETRY_ATTEMPTS = 5
RETRY_PAUSE = 0.5

# The driver checks each node before any task runs; an answer takes a loopback round trip,
# so a few seconds tell a dead address from a slow one.
PROBE_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class PartitionReport:
    """What one task published: the driver logs it and sums it up."""

    partition: int
    node: str
    rows: int
    packets: int
    first_packet: int | None
    last_packet: int | None
    # The partition's last, partial packet and its uid, for the driver's commit to publish
    # (the module notes say why); None if the rows filled whole packets.
    tail: tuple[int, bytes] | None = None


def stream_of(options: SinkOptions) -> StreamLike:
    """The stream as the client takes it: with its signing key for a signed stream."""
    if options.key_file is None:
        return options.stream
    try:
        return SignedStream.load(options.key_file, options.stream)
    except (OSError, ValueError) as error:
        raise OverlaySinkError(f"overlay sink: option 'keyFile': {error}") from None


def connect(node: str, options: SinkOptions, name: str, timeout: float | None = None) -> Client:
    """A client of ``node``; OverlaySinkError naming the node and the option if none
    answers there."""
    try:
        return Client(
            node,
            timeout=options.timeout if timeout is None else timeout,
            max_in_flight=options.max_in_flight,
            name=name,
        )
    except NotAClientPort as error:
        raise OverlaySinkError(f"overlay sink: option 'node': {error}") from None
    except NodeUnreachable as error:
        raise OverlaySinkError(
            f"overlay sink: option 'node': {error} (is a node running there? "
            "start one with 'overlay node')"
        ) from None


def probe_nodes(options: SinkOptions) -> None:
    """On the driver, before any task runs: every node named answers, and a signed
    stream's key file is readable and is that stream's."""
    stream_of(options)
    for node in options.nodes:
        connect(node, options, "spark driver probe", min(options.timeout, PROBE_TIMEOUT)).close()


class _Pipeline:
    """Publishes in flight on one connection, oldest first; settles the oldest whenever
    more than ``window`` are unanswered."""

    def __init__(self, client: Client, stream: StreamLike, epoch: int | None, what: str) -> None:
        self.client = client
        self.stream = stream
        self.epoch = epoch
        self.what = what
        self.window = client.max_in_flight
        self.pending: deque[tuple[int, bytes, int]] = deque()  # (uid, data, attempt)
        self.first: int | None = None
        self.last: int | None = None

    def send(self, uid: int, data: bytes, attempt: int = 1) -> None:
        self.client.publish_nowait(self.stream, data, uid=uid, epoch=self.epoch)
        self.pending.append((uid, data, attempt))
        while len(self.pending) > self.window:
            self._settle()

    def drain(self) -> None:
        while self.pending:
            self._settle()

    def _settle(self) -> None:
        uid, data, attempt = self.pending.popleft()
        try:
            number = self.client.wait(uid)
        except PublishRejectedError as error:
            if error.retryable and attempt < RETRY_ATTEMPTS:
                log.info("%s: retrying publish %#x after %s", self.what, uid, error.error.name)
                time.sleep(RETRY_PAUSE * attempt)
                self.send(uid, data, attempt + 1)
                return
            raise OverlaySinkError(_refusal(error, self.epoch, self.what)) from None
        self.first = number if self.first is None else min(self.first, number)
        self.last = number if self.last is None else max(self.last, number)


def publish_partition(
    options: SinkOptions,
    batches: Iterable[pa.RecordBatch],
    *,
    job: str,
    batch: int | None,
    partition: int,
    epoch: int | None,
) -> PartitionReport:
    """Publish one partition's rows as packets with uids from (``job``, ``batch``,
    ``partition``, packet sequence); returns once the root has answered every one."""
    stream = stream_of(options)
    keyed = options.key_column is not None
    packer = Packer(options.rows_per_packet, options.bytes_per_packet, keyed)
    node = options.node_for(partition)
    what = f"partition {partition}" + ("" if batch is None else f" of micro-batch {batch}")
    seq = 0
    tail: tuple[int, bytes] | None = None
    with connect(node, options, f"spark {what}") as client:
        pipeline = _Pipeline(client, stream, epoch, what)

        def send(data: bytes) -> None:
            nonlocal seq
            pipeline.send(data_uid(job, batch, partition, seq, options.packing), data)
            seq += 1

        try:
            for record_batch in batches:
                values = _column(record_batch, options.value_column)
                keys = _column(record_batch, options.key_column) if keyed else None
                for packet in packer.add(values, keys):
                    send(packet)
            last = packer.finish()
            if last is not None:
                tail = (data_uid(job, batch, partition, seq, options.packing), last)
                seq += 1
            pipeline.drain()
        except PackingError as error:
            raise Unpublishable(f"overlay sink: {what}: {error}") from None
        except ClientError as error:
            raise OverlaySinkError(f"overlay sink: {what} via {node}: {error}") from None
    return PartitionReport(
        partition, node, packer.rows_packed, seq, pipeline.first, pipeline.last, tail
    )


def commit_write(
    options: SinkOptions, tails: Sequence[tuple[int, bytes]], epoch: int | None
) -> int | None:
    """On the driver, once every task of a write is committed: publish the partitions' last
    packets (``tails``, each under its uid), then close ``epoch`` if the write has one.
    Returns the close marker's packet number (see ``finish_epoch``)."""
    if not tails and epoch is None:
        return None  # (every partition filled whole packets: nothing to publish)
    # A micro-batch with no rows still closes its epoch, with no packets in it: closed
    # epochs then follow batch ids without holes, an atomic subscriber sees that the batch
    # ran (an empty epoch), and the close is idempotent like any other (``_mark``), at the
    # cost of one marker for a batch Spark rarely runs (it runs none when no data came).
    what = "the driver's commit" if epoch is None else f"the driver's commit of epoch {epoch}"
    with _driver_client(options) as (client, node):
        try:
            pipeline = _Pipeline(client, stream_of(options), epoch, what)
            for uid, data in tails:
                pipeline.send(uid, data)
            pipeline.drain()
        except ClientError as error:
            raise OverlaySinkError(f"overlay sink: {what} via {node}: {error}") from None
        return (
            None if epoch is None else _mark(client, node, options, epoch, PacketKind.EPOCH_CLOSED)
        )


def finish_epoch(options: SinkOptions, epoch: int, kind: PacketKind) -> int | None:
    """On the driver: close (EPOCH_CLOSED) or abort (EPOCH_ABORTED) ``epoch``; returns the
    marker's packet number, or None if the root says the epoch was already done."""
    with _driver_client(options) as (client, node):
        return _mark(client, node, options, epoch, kind)


@contextmanager
def _driver_client(options: SinkOptions) -> Iterator[tuple[Client, str]]:
    """A client of the first node of ``options.nodes`` that answers."""
    last_error: OverlaySinkError | None = None
    for node in options.nodes:
        try:
            client = connect(node, options, "spark driver")
        except OverlaySinkError as error:
            last_error = error
            continue
        with client:
            yield client, node
        return
    assert last_error is not None
    raise last_error


def _mark(
    client: Client, node: str, options: SinkOptions, epoch: int, kind: PacketKind
) -> int | None:
    """Publish ``epoch``'s marker of ``kind``.

    Idempotent: the marker's uid is ``marker_uid(stream, epoch, kind)``, so a replayed
    commit is answered from the root's uid table. If the root has forgotten that uid (65,536
    publishes later, or after a root takeover) it refuses the marker as EPOCH_DONE, which
    is also an answer: the epoch is finished, and every data packet of it was refused or
    stored before, so nothing reaches a subscriber twice."""
    try:
        return client.publish(
            stream_of(options),
            b"",
            uid=marker_uid(options.stream.key, epoch, kind),
            epoch=epoch,
            kind=kind,
        )
    except PublishRejectedError as error:
        if error.error is PublishError.EPOCH_DONE:
            log.warning(
                "epoch %d of %s was already closed or aborted (a replayed commit)",
                epoch,
                options.stream.address,
            )
            return None
        raise OverlaySinkError(
            f"overlay sink: {kind.name} marker of epoch {epoch}: {error}"
        ) from None
    except ClientError as error:
        raise OverlaySinkError(
            f"overlay sink: {kind.name} marker of epoch {epoch} via {node}: {error}"
        ) from None


def _column(record_batch: pa.RecordBatch, name: str | None) -> pa.Array:
    assert name is not None
    return record_batch.column(record_batch.schema.get_field_index(name))


def _refusal(error: PublishRejectedError, epoch: int | None, what: str) -> str:
    """The message for a refused data publish, with what to do about it."""
    if error.error is PublishError.EPOCH_DONE:
        return (
            f"overlay sink: {what}: the root refused a packet for epoch {epoch}, which is "
            "already closed or aborted, and it does not remember this packet's uid. Either "
            "another query used these epoch numbers on this stream (a query started from a "
            "fresh checkpoint numbers its micro-batches from 0 again: set option "
            "'epochOffset' above the stream's last epoch), or this batch was committed so "
            "long ago that the root has forgotten its uids."
        )
    if error.error is PublishError.UID_REUSED:
        return (
            f"overlay sink: {what}: the root holds a packet under this packet's uid with "
            "other rows, so this attempt saw the partition's rows differently from an "
            "earlier one (a nondeterministic plan: a shuffle without a sort, a random or "
            "time-dependent column; sort within partitions or checkpoint the DataFrame), "
            "or another write used the same runId; nothing of this packet was stored"
        )
    if error.error is PublishError.TOO_MANY_EPOCHS:
        return (
            f"overlay sink: {what}: the stream has its maximum number of open epochs "
            "(failed micro-batches kept open for their replay, or other publishers' epochs)"
        )
    return f"overlay sink: {what}: {error}"
