"""Which micro-batch of a streaming query is its first, read from Spark's commit log in the
checkpoint folder (``overlay.spark.frontier``); the driver's check itself runs against real
nodes in test_spark.py."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from overlay.spark.frontier import is_first_batch


def test_a_checkpoint_without_recorded_batches_is_a_first_batch(tmp_path: Path) -> None:
    assert is_first_batch(str(tmp_path))  # no commits folder yet
    commits = tmp_path / "commits"
    commits.mkdir()
    (commits / ".0.crc").touch()  # Spark's checksum files are not batches
    assert is_first_batch(str(tmp_path))
    assert is_first_batch(tmp_path.as_uri())
    (commits / "0").touch()
    assert not is_first_batch(str(tmp_path))
    assert not is_first_batch(tmp_path.as_uri())


def test_an_unreadable_checkpoint_is_never_judged_first() -> None:
    assert not is_first_batch(None)
    assert not is_first_batch("")
    assert not is_first_batch("hdfs://namenode/checkpoints/q")
    assert not is_first_batch("s3a://bucket/checkpoints/q")
