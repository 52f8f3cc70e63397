"""Spark jobs as publishers: the ``overlay`` data source (batch and streaming writes).

    from overlay.spark import OverlayDataSource
    spark.dataSource.register(OverlayDataSource)  # once per SparkSession
    (df.selectExpr("cast(id as string) as key", "to_json(struct(*)) as value")
       .write.format("overlay").mode("append")
       .option("stream", "ovl:open/prices").option("node", "127.0.0.1:7702").save())

Options (names are case-insensitive, values strings):

=================  ==========================================================================
stream             the stream's address (required); a signed stream also needs keyFile
node               a node's client port as host:port (the port is required; tcp://host:port
                   too), or several comma-separated: partition p publishes through node
                   p mod n (default, when the option is absent: 127.0.0.1:7702)
valueColumn        the binary or string column published (default "value")
keyColumn          an optional binary or string column carried beside each value
keyFile            the signing key file of a signed stream (readable on every executor)
rowsPerPacket      at most this many rows a packet (default 100000)
bytesPerPacket     at most this many bytes a packet, header included (default 60000, at
                   most 65536)
runId              batch writes: names the run in every uid, so re-running the same job with
                   the same runId republishes nothing twice (default: a fresh id per write)
epoch              batch writes: publish the whole write as this epoch, closed on commit
epochOffset        streaming: micro-batch b is epoch epochOffset + b (default 0); a first
                   batch whose epoch the stream already closed is refused on the driver
                   (``frontier.py``)
onAbort            "keep" (default): a failed write's epoch stays open for its replay to
                   complete; "abort": abort it at once (for writes never re-run)
timeout            seconds to wait for any one answer from a node (default 30)
maxInFlight        unanswered publishes per task (default 1000)
=================  ==========================================================================

Subscribers read the rows back with ``unpack(packet.data)`` (the framing is in
``rows.py``); with ``overlay subscribe --atomic`` a micro-batch arrives as one epoch.

Exactly once, the argument in full (each step is the module named):

1. Every packet's uid is a hash of what a retry keeps: (query id or run id, micro-batch id,
   partition id, packet sequence in the partition, packing options), never the attempt
   (``uids.py``). Spark retries a task with the same partition id and the same rows in the
   same order, and restarts a query re-running an unfinished micro-batch under the same id
   with the same rows; packing cuts the same packets from the same rows however Spark
   splits them into Arrow batches (``packing.py``). So a retry republishes each packet
   under the uid it had.
2. A task publishes only full packets; its last, partial one goes to the driver in its
   commit message (``publisher.py``). A failed attempt's input may have ended early and
   looked complete (Spark closes the writer's input when an upstream stage fails), but a
   full packet is cut only when the row after it is in hand, so every packet the attempt
   published is one its retry cuts identically. Only attempts Spark committed, whose
   input was whole, contribute a last packet.
3. The root answers a uid it remembers with the packet's original number and stores
   nothing; it checks the uid before anything else, even before refusing a packet whose
   epoch is finished (``overlay.core.publishing``). So a republished packet is stored
   once; distinct packets have distinct uids (64-bit hashes) and are each stored.
4. A task returns only after the root has answered all its packets, and Spark calls
   commit only after every task returned; commit publishes the last packets, waits for
   their answers, then publishes the epoch's EPOCH_CLOSED marker, which is therefore
   ordered after every data packet of the micro-batch: an atomic subscriber gets the
   batch whole, once. Every uid involved is a hash of what a replay keeps (the marker's
   of (stream, epoch, kind)), so a replayed commit (the query died after closing the epoch
   but before Spark recorded the batch as done) is answered from the uid table too, and
   if the root has forgotten the marker's uid it refuses it as EPOCH_DONE, which is also
   "already closed".
5. A failed micro-batch's epoch stays open by default (``source.py``, ``onAbort``): its
   replay on restart completes it under the same uids and closes it, so atomic
   subscribers never see part of it and nobody sees a row twice.

Limits: the uid table and the epoch frontier live in the root's state of a *carried* stream.
A root that has no children and no local clients forgets the stream when the last client
leaves (its numbering restarts at 0 for the next publisher), so the argument above holds
while the stream is subscribed somewhere (which is what publishing is for); a task retried
after the stream was forgotten stores its rows again. The root remembers the 65,536 most
recent uids of a stream (``publish_uids``), and after a root takeover only those of packets
in its window; a replay later than that gets its epoch's data refused (EPOCH_DONE, a clear
task error) rather than stored twice, but a batch write without epoch replayed that late
would store its rows again. An atomic subscriber gets an epoch whole only if the epoch fits
in the nodes' window (``window_packets`` 1024, ``window_bytes`` 4 MiB by default): keep
micro-batches under that (``maxOffsetsPerTrigger``, ``maxFilesPerTrigger``) or raise the
window.
"""

from typing import TYPE_CHECKING, Any

from overlay.spark.options import OverlaySinkError, SinkOptions, parse_options
from overlay.spark.rows import PackingError, Record, unpack

if TYPE_CHECKING:
    from overlay.spark.source import OverlayDataSource


def __getattr__(name: str) -> Any:
    # The data source needs pyspark; a subscriber that only unpacks rows does not.
    if name == "OverlayDataSource":
        from overlay.spark.source import OverlayDataSource

        return OverlayDataSource
    raise AttributeError(f"module 'overlay.spark' has no attribute {name!r}")


__all__ = [
    "OverlayDataSource",
    "OverlaySinkError",
    "PackingError",
    "Record",
    "SinkOptions",
    "parse_options",
    "unpack",
]
