"""Idempotency uids for the Spark sink: derived only from what a retry keeps.

The root's uid table answers a publish whose uid it remembers with the packet number it
gave the first time, and stores nothing (``overlay.core.publishing``: "A uid it remembers
gets its original number"). So a publish is exactly-once if every retry of it carries the
same uid, and two different publishes never do. What Spark keeps across a retry, and so
what may go into a uid:

* the job: a streaming query's id (stable across restarts from its checkpoint), or a batch
  write's run id (the user's ``runId``, else one drawn on the driver when the write is
  planned and shipped inside the writer, so every attempt of every task sees it);
* the micro-batch id (a restarted query re-runs an unfinished batch under the same id);
* the partition id (a retried task has the same one);
* the packet's sequence number within the partition: a retried task sees the same rows in
  the same order, and packing depends only on those rows and the packing options
  (``packing.py``), so packet ``seq`` holds the same rows every time;
* the packing options themselves, so that a query restarted with other options cuts new
  uids rather than reusing one for different rows (at worst a duplicate, never a loss).

Never the task attempt number, the executor, the time or a random draw on the executor.

Epoch markers get uids from (stream key, epoch, kind) alone: closing epoch E of a stream is
one act, whoever repeats it, so a replayed commit is answered from the table too.
"""

from __future__ import annotations

import hashlib

from overlay.messages import PacketKind


def data_uid(job: str, batch: int | None, partition: int, seq: int, packing: str) -> int:
    """The uid of packet ``seq`` of ``partition`` in micro-batch ``batch`` (None for a batch
    write) of ``job``: 64 bits of BLAKE2b over exactly those fields."""
    text = f"{job}\x00{'-' if batch is None else batch}\x00{partition}\x00{seq}\x00{packing}"
    return _hash(b"ovl-spark-data", text.encode())


def marker_uid(key: bytes, epoch: int, kind: PacketKind) -> int:
    """The uid of the marker that closes or aborts ``epoch`` of the stream ``key``."""
    return _hash(b"ovl-spark-mark", key + f"\x00{epoch}\x00{int(kind)}".encode())


def _hash(person: bytes, data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=person).digest(), "big")
