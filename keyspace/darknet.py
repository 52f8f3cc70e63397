"""Darknet graphs: a trust graph that routes greedily only once its locations are right.

Theory of operation: in a darknet, nodes link only to people they trust, so the links are
fixed and cannot be rewired into a small world; only the locations can move, by swapping
(``keyspace.swapping``). Sandberg ("Distributed routing in small-world networks", ALENEX 2006)
models such a graph as a Kleinberg small world over positions nobody knows: the people's
places in the social world. Greedy routing over those hidden positions works; over locations
assigned without knowledge of them it does not, and swapping is meant to recover positions
that route as well as the hidden ones.

:func:`darknet` builds that model. The trust graph is :func:`keyspace.topology.small_world`
with its own locations as the hidden (ideal) positions; the nodes start at a uniformly random
permutation of those same positions. A permutation rather than fresh uniform draws, because
swapping only ever permutes locations: the ideal arrangement is then one the swaps can reach,
and "after swapping" and "ideal" are two arrangements of the same multiset of locations, so
any difference between them is the arrangement's alone.

Invariants of a :class:`Darknet` (checked on construction): both topologies have the same
neighbour lists, and the starting locations are a permutation of the ideal ones. The same rng
state always gives the identical darknet.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from keyspace.location import distance
from keyspace.swapping import MIN_DISTANCE
from keyspace.topology import Topology, closest_node, greedy_route, small_world


@dataclass(frozen=True, slots=True)
class Darknet:
    """A trust graph at its starting locations (``topology``) and at its hidden positions
    (``ideal``): node ``i`` starts at ``topology.locations[i]`` and ideally sits at
    ``ideal.locations[i]``; the links are the same in both."""

    topology: Topology
    ideal: Topology

    def __post_init__(self) -> None:
        if self.topology.neighbours != self.ideal.neighbours:
            raise ValueError("a darknet's starting and ideal topologies have different links")
        if sorted(self.topology.locations) != sorted(self.ideal.locations):
            raise ValueError(
                "a darknet's starting locations are not a permutation of its ideal ones"
            )


def darknet(n: int, degree: int, rng: random.Random) -> Darknet:
    """Sandberg's darknet of ``n`` nodes with mean degree about ``degree``: a Kleinberg small
    world (``small_world(n, degree, rng)``, no proximity selection: trust does not follow
    latency) whose nodes start at a random permutation of its locations, drawn from ``rng``
    after the graph. Raises ValueError as ``small_world`` does."""
    ideal = small_world(n, degree, rng)
    start = list(ideal.locations)
    rng.shuffle(start)
    return Darknet(relocated(ideal, start), ideal)


def relocated(topology: Topology, locations: Sequence[float]) -> Topology:
    """The same links as ``topology``, with node ``i`` at ``locations[i]``: a darknet after
    its nodes have swapped. Validated as any Topology is (ValueError on a location outside
    [0, 1)); raises ValueError if the number of locations is not the number of nodes."""
    if len(locations) != len(topology):
        raise ValueError(f"{len(locations)} locations for a topology of {len(topology)} nodes")
    return Topology(tuple(locations), topology.neighbours)


def link_length_gmean(topology: Topology) -> float:
    """The geometric mean of the links' lengths: the quantity swapping minimises (the
    product of link lengths), per link. 0 for a graph without links."""
    locations = topology.locations
    lengths = [distance(locations[i], locations[j]) for i, j in topology.edges()]
    if not lengths:
        return 0.0
    # Two nodes may share a location; a zero length is floored as swapping floors it.
    return math.exp(math.fsum(math.log(max(d, MIN_DISTANCE)) for d in lengths) / len(lengths))


def greedy_success(topology: Topology, samples: int, rng: random.Random) -> tuple[float, float]:
    """Plain greedy routing (Sandberg's measure) from ``samples`` random nodes to random
    targets: the percentage that reach the globally closest node, and the mean steps.
    (100.0, 0.0) for no samples or an empty topology."""
    n = len(topology)
    if samples < 1 or n == 0:
        return 100.0, 0.0
    hits = steps = 0
    for _ in range(samples):
        start, target = rng.randrange(n), rng.random()
        path = greedy_route(topology, start, target, max_steps=10 * n)
        steps += len(path) - 1
        hits += path[-1] == closest_node(topology, target)
    return 100.0 * hits / samples, steps / samples
