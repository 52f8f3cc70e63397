"""The example Spark job's stop: a streaming query is stopped between micro-batches, never
during one (``stop_between_batches``); a fake query stands in for Spark's."""

from __future__ import annotations

from typing import Any

import pytest

from testnet.examples import spark_job


class FakeQuery:
    """A query whose micro-batch in flight ends after ``busy`` status reads."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.reads = 0
        self.stopped_active: bool | None = None

    @property
    def status(self) -> dict[str, Any]:
        self.reads += 1
        return {"isTriggerActive": self.reads <= self.busy}

    def stop(self) -> None:
        self.stopped_active = self.reads <= self.busy


def test_the_query_stops_once_its_micro_batch_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(spark_job.time, "sleep", pauses.append)
    query = FakeQuery(busy=3)
    spark_job.stop_between_batches(query)
    assert query.stopped_active is False
    assert len(pauses) == 3


def test_a_micro_batch_that_never_ends_is_stopped_after_the_patience(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]

    def pause(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(spark_job.time, "sleep", pause)
    monkeypatch.setattr(spark_job.time, "monotonic", lambda: clock[0])
    query = FakeQuery(busy=10**9)
    spark_job.stop_between_batches(query)
    assert query.stopped_active is True
    assert spark_job.STOP_PATIENCE <= clock[0] < spark_job.STOP_PATIENCE + 1
