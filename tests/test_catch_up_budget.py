"""CatchUpBudget: each peer's token bucket of catch-up frames and bytes, filled with the
caller's ``now``; the cut-off of a peer refused again and again; bounded memory."""

from __future__ import annotations

import pytest

from overlay.core.catch_up_budget import MAX_STRIKES, CatchUpBudget, Verdict


def budget(capacity: int = 16) -> CatchUpBudget:
    """100 frames and 10,000 bytes a second, up to 200 frames and 20,000 bytes at once."""
    return CatchUpBudget(100.0, 10_000.0, 200.0, 20_000.0, capacity)


def test_a_full_bucket_serves_its_burst_and_then_refuses() -> None:
    b = budget()
    assert b.take(0.0, b"A", 150, lambda: 1000) is Verdict.SERVE
    assert b.take(0.0, b"A", 50, lambda: 1000) is Verdict.SERVE
    assert b.take(0.0, b"A", 1, lambda: 1) is Verdict.REFUSE


def test_the_bucket_fills_at_its_rate_up_to_its_burst() -> None:
    b = budget()
    assert b.take(0.0, b"A", 200, lambda: 0) is Verdict.SERVE
    assert b.take(0.5, b"A", 51, lambda: 0) is Verdict.REFUSE  # 50 frames back
    assert b.take(0.5, b"A", 50, lambda: 0) is Verdict.SERVE
    # Ten seconds on, it holds its burst, not a thousand frames.
    assert b.take(10.5, b"A", 200, lambda: 0) is Verdict.SERVE
    assert b.take(10.5, b"A", 1, lambda: 0) is Verdict.REFUSE


def test_bytes_bind_as_well_as_frames() -> None:
    b = budget()
    assert b.take(0.0, b"A", 1, lambda: 15_000) is Verdict.SERVE
    assert b.take(0.0, b"A", 1, lambda: 6_000) is Verdict.REFUSE
    assert b.take(0.1, b"A", 1, lambda: 6_000) is Verdict.SERVE  # 1,000 bytes back


def test_a_catch_up_larger_than_the_burst_fits_a_full_bucket_and_empties_it() -> None:
    """A window may hold up to twice its bounds: a peer asking for all of it once still
    gets it, charged the whole burst."""
    b = budget()
    assert b.take(0.0, b"A", 5000, lambda: 10**9) is Verdict.SERVE
    assert b.take(0.0, b"A", 1, lambda: 1) is Verdict.REFUSE


def test_peers_have_buckets_of_their_own() -> None:
    b = budget()
    assert b.take(0.0, b"A", 200, lambda: 0) is Verdict.SERVE
    assert b.take(0.0, b"B", 200, lambda: 0) is Verdict.SERVE


def test_a_refused_catch_up_is_not_weighed() -> None:
    """A peer refused in a loop costs a count, not a walk over the window each time."""
    b = budget()
    b.take(0.0, b"A", 200, lambda: 0)

    def weigh() -> int:
        raise AssertionError("weighed a catch-up the frames already refuse")

    assert b.take(0.0, b"A", 10, weigh) is Verdict.REFUSE


def test_nothing_to_send_is_always_served_and_keeps_no_state() -> None:
    b = budget()
    assert b.take(0.0, b"A", 0, lambda: 0) is Verdict.SERVE
    assert len(b) == 0


def test_a_peer_refused_again_and_again_is_cut_off_but_one_refused_now_and_then_is_not() -> None:
    b = budget()
    b.take(0.0, b"A", 200, lambda: 0)
    verdicts = [b.take(i / 1000, b"A", 200, lambda: 0) for i in range(int(MAX_STRIKES) + 1)]
    assert verdicts[:-1] == [Verdict.REFUSE] * int(MAX_STRIKES)
    assert verdicts[-1] is Verdict.CUT_OFF
    # A peer that asks for two bursts every two seconds, for a long while, is served one
    # and refused the other each time, and never cut off.
    for i in range(200):
        assert b.take(2.0 * i, b"B", 200, lambda: 0) is Verdict.SERVE
        assert b.take(2.0 * i, b"B", 200, lambda: 0) is Verdict.REFUSE


def test_a_forgotten_peer_starts_again_with_a_full_bucket() -> None:
    b = budget()
    b.take(0.0, b"A", 200, lambda: 0)
    b.forget(b"A")
    assert len(b) == 0
    assert b.take(0.0, b"A", 200, lambda: 0) is Verdict.SERVE


def test_buckets_are_bounded_the_least_recently_charged_dropped_first() -> None:
    b = budget(capacity=2)
    b.take(0.0, b"A", 200, lambda: 0)
    b.take(0.0, b"B", 200, lambda: 0)
    b.take(0.0, b"A", 1, lambda: 0)  # (refused, but A was charged more recently than B)
    b.take(0.0, b"C", 200, lambda: 0)
    assert len(b) == 2
    assert b.take(0.0, b"A", 1, lambda: 0) is Verdict.REFUSE  # A's was kept
    assert b.take(0.0, b"B", 200, lambda: 0) is Verdict.SERVE  # B's was dropped


def test_a_clock_that_runs_back_adds_nothing() -> None:
    b = budget()
    b.take(10.0, b"A", 200, lambda: 0)
    assert b.take(5.0, b"A", 1, lambda: 0) is Verdict.REFUSE
    assert b.take(10.1, b"A", 1, lambda: 0) is Verdict.SERVE


@pytest.mark.parametrize(
    "args",
    [(0.0, 1.0, 1.0, 1.0), (1.0, -1.0, 1.0, 1.0), (1.0, 1.0, 0.5, 1.0), (1.0, 1.0, 1.0, 0.0)],
)
def test_rates_must_be_positive_and_bursts_at_least_one(
    args: tuple[float, float, float, float],
) -> None:
    with pytest.raises(ValueError, match="catch-up rates"):
        CatchUpBudget(*args)
