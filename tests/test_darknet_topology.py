"""Tests for keyspace.darknet: Sandberg's darknet model and moving its locations."""

from __future__ import annotations

import random

import pytest

from keyspace.darknet import Darknet, darknet, greedy_success, link_length_gmean, relocated
from keyspace.topology import Topology, closest_node, small_world


def test_the_links_are_the_small_worlds_and_the_locations_a_permutation_of_it() -> None:
    net = darknet(500, 16, random.Random(7))
    world = small_world(500, 16, random.Random(7))
    assert net.ideal == world
    assert net.topology.neighbours == world.neighbours
    assert sorted(net.topology.locations) == sorted(world.locations)
    # A permutation that moved almost every node, not the identity.
    moved = sum(a != b for a, b in zip(net.topology.locations, world.locations, strict=True))
    assert moved > 490


def test_the_same_seed_gives_the_same_darknet() -> None:
    assert darknet(300, 8, random.Random(3)) == darknet(300, 8, random.Random(3))
    assert darknet(300, 8, random.Random(3)) != darknet(300, 8, random.Random(4))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_darknets(n: int) -> None:
    net = darknet(n, 16, random.Random(0))
    assert len(net.topology) == n
    assert sorted(net.topology.locations) == sorted(net.ideal.locations)


def test_greedy_routing_works_on_the_ideal_locations_and_fails_on_the_starting_ones() -> None:
    # Measured at 2,000 nodes, degree 16, seeds 1 to 3: 100% on the ideal locations, 1.3% to
    # 2.4% on the shuffled ones (a greedy walk meets a local minimum after about 1.5 steps).
    net = darknet(2000, 16, random.Random(1))
    ideal, ideal_steps = greedy_success(net.ideal, 1000, random.Random(9))
    start, start_steps = greedy_success(net.topology, 1000, random.Random(9))
    assert ideal >= 99.0 and start <= 10.0
    assert start_steps < 2.5 < ideal_steps  # (a walk on the shuffled ring stops early)


def test_the_link_length_gmean_is_the_geometric_mean_of_the_links() -> None:
    line = Topology((0.0, 0.1, 0.5, 0.9), ((1,), (0, 2), (1,), ()))
    assert link_length_gmean(line) == pytest.approx((0.1 * 0.4) ** 0.5)
    assert link_length_gmean(Topology((0.2,), ((),))) == 0.0
    net = darknet(500, 8, random.Random(4))
    assert link_length_gmean(net.ideal) < link_length_gmean(net.topology) / 3


def test_relocated_keeps_the_links_and_takes_the_locations() -> None:
    net = darknet(50, 8, random.Random(2))
    locations = list(reversed(net.ideal.locations))
    moved = relocated(net.topology, locations)
    assert moved.locations == tuple(locations)
    assert moved.neighbours == net.topology.neighbours
    assert closest_node(moved, locations[17]) == 17  # the lookup index follows the move


def test_relocated_refuses_a_wrong_count_or_a_location_off_the_circle() -> None:
    net = darknet(10, 4, random.Random(2))
    with pytest.raises(ValueError, match="9 locations for a topology of 10 nodes"):
        relocated(net.topology, net.topology.locations[:9])
    with pytest.raises(ValueError, match="not a float in"):
        relocated(net.topology, [1.0, *net.topology.locations[1:]])


def test_a_darknet_refuses_other_links_or_other_locations() -> None:
    net = darknet(20, 8, random.Random(5))
    other = small_world(20, 8, random.Random(6))
    with pytest.raises(ValueError, match="different links"):
        Darknet(relocated(other, net.ideal.locations), net.ideal)
    with pytest.raises(ValueError, match="not a permutation"):
        Darknet(relocated(net.ideal, [0.5] * 20), net.ideal)
