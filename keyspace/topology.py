"""Seeded Kleinberg small-world graphs on the keyspace circle, and greedy routing over them.

Theory of operation: Kleinberg showed that greedy routing finds short paths (O(log^2 n) steps)
exactly when long-range links are drawn with probability proportional to 1/distance, the
"harmonic" distribution; any other exponent makes greedy paths polynomially long. Freenet's
location swapping converges towards this shape, and Sandberg measured greedy routing on such
graphs at 99.6% success in 6.04 mean steps at 64,000 nodes. This module builds such graphs for
testnets and the simulator:

* every node gets a uniformly random location;
* every node is linked to its predecessor and successor in location order (the ring). The ring
  makes greedy routing always reach the globally closest node: a node that is not the closest
  to a target always has a ring neighbour that is strictly closer;
* every node then draws ``(degree - 2) // 2`` long-range links whose length follows the density
  proportional to 1/d on [1/n, 1/2], so the mean degree is about ``degree``.

Invariants of a :class:`Topology` (checked on construction): neighbour lists are sorted, hold
no duplicates and no self loops, and are symmetric (j in neighbours[i] iff i in neighbours[j]);
every location is in [0, 1). The same seed always gives the identical topology: all randomness
comes from the ``random.Random`` handed in, and no step depends on set or dict iteration order.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple

from keyspace.location import distance

# How many times each wanted long link may be redrawn when the draw lands on the node itself or
# on a node it is already linked to. Such misses are rare for large n (a fresh draw usually
# lands elsewhere), but on tiny graphs every node may already be linked to everyone, so the
# bound is what keeps generation finite; 8 redraws per link lose well under 1% of links at
# realistic sizes.
LONG_LINK_RETRIES = 8

# With proximity neighbour selection, a long link may end at a node no farther than this
# fraction of its drawn length from the drawn point (``_nearest_alike``).
ALIKE = 0.25

# The cost of a link between two nodes (by index), such as its latency: lower is nearer.
Nearness = Callable[[int, int], float]


class DegreeStats(NamedTuple):
    """Summary of a topology's node degrees (number of neighbours per node)."""

    min: int
    max: int
    mean: float


@dataclass(frozen=True, slots=True)
class Topology:
    """An undirected graph of nodes with locations; node ``i`` is at ``locations[i]``.

    Construct it with :func:`small_world`, or directly from explicit locations and neighbour
    lists (validated, ValueError on any broken invariant). Lookups by location
    (:func:`closest_node`) use an index sorted by location that is built once here.
    """

    locations: tuple[float, ...]
    neighbours: tuple[tuple[int, ...], ...]
    # Node indices sorted by (location, index), and the matching locations, for bisection.
    _order: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _sorted_locations: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _validate(self.locations, self.neighbours)
        self._build_index(_location_order(self.locations))

    @classmethod
    def _trusted(
        cls,
        locations: tuple[float, ...],
        neighbours: tuple[tuple[int, ...], ...],
        order: Sequence[int],
    ) -> Topology:
        """Build without validation, for generators that establish the invariants themselves.

        Validating a 100,000-node graph costs about as much as a third of generating it; the
        public constructor always validates.
        """
        self = object.__new__(cls)
        object.__setattr__(self, "locations", locations)
        object.__setattr__(self, "neighbours", neighbours)
        self._build_index(order)
        return self

    def _build_index(self, order: Sequence[int]) -> None:
        object.__setattr__(self, "_order", tuple(order))
        object.__setattr__(self, "_sorted_locations", tuple(self.locations[i] for i in order))

    def __len__(self) -> int:
        return len(self.locations)

    def edges(self) -> Iterator[tuple[int, int]]:
        """Each undirected edge once, as ``(i, j)`` with ``i < j``, in ascending order."""
        for i, row in enumerate(self.neighbours):
            for j in row:
                if j > i:
                    yield (i, j)

    def degree_stats(self) -> DegreeStats:
        """Minimum, maximum and mean degree; all zero for a graph without nodes."""
        degrees = [len(row) for row in self.neighbours]
        if not degrees:
            return DegreeStats(0, 0, 0.0)
        return DegreeStats(min(degrees), max(degrees), sum(degrees) / len(degrees))


def _validate(locations: Sequence[float], neighbours: Sequence[Sequence[int]]) -> None:
    # Written to run in C-level loops where it can: a 100,000-node graph has 1.6 million
    # neighbour entries and validation should cost a fraction of building it.
    n = len(locations)
    if len(neighbours) != n:
        raise ValueError(f"{n} locations but {len(neighbours)} neighbour lists")
    for i, loc in enumerate(locations):
        if not isinstance(loc, float) or not 0.0 <= loc < 1.0:
            raise ValueError(f"node {i} has location {loc!r}, not a float in [0, 1)")
    for i, row in enumerate(neighbours):
        if not row:
            continue
        if row[0] < 0 or row[-1] >= n:
            raise ValueError(f"node {i} lists a neighbour outside 0..{n - 1}: {row}")
        if list(row) != sorted(set(row)):
            raise ValueError(f"neighbours of node {i} are not strictly increasing: {row}")
        if i in row:
            raise ValueError(f"node {i} is linked to itself")
    # Symmetry: transpose the adjacency lists. Visiting i in ascending order appends to each
    # transposed row in ascending order, so a symmetric graph is its own transpose exactly.
    transposed: list[list[int]] = [[] for _ in range(n)]
    for i, row in enumerate(neighbours):
        for j in row:
            transposed[j].append(i)
    for i, row in enumerate(neighbours):
        if list(row) != transposed[i]:
            missing = sorted(set(row).symmetric_difference(transposed[i]))
            raise ValueError(
                f"links of node {i} are not symmetric: {i} <-> {missing} is listed on one side only"
            )


def _location_order(locations: Sequence[float]) -> list[int]:
    """Node indices sorted by location; a stable sort keeps equal locations in index order,
    which is the tie-break used everywhere."""
    return sorted(range(len(locations)), key=locations.__getitem__)


def small_world(
    n: int,
    degree: int,
    rng: random.Random,
    nearness: Nearness | None = None,
    choices: int = 1,
) -> Topology:
    """A Kleinberg small-world graph of ``n`` nodes with mean degree about ``degree``.

    Locations are uniform draws from ``rng``. The ring links are always present, even when
    ``degree`` is below 2, because greedy routing relies on them; ``degree`` only sets how many
    long links are added on top: ``(degree - 2) // 2`` drawn per node, each adding 1 to both
    ends, so an odd ``degree`` rounds down to the even number below. A long link that cannot
    be placed within a few redraws (it keeps landing on the node itself or on an existing
    neighbour) is dropped, so on tiny graphs the mean degree falls short of ``degree``. One
    node has no edges; two nodes have one; three a triangle.

    Proximity neighbour selection: given ``nearness`` (the cost of a link between two nodes,
    such as its latency) and ``choices`` above 1, each long link goes to the nearest of up to
    ``choices`` nodes alike in keyspace usefulness, instead of the one node closest to the
    drawn point (``_nearest_alike``). Pastry's proximity neighbour selection does the same
    among the nodes that fit a routing-table slot. The locations are the same either way;
    the links are not, and neither is the state ``rng`` is left in (a proximity link redraws
    less often).

    Deterministic: the same seed (rng state) gives an identical Topology.
    Raises ValueError if ``n < 1``, ``degree < 0`` or ``choices < 1``.
    """
    if n < 1:
        raise ValueError(f"a topology needs at least one node, got n={n}")
    if degree < 0:
        raise ValueError(f"degree must be >= 0, got {degree}")
    if choices < 1:
        raise ValueError(f"choices must be >= 1, got {choices}")
    if choices == 1:
        nearness = None

    locations = [rng.random() for _ in range(n)]
    order = _location_order(locations)
    sorted_locations = [locations[i] for i in order]
    links: list[set[int]] = [set() for _ in range(n)]

    if n >= 2:
        for rank in range(n):
            a = order[rank]
            b = order[(rank + 1) % n]
            links[a].add(b)
            links[b].add(a)

    wanted = max(0, (degree - 2) // 2)
    if wanted and n >= 2:
        _add_long_links(locations, order, sorted_locations, links, wanted, rng, nearness, choices)

    # The ring and _add_long_links never link a node to itself and always add both
    # directions, and sorting each set gives strictly increasing rows: the Topology invariants
    # hold by construction (tests check them), so the validation pass is skipped.
    return Topology._trusted(tuple(locations), tuple(map(tuple, map(sorted, links))), order)


def _add_long_links(
    locations: list[float],
    order: list[int],
    sorted_locations: list[float],
    links: list[set[int]],
    wanted: int,
    rng: random.Random,
    nearness: Nearness | None,
    choices: int,
) -> None:
    """Give every node ``wanted`` harmonic long links (fewer if redraws run out), each to
    the nearest of ``choices`` alike nodes when ``nearness`` is given."""
    n = len(locations)
    # Harmonic lengths between the typical gap between nodes (1/n) and the farthest point on
    # the circle (1/2). Inverse CDF of density 1/d on [dmin, dmax]: d = dmin * (dmax/dmin)**u.
    dmin = 1.0 / n
    log_ratio = math.log(0.5 / dmin)
    # The draw loop below runs n * wanted times (700,000 for n=100,000 and degree 16), so it is
    # written for speed:
    # * the nearest-node lookup of _nearest is inlined without its tie scan: exact distance
    #   ties between random floats do not occur in practice, and if one did, the lower-index
    #   rule still settles the two bracketing candidates deterministically;
    # * a bucket index narrows each bisection to the few nodes in the point's 1/n-wide bucket
    #   (about a sixth of the running time saved at n=100,000). The bucket of x is
    #   int(x * n), monotone in x, so nodes in lower buckets lie strictly below the point and
    #   nodes in higher buckets strictly above it: the narrowed bisection gives the same rank.
    last = n - 1
    bucket_starts = [0] * (n + 1)
    for loc in sorted_locations:
        bucket_starts[min(int(loc * n), last) + 1] += 1
    bucket_starts = list(accumulate(bucket_starts))
    exp = math.exp
    draw = rng.random
    budget = wanted * (1 + LONG_LINK_RETRIES)
    for i in range(n):
        here = locations[i]
        mine = links[i]
        made = 0
        for _ in range(budget):
            # One uniform draw gives both the direction (which half it falls in) and the
            # length (its position within that half, rescaled to [0, 1)).
            u = draw()
            if u < 0.5:
                length = dmin * exp(2.0 * u * log_ratio)
                point = here + length
                if point >= 1.0:
                    point -= 1.0
            else:
                length = dmin * exp((2.0 * u - 1.0) * log_ratio)
                point = here - length
                if point < 0.0:
                    # May round to exactly 1.0; the bisection below wraps that to rank 0.
                    point += 1.0
            bucket = min(int(point * n), last)
            rank = bisect_left(
                sorted_locations, point, bucket_starts[bucket], bucket_starts[bucket + 1]
            )
            above = rank if rank <= last else 0
            below = rank - 1 if rank > 0 else last
            d_above = abs(point - sorted_locations[above])
            if d_above > 0.5:
                d_above = 1.0 - d_above
            d_below = abs(point - sorted_locations[below])
            if d_below > 0.5:
                d_below = 1.0 - d_below
            if d_above < d_below:
                j = order[above]
            elif d_below < d_above:
                j = order[below]
            else:
                j = min(order[above], order[below])
            if nearness is not None:
                j = _nearest_alike(
                    i,
                    j,
                    point,
                    length * ALIKE,
                    above,
                    below,
                    order,
                    sorted_locations,
                    choices,
                    nearness,
                    mine,
                )
            if j == i or j in mine:
                continue
            mine.add(j)
            links[j].add(i)
            made += 1
            if made == wanted:
                break


def _nearest_alike(
    i: int,
    j: int,
    point: float,
    reach: float,
    above: int,
    below: int,
    order: Sequence[int],
    sorted_locations: Sequence[float],
    choices: int,
    nearness: Nearness,
    mine: set[int],
) -> int:
    """The node ``i`` links to for a long link drawn at ``point``: the nearest to ``i`` by
    ``nearness`` among up to ``choices`` candidates, ``j`` (the node closest to ``point``)
    and then the nodes closest to ``point`` in location order, those within ``reach`` of
    it; ties go to the earlier candidate, so a constant nearness gives ``j`` as without
    proximity. Neither ``i`` nor a node it is linked to is a candidate; ``j`` is returned
    when there is none (the caller then redraws).

    Rule: a long link is useful to greedy routing for its length's scale, not its exact
    length, so a node near the drawn point serves alike. The candidates lie within a
    fraction (``ALIKE``) of the drawn length from it, and within about ``choices / 2``
    nodes of it, so the harmonic density (uniform in log length) holds but for a blur of
    that much, and Kleinberg's condition for short greedy paths with it. ``above`` and
    ``below`` are the ranks bracketing ``point`` in location order.
    """
    n = len(order)
    best = j
    best_cost = math.inf
    taken = 0
    if j != i and j not in mine:
        best_cost = nearness(i, j)
        taken = 1
    # Locations are sorted, so each side's gap to ``point`` grows as the walk goes out:
    # once neither side's next slot is within reach, none further is. In a small graph the
    # walk may wrap round to a slot it had: it then counts twice, as a smaller ``choices``.
    for step in range(choices):
        within = False
        for slot in ((above + step) % n, (below - step) % n):
            gap = abs(point - sorted_locations[slot])
            if gap > 0.5:
                gap = 1.0 - gap
            if gap > reach:
                continue
            within = True
            node = order[slot]
            if node in (j, i) or node in mine:
                continue
            if taken >= choices:
                return best
            taken += 1
            cost = nearness(i, node)
            if cost < best_cost:
                best, best_cost = node, cost
        if not within:
            break
    return best


def _nearest(order: Sequence[int], sorted_locations: Sequence[float], point: float) -> int:
    """Index of the node closest to ``point``, ties by lower index; needs at least one node.

    The closest nodes on a circle sit at the two ends of the bracket around the point in
    sorted order (wrapping round at the ends), so one bisection finds the best distance. Nodes
    at exactly that distance form a run on each side of the bracket (duplicate locations, or a
    node mirrored across the point); scanning those runs gives the lowest index among them.
    """
    n = len(order)
    rank = bisect_left(sorted_locations, point)
    best_distance = min(
        distance(point, sorted_locations[rank % n]),
        distance(point, sorted_locations[(rank - 1) % n]),
    )
    best = n
    # Walk up from the bracket's upper end, then down from its lower end, while nodes stay at
    # the best distance; each walk is bounded by n so a graph of identical locations ends.
    for start, step in ((rank, 1), (rank - 1, -1)):
        position = start
        for _ in range(n):
            slot = position % n
            if distance(point, sorted_locations[slot]) != best_distance:
                break
            best = min(best, order[slot])
            position += step
    return best


def closest_node(topology: Topology, target: float) -> int:
    """The node globally closest to ``target``, ties broken by lower index.

    This is where an ideal router would deliver; :func:`greedy_route` succeeds when it ends
    here. O(log n) thanks to the topology's sorted index. Raises ValueError for a topology
    without nodes.
    """
    if not topology.locations:
        raise ValueError("an empty topology has no closest node")
    return _nearest(topology._order, topology._sorted_locations, target)


def greedy_route(topology: Topology, start: int, target: float, max_steps: int) -> list[int]:
    """The path of plain greedy routing from ``start`` toward ``target``, starting with ``start``.

    Each step moves to the neighbour closest to ``target`` (ties by lower index), but only if it
    is strictly closer than the current node; otherwise the current node is a local minimum and
    the path ends there. At most ``max_steps`` steps are taken, so the path has at most
    ``max_steps + 1`` nodes. There is no backtracking: this is the baseline the overlay's real
    routing improves on, and the quantity Sandberg's small-world results measure.
    """
    if not 0 <= start < len(topology.locations):
        raise ValueError(f"start node {start} is not in a topology of {len(topology)} nodes")
    locations = topology.locations
    neighbours = topology.neighbours
    path = [start]
    current = start
    current_distance = distance(target, locations[start])
    for _ in range(max_steps):
        best = -1
        best_distance = current_distance
        # Neighbour rows are sorted by index, so a strict '<' keeps the lowest index on ties.
        for j in neighbours[current]:
            d = distance(target, locations[j])
            if d < best_distance:
                best = j
                best_distance = d
        if best < 0:
            break
        path.append(best)
        current = best
        current_distance = best_distance
    return path
