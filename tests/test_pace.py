"""The pace of a stream's publishes (``overlay.core.pace``): a window of publishes out that
follows how long the tree takes to answer them, built alone and fed answer delays."""

from __future__ import annotations

from overlay.core.pace import BASE_PERIOD, BASE_PERIODS, INITIAL_WINDOW, MIN_WINDOW, Pace

TOP = 256
TARGET = 0.1


def answers(pace: Pace, delay: float, count: int, now: float = 1.0) -> None:
    for _ in range(count):
        pace.answered(now, delay)


def test_a_window_starts_small_and_doubles_a_round_trip_while_answers_come_promptly() -> None:
    pace = Pace(TOP, TARGET)
    assert pace.limit == INITIAL_WINDOW
    answers(pace, 0.02, INITIAL_WINDOW)  # (one round trip's answers)
    assert pace.limit == 2 * INITIAL_WINDOW
    answers(pace, 0.02, 1000)
    assert pace.limit == TOP  # (never past the credit)


def settle(pace: Pace, base: float, rate: float, count: int) -> None:
    """Answers from a tree that answers a publish in ``base`` with nothing queued and takes
    ``rate`` a second: past ``rate * base`` out, each more waits its turn in a queue."""
    for _ in range(count):
        queued = max(0.0, pace.window - rate * base)
        pace.answered(1.0, base + queued / rate)


def test_the_window_settles_where_the_queue_adds_the_target_to_the_answer_time() -> None:
    # 1,000 publishes a second, 50 ms with nothing queued: 50 out fill the pipe (more than
    # start, so the base is learned), and 100 more queued add the target, 100 ms.
    pace = Pace(TOP, TARGET)
    settle(pace, 0.05, 1000.0, 5000)
    assert pace.base == 0.05 and 145 <= pace.window <= 155
    settle(pace, 0.05, 250.0, 5000)  # the tree slows to a quarter: so does the window
    assert 35 <= pace.window <= 40
    settle(pace, 0.05, 10_000.0, 5000)  # a tree faster than the credit: the credit
    assert pace.limit == TOP


def test_a_standing_delay_far_past_the_allowance_takes_the_window_to_its_floor() -> None:
    pace = Pace(TOP, TARGET)
    answers(pace, 0.02, 1000)
    answers(pace, 10.0, 10 * TOP)
    assert pace.limit == MIN_WINDOW


def test_on_a_long_path_the_allowance_is_the_base_itself() -> None:
    # A path that answers in 1 s with nothing queued (the pipe: 100 out at 100 a second)
    # settles with a queue as long as the base, not with 100 ms of queue, so its hops'
    # jitter does not take the window down to a few packets a round trip.
    pace = Pace(TOP, TARGET)
    settle(pace, 1.0, 100.0, 5000)
    assert 190 <= pace.window <= 210


def test_the_base_is_the_least_delay_of_the_last_few_periods_so_a_slower_path_is_learned() -> None:
    pace = Pace(TOP, TARGET)
    pace.answered(0.0, 0.02)
    pace.answered(BASE_PERIOD / 2, 0.5)
    assert pace.base == 0.02
    for period in range(1, BASE_PERIODS):
        pace.answered(period * BASE_PERIOD, 0.5)
    assert pace.base == 0.02  # (its period is still among those kept)
    pace.answered(BASE_PERIODS * BASE_PERIOD, 0.5)
    assert pace.base == 0.5  # the route got slower: the old minimum is gone


def test_a_target_of_zero_is_a_fixed_credit() -> None:
    pace = Pace(TOP, 0.0)
    assert pace.limit == TOP
    answers(pace, 5.0, 1000)
    assert pace.limit == TOP


def test_a_credit_below_the_floor_is_fixed_at_it() -> None:
    pace = Pace(2, TARGET)
    assert pace.limit == 2
    answers(pace, 5.0, 100)
    assert pace.limit == 2


def test_a_minimum_a_minute_old_is_forgotten_even_after_an_idle_time() -> None:
    pace = Pace(TOP, TARGET)
    pace.answered(0.0, 0.001)  # (a root answers its own publishes at once)
    pace.answered(3600.0, 0.3)  # an hour later, a member: its answers take 300 ms
    assert pace.base == 0.3


def test_a_round_that_some_answers_cross_promptly_is_jitter_not_a_queue() -> None:
    # A node busy for moments delays most answers of a round, but not all: no queue stands
    # for the whole round, so the window does not shrink.
    pace = Pace(TOP, TARGET)
    answers(pace, 0.02, INITIAL_WINDOW)  # (the base, 20 ms; the window doubles to 64)
    window = pace.window
    answers(pace, 0.6, int(window) - 1)
    pace.answered(1.0, 0.03)
    assert pace.window >= window


def test_a_batch_of_answers_counts_each_and_ends_at_most_one_round() -> None:
    """A root's batch is answered all at once: its publishes count toward the round, as
    many single answers would, but the window moves once for it, however large it is."""
    pace = Pace(TOP, TARGET)
    pace.answered(1.0, 0.02, INITIAL_WINDOW - 1)
    assert pace.limit == INITIAL_WINDOW  # (the round goes on)
    pace.answered(1.0, 0.02, 1)
    assert pace.limit == 2 * INITIAL_WINDOW
    pace.answered(1.0, 0.02, 10 * TOP)
    assert pace.limit == 4 * INITIAL_WINDOW  # (one round: twice, not to the top)
