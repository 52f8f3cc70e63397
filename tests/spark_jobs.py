"""Spark jobs through real nodes, for the Spark tests: the tests' local SparkSession, and
what subscribers saw (``Watcher``: a plain and an atomic subscriber joined before the job
ran), read back as rows, and how many packets one clean run cuts.

Imported by a test module, it skips that module as test_spark skips itself: without
pyspark, pyarrow or a Java runtime."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime", allow_module_level=True)

from pyspark.sql import SparkSession  # noqa: E402

from overlay.client import Client  # noqa: E402
from overlay.client.blocking import BlockingSubscription  # noqa: E402
from overlay.client.connection import ClientTimeout, StreamEvent  # noqa: E402
from overlay.core.events import Epoch, Packet  # noqa: E402
from overlay.messages import PacketKind  # noqa: E402
from overlay.spark import OverlayDataSource, unpack  # noqa: E402
from overlay.spark.packing import Packer  # noqa: E402

TIMEOUT = 60.0  # per wait: only a broken test waits this long


def local_spark() -> SparkSession:
    """The tests' SparkSession: two task slots, a failed task tried up to three times, and
    the ``overlay`` data source registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,3]")
        .appName("overlay-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(OverlayDataSource)
    return session


class Watcher:
    """A plain and an atomic subscriber of one stream, joined before the job runs."""

    def __init__(self, address: str, stream: str, root: str | None = None) -> None:
        self.stream = stream
        self.root = root
        self.client = Client(address, timeout=TIMEOUT)
        self.plain = self.client.subscribe(stream, event_timeout=TIMEOUT)
        # One subscription a stream a connection: the atomic one has its own.
        self.atomic_client = Client(address, timeout=TIMEOUT)
        self.atomic = self.atomic_client.subscribe(stream, atomic=True, event_timeout=TIMEOUT)

    def head(self) -> int:
        """The stream's newest packet number, at its ``root`` (if set; else the watched
        node is the root). A member's may lag it: the acknowledgements that end a job
        go down the publishers' paths at the commit, while the last packets may still
        be on their way to members on other branches."""
        if self.root is None:
            (state,) = self.client.describe(self.stream)["streams"]  # type: ignore[misc]
        else:
            with Client(self.root, timeout=TIMEOUT) as client:
                (state,) = client.describe(self.stream)["streams"]  # type: ignore[misc]
        high = state["high"]
        assert isinstance(high, int)
        return high

    def packets(self) -> list[Packet]:
        """Every packet up to the head, in order (the head is read once the job is done)."""
        return [e for e in _until_number(self.plain, self.head()) if isinstance(e, Packet)]

    def epochs(self) -> list[Epoch]:
        head = self.head()
        events = _read(self.atomic, lambda e: isinstance(e, Epoch) and e.closed_at == head)
        return [e for e in events if isinstance(e, Epoch)]

    def close(self) -> None:
        self.client.close()
        self.atomic_client.close()


def _read(subscription: BlockingSubscription, last: Any) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    while not events or not last(events[-1]):
        try:
            events.append(subscription.next(TIMEOUT))
        except ClientTimeout as error:
            # What did come says why the awaited event did not: an epoch skipped, a gap.
            seen = [_brief(e) for e in events if not isinstance(e, Packet)][-5:]
            raise AssertionError(
                f"{error}; {len(events)} events came, the last others {seen}"
            ) from None
    return events


def _brief(event: StreamEvent) -> str:
    if isinstance(event, Epoch):
        return f"Epoch({event.epoch}, closed_at={event.closed_at})"
    return repr(event)


def _until_number(subscription: BlockingSubscription, head: int) -> list[StreamEvent]:
    return _read(subscription, lambda e: isinstance(e, Packet) and e.number == head)


def rows_in(packets: list[Packet]) -> list[tuple[bytes | None, bytes | None]]:
    data = [p for p in packets if p.kind is PacketKind.DATA]
    return [(r.key, r.value) for p in data for r in unpack(p.data)]


def packets_for(partitions: list[list[str]], rows_per_packet: int, bytes_per_packet: int) -> int:
    """How many packets one clean run cuts from these partitions' values."""
    total = 0
    for values in partitions:
        packer = Packer(rows_per_packet, bytes_per_packet, keyed=False)
        total += len(list(packer.add(pa.array(values, pa.string()))))
        total += packer.finish() is not None
    return total


@contextmanager
def watching(address: str, stream: str, root: str | None = None) -> Iterator[Watcher]:
    watcher = Watcher(address, stream, root)
    try:
        yield watcher
    finally:
        watcher.close()
