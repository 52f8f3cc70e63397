"""Spark publishing through a node, beside the same Arrow writer sending to a plain TCP sink.

    python -m testnet.bench.spark_publish [--rows 1000000] [--row-bytes 100]
                                          [--partitions 2] [--repeats 2]
                                          [--no-subscriber] [--max-in-flight N] [--json]

This is the single-node mode; ``--multi-node`` publishes through a testnet of node
processes with task failures injected instead (``spark_multinode``).

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

from testnet.bench.row_check import FILLER, ID_DIGITS, RowCheck, check_rows

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

    from overlay.runtime.collector import tune_for_nodes
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

    tune_for_nodes()
    trio.run(main)


@dataclass
class Counter:
    """A subscriber in a thread. While a write runs it only keeps each data packet's number
    and data and reads the row count from its header (so it takes little CPU from the job it
    watches); ``check`` then unpacks everything and checks each row arrived once."""

    address: str
    stream: str = STREAM
    rows: int = 0
    high: int = -1  # the highest packet number delivered or reported missed
    missed: int = 0  # packets the node reported gone (``Missed``)
    data: list[tuple[int, bytes]] = field(default_factory=list)

    def start(self) -> None:
        from overlay.client import Client

        self.client = Client(self.address, timeout=60)
        self.subscription = self.client.subscribe(self.stream, event_timeout=None)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        from overlay.client import ClientClosed
        from overlay.core.events import Missed, Packet
        from overlay.messages import PacketKind

        try:
            for event in self.subscription:
                if isinstance(event, Packet):
                    if event.kind is PacketKind.DATA:
                        self.data.append((event.number, event.data))
                        self.rows += struct.unpack_from("<I", event.data, 5)[0]
                    self.high = max(self.high, event.number)
                elif isinstance(event, Missed):
                    self.missed += event.last - event.first + 1
                    self.high = max(self.high, event.last)
        except ClientClosed:
            pass

    def wait_for(self, rows: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.rows < rows and time.monotonic() < deadline:
            time.sleep(0.05)

    def wait_for_number(self, number: int, quiet: float, timeout: float = 120.0) -> None:
        """Until packet ``number`` came (or was reported missed), or nothing came for
        ``quiet`` seconds: a lost packet must not hold the run for the whole ``timeout``."""
        deadline = time.monotonic() + timeout
        seen, last_change = len(self.data), time.monotonic()
        while self.high < number:
            now = time.monotonic()
            if len(self.data) != seen:
                seen, last_change = len(self.data), now
            if now - last_change > quiet or now > deadline:
                return
            time.sleep(0.05)

    def reset(self) -> None:
        """Forget what came so far (a warm-up write's rows)."""
        self.data, self.rows, self.missed = [], 0, 0

    def check(self, expected: int, row_bytes: int) -> RowCheck:
        """Every row since the last check or reset against rows ``0 .. expected - 1``."""
        data, missed = self.data, self.missed
        self.reset()
        return check_rows(data, expected, row_bytes, missed)


# --- the run ---------------------------------------------------------------------------------


def spark_session(master: str) -> Any:
    """The local SparkSession both modes use, with both sinks registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from overlay.spark import OverlayDataSource

    spark = (
        SparkSession.builder.master(master)
        .appName("overlay-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OverlayDataSource)
    spark.dataSource.register(_plain_sink_classes())
    return spark


def bench_frame(spark: Any, rows: int, row_bytes: int, partitions: int) -> Any:
    """Rows ``0 .. rows - 1`` as ``row_check.row_value`` spells them, cached."""
    filler = row_bytes - ID_DIGITS
    df = (
        spark.range(0, rows, numPartitions=partitions)
        .selectExpr(
            f"concat(lpad(cast(id as string), {ID_DIGITS}, '0'), "
            f"repeat('{FILLER.decode()}', {filler})) as value"
        )
        .cache()
    )
    assert df.count() == rows
    return df


def overlay_write(frame: Any, nodes: str, max_in_flight: int | None = None) -> None:
    writer = frame.write.format("overlay").mode("append").option("stream", STREAM)
    if max_in_flight is not None:
        writer = writer.option("maxInFlight", str(max_in_flight))
    writer.option("node", nodes).save()


def plain_write(frame: Any, discard: Discard) -> None:
    frame.write.format("plain_tcp").mode("append").option("address", discard.address).save()


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
    parser.add_argument(
        "--multi-node",
        action="store_true",
        help="publish through a testnet of --nodes node processes whose root is neither "
        "publishing node, with failures injected (testnet.bench.spark_multinode)",
    )
    parser.add_argument("--nodes", type=int, default=5, help="--multi-node: at least 5")
    parser.add_argument(
        "--fail-partitions",
        type=int,
        default=2,
        help="--multi-node: partitions 0 .. N-1 fail halfway on their first attempt "
        "(0: no failures)",
    )
    parser.add_argument(
        "--max-in-flight", type=int, default=None, help="the sink's maxInFlight (its default)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.row_bytes < ID_DIGITS + 1:
        parser.error(
            f"--row-bytes must be at least {ID_DIGITS + 1} (a {ID_DIGITS}-digit id and filler)"
        )
    if args.multi_node:
        # Imported here: that module builds on this one's sinks and subscriber.
        from testnet.bench import spark_multinode

        if args.nodes < spark_multinode.MIN_NODES:
            parser.error(f"--nodes must be at least {spark_multinode.MIN_NODES}")
        if not 0 <= args.fail_partitions <= args.partitions:
            parser.error("--fail-partitions must be in 0 .. --partitions")
        if args.no_subscriber:
            parser.error("--multi-node always has subscribers: they are what it checks")
        result = spark_multinode.run(
            rows=args.rows,
            row_bytes=args.row_bytes,
            partitions=args.partitions,
            repeats=args.repeats,
            nodes=args.nodes,
            fail_partitions=args.fail_partitions,
            max_in_flight=args.max_in_flight,
        )
        print(json.dumps(result) if args.json else spark_multinode.format_report(result))
        return 0 if result["exactly_once"] else 1
    return run_single(args)


def run_single(args: argparse.Namespace) -> int:
    """One node in its own process, the stream's root, and a subscriber on it."""
    load_before = os.getloadavg()
    spawn = multiprocessing.get_context("spawn")
    queue, stop = spawn.Queue(), spawn.Event()
    node_process = spawn.Process(target=_serve_node, args=(queue, stop), daemon=True)
    node_process.start()
    node = queue.get(timeout=60)
    discard = Discard()
    counter = None if args.no_subscriber else Counter(node)
    if counter is not None:
        counter.start()

    spark = spark_session("local[2]")
    df = bench_frame(spark, args.rows, args.row_bytes, args.partitions)

    # Warm-up: Python workers started, the node in the stream's tree.
    small = df.limit(1000)
    plain_write(small, discard)
    overlay_write(small, node, args.max_in_flight)
    if counter is not None:
        counter.wait_for(1000)
        counter.reset()

    results: dict[str, list[float]] = {"overlay": [], "plain": []}
    packets: int | None = None
    for round_ in range(args.repeats):
        order = ("plain", "overlay") if round_ % 2 == 0 else ("overlay", "plain")
        for sink in order:
            start = time.perf_counter()
            if sink == "overlay":
                overlay_write(df, node, args.max_in_flight)
            else:
                plain_write(df, discard)
            elapsed = time.perf_counter() - start
            results[sink].append(args.rows / elapsed)
            if counter is not None and sink == "overlay":
                counter.wait_for(args.rows)
                check = counter.check(args.rows, args.row_bytes)
                packets = check.packets
                if not check.exactly_once:
                    print(
                        f"overlay: the subscriber got {check.rows} rows, expected {args.rows}: "
                        f"{check.lost} lost, {check.duplicated} duplicated, "
                        f"{check.foreign} not written",
                        file=sys.stderr,
                    )
                    return 1

    overlay_rate = statistics.median(results["overlay"])
    plain_rate = statistics.median(results["plain"])
    load_after = os.getloadavg()
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
        "load_average": {"before": load_before, "after": load_after},
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
            f"  ratio: {overlay_rate / plain_rate:.2f} (goal >= 0.50)\n"
            f"  load average: {load_text(load_before)} before, {load_text(load_after)} after"
        )
    return 0


def load_text(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    sys.exit(main())
