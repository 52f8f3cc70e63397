"""Spark publishing through a node, beside the same Arrow writer sending to a plain TCP sink.

    python -m testnet.bench.spark_publish [--rows 1000000] [--row-bytes 100]
                                          [--partitions 2] [--repeats 2]
                                          [--no-subscriber] [--json]

Method. One local SparkSession (``local[2]``, the UI off) and one cached DataFrame of
``--rows`` rows of ``--row-bytes`` bytes (a zero-padded id then filler) in ``--partitions``
partitions. Each round writes it twice, in alternating order:

* *overlay*: ``df.write.format("overlay")`` to a node running in its own process (a full
  ``run_node``: client port, root of the stream), with a subscriber attached in this
  process, so the figure includes the node storing and delivering each packet; after each
  write the subscriber's packets are unpacked and every row checked to have arrived once
  (``--no-subscriber``: nobody subscribes, so the node only orders and stores);
* *plain*: ``df.write.format("plain_tcp")``, a ``DataSourceArrowWriter`` like the sink's
  whose tasks send each Arrow batch's value column (offsets and bytes, length-prefixed) to
  a TCP server in this process that reads and discards. That is the most any Arrow writer
  can do with the rows: the ceiling the sink is measured against.

Both figures are rows a second of the whole ``save()`` (job planning, tasks, commit). A
warm-up write to each sink first starts Spark's Python workers. The machine is shared, so
the ratio of the two, measured in the same run, is the number to read.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

STREAM = "ovl:open/bench-spark"


# --- the plain sink ----------------------------------------------------------------------


def _plain_sink_classes() -> Any:
    """The plain TCP data source (defined on first use: it needs pyspark)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
    from pyspark.sql.types import StructType

    class PlainTcpWriter(DataSourceArrowWriter):
        def __init__(self, address: str) -> None:
            self.address = address

        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
            host, port = self.address.rsplit(":", 1)
            with socket.create_connection((host, int(port))) as sock:
                for batch in iterator:
                    values = batch.column(0)
                    _, offsets, data = values.buffers()
                    parts = (offsets, data) if data is not None else (offsets,)
                    header = struct.pack("<II", len(values), sum(p.size for p in parts))
                    sock.sendall(header)
                    for part in parts:
                        sock.sendall(part)
            return WriterCommitMessage()

    class PlainTcpSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "plain_tcp"

        def writer(self, schema: StructType, overwrite: bool) -> PlainTcpWriter:
            return PlainTcpWriter(self.options["address"])

    return PlainTcpSink


class Discard:
    """A TCP server that reads and discards, one thread a connection."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.received = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    def _drain(self, conn: socket.socket) -> None:
        with conn:
            buffer = bytearray(1 << 20)
            while n := conn.recv_into(buffer):
                with self._lock:
                    self.received += n


# --- the node --------------------------------------------------------------------------


def _serve_node(queue: Any, stop: Any) -> None:
    """In its own process: one node (the stream's root) until ``stop`` is set."""
    import trio

    from overlay.runtime.config import Address, RuntimeConfig
    from overlay.runtime.identity import Identity
    from overlay.runtime.service import RunningNode, run_node

    config = RuntimeConfig(listen=Address("127.0.0.1", 0), client=Address("127.0.0.1", 0))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            node: RunningNode = await nursery.start(
                lambda task_status: run_node(
                    config, identity=Identity.generate(), task_status=task_status
                )
            )
            queue.put(str(node.client_address))
            await trio.to_thread.run_sync(stop.wait)
            nursery.cancel_scope.cancel()

    trio.run(main)


@dataclass
class Counter:
    """A subscriber in a thread. While a write runs it only keeps each packet's data and
    reads the row count from its header (so it takes little CPU from the job it watches);
    ``check`` then unpacks everything and finds any row that came twice."""

    address: str
    rows: int = 0
    data: list[bytes] = field(default_factory=list)

    def start(self) -> None:
        from overlay.client import Client

        self.client = Client(self.address, timeout=60)
        self.subscription = self.client.subscribe(STREAM, event_timeout=None)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from overlay.client import ClientClosed
        from overlay.core.events import Packet

        try:
            for event in self.subscription:
                if isinstance(event, Packet):
                    self.data.append(event.data)
                    self.rows += struct.unpack_from("<I", event.data, 5)[0]
        except ClientClosed:
            pass

    def wait_for(self, rows: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.rows < rows and time.monotonic() < deadline:
            time.sleep(0.05)

    def check(self) -> tuple[int, int, int]:
        """(rows, distinct rows, packets) received since the last check."""
        from overlay.spark import unpack

        data, self.data, self.rows = self.data, [], 0
        ids = [r.value[:10] for d in data for r in unpack(d) if r.value is not None]
        return len(ids), len(set(ids)), len(data)


# --- the run ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testnet.bench.spark_publish")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--row-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--no-subscriber",
        action="store_true",
        help="publish to a stream nobody subscribes to (no delivery, no exactly-once check)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.row_bytes < 11:
        parser.error("--row-bytes must be at least 11 (a 10-digit id and filler)")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from overlay.spark import OverlayDataSource

    spawn = multiprocessing.get_context("spawn")
    queue, stop = spawn.Queue(), spawn.Event()
    node_process = spawn.Process(target=_serve_node, args=(queue, stop), daemon=True)
    node_process.start()
    node = queue.get(timeout=60)
    discard = Discard()
    counter = None if args.no_subscriber else Counter(node)
    if counter is not None:
        counter.start()

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("overlay-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OverlayDataSource)
    spark.dataSource.register(_plain_sink_classes())
    filler = args.row_bytes - 10
    df = (
        spark.range(0, args.rows, numPartitions=args.partitions)
        .selectExpr(f"concat(lpad(cast(id as string), 10, '0'), repeat('x', {filler})) as value")
        .cache()
    )
    assert df.count() == args.rows

    def overlay_write(frame: Any) -> None:
        frame.write.format("overlay").mode("append").option("stream", STREAM).option(
            "node", node
        ).save()

    def plain_write(frame: Any) -> None:
        frame.write.format("plain_tcp").mode("append").option("address", discard.address).save()

    # Warm-up: Python workers started, the node in the stream's tree.
    small = df.limit(1000)
    plain_write(small)
    overlay_write(small)
    if counter is not None:
        counter.wait_for(1000)
        counter.check()

    results: dict[str, list[float]] = {"overlay": [], "plain": []}
    packets: int | None = None
    for round_ in range(args.repeats):
        order = ("plain", "overlay") if round_ % 2 == 0 else ("overlay", "plain")
        for sink in order:
            start = time.perf_counter()
            (overlay_write if sink == "overlay" else plain_write)(df)
            elapsed = time.perf_counter() - start
            results[sink].append(args.rows / elapsed)
            if counter is not None and sink == "overlay":
                counter.wait_for(args.rows)
                rows, distinct, packets = counter.check()
                if rows != args.rows or distinct != rows:
                    print(
                        f"overlay: the subscriber got {rows} rows ({distinct} distinct), "
                        f"expected {args.rows}",
                        file=sys.stderr,
                    )
                    return 1

    overlay_rate = statistics.median(results["overlay"])
    plain_rate = statistics.median(results["plain"])
    summary = {
        "rows": args.rows,
        "row_bytes": args.row_bytes,
        "partitions": args.partitions,
        "subscriber": counter is not None,
        "packets_per_write": packets,
        "overlay_rows_per_s": [round(r) for r in results["overlay"]],
        "plain_rows_per_s": [round(r) for r in results["plain"]],
        "overlay_median": round(overlay_rate),
        "plain_median": round(plain_rate),
        "ratio": round(overlay_rate / plain_rate, 3),
    }
    spark.stop()
    if counter is not None:
        counter.client.close()
    stop.set()
    node_process.join(10)
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{args.rows:,} rows of {args.row_bytes} bytes, {args.partitions} partitions, "
            f"{packets or 'unchecked'} packets a write, "
            f"{'a subscriber' if counter is not None else 'no subscriber'}\n"
            f"  overlay sink (through a node): {overlay_rate:12,.0f} rows/s  "
            f"(runs: {', '.join(f'{r:,.0f}' for r in results['overlay'])})\n"
            f"  plain TCP sink:                {plain_rate:12,.0f} rows/s  "
            f"(runs: {', '.join(f'{r:,.0f}' for r in results['plain'])})\n"
            f"  ratio: {overlay_rate / plain_rate:.2f} (goal >= 0.50)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
