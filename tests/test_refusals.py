"""Refusals are counted by reason without limit and logged as warnings, at most a few lines
per reason and interval; the first line after a flood says how many went unlogged."""

from __future__ import annotations

import logging

import pytest

from overlay.runtime.refusals import Refusal, Refusals


def test_a_flood_is_counted_in_full_and_logged_in_a_few_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    now = [0.0]
    refusals = Refusals(lambda: now[0], lines=3, interval=60.0)
    for n in range(1000):
        refusals(Refusal.HANDSHAKE, f"10.0.0.1:{n}", "handshake timed out")
    refusals(Refusal.LINKS_FULL, "peer", "the node has 256 links")  # its own allowance
    assert refusals.counts == {"handshake": 1000, "links_full": 1}
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all(r.levelno == logging.WARNING for r in caplog.records)
    assert lines[0] == "refused 10.0.0.1:0 (handshake): handshake timed out"
    caplog.clear()
    now[0] = 61.0
    refusals(Refusal.HANDSHAKE, "10.0.0.1:1000", "handshake timed out")
    summary, line = [r.getMessage() for r in caplog.records]
    assert summary.startswith("997 more refusals (handshake)")
    assert line == "refused 10.0.0.1:1000 (handshake): handshake timed out"
