"""An example Spark job publishing into a local testnet: a batch write, then a streaming one.

    overlay testnet up --nodes 20 --base-port 7800        # clients on 7801, 7803, ...
    overlay subscribe ovl:open/spark-demo --atomic --node 127.0.0.1:7805 &
    python -m testnet.examples.spark_job --node 127.0.0.1:7801,127.0.0.1:7803

``batch`` writes ``--rows`` rows (key: the row's id mod 10; value: a JSON object) under
run id ``--run-id``: run it again with the same id and nothing is published twice.
``stream`` runs Spark's ``rate`` source (``--rate`` rows a second) for ``--seconds``
seconds with a one-second trigger: every micro-batch is one epoch, closed when Spark
commits it, so ``--atomic`` subscribers get each micro-batch whole. Both spread their
partitions over the nodes given.

Epoch numbers only go up on a stream, and a new query numbers its micro-batches from 0, so
the example keeps an epoch offset in the checkpoint folder: chosen from the clock when the
folder is new (above anything an earlier query could have used), the same on every restart
from that folder (a replayed micro-batch must keep its epoch).

A subscriber reads the rows back with ``overlay.spark.unpack``::

    from overlay.client import Client
    from overlay.spark import unpack
    with Client("127.0.0.1:7805") as client:
        for event in client.subscribe("ovl:open/spark-demo", atomic=True):
            rows = [r for p in getattr(event, "packets", ()) for r in unpack(p.data)]

Run it twice with the same ``--checkpoint`` and the streaming query resumes where it
stopped: a micro-batch it had not finished is replayed under the same ids, and nothing
reaches a subscriber twice.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from overlay.spark.options import DEFAULT_NODE


def epoch_offset(checkpoint: Path) -> int:
    """The query's epoch offset, kept beside its checkpoint: a thousand epochs a second of
    the clock when the folder was new, so a later query starts above an earlier one that
    ran less than a micro-batch a millisecond."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    saved = checkpoint / "overlay-epoch-offset"
    if not saved.exists():
        saved.write_text(f"{int(time.time()) * 1000}\n")
    return int(saved.read_text())


# How long stopping waits for the micro-batch in flight: longer than a micro-batch of this
# example takes, even the first, which starts Python workers on a busy machine.
STOP_PATIENCE = 60.0


def stop_between_batches(query: Any) -> None:
    """Stop ``query`` while it waits for its next trigger, not during a micro-batch.

    ``query.stop()`` cancels a micro-batch in flight, its tasks or the driver's commit, and
    Spark then logs ``ERROR WriteToDataSourceV2Exec: ... is aborting`` for it (the sink
    keeps that epoch open, and a restart from the checkpoint replays the batch). Between
    micro-batches there is nothing to cancel. Spark has no stop that finishes the batch, so
    this polls the query's status; after ``STOP_PATIENCE`` it stops the query anyway."""
    deadline = time.monotonic() + STOP_PATIENCE
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.01)
    query.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testnet.examples.spark_job")
    parser.add_argument("what", nargs="?", choices=("batch", "stream", "both"), default="both")
    parser.add_argument("--stream", default="ovl:open/spark-demo", help="stream address")
    parser.add_argument("--node", default=DEFAULT_NODE, help="client port(s), comma-separated")
    parser.add_argument("--rows", type=int, default=10_000, help="rows of the batch write")
    parser.add_argument("--run-id", default=None, help="the batch write's run id")
    parser.add_argument("--rate", type=int, default=1_000, help="streaming rows a second")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to stream")
    parser.add_argument("--checkpoint", help="the streaming query's checkpoint folder")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from overlay.spark import OverlayDataSource

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("overlay-example")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(OverlayDataSource)

    if args.what in ("batch", "both"):
        run_id = args.run_id or f"example-{uuid.uuid4().hex[:8]}"
        df = spark.range(args.rows).selectExpr(
            "cast(id % 10 as string) as key",
            "to_json(named_struct('id', id, 'square', id * id)) as value",
        )
        (
            df.write.format("overlay")
            .mode("append")
            .option("stream", args.stream)
            .option("node", args.node)
            .option("keyColumn", "key")
            .option("runId", run_id)
            .save()
        )
        print(f"batch: {args.rows} rows published to {args.stream} (run id {run_id})")

    if args.what in ("stream", "both"):
        checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="overlay-spark-")
        offset = epoch_offset(Path(checkpoint))
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", args.rate)
            .load()
            .selectExpr("cast(value % 10 as string) as key", "to_json(struct(*)) as value")
            .writeStream.format("overlay")
            .option("stream", args.stream)
            .option("node", args.node)
            .option("keyColumn", "key")
            .option("epochOffset", str(offset))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )
        query.awaitTermination(args.seconds)
        stop_between_batches(query)
        progress: dict[str, Any] = query.lastProgress or {}
        print(
            f"stream: micro-batches up to {progress.get('batchId')} published to "
            f"{args.stream} as epochs from {offset} (checkpoint {checkpoint})"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
