"""The delivery report: what counts as lost, duplicated, reordered or acknowledged twice."""

from __future__ import annotations

from testnet.traffic import (
    ACK_PATIENCE,
    MIN_IN_FLIGHT,
    Publisher,
    Recorder,
    in_flight_for,
    percentile,
    report,
)


def recorder(numbers: list[int], frontier: int | None = None) -> Recorder:
    r = Recorder(1, "127.0.0.1:1", frontier=frontier)
    r.numbers = numbers
    r.arrivals = [10.0 + 0.01 * i for i in range(len(numbers))]
    r.sent = [10.0 + 0.01 * i - 0.002 for i in range(len(numbers))]
    return r


def publisher(numbers: list[int]) -> Publisher:
    p = Publisher(0, "127.0.0.1:0")
    p.acked = dict(enumerate(numbers))
    return p


def test_clean_delivery() -> None:
    result = report(publisher([0, 1, 2, 3]), [recorder([0, 1, 2, 3])])
    assert result.ok and result.lost == 0 and result.duplicates == 0
    assert abs(result.percentile(50) - 0.002) < 1e-9


def test_lost_duplicated_and_reordered_are_counted() -> None:
    result = report(publisher([0, 1, 2, 3, 4]), [recorder([0, 2, 2, 1, 4])])
    (s,) = result.subscribers
    assert (s.lost, s.duplicates, s.reordered) == (1, 1, 2)  # 3 lost; 2 twice; 2->1 and 2->2
    assert not result.ok


def test_packets_before_the_join_frontier_are_not_expected() -> None:
    result = report(publisher([5, 6, 7]), [recorder([6, 7], frontier=5)])
    assert result.ok and result.subscribers[0].expected == 2


def test_a_number_acknowledged_for_two_publishes_fails_the_run() -> None:
    result = report(publisher([0, 1, 1, 2]), [recorder([0, 1, 2])])
    assert result.double_acked == ((1, (1, 2)),)
    assert not result.ok
    assert any("ACK BUG: packet number 1" in line for line in result.lines())


def test_repair_time_is_until_every_subscriber_has_fresh_data() -> None:
    r = recorder([0, 1, 2])
    r.sent = [1.0, 2.0, 5.0]
    r.arrivals = [1.1, 2.1, 5.5]
    result = report(publisher([0, 1, 2]), [r], kills=[3.0])
    assert result.repairs == (2.5,)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0


def test_a_publisher_keeps_its_pace_through_slow_acknowledgements_at_any_rate() -> None:
    # Unanswered publishes cover ACK_PATIENCE of the rate: 200/s through 0.6 s acks needs
    # 120 in flight; a slow stream keeps the floor that bounds a retry storm.
    assert in_flight_for(200) == 120 >= 200 * ACK_PATIENCE
    assert in_flight_for(50) == in_flight_for(0) == MIN_IN_FLIGHT
