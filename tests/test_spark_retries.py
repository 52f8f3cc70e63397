"""Spark task retries on a three-node overlay: every row once at subscribers on two nodes.

The stream's root is the third node, which no task publishes through and nobody reads
from, so every packet climbs a link to the root and comes back down another. The failure
injected is the one Spark produces when an upstream stage fails under the writer (a UDF
raising in another Python worker, an executor lost): the writer's input ends early at a
batch boundary as if it were complete, and only then does the task fail. The failed
attempt has published packets by then; its retry must not be answered with a packet that
holds fewer rows than its own. Checked for a batch write (as one epoch) and for a streaming
query, by a plain and an atomic subscriber on each of two nodes.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

import pyspark.cloudpickle as cloudpickle  # noqa: E402
from client_node import network_in_thread  # noqa: E402
from pyspark import TaskContext  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402
from spark_jobs import TIMEOUT, Watcher, local_spark, packets_for, rows_in, watching  # noqa: E402

from keyspace.stream_key import StreamKey  # noqa: E402
from overlay.client import Client  # noqa: E402
from overlay.core.events import Epoch  # noqa: E402
from overlay.messages import PacketKind  # noqa: E402
from overlay.spark import OverlayDataSource, unpack  # noqa: E402
from overlay.spark.source import OverlayBatchWriter, OverlayStreamWriter  # noqa: E402

pytestmark = pytest.mark.slow

# The nodes sit at 1/6, 1/2 and 5/6 in a chain; these streams' keys lie nearest 5/6, so
# node 2 is their root (asserted below, in case the key hash ever changes).
BATCH_STREAM = "ovl:open/spark-retry-0"  # location 0.880
STREAMING_STREAM = "ovl:open/spark-retry-2"  # location 0.983
ROOT = 2


def _first(iterator: Iterator[pa.RecordBatch], count: int) -> Iterator[pa.RecordBatch]:
    for i, batch in enumerate(iterator):
        if i == count:
            return
        yield batch


def _write_cut_short(write: Any, iterator: Iterator[pa.RecordBatch], folder: str) -> Any:
    """``write`` as Spark runs it when an upstream stage fails on the first attempt of
    partitions 1 and 2 (of a batch write) or partition 0 (of each micro-batch): the input
    ends after three Arrow batches, ``write`` returns, and the task fails."""
    context = TaskContext.get()
    assert context is not None
    streaming = context.getLocalProperty("streaming.sql.batchId") is not None
    cut = (0,) if streaming else (1, 2)
    if context.attemptNumber() > 0 or context.partitionId() not in cut:
        return write(iterator)
    report = write(_first(iterator, 3))
    assert report.report.packets > 1  # it did publish, and its input did end short
    Path(folder, f"cut-{context.stageId()}-{context.partitionId()}").touch()
    raise RuntimeError("an upstream stage failed (first attempt)")


class CutShortBatchWriter(OverlayBatchWriter):
    folder = ""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Any:
        return _write_cut_short(super().write, iterator, self.folder)


class CutShortStreamWriter(OverlayStreamWriter):
    folder = ""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Any:
        return _write_cut_short(super().write, iterator, self.folder)


class CutShortOverlay(OverlayDataSource):
    """The sink, its tasks failing as above; option ``cutFolder`` (the test's own) is where
    each cut leaves a file, so the test knows the failures happened."""

    @classmethod
    def name(cls) -> str:
        return "overlay_cut_short"

    def _folder(self) -> str:
        folder = str(self.options["cutfolder"])
        self.options = {k: v for k, v in self.options.items() if k.lower() != "cutfolder"}
        return folder

    def writer(self, schema: StructType, overwrite: bool) -> OverlayBatchWriter:
        folder = self._folder()
        plain = super().writer(schema, overwrite)
        writer = CutShortBatchWriter(plain.options, plain.job)
        writer.folder = folder
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool) -> OverlayStreamWriter:
        folder = self._folder()
        writer = CutShortStreamWriter(super().streamWriter(schema, overwrite).options)
        writer.folder = folder
        return writer


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_spark()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # for CutShortOverlay
    session.dataSource.register(CutShortOverlay)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[str]]:
    with network_in_thread(3) as running:
        yield [str(node.client_address) for node in running]


def _is_root(address: str, stream: str) -> bool:
    with Client(address, timeout=TIMEOUT) as client:
        (state,) = client.describe(stream)["streams"]  # type: ignore[misc]
    return bool(state["state"] == "root")


def _check_watcher(watcher: Watcher, want: Counter[bytes], packets: int) -> list[Epoch]:
    got = watcher.packets()
    assert Counter(v for _, v in rows_in(got)) == want  # every row, once
    assert sum(1 for p in got if p.kind is PacketKind.DATA) == packets  # no packet twice
    return watcher.epochs()


def test_a_batch_write_with_failed_first_attempts_delivers_every_row_once(
    spark: SparkSession, nodes: list[str], tmp_path: Path
) -> None:
    values = [[f"row-{p}-{i:05}" for i in range(1500)] for p in range(4)]
    df = spark.range(0, 6000, numPartitions=4).selectExpr(
        "concat('row-', cast(floor(id / 1500) as string), '-', "
        "lpad(cast(id % 1500 as string), 5, '0')) as value"
    )
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        with (
            watching(nodes[0], BATCH_STREAM, nodes[ROOT]) as first,
            watching(nodes[1], BATCH_STREAM, nodes[ROOT]) as second,
        ):
            assert _is_root(nodes[ROOT], BATCH_STREAM)
            (
                df.write.format("overlay_cut_short")
                .mode("append")
                .option("stream", BATCH_STREAM)
                .option("node", f"{nodes[0]},{nodes[1]}")
                .option("bytesPerPacket", "500")
                .option("epoch", "9")
                .option("cutFolder", str(tmp_path))
                .save()
            )
            want = Counter(v.encode() for part in values for v in part)
            packets = packets_for(values, 100_000, 500)
            for watcher in (first, second):
                (epoch,) = _check_watcher(watcher, want, packets)
                assert epoch.epoch == 9
                assert Counter(r.value for p in epoch.packets for r in unpack(p.data)) == want
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert len(list(tmp_path.glob("cut-*"))) == 2  # partitions 1 and 2 did fail once


def test_a_streaming_query_with_failed_first_attempts_shows_whole_epochs(
    spark: SparkSession, nodes: list[str], tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    files = {}
    for n in range(3):
        lines = [f"file{n}-line{i:04}" for i in range(1200)]
        (folder / f"{n:02}.txt").write_text("\n".join(lines) + "\n")
        files[n] = lines
    cuts = tmp_path / "cuts"
    cuts.mkdir()
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        with (
            watching(nodes[0], STREAMING_STREAM, nodes[ROOT]) as first,
            watching(nodes[1], STREAMING_STREAM, nodes[ROOT]) as second,
        ):
            assert _is_root(nodes[ROOT], STREAMING_STREAM)
            source: DataFrame = (
                spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(folder))
            )
            query = (
                source.writeStream.format("overlay_cut_short")
                .option("checkpointLocation", str(tmp_path / "ck"))
                .option("stream", STREAMING_STREAM)
                .option("node", f"{nodes[1]},{nodes[0]}")
                .option("bytesPerPacket", "500")
                .option("cutFolder", str(cuts))
                .trigger(availableNow=True)
                .start()
            )
            assert query.awaitTermination(TIMEOUT * 2)
            assert query.exception() is None
            want = Counter(line.encode() for lines in files.values() for line in lines)
            packets = packets_for([sorted(lines) for lines in files.values()], 100_000, 500)
            for watcher in (first, second):
                epochs = _check_watcher(watcher, want, packets)
                assert [e.epoch for e in epochs] == [0, 1, 2]
                whole = {tuple(sorted(line.encode() for line in lines)) for lines in files.values()}
                shown = {
                    tuple(sorted(r.value for p in e.packets for r in unpack(p.data)))
                    for e in epochs
                }
                assert shown == whole  # each micro-batch whole: one file, every line once
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert len(list(cuts.glob("cut-*"))) == 3  # each micro-batch's task failed once


def test_the_streams_root_is_the_third_node() -> None:
    """The premise of the tests above: neither stream's key is nearer nodes 0 or 1."""
    for stream in (BATCH_STREAM, STREAMING_STREAM):
        location = StreamKey.parse(stream).location
        distances = [min(abs(location - n), 1 - abs(location - n)) for n in (1 / 6, 1 / 2, 5 / 6)]
        assert distances.index(min(distances)) == ROOT
