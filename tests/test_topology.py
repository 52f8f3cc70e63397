"""Tests for keyspace.topology: small-world generation, invariants, greedy routing."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keyspace.location import distance
from keyspace.topology import (
    DegreeStats,
    Nearness,
    Topology,
    _nearest_alike,
    closest_node,
    greedy_route,
    small_world,
)


def _assert_invariants(topo: Topology) -> None:
    n = len(topo.locations)
    assert len(topo.neighbours) == n
    for loc in topo.locations:
        assert 0.0 <= loc < 1.0
    for i, row in enumerate(topo.neighbours):
        assert list(row) == sorted(set(row)), f"row {i} not sorted/unique"
        assert i not in row
        for j in row:
            assert 0 <= j < n
            assert i in topo.neighbours[j], f"{i}->{j} not symmetric"


def _assert_ring(topo: Topology) -> None:
    n = len(topo.locations)
    order = sorted(range(n), key=lambda i: (topo.locations[i], i))
    for rank in range(n):
        a, b = order[rank], order[(rank + 1) % n]
        if a != b:
            assert b in topo.neighbours[a], f"ring link {a}-{b} missing"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 100])
@pytest.mark.parametrize("degree", [0, 1, 2, 3, 4, 8, 16])
def test_invariants_and_ring_for_small_graphs(n: int, degree: int) -> None:
    topo = small_world(n, degree, random.Random(n * 100 + degree))
    _assert_invariants(topo)
    _assert_ring(topo)


def test_tiny_graphs() -> None:
    assert small_world(1, 16, random.Random(0)).neighbours == ((),)
    two = small_world(2, 16, random.Random(0))
    assert two.neighbours == ((1,), (0,))
    assert list(two.edges()) == [(0, 1)]
    three = small_world(3, 16, random.Random(0))
    assert list(three.edges()) == [(0, 1), (0, 2), (1, 2)]


def test_degree_below_two_gives_a_plain_ring() -> None:
    for degree in (0, 1, 2, 3):
        topo = small_world(50, degree, random.Random(degree))
        assert topo.degree_stats() == DegreeStats(2, 2, 2.0)


@pytest.mark.parametrize(("n", "degree"), [(0, 4), (-5, 4), (10, -1)])
def test_rejects_bad_arguments(n: int, degree: int) -> None:
    with pytest.raises(ValueError):
        small_world(n, degree, random.Random(0))


def test_same_seed_same_topology_different_seed_different() -> None:
    a = small_world(500, 10, random.Random(42))
    b = small_world(500, 10, random.Random(42))
    c = small_world(500, 10, random.Random(43))
    assert a == b
    assert a.neighbours == b.neighbours and a.locations == b.locations
    assert a != c


@pytest.mark.parametrize("degree", [4, 8, 10, 16])
def test_mean_degree_is_about_right(degree: int) -> None:
    topo = small_world(2000, degree, random.Random(degree))
    _assert_invariants(topo)
    stats = topo.degree_stats()
    # Every node draws (degree - 2) // 2 long links; a few redraws fail, so slightly below.
    assert degree - 0.3 <= stats.mean <= degree, stats
    assert stats.min >= 2


def test_long_links_follow_the_harmonic_law() -> None:
    # With density 1/d on [1/n, 1/2], half the long links are shorter than the geometric mean
    # of the bounds. A uniform choice of partner would put the median near 1/4 instead.
    n = 4000
    topo = small_world(n, 12, random.Random(5))
    order = sorted(range(n), key=lambda i: topo.locations[i])
    ring = {frozenset((order[r], order[(r + 1) % n])) for r in range(n)}
    lengths = [
        distance(topo.locations[i], topo.locations[j])
        for i, j in topo.edges()
        if frozenset((i, j)) not in ring
    ]
    assert len(lengths) > 4 * n
    pivot = math.sqrt((1 / n) * 0.5)
    below = sum(length < pivot for length in lengths) / len(lengths)
    # Slightly under half: the shortest draws often land on the node itself or a ring
    # neighbour and are redrawn, which thins the short end a little (measured 0.449).
    assert 0.42 <= below <= 0.55, below
    # And each decade of length holds about the same share of links: density ~ 1/d.
    decade_low = sum(0.001 <= x < 0.01 for x in lengths) / len(lengths)
    decade_high = sum(0.01 <= x < 0.1 for x in lengths) / len(lengths)
    assert decade_low == pytest.approx(decade_high, rel=0.1)


def test_edges_once_each_in_order() -> None:
    topo = small_world(300, 8, random.Random(1))
    edges = list(topo.edges())
    assert all(i < j for i, j in edges)
    assert edges == sorted(set(edges))
    assert len(edges) * 2 == sum(len(row) for row in topo.neighbours)


def test_degree_stats() -> None:
    topo = Topology((0.1, 0.2, 0.3, 0.4), ((1, 2, 3), (0,), (0,), (0,)))
    assert topo.degree_stats() == DegreeStats(1, 3, 1.5)
    low, high, mean = topo.degree_stats()
    assert (low, high, mean) == (1, 3, 1.5)
    assert Topology((), ()).degree_stats() == DegreeStats(0, 0, 0.0)


@pytest.mark.parametrize(
    ("locations", "neighbours", "complaint"),
    [
        ((0.1, 0.2), ((1,),), "2 locations but 1"),
        ((0.1, 0.2), ((1,), ()), "not symmetric"),
        ((0.1, 0.2), ((0, 1), (0,)), "itself"),
        ((0.1, 0.2, 0.3), ((2, 1), (0,), (0,)), "strictly increasing"),
        ((0.1, 0.2), ((1, 1), (0, 0)), "strictly increasing"),
        ((0.1, 0.2), ((2,), ()), "outside"),
        ((0.1, 0.2), ((-1,), ()), "outside"),
        ((0.1, 1.0), ((), ()), "location"),
        ((0.1, 0), ((), ()), "location"),
        ((0.1, math.nan), ((), ()), "location"),
    ],
)
def test_constructor_rejects_broken_invariants(
    locations: tuple[float, ...], neighbours: tuple[tuple[int, ...], ...], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        Topology(locations, neighbours)


unit = st.floats(0.0, 1.0, exclude_max=True)


@given(st.lists(unit | st.sampled_from([0.0, 0.25, 0.5, 0.75]), min_size=1, max_size=40), unit)
def test_closest_node_matches_brute_force(locations: list[float], target: float) -> None:
    topo = Topology(tuple(locations), tuple(() for _ in locations))
    expected = min(range(len(locations)), key=lambda i: (distance(target, locations[i]), i))
    assert closest_node(topo, target) == expected


def test_closest_node_ties_go_to_the_lower_index() -> None:
    # Node 2 and node 0 are both 0.25 from 0.5 (one each side); node 1 duplicates node 2.
    topo = Topology((0.25, 0.75, 0.75), ((), (), ()))
    assert closest_node(topo, 0.5) == 0
    assert closest_node(topo, 0.0) == 0
    assert closest_node(topo, 0.8) == 1
    with pytest.raises(ValueError):
        closest_node(Topology((), ()), 0.5)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 300), st.integers(0, 12), st.integers(0, 2**32), unit)
def test_greedy_path_properties(n: int, degree: int, seed: int, target: float) -> None:
    topo = small_world(n, degree, random.Random(seed))
    start = seed % n
    path = greedy_route(topo, start, target, max_steps=n)
    assert path[0] == start
    for a, b in itertools.pairwise(path):
        assert b in topo.neighbours[a]
        assert distance(target, topo.locations[b]) < distance(target, topo.locations[a])
    # With the ring always present, greedy routing never gets stuck short of the closest node.
    assert path[-1] == closest_node(topo, target)


def test_greedy_respects_max_steps_and_picks_the_closest_neighbour() -> None:
    # A line 0 - 1 - 2 - 3 with a shortcut 0 - 3; target near node 3.
    topo = Topology((0.1, 0.2, 0.3, 0.4), ((1, 3), (0, 2), (1, 3), (0, 2)))
    assert greedy_route(topo, 0, 0.39, max_steps=10) == [0, 3]
    assert greedy_route(topo, 1, 0.39, max_steps=0) == [1]
    assert greedy_route(topo, 1, 0.39, max_steps=1) == [1, 2]
    # Node 1 at a local minimum (its neighbours are both farther): the path stops there.
    assert greedy_route(topo, 1, 0.2, max_steps=10) == [1]
    with pytest.raises(ValueError):
        greedy_route(topo, 4, 0.5, max_steps=1)


def test_greedy_tie_goes_to_the_lower_index() -> None:
    # Seen from target 0.9, locations 0.8 and 0.0 are at exactly the same float distance.
    assert distance(0.9, 0.8) == distance(0.9, 0.0)
    tie = Topology((0.5, 0.8, 0.0), ((1, 2), (0,), (0,)))
    assert greedy_route(tie, 0, 0.9, 5) == [0, 1]
    tie_swapped = Topology((0.5, 0.0, 0.8), ((1, 2), (0,), (0,)))
    assert greedy_route(tie_swapped, 0, 0.9, 5) == [0, 1]
    assert closest_node(tie, 0.9) == 1
    assert closest_node(tie_swapped, 0.9) == 1


def test_greedy_routing_on_a_small_world() -> None:
    n = 2000
    topo = small_world(n, 16, random.Random(2000))
    rng = random.Random(7)
    trials = 1000
    successes = 0
    steps: list[int] = []
    for _ in range(trials):
        start = rng.randrange(n)
        target = rng.random()
        path = greedy_route(topo, start, target, max_steps=n)
        successes += path[-1] == closest_node(topo, target)
        steps.append(len(path) - 1)
    success = successes / trials
    mean_steps = statistics.mean(steps)
    print(f"greedy n={n} degree=16: success {success:.3f}, mean steps {mean_steps:.2f}")
    assert success >= 0.99, f"success {success}"
    # Kleinberg: O(log^2 n / degree) steps; a ring alone would take ~n/4 = 500.
    assert mean_steps < 8, f"mean steps {mean_steps}"
    assert max(steps) < 25, f"max steps {max(steps)}"


def test_long_links_make_routes_short() -> None:
    # The same routing on a plain ring takes about n/4 steps; long links are what help.
    n = 1000
    rng = random.Random(3)
    targets = [(rng.randrange(n), rng.random()) for _ in range(200)]
    ring = small_world(n, 2, random.Random(1))
    world = small_world(n, 12, random.Random(1))

    def mean_steps(topo: Topology) -> float:
        return statistics.mean(len(greedy_route(topo, s, t, n)) - 1 for s, t in targets)

    assert mean_steps(ring) > 150
    assert mean_steps(world) < 10


def _plane(n: int, seed: int) -> tuple[list[tuple[float, float]], Nearness]:
    """Seeded points in the unit square, and the distance between two nodes' points."""
    rng = random.Random(seed)
    points = [(rng.random(), rng.random()) for _ in range(n)]

    def apart(a: int, b: int) -> float:
        return math.dist(points[a], points[b])

    return points, apart


def _long_links(topo: Topology) -> list[tuple[int, int]]:
    n = len(topo)
    order = sorted(range(n), key=lambda i: topo.locations[i])
    ring = {frozenset((order[r], order[(r + 1) % n])) for r in range(n)}
    return [(i, j) for i, j in topo.edges() if frozenset((i, j)) not in ring]


def test_proximity_keeps_the_invariants_the_ring_and_the_draws() -> None:
    _, apart = _plane(500, 1)
    plain = small_world(500, 16, random.Random(9))
    near = small_world(500, 16, random.Random(9), apart, 16)
    _assert_invariants(near)
    _assert_ring(near)
    assert near.locations == plain.locations  # the same draws of the generator
    assert near != plain
    assert small_world(500, 16, random.Random(9), apart, 16) == near  # deterministic
    # One choice is the plain graph, whatever the nearness.
    assert small_world(500, 16, random.Random(9), apart, 1) == plain
    with pytest.raises(ValueError, match="choices"):
        small_world(500, 16, random.Random(9), apart, 0)


def test_proximity_makes_long_links_nearer_and_keeps_the_harmonic_law() -> None:
    n = 4000
    _, apart = _plane(n, 2)
    plain = small_world(n, 12, random.Random(5))
    near = small_world(n, 12, random.Random(5), apart, 16)

    def mean_reach(topo: Topology) -> float:
        return statistics.mean(apart(i, j) for i, j in _long_links(topo))

    # Random pairs in the unit square are 0.52 apart on average; the nearest of 16 alike
    # nodes is far closer (measured 0.52 and 0.22 for these seeds).
    assert mean_reach(plain) > 0.45
    assert mean_reach(near) < 0.6 * mean_reach(plain)
    lengths = [distance(near.locations[i], near.locations[j]) for i, j in _long_links(near)]
    decade_low = sum(0.001 <= x < 0.01 for x in lengths) / len(lengths)
    decade_high = sum(0.01 <= x < 0.1 for x in lengths) / len(lengths)
    assert decade_low == pytest.approx(decade_high, rel=0.1)


def test_a_long_link_goes_to_the_nearest_alike_node_within_reach() -> None:
    # Five nodes around a drawn point at 0.5, one far away in the keyspace. Node 0 links to
    # the nearest by cost among those within 0.06 of the point, not to node 3, the closest
    # to the point, and never to one beyond reach however near.
    locations = [0.0, 0.40, 0.46, 0.50, 0.55, 0.62]
    order = list(range(6))
    cost = {1: 0.1, 2: 0.5, 3: 0.9, 4: 0.3, 5: 0.0}

    def nearness(a: int, b: int) -> float:
        return cost[b]

    def pick(choices: int, mine: set[int]) -> int:
        return _nearest_alike(0, 3, 0.5, 0.06, 3, 2, order, locations, choices, nearness, mine)

    assert pick(16, set()) == 4  # 2, 3 and 4 are within reach; 1 and 5 are not
    assert pick(16, {4}) == 2  # linked already: the next nearest
    assert pick(2, set()) == 2  # 3, then the first of the walk out from the point: 2
    assert pick(1, set()) == 3
    assert pick(2, {3}) == 4  # a linked node is no candidate: 2 and 4 are the two


def test_equal_nearness_favours_no_node() -> None:
    # Ties go to the candidate closest to the drawn point, as without proximity, not to the
    # lowest index, which would gather the links of a network with equal latencies on its
    # first nodes.
    n = 4000
    plain = small_world(n, 16, random.Random(4))
    flat = small_world(n, 16, random.Random(4), lambda a, b: 1.0, 16)
    low = statistics.mean(len(row) for row in flat.neighbours[: n // 10])
    high = statistics.mean(len(row) for row in flat.neighbours[-n // 10 :])
    assert low == pytest.approx(high, rel=0.1)
    assert max(map(len, flat.neighbours)) <= max(map(len, plain.neighbours)) + 8


def test_greedy_routing_on_a_proximity_small_world_is_as_short() -> None:
    n = 2000
    _, apart = _plane(n, 3)
    rng = random.Random(7)
    targets = [(rng.randrange(n), rng.random()) for _ in range(500)]
    for topo in (
        small_world(n, 16, random.Random(2000)),
        small_world(n, 16, random.Random(2000), apart, 16),
    ):
        paths = [greedy_route(topo, s, t, n) for s, t in targets]
        assert all(p[-1] == closest_node(topo, t) for p, (_, t) in zip(paths, targets, strict=True))
        assert statistics.mean(len(p) - 1 for p in paths) < 8
