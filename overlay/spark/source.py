"""The ``overlay`` Python data source: Spark's batch and streaming Arrow writers.

Spark's side of the contract, as pyspark 4.3 behaves: the data source and
its writer are built on the driver (in a Python worker there) when a write is planned, once
per batch write and once per micro-batch; the writer is pickled to the executors, whose
``write`` gets the partition's rows as Arrow record batches; ``commit`` and ``abort`` run
on the driver in yet another Python worker, after every task has finished. A retried task
has the same partition id and sees the same rows in the same order; a restarted streaming
query re-runs an unfinished micro-batch under the same batch id with the same rows, and its
query id survives restarts. A task learns the micro-batch and query from the Spark local
properties ``streaming.sql.batchId`` and ``sql.streaming.queryId``.

Checked on the driver before any task runs (``writer``/``streamWriter``): the options
(``options.py``), the DataFrame's value and key columns, the key file, and that every node
named answers. Each problem is one ``OverlaySinkError`` whose message says what to fix.
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from overlay.messages import MAX_PACKET, PacketKind
from overlay.spark.frontier import check_first_epoch
from overlay.spark.options import OverlaySinkError, SinkOptions, Unpublishable, parse_options
from overlay.spark.publisher import (
    PROBE_TIMEOUT,
    PartitionReport,
    commit_write,
    finish_epoch,
    probe_nodes,
    publish_partition,
)

log = logging.getLogger("overlay.spark")

P = ParamSpec("P")
R = TypeVar("R")


def _one_line(method: Callable[P, R]) -> Callable[P, R]:
    """``method``'s OverlaySinkError reaches the user as its one line, without a traceback.

    Every method Spark calls runs in a Python worker, and when one raises, the worker sends
    the JVM the exception as ``pyspark.util.handle_worker_exception`` formats it: with the
    traceback below the first frame outside pyspark, unless ``SPARK_HIDE_TRACEBACK`` is set
    (the session's ``spark.sql.execution.pyspark.udf.hideTraceback.enabled``), which it reads
    when it formats. An OverlaySinkError is the sink's own verdict on the job, already
    saying what to fix; the frames of the code that raised it say nothing to a user of the
    sink. So such a worker gets the variable set just before it reports the error, and then
    it exits (pyspark ends a worker whose call raised), so nothing else sees it. Outside
    a Spark worker (no ``PYTHON_WORKER_FACTORY_SECRET``, which Spark gives its workers)
    nothing changes. Other exceptions are bugs and keep their tracebacks."""

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except OverlaySinkError as error:
            if _WORKER_SECRET in os.environ:
                os.environ["SPARK_HIDE_TRACEBACK"] = "1"
            raise error.with_traceback(None) from None

    return call


_WORKER_SECRET = "PYTHON_WORKER_FACTORY_SECRET"

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
_CHECKPOINT = "checkpointlocation"  # the option Spark passes a streaming sink, lower-cased


@dataclass(frozen=True, slots=True)
class OverlayCommitMessage(WriterCommitMessage):
    """One task's report, sent to the driver's commit."""

    report: PartitionReport


@dataclass(frozen=True, slots=True)
class Refused(WriterCommitMessage):
    """A task's rows that no retry can publish (``Unpublishable``), why in ``reason``."""

    reason: str


def _refusing(write: Callable[P, WriterCommitMessage]) -> Callable[P, WriterCommitMessage]:
    """A task whose rows can never be published returns ``Refused`` instead of failing.

    Spark retries a failed task up to ``spark.task.maxFailures`` times, and the only task
    errors it does not retry are JVM ones (a result that does not serialize, an output file
    that exists): a Python task cannot say "do not retry". A row larger than a packet is in
    the same place of the same partition on every attempt, so each retry would fail the same
    way, republishing the packets before it (answered from the uid table) and costing the
    time of the partition each time. Returning the refusal makes the task succeed once; the
    driver's commit (``_unless_refused``) then fails the write with the reason, before it
    closes any epoch, and Spark aborts the write as after any failed commit."""

    @functools.wraps(write)
    def call(*args: P.args, **kwargs: P.kwargs) -> WriterCommitMessage:
        try:
            return write(*args, **kwargs)
        except Unpublishable as error:
            return Refused(str(error))

    return call


def _unless_refused(commit: Callable[P, None]) -> Callable[P, None]:
    """The driver's commit, unless a task refused its rows (``_refusing``): then the write
    fails with the first task's reason, and no epoch is closed."""

    @functools.wraps(commit)
    def call(*args: P.args, **kwargs: P.kwargs) -> None:
        messages = args[1] if len(args) > 1 else kwargs["messages"]
        assert isinstance(messages, Sequence)
        refused = [m.reason for m in messages if isinstance(m, Refused)]
        if refused:
            more = f" ({len(refused) - 1} more tasks refused rows too)" if len(refused) > 1 else ""
            raise Unpublishable(refused[0] + more)
        commit(*args, **kwargs)

    return call


class OverlayDataSource(DataSource):
    """``df.write.format("overlay")`` and ``df.writeStream.format("overlay")``, once
    registered with ``spark.dataSource.register(OverlayDataSource)``. Options: see the
    package docs (``overlay.spark``)."""

    @classmethod
    def name(cls) -> str:
        return "overlay"

    @_one_line
    def writer(self, schema: StructType, overwrite: bool) -> OverlayBatchWriter:
        options = _checked(self.options, schema, overwrite, streaming=False)
        run_id = options.run_id or f"auto-{uuid.uuid4().hex}"
        return OverlayBatchWriter(options, f"run:{run_id}")

    @_one_line
    def streamWriter(self, schema: StructType, overwrite: bool) -> OverlayStreamWriter:
        return OverlayStreamWriter(_checked(self.options, schema, overwrite, streaming=True))


class OverlayBatchWriter(DataSourceArrowWriter):
    """A batch write: every row once, under uids of (run id, partition, sequence). With
    option ``epoch`` the whole write is one epoch, closed on commit."""

    def __init__(self, options: SinkOptions, job: str) -> None:
        self.options = options
        self.job = job

    @_one_line
    @_refusing
    def write(self, iterator: Iterator[pa.RecordBatch]) -> OverlayCommitMessage:
        partition = _task().partitionId()
        report = publish_partition(
            self.options,
            iterator,
            job=self.job,
            batch=None,
            partition=partition,
            epoch=self.options.epoch,
        )
        return OverlayCommitMessage(report)

    @_one_line
    @_unless_refused
    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        epoch = self.options.epoch
        marker = commit_write(self.options, _tails(messages), epoch)
        log.info("%s: %s; epoch %s closed at %s", self.job, _summary(messages), epoch, marker)

    @_one_line
    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        _abort(self.options, self.options.epoch, self.job, messages)


class OverlayStreamWriter(DataSourceStreamArrowWriter):
    """A streaming write: micro-batch ``b`` is epoch ``epochOffset + b``, its packets'
    uids come from (query id, b, partition, sequence), and commit closes the epoch."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    @_one_line
    @_refusing
    def write(self, iterator: Iterator[pa.RecordBatch]) -> OverlayCommitMessage:
        context = _task()
        batch_text = context.getLocalProperty(BATCH_ID_PROPERTY)
        query = context.getLocalProperty(QUERY_ID_PROPERTY)
        if batch_text is None or query is None:
            raise OverlaySinkError(
                "overlay sink: this streaming task has no micro-batch id or query id (Spark "
                f"local properties {BATCH_ID_PROPERTY}, {QUERY_ID_PROPERTY}); only "
                "micro-batch triggers are supported"
            )
        batch = int(batch_text)
        report = publish_partition(
            self.options,
            iterator,
            job=f"query:{query}",
            batch=batch,
            partition=context.partitionId(),
            epoch=_epoch(self.options, batch),
        )
        return OverlayCommitMessage(report)

    @_one_line
    @_unless_refused
    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        epoch = _epoch(self.options, batchId)
        marker = commit_write(self.options, _tails(messages), epoch)
        log.info(
            "micro-batch %d: %s; epoch %d closed at %s", batchId, _summary(messages), epoch, marker
        )

    @_one_line
    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        _abort(self.options, _epoch(self.options, batchId), f"micro-batch {batchId}", messages)


def _abort(
    options: SinkOptions,
    epoch: int | None,
    what: str,
    messages: Sequence[WriterCommitMessage | None],
) -> None:
    """Spark gave up on a write. With ``onAbort=keep`` (the default) its epoch stays open:
    Spark replays a failed micro-batch under the same batch id when the query restarts, and
    the replay's uids find what this attempt stored and its commit closes the epoch, so
    every subscriber gets each row once and atomic ones the batch whole. An aborted epoch
    could never be reopened (the root refuses EPOCH_DONE), so aborting would wedge that
    replay. ``onAbort=abort`` aborts it now, for writes that will never be re-run."""
    if epoch is None:
        log.warning("%s aborted: %s (no epoch: published rows stay)", what, _summary(messages))
    elif options.on_abort == "abort":
        finish_epoch(options, epoch, PacketKind.EPOCH_ABORTED)
        log.warning("%s aborted: %s; epoch %d aborted", what, _summary(messages), epoch)
    else:
        log.warning(
            "%s aborted: %s; epoch %d kept open for the replay to complete",
            what,
            _summary(messages),
            epoch,
        )


def _checked(raw: Any, schema: StructType, overwrite: bool, *, streaming: bool) -> SinkOptions:
    """The write's options, checked against the DataFrame's ``schema`` and the nodes."""
    if overwrite:
        raise OverlaySinkError(
            "overlay sink: a stream cannot be overwritten, only appended to: use "
            "mode('append') (or outputMode('append') for a streaming query)"
        )
    options = parse_options(dict(raw), streaming=streaming)
    value = _field(schema, options.value_column, "valueColumn")
    key = None if options.key_column is None else _field(schema, options.key_column, "keyColumn")
    options = replace(options, value_column=value, key_column=key)
    if streaming and options.epoch_offset > MAX_PACKET // 2:
        raise OverlaySinkError("overlay sink: option 'epochOffset' leaves no room for batch ids")
    probe_nodes(options)
    if streaming:
        checkpoint = next((v for k, v in dict(raw).items() if k.lower() == _CHECKPOINT), None)
        check_first_epoch(options, checkpoint, PROBE_TIMEOUT)
    return options


def _field(schema: StructType, name: str, option: str) -> str:
    """The schema's name for column ``name`` (Spark matches names case-insensitively),
    checked to be binary or string."""
    matches = [f for f in schema.fields if f.name == name] or [
        f for f in schema.fields if f.name.lower() == name.lower()
    ]
    if len(matches) != 1:
        have = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)
        found = "no" if not matches else "more than one"
        raise OverlaySinkError(
            f"overlay sink: the DataFrame has {found} column {name!r} (option {option!r}); "
            f"its columns: {have or 'none'}"
        )
    field = matches[0]
    if not isinstance(field.dataType, BinaryType | StringType):
        raise OverlaySinkError(
            f"overlay sink: column {field.name!r} (option {option!r}) is "
            f"{field.dataType.simpleString()}; it must be binary or string (cast it, e.g. "
            f"selectExpr('cast({field.name} as string) as {field.name}'), or to_json)"
        )
    return field.name


def _epoch(options: SinkOptions, batch: int) -> int:
    epoch = options.epoch_offset + batch
    if epoch > MAX_PACKET:
        raise OverlaySinkError(f"overlay sink: epoch {epoch} is beyond the largest, {MAX_PACKET}")
    return epoch


def _task() -> TaskContext:
    context = TaskContext.get()
    if context is None:
        raise OverlaySinkError("overlay sink: write() runs only inside a Spark task")
    return context


def _tails(messages: Sequence[WriterCommitMessage | None]) -> list[tuple[int, bytes]]:
    """The last packets of the committed tasks, by partition (``publisher`` says why the
    driver publishes them)."""
    reports = sorted(
        (m.report for m in messages if isinstance(m, OverlayCommitMessage)),
        key=lambda r: r.partition,
    )
    return [r.tail for r in reports if r.tail is not None]


def _summary(messages: Sequence[WriterCommitMessage | None]) -> str:
    reports = [m.report for m in messages if isinstance(m, OverlayCommitMessage)]
    rows = sum(r.rows for r in reports)
    packets = sum(r.packets for r in reports)
    failed = sum(1 for m in messages if m is None)
    refused = sum(1 for m in messages if isinstance(m, Refused))
    return (
        f"{rows} rows in {packets} packets from {len(reports)} tasks ({failed} failed, "
        f"{refused} refused their rows)"
    )
