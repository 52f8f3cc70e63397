"""Freenet location swapping: nodes trade locations until the graph routes greedily.

Theory of operation: in a darknet the links are fixed (they follow trust between people), so
the graph cannot be rewired into a small world; instead the *locations* move. Two nodes A and
B consider exchanging their locations. Let

    D(A at x, B at y) = product of distance(x, n) over A's neighbours n
                      * product of distance(y, m) over B's neighbours m.

Freenet (after Sandberg's Metropolis-Hastings formulation) swaps when the product after the
swap is no larger than before, and otherwise swaps with probability before / after. Minimising
the product of link lengths pulls neighbours' locations together, which over many swaps makes
the link lengths follow the 1/distance law that greedy routing needs (Kleinberg).

The a-b link itself is left out of both products: its length is |loc_a - loc_b| before and
after the swap alike, so it cannot change the decision, and counting it naively (with B's
location held fixed while A moves onto it) would make a distance of zero.

Invariants: :func:`swap_gain` is a positive ratio (or +inf), and gain(a, b) * gain of the
reverse swap == 1, which is what makes the chain satisfy detailed balance. :func:`swap_step`
only ever permutes the list of locations; the multiset of locations never changes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from keyspace.location import distance

# Distances are floored here before taking logarithms. Two nodes can share a location (two
# ids with equal leading bits, or a configured location), and a zero distance would make the
# product zero and the ratio undefined. 2**-64 is the resolution of a key location, so no
# meaningful distance is smaller; a floored distance still makes the ratio overwhelming,
# which is the right decision (moving a node onto its neighbour's exact location is as good
# as it gets).
MIN_DISTANCE = 2.0**-64

# exp() overflows a float a little above e**709; any ratio that large means "swap".
_MAX_LOG_RATIO = 700.0


def _log_length(location: float, others: Sequence[float]) -> float:
    """Sum of log distances from ``location`` to each of ``others`` (log of their product)."""
    log = math.log
    return math.fsum(log(max(distance(location, other), MIN_DISTANCE)) for other in others)


def swap_gain(
    loc_a: float,
    loc_b: float,
    neighbour_locs_a: Sequence[float],
    neighbour_locs_b: Sequence[float],
) -> float:
    """The Metropolis-Hastings ratio for swapping A's and B's locations: before / after.

    ``before`` is the product of A's link lengths (from ``loc_a``) and B's (from ``loc_b``);
    ``after`` is the same with the locations exchanged. A ratio of at least 1 means the swap
    shortens links overall and is always taken; a ratio ``r < 1`` is taken with probability
    ``r``. The neighbour lists must NOT contain the a-b link (leave B out of A's list and A out
    of B's): see the module docstring. Computed in log space so that high degrees and tiny
    distances neither underflow nor overflow; may return ``math.inf``.
    """
    before = _log_length(loc_a, neighbour_locs_a) + _log_length(loc_b, neighbour_locs_b)
    after = _log_length(loc_b, neighbour_locs_a) + _log_length(loc_a, neighbour_locs_b)
    log_ratio = before - after
    if log_ratio > _MAX_LOG_RATIO:
        return math.inf
    return math.exp(log_ratio)


def swap_step(
    locations: list[float], neighbours: Sequence[Sequence[int]], rng: random.Random
) -> bool:
    """Make one swap attempt between two distinct random nodes; True if they swapped.

    ``locations`` is changed in place (only ever permuted). The pair is drawn uniformly at
    random: Freenet finds its partner at the end of a random walk, which on a connected graph
    of small diameter reaches a close-to-uniform node; drawing uniformly is what that walk
    approximates, and keeps each step O(degree). The a-b link, if there is one, is left out of
    the gain as :func:`swap_gain` requires. Graphs with fewer than two nodes never swap.
    """
    n = len(locations)
    if n < 2:
        return False
    a = rng.randrange(n)
    b = rng.randrange(n - 1)
    if b >= a:
        b += 1
    neighbour_locs_a = [locations[x] for x in neighbours[a] if x != b]
    neighbour_locs_b = [locations[x] for x in neighbours[b] if x != a]
    gain = swap_gain(locations[a], locations[b], neighbour_locs_a, neighbour_locs_b)
    # Drawing the coin only when it is needed keeps the step cheap; the rng sequence is still
    # a pure function of the seed and the graph, so runs stay reproducible.
    if gain >= 1.0 or rng.random() < gain:
        locations[a], locations[b] = locations[b], locations[a]
        return True
    return False
