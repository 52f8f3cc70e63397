"""Where a stream's epochs stand, and whether a streaming query is about to reuse them.

A streaming query's micro-batch ``b`` is epoch ``epochOffset + b``, and epochs only go up on
a stream: the root refuses data for an epoch already closed (EPOCH_DONE). A query started
from a fresh checkpoint numbers its batches from 0 again, so on a stream another query has
published, its first batch's epoch is already closed unless ``epochOffset`` lies above the
stream's last closed epoch. The driver checks that before the first batch's tasks run: the
stream's frontier comes from subscribing through a node (the node's ``Subscribed`` carries
``last_closed``, which the node learned from the tree when it joined), and which batch comes
next from Spark's commit log in the checkpoint folder (``commits/<batch id>``, one file a
batch Spark recorded as done).

Only a first batch (no batch recorded) is judged, and only an epoch *below* the last closed
one is refused: a first batch whose epoch *is* the last closed one may be the replay of a
batch the sink closed just before the driver died (before Spark recorded it), which is
legitimate, and its tasks are answered from the root's uid table. A later batch of a
restarted query resumes its own numbering and is not judged. A checkpoint Spark keeps
somewhere other than the local file system (``hdfs://``, ``s3a://``) is not read; the
tasks' EPOCH_DONE refusal then says the same, later.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from overlay.client.connection import ClientError
from overlay.spark.options import OverlaySinkError, SinkOptions
from overlay.spark.publisher import connect

# Spark's commit log: one file a micro-batch it recorded as done, named by the batch id.
COMMITS = "commits"


def is_first_batch(checkpoint: str | None) -> bool:
    """Whether the query with this checkpoint location has no micro-batch recorded as done;
    False when that cannot be read (no location, or not on the local file system)."""
    if not checkpoint:
        return False
    parsed = urlparse(checkpoint)
    if parsed.scheme not in ("", "file"):
        return False
    folder = os.path.join(parsed.path if parsed.scheme else checkpoint, COMMITS)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return True  # Spark creates the folder with the first commit
    except OSError:
        return False
    return not any(name.isdigit() for name in names)


def last_closed_epoch(options: SinkOptions, timeout: float) -> int | None:
    """The stream's newest closed epoch (None: none yet), as the first node that answers
    knows it once it is in the stream's tree."""
    last_error: Exception | None = None
    for node in options.nodes:
        try:
            with connect(node, options, "spark driver frontier", timeout) as client:
                subscription = client.subscribe(options.stream, timeout=timeout)
                return subscription.subscribed.last_closed
        except (OverlaySinkError, ClientError) as error:
            last_error = error
    raise OverlaySinkError(
        f"overlay sink: cannot learn the epochs of {options.stream.address}: {last_error}"
    )


def check_first_epoch(options: SinkOptions, checkpoint: str | None, timeout: float) -> None:
    """On the driver, before a streaming query's tasks run: refuse a first micro-batch whose
    epoch the stream has already closed, naming the ``epochOffset`` to use."""
    if not is_first_batch(checkpoint):
        return
    last = last_closed_epoch(options, timeout)
    if last is None or options.epoch_offset >= last:
        return
    raise OverlaySinkError(
        f"overlay sink: {options.stream.address} has closed epochs up to {last}, and this "
        f"query's first micro-batch would be epoch {options.epoch_offset} (option "
        f"'epochOffset'): the stream was published by another query, and this one starts "
        f"from a fresh checkpoint. Set option 'epochOffset' to {last + 1} or more "
        "(epochs only go up on a stream)"
    )
