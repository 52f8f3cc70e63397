"""Spark jobs publishing through real nodes: one local SparkSession (``local[2,3]``, so a
failed task is retried) for the module, a node on loopback (``client_node``), and
subscribers that were there before the job ran.

What is checked is what a subscriber sees: every row exactly once, micro-batches as whole
epochs, nothing twice after a task retry or a query restart, and the root's packet count
equal to what one clean run cuts (``Packer`` run locally on the same rows), so a packet
stored twice would show even if its rows were filtered out later. Bad options fail the job
with the sink's own message. Spark costs about 10 s to start and a second or two a job.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime", allow_module_level=True)

from client_node import network_in_thread, node_in_thread  # noqa: E402
from pyspark import TaskContext  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402
from spark_jobs import (  # noqa: E402
    TIMEOUT,
    _read,
    local_spark,
    packets_for,
    rows_in,
    watching,
)

from overlay.core.events import Epoch, Subscribed  # noqa: E402
from overlay.messages import PacketKind  # noqa: E402
from overlay.spark import OverlayDataSource, unpack  # noqa: E402
from overlay.spark.source import OverlayBatchWriter  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_spark()
    import pyspark.cloudpickle as cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # for FlakyOverlay
    session.dataSource.register(FlakyOverlay)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def node() -> Iterator[str]:
    with node_in_thread() as (_, address):
        yield address


# --- batch writes ----------------------------------------------------------------------


def test_batch_write_delivers_every_row_exactly_once(spark: SparkSession, node: str) -> None:
    stream = "ovl:open/spark-batch"
    df = spark.range(0, 3000, numPartitions=3).selectExpr(
        "cast(id as string) as key", "concat('row-', cast(id as string)) as value"
    )
    with watching(node, stream) as watcher:
        (
            df.write.format("overlay")
            .mode("append")
            .option("stream", stream)
            .option("node", f"{node},tcp://{node}")
            .option("keyColumn", "key")
            .option("bytesPerPacket", "2000")
            .save()
        )
        got = rows_in(watcher.packets())
    want = [(b"%d" % i, b"row-%d" % i) for i in range(3000)]
    assert sorted(got) == sorted(want)


class FlakyBatchWriter(OverlayBatchWriter):
    """The sink's writer, except that the first attempt of partition 1 dies after it has
    handed three Arrow batches (and so some packets) to the sink."""

    marker_dir = ""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Any:
        context = TaskContext.get()
        assert context is not None
        if context.partitionId() == 1 and context.attemptNumber() == 0:
            Path(self.marker_dir, "failed").touch()
            return super().write(_dies_after(iterator, 3))
        return super().write(iterator)


def _dies_after(iterator: Iterator[pa.RecordBatch], count: int) -> Iterator[pa.RecordBatch]:
    for i, batch in enumerate(iterator):
        if i == count:
            raise RuntimeError("task killed on purpose (first attempt)")
        yield batch


class FlakyOverlay(OverlayDataSource):
    marker_dir = ""

    @classmethod
    def name(cls) -> str:
        return "overlay_flaky"

    def writer(self, schema: StructType, overwrite: bool) -> OverlayBatchWriter:
        marker_dir = self.options["markerdir"]
        self.options = {k: v for k, v in self.options.items() if k.lower() != "markerdir"}
        writer = super().writer(schema, overwrite)
        flaky = FlakyBatchWriter(writer.options, writer.job)
        flaky.marker_dir = marker_dir
        return flaky


def test_a_task_failing_once_duplicates_and_loses_nothing(
    spark: SparkSession, node: str, tmp_path: Path
) -> None:
    stream = "ovl:open/spark-flaky"
    values = [[f"value-{p}-{i:04}" for i in range(1000)] for p in range(3)]
    df = spark.range(0, 3000, numPartitions=3).selectExpr(
        "concat('value-', cast(floor(id / 1000) as string), '-', "
        "lpad(cast(id % 1000 as string), 4, '0')) as value"
    )
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        with watching(node, stream) as watcher:
            writer = (
                df.write.format("overlay_flaky")
                .mode("append")
                .option("stream", stream)
                .option("node", node)
                .option("bytesPerPacket", "500")
            )
            # markerDir is the test's own option: the sink itself refuses unknown ones.
            writer = writer.option("markerDir", str(tmp_path))
            with pytest.raises(Exception, match="unknown option 'markerdir'"):
                writer.format("overlay").save()
            writer.format("overlay_flaky").save()
            packets = watcher.packets()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert (tmp_path / "failed").exists()  # the first attempt did die
    assert Counter(v for _, v in rows_in(packets)) == Counter(
        v.encode() for part in values for v in part
    )
    assert len(packets) == packets_for(values, 100_000, 500)  # no packet stored twice


def test_a_row_larger_than_a_packet_fails_the_write_once_without_retries(
    spark: SparkSession, node: str
) -> None:
    """Every attempt would fail the same way: the task reports the row to the driver, whose
    commit fails the write with the reason; no task fails, so Spark retries none."""
    df = spark.range(0, 4, numPartitions=2).selectExpr(
        "case when id = 3 then repeat('x', 70000) else cast(id as string) end as value"
    )
    context = spark.sparkContext
    context.setJobGroup("oversized-row", "a row larger than a packet")
    try:
        with pytest.raises(Exception, match="can never be published") as raised:
            df.write.format("overlay").mode("append").option(
                "stream", "ovl:open/spark-oversized"
            ).option("node", node).save()
    finally:
        context.setJobGroup("", "")
    message = str(raised.value)
    assert "overlay.spark.options.Unpublishable: overlay sink: partition 1: row 1 needs" in message
    assert "raise option 'bytesPerPacket' (at most 65536)" not in message  # 70,004 > any packet
    assert "split or compress the row" in message
    assert "Traceback" not in message
    tracker = context.statusTracker()
    (job,) = tracker.getJobIdsForGroup("oversized-row")
    info = tracker.getJobInfo(job)
    assert info is not None
    stages = [tracker.getStageInfo(stage) for stage in info.stageIds]
    assert [(s.numTasks, s.numCompletedTasks, s.numFailedTasks) for s in stages if s] == [(2, 2, 0)]


# --- streaming writes ------------------------------------------------------------------


def _files(folder: Path, names: range, lines: int = 200) -> dict[str, set[bytes]]:
    """Text files of ``lines`` lines each; each file's lines, by file name."""
    folder.mkdir(exist_ok=True)
    contents = {}
    for n in names:
        rows = [f"file{n}-line{i:03}" for i in range(lines)]
        (folder / f"{n:02}.txt").write_text("\n".join(rows) + "\n")
        contents[f"{n:02}"] = {r.encode() for r in rows}
    return contents


def _run_stream(spark: SparkSession, folder: Path, checkpoint: Path, node: str, **opts: str):  # type: ignore[no-untyped-def]
    source: DataFrame = (
        spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(folder))
    )
    writer = (
        source.writeStream.format("overlay")
        .option("checkpointLocation", str(checkpoint))
        .option("node", node)
        .option("bytesPerPacket", "1000")
        .trigger(availableNow=True)
    )
    for key, value in opts.items():
        writer = writer.option(key, value)
    query = writer.start()
    assert query.awaitTermination(TIMEOUT * 2)
    assert query.exception() is None
    return query


def _check_epochs(epochs: list[Epoch], files: dict[str, set[bytes]], offset: int) -> None:
    """One whole epoch a file, numbered from ``offset``, each file's lines exactly once."""
    assert [e.epoch for e in epochs] == [offset + b for b in range(len(files))]
    seen = []
    for epoch in epochs:
        values = [r.value for p in epoch.packets for r in unpack(p.data)]
        assert len(values) == len(set(values))
        matches = [name for name, lines in files.items() if lines == set(values)]
        assert len(matches) == 1, f"epoch {epoch.epoch} is not one whole file"
        seen.extend(matches)
    assert sorted(seen) == sorted(files)


def test_streaming_micro_batches_arrive_whole_and_once(
    spark: SparkSession, node: str, tmp_path: Path
) -> None:
    stream = "ovl:open/spark-stream"
    files = _files(tmp_path / "in", range(3))
    with watching(node, stream) as watcher:
        _run_stream(spark, tmp_path / "in", tmp_path / "ck", node, stream=stream)
        epochs = watcher.epochs()
        packets = watcher.packets()
    _check_epochs(epochs, files, 0)
    data = [p for p in packets if p.kind is PacketKind.DATA]
    markers = [p for p in packets if p.kind is PacketKind.EPOCH_CLOSED]
    assert [m.epoch for m in markers] == [0, 1, 2]
    assert len(data) == packets_for(
        [sorted(v.decode() for v in f) for f in files.values()], 100_000, 1000
    )
    assert Counter(v for _, v in rows_in(packets)) == Counter(v for f in files.values() for v in f)


def test_a_restarted_query_replays_its_last_batch_without_duplicates(
    spark: SparkSession, node: str, tmp_path: Path
) -> None:
    stream = "ovl:open/spark-restart"
    folder, checkpoint = tmp_path / "in", tmp_path / "ck"
    files = _files(folder, range(2))
    with watching(node, stream) as watcher:
        first = _run_stream(spark, folder, checkpoint, node, stream=stream, epochOffset="100")
        # The driver "died" after the sink committed batch 1 and before Spark recorded it:
        # the restarted query runs batch 1 again, same id, same rows.
        for name in ("1", ".1.crc"):
            (checkpoint / "commits" / name).unlink(missing_ok=True)
        files |= _files(folder, range(2, 3))
        second = _run_stream(spark, folder, checkpoint, node, stream=stream, epochOffset="100")
        assert second.id == first.id  # the query id, so the uids, survive the restart
        assert second.lastProgress["batchId"] == 2
        epochs = watcher.epochs()
        packets = watcher.packets()
    _check_epochs(epochs, files, 100)
    markers = [p.epoch for p in packets if p.kind is PacketKind.EPOCH_CLOSED]
    assert markers == [100, 101, 102]  # epoch 101 closed once: the replayed close was a no-op
    assert Counter(v for _, v in rows_in(packets)) == Counter(v for f in files.values() for v in f)


def test_an_empty_micro_batch_closes_its_epoch_without_an_abort(
    spark: SparkSession, node: str, tmp_path: Path
) -> None:
    """An empty file, the query's last, is a final micro-batch of no rows: its commit
    closes its epoch with nothing in it, and nothing aborts it (with onAbort=abort an abort
    would publish a marker)."""
    stream = "ovl:open/spark-empty-batch"
    folder = tmp_path / "in"
    files = _files(folder, range(1), lines=3)
    empty = folder / "01.txt"
    empty.write_text("")
    later = (folder / "00.txt").stat().st_mtime + 10  # the file source goes by age
    os.utime(empty, (later, later))
    with watching(node, stream) as watcher:
        query = _run_stream(spark, folder, tmp_path / "ck", node, stream=stream, onAbort="abort")
        epochs = watcher.epochs()
        packets = watcher.packets()
    assert [(p["batchId"], p["numInputRows"]) for p in query.recentProgress] == [(0, 3), (1, 0)]
    assert [(p.kind, p.epoch) for p in packets if p.kind is not PacketKind.DATA] == [
        (PacketKind.EPOCH_CLOSED, 0),
        (PacketKind.EPOCH_CLOSED, 1),
    ]
    assert [(e.epoch, len(e.packets)) for e in epochs] == [(0, 1), (1, 0)]
    assert Counter(v for _, v in rows_in(packets)) == Counter(v for f in files.values() for v in f)


def test_a_fresh_checkpoint_on_a_used_stream_is_refused_before_any_task_runs(
    spark: SparkSession, node: str, tmp_path: Path
) -> None:
    stream = "ovl:open/spark-fresh-checkpoint"
    folder = tmp_path / "in"
    _files(folder, range(2), lines=3)
    with watching(node, stream) as watcher:
        _run_stream(spark, folder, tmp_path / "ck1", node, stream=stream)  # epochs 0 and 1
        head = watcher.head()
        with pytest.raises(Exception, match=r"closed epochs up to 1\b") as raised:
            _run_stream(spark, folder, tmp_path / "ck2", node, stream=stream)
        assert watcher.head() == head  # no task published a packet
        message = str(raised.value)
        assert "Set option 'epochOffset' to 2 or more" in message, message
        assert "Traceback" not in message
        _run_stream(spark, folder, tmp_path / "ck3", node, stream=stream, epochOffset="2")
        epochs = [e.epoch for e in watcher.epochs()]
    assert epochs == [0, 1, 2, 3]


# --- options -------------------------------------------------------------------------------


def test_bad_options_fail_the_job_with_the_sinks_message(spark: SparkSession, node: str) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value", "id as number")
    cases: list[tuple[dict[str, str], str]] = [
        ({"node": node}, "option 'stream' is required"),
        ({"stream": "ovl:!!/x", "node": node}, "option 'stream'"),
        (
            {"stream": "ovl:open/x", "node": "127.0.0.1:1"},
            "cannot connect to a node at 127.0.0.1:1",
        ),
        ({"stream": "ovl:open/x", "node": "nowhere"}, "option 'node': .*'nowhere': no port"),
        ({"stream": "my stream", "node": node}, "option 'stream': .* contains whitespace"),
        ({"stream": "ovl:open/x", "node": node, "valueColumn": "payload"}, "no column 'payload'"),
        (
            {"stream": "ovl:open/x", "node": node, "valueColumn": "number"},
            "must be binary or string",
        ),
        ({"stream": "ovl:open/x", "node": node, "rowsPerPacket": "-3"}, "'rowsPerPacket' must be"),
    ]
    for options, message in cases:
        writer = df.write.format("overlay").mode("append")
        for key, value in options.items():
            writer = writer.option(key, value)
        with pytest.raises(Exception, match=message) as raised:
            writer.save()
        # The sink's message first, with no Python frames around it (``_one_line``).
        first, *_ = str(raised.value).splitlines()
        assert first.startswith(
            "[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source writer: "
            "overlay.spark.options.OverlaySinkError: overlay sink: "
        ), str(raised.value)
        assert "Traceback" not in str(raised.value)
    with pytest.raises(Exception, match="cannot be overwritten"):
        df.write.format("overlay").mode("overwrite").option("stream", "x").save()


def test_a_peer_port_given_as_node_fails_the_job_in_one_line(spark: SparkSession) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    with network_in_thread(1) as (node,):
        peer = str(node.peer_address)
        with pytest.raises(Exception, match="probably a node's peer port") as raised:
            df.write.format("overlay").mode("append").option("stream", "ovl:open/x").option(
                "node", peer
            ).save()
    message = str(raised.value)
    assert f"OverlaySinkError: overlay sink: option 'node': {peer} closed" in message
    assert "ClientClosed" not in message and "Traceback" not in message


def test_a_streaming_query_with_an_unreachable_node_fails_clearly(
    spark: SparkSession, tmp_path: Path
) -> None:
    _files(tmp_path / "in", range(1), lines=3)
    query = (
        spark.readStream.format("text")
        .load(str(tmp_path / "in"))
        .writeStream.format("overlay")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .option("stream", "ovl:open/x")
        .option("node", "127.0.0.1:1")
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"cannot connect to a node at 127\.0\.0\.1:1"):
        query.awaitTermination(TIMEOUT)


# --- several nodes ---------------------------------------------------------------------------


def test_partitions_spread_over_several_nodes(spark: SparkSession) -> None:
    stream = "ovl:open/spark-spread"
    with network_in_thread(3) as nodes:
        addresses = [str(n.client_address) for n in nodes]
        df = spark.range(0, 900, numPartitions=3).selectExpr("cast(id as string) as value")
        # Each node joins the stream's tree; the watcher on the last node sees it all.
        with watching(addresses[-1], stream) as watcher:
            assert isinstance(watcher.plain.subscribed, Subscribed)
            (
                df.write.format("overlay")
                .mode("append")
                .option("stream", stream)
                .option("node", ",".join(addresses))
                .option("epoch", "5")
                .option("bytesPerPacket", "1000")
                .save()
            )
            (epoch,) = _read(watcher.atomic, lambda e: isinstance(e, Epoch))
        assert isinstance(epoch, Epoch) and epoch.epoch == 5
        values = [r.value for p in epoch.packets for r in unpack(p.data)]
        assert sorted(values) == sorted(b"%d" % i for i in range(900))
