"""The chaos run on an in-process testnet: tree members (the root included) killed and
restarted while a stream is published; every subscriber must get every packet once."""

from __future__ import annotations

import pytest
import trio

from testnet.churn import ChaosOptions, run_chaos
from testnet.handle import local_testnet

LIMIT = 90.0


@pytest.mark.slow
async def test_churn_in_the_tree_loses_nothing() -> None:
    lines: list[str] = []
    options = ChaosOptions(
        rate=3.0,
        duration=4.0,
        downtime=0.5,
        subscribers=4,
        publish_rate=100.0,
        seed=3,
        in_tree=True,
    )
    with trio.fail_after(LIMIT):
        async with local_testnet(24, seed=3) as net:
            result = await run_chaos(net, options, lines.append)
    report = "\n".join(lines)
    assert result.kills >= 3, report
    assert result.delivery.published >= 390, report
    # Subscribers' view: nothing lost, nothing twice, nothing out of order.
    for s in result.delivery.subscribers:
        assert (s.lost, s.duplicates, s.reordered, s.missed_events) == (0, 0, 0, 0), report
    assert result.final.check.ok, report
    assert len(result.final.check.roots) == 1
    assert "killed node" in report and "restarted node" in report


async def test_too_few_nodes_for_the_clients_is_a_usage_error() -> None:
    with trio.fail_after(LIMIT):
        async with local_testnet(5, seed=1) as net:
            with pytest.raises(ValueError, match="cannot hold 4 subscribers"):
                await run_chaos(net, ChaosOptions(subscribers=4), lambda _: None)
