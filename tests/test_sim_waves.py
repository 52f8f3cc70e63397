"""A wave of heartbeats (``testnet.sim.waves``) built alone: it hands them out by arrival,
equal arrivals in the order they were added, and reports what is left."""

from __future__ import annotations

import math

from overlay.messages import Heartbeat
from testnet.sim.waves import Wave


def test_heartbeats_come_out_by_arrival_and_equal_arrivals_in_the_order_added() -> None:
    wave = Wave()
    beats = [Heartbeat(1), Heartbeat(2)]
    wave.add(0.30, 11, 0, 1, beats[0])
    wave.add(0.10, 12, 0, 2, beats[0])
    wave.add(0.30, 13, 1, 0, beats[1])
    wave.add(0.05, 14, 2, 0, beats[1])
    wave.add(0.10, 15, 1, 2, beats[1])
    wave.sort()
    assert len(wave) == 5
    assert wave.head() == (0.05, 14)
    taken = [wave.take() for _ in range(5)]
    assert taken == [
        (0.05, 2, 0, beats[1]),
        (0.10, 0, 2, beats[0]),
        (0.10, 1, 2, beats[1]),
        (0.30, 0, 1, beats[0]),
        (0.30, 1, 0, beats[1]),
    ]
    assert len(wave) == 0 and not wave


def test_a_wave_taken_in_part_resumes_where_it_stopped() -> None:
    wave = Wave()
    for k in range(1000):
        wave.add(1.0 + (k * 7919 % 1000) / 1e4, 100 + k, k, k + 1, Heartbeat(k))
    wave.sort()
    first = [wave.take()[0] for _ in range(400)]
    assert len(wave) == 600
    at, seq = wave.head()
    rest = [wave.take()[0] for _ in range(600)]
    assert rest[0] == at and seq >= 100
    assert first + rest == sorted(first + rest)


def test_a_wave_of_one_arrival_time_comes_out_in_the_order_added() -> None:
    wave = Wave()
    for k in range(300):
        wave.add(2.5, 10 + k, k, 300 - k, Heartbeat(1))
    wave.sort()
    assert [wave.take()[1] for _ in range(300)] == list(range(300))


def test_arrivals_whose_spread_a_float_cannot_scale_still_come_out_in_order() -> None:
    for arrivals in ([0.0, math.inf, 1.0], [0.0, 5e-324, 0.0]):
        wave = Wave()
        for k, at in enumerate(arrivals):
            wave.add(at, k, k, k, Heartbeat(1))
        wave.sort()
        assert [wave.take()[0] for _ in arrivals] == sorted(arrivals)
