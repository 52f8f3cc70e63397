"""The chaos run on an in-process testnet: tree members (the root included) killed and
restarted while a stream is published; every subscriber must get every packet once."""

from __future__ import annotations

import pytest
import trio

from testnet.churn import ChaosOptions, cut_when_stalled, run_chaos
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


class Answers:
    """A publisher's answered count, moved by hand."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> int:
        return self.count


async def cut_at(answers: Answers, steps: list[tuple[float, int]]) -> float:
    """When ``cut_when_stalled`` (run end at 10 s, quiet 30 s) cancels its scope, while
    ``answers`` reaches each count at each time of ``steps``."""
    start = trio.current_time()
    async with trio.open_nursery() as nursery:

        async def answer() -> None:
            for at, count in steps:
                await trio.sleep_until(start + at)
                answers.count = count

        nursery.start_soon(answer)
        with trio.CancelScope() as scope:
            nursery.start_soon(cut_when_stalled, answers, start + 10.0, scope, 30.0)
            await trio.sleep_forever()
        nursery.cancel_scope.cancel()
    return trio.current_time() - start


async def test_a_run_still_answering_past_its_end_is_waited_for(autojump_clock: object) -> None:
    # A loaded testnet behind its rate goes on answering: cut off after a fixed drain, it
    # would be reported as failed though nothing was lost.
    answers = Answers()
    steps = [(t, 100 * i) for i, t in enumerate((5.0, 25.0, 50.0, 75.0), start=1)]
    # Checked every 30 s from the end (10 s): at 40, 70 and 100 s there were new answers
    # (the last at 75 s); at 130 s none, and the run is cut.
    assert await cut_at(answers, steps) == pytest.approx(130.0)


async def test_a_run_that_stops_answering_is_cut_once_quiet(autojump_clock: object) -> None:
    answers = Answers()
    assert await cut_at(answers, [(5.0, 100)]) == pytest.approx(40.0)
