"""Tests for keyspace.swapping: the swap ratio and the convergence it produces."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyspace.location import distance
from keyspace.swapping import swap_gain, swap_step
from keyspace.topology import Topology, closest_node, greedy_route, small_world

unit = st.floats(0.0, 1.0, exclude_max=True)


def test_swap_gain_by_hand() -> None:
    # A at 0.1 with a neighbour at 0.8; B at 0.7 with a neighbour at 0.2. Swapping puts each
    # next to the other's neighbour.
    before = distance(0.1, 0.8) * distance(0.7, 0.2)  # 0.3 * 0.5
    after = distance(0.7, 0.8) * distance(0.1, 0.2)  # 0.1 * 0.1
    gain = swap_gain(0.1, 0.7, [0.8], [0.2])
    assert gain == pytest.approx(before / after)
    assert gain == pytest.approx(15.0)
    # The reverse move is discouraged by exactly the inverse ratio.
    assert swap_gain(0.7, 0.1, [0.8], [0.2]) == pytest.approx(1 / 15.0)


def test_swap_gain_is_one_without_neighbours() -> None:
    assert swap_gain(0.1, 0.9, [], []) == 1.0


@given(
    unit,
    unit,
    st.lists(unit, max_size=12),
    st.lists(unit, max_size=12),
)
def test_swap_gain_detailed_balance(a: float, b: float, na: list[float], nb: list[float]) -> None:
    forward = swap_gain(a, b, na, nb)
    backward = swap_gain(b, a, na, nb)
    assert forward > 0.0
    if math.isfinite(forward) and math.isfinite(backward):
        assert forward * backward == pytest.approx(1.0, rel=1e-9)


def test_swap_gain_handles_coincident_locations() -> None:
    # A's neighbour sits exactly at B's location: the swap puts A on top of it.
    assert swap_gain(0.1, 0.5, [0.5], [0.3]) > 1e6
    assert swap_gain(0.5, 0.1, [0.5], [0.3]) < 1e-6


def test_swap_gain_does_not_overflow_for_high_degree() -> None:
    near = [0.5 + i * 1e-9 for i in range(200)]
    assert swap_gain(0.1, 0.5, near, []) == math.inf
    assert swap_gain(0.5, 0.1, near, []) == 0.0


def test_swap_step_only_permutes() -> None:
    topo = small_world(100, 8, random.Random(1))
    locations = list(topo.locations)
    rng = random.Random(2)
    swaps = sum(swap_step(locations, topo.neighbours, rng) for _ in range(2000))
    assert swaps > 0
    assert sorted(locations) == sorted(topo.locations)
    assert locations != list(topo.locations)


def test_swap_step_is_deterministic() -> None:
    topo = small_world(100, 8, random.Random(1))
    runs = []
    for _ in range(2):
        locations = list(topo.locations)
        rng = random.Random(9)
        results = [swap_step(locations, topo.neighbours, rng) for _ in range(500)]
        runs.append((results, locations))
    assert runs[0] == runs[1]


def test_swap_step_tiny_graphs() -> None:
    rng = random.Random(0)
    single = [0.3]
    assert not swap_step(single, [[]], rng)
    assert single == [0.3]
    # Two linked nodes: with the a-b link excluded nothing else matters; the ratio is 1.
    pair = [0.1, 0.6]
    assert swap_step(pair, [[1], [0]], rng)
    assert pair == [0.6, 0.1]


def test_swap_step_samples_the_metropolis_distribution() -> None:
    # With a symmetric proposal (a uniform random pair) and acceptance min(1, before/after),
    # the chain's stationary distribution gives each arrangement of locations a weight
    # proportional to 1 / (product of link lengths). Check the time a long run spends in each
    # class of arrangements against that, on a 4-node path over 4 evenly spaced locations.
    neighbours = [[1], [0, 2], [1, 3], [2]]
    spots = [0.1, 0.35, 0.6, 0.85]

    def product(locations: Sequence[float]) -> float:
        return math.prod(distance(locations[i], locations[i + 1]) for i in range(3))

    def label(locations: Sequence[float]) -> float:
        return round(product(locations), 6)

    weights: dict[float, float] = {}
    for perm in itertools.permutations(spots):
        weights[label(perm)] = weights.get(label(perm), 0.0) + 1 / product(perm)
    total_weight = sum(weights.values())
    expected = {key: weight / total_weight for key, weight in weights.items()}
    assert len(expected) >= 2  # more than one class, so the comparison says something

    locations = [0.1, 0.6, 0.35, 0.85]
    rng = random.Random(4)
    for _ in range(1000):  # burn-in
        swap_step(locations, neighbours, rng)
    seen: Counter[float] = Counter()
    steps = 60_000
    for _ in range(steps):
        swap_step(locations, neighbours, rng)
        seen[label(locations)] += 1
    for key, share in expected.items():
        assert seen[key] / steps == pytest.approx(share, abs=0.02), (key, seen, expected)


def _greedy_success(topo: Topology, rng: random.Random, trials: int) -> float:
    hits = 0
    for _ in range(trials):
        start = rng.randrange(len(topo))
        target = rng.random()
        path = greedy_route(topo, start, target, max_steps=len(topo))
        hits += path[-1] == closest_node(topo, target)
    return hits / trials


def _log_link_length(locations: list[float], topo: Topology) -> float:
    return sum(math.log(distance(locations[i], locations[j])) for i, j in topo.edges())


def test_swapping_restores_greedy_routing() -> None:
    # A small-world graph whose locations were shuffled routes badly: its links no longer
    # follow the keyspace. Swapping must pull linked nodes together again and make plain
    # greedy routing reach the closest node far more often. Measured at this seed: about
    # 0.04 before and 0.16 after 20,000 attempts (0.43 at degree 16 after 50,000).
    n = 500
    rng = random.Random(1)
    topo = small_world(n, 8, rng)
    locations = list(topo.locations)
    rng.shuffle(locations)

    before_success = _greedy_success(
        Topology(tuple(locations), topo.neighbours), random.Random(5), 500
    )
    before_length = _log_link_length(locations, topo)

    accepted = sum(swap_step(locations, topo.neighbours, rng) for _ in range(40 * n))

    after_success = _greedy_success(
        Topology(tuple(locations), topo.neighbours), random.Random(5), 500
    )
    after_length = _log_link_length(locations, topo)

    assert accepted > 0
    # Links got shorter (the product of link lengths is what the rule minimises).
    assert after_length < before_length - 0.5 * len(list(topo.edges())), (
        before_length,
        after_length,
    )
    assert after_success >= 2.5 * before_success, (before_success, after_success)
    assert after_success >= before_success + 0.06, (before_success, after_success)
