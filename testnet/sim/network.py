"""The simulated network: who is linked to whom, how long a message takes, what goes wrong.

Latency comes from geography: every node gets a seeded point in the unit square and a link's
one-way latency is ``base + spread * euclidean distance / sqrt(2)``, so the direct latency of
any pair (which the relative delay penalty needs) is defined, and the triangle inequality
roughly holds as it does on the Internet. The simulator draws its graph's long links with
the same latency (``SimConfig.proximity``: the nearest of 16 nodes alike in keyspace), as
nodes that measure their peers' round trips would choose them. Links are FIFO, like the TCP
links of the real runtime: with jitter on, a message never overtakes an earlier one on the
same link.

Faults are knobs: ``drop`` and ``duplicate`` probabilities per message and ``jitter`` (extra
uniform delay). All draws come from the network's own seeded ``random.Random``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NetworkModel:
    base_latency: float = 0.005  # 5 ms: a nearby host
    latency_spread: float = 0.095  # up to 100 ms across the whole square
    drop: float = 0.0  # probability a message is lost
    duplicate: float = 0.0  # probability a message is delivered twice
    jitter: float = 0.0  # extra delay, uniform in [0, jitter] seconds

    def __post_init__(self) -> None:
        for name in ("drop", "duplicate"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value}")
        if self.base_latency < 0 or self.latency_spread < 0 or self.jitter < 0:
            raise ValueError("latencies and jitter must not be negative")


class Network:
    """Latencies and fault draws for ``n`` nodes."""

    def __init__(self, n: int, model: NetworkModel, rng: random.Random) -> None:
        self.model = model
        self._rng = rng
        self._points = [(rng.random(), rng.random()) for _ in range(n)]
        # FIFO bookkeeping: the last arrival time on each link. Only jitter can make a
        # frame overtake an earlier one: without it a link's latency is fixed and frames
        # arrive in the order they were sent. So nothing is kept (16 entries a node, at a
        # million nodes) until a model with jitter is first used; from then on it is kept
        # in calm weather too, or a frame sent after a jittery spell ends could overtake
        # one sent during it, and a subscriber would be told the overtaken packet was
        # missed (links are FIFO).
        self._last: dict[tuple[int, int], float] = {}
        self._jittered = False
        self._scale = model.latency_spread / math.sqrt(2.0)

    @property
    def calm(self) -> bool:
        """Whether a message's arrival is just its link's latency: no loss or duplicate
        drawn for it, and no jitter now or earlier (``_last`` is not kept)."""
        model = self.model
        return not (model.drop or model.duplicate or model.jitter or self._jittered)

    def add_node(self) -> None:
        """Place one more node (the next index) in the square."""
        self._points.append((self._rng.random(), self._rng.random()))

    def latency(self, a: int, b: int) -> float:
        """One-way latency of the direct path from ``a`` to ``b``."""
        (xa, ya), (xb, yb) = self._points[a], self._points[b]
        return self.model.base_latency + self._scale * math.hypot(xa - xb, ya - yb)

    def arrivals(self, now: float, a: int, b: int) -> list[float]:
        """When a message sent now from ``a`` reaches ``b``: none if lost, two if duplicated."""
        model = self.model
        if model.drop and self._rng.random() < model.drop:
            return []
        copies = 2 if model.duplicate and self._rng.random() < model.duplicate else 1
        if model.jitter:
            self._jittered = True
        elif not self._jittered:
            return [now + self.latency(a, b)] * copies
        times = []
        for _ in range(copies):
            at = now + self.latency(a, b)
            if model.jitter:
                at += self._rng.random() * model.jitter
            at = max(at, self._last.get((a, b), 0.0))
            self._last[(a, b)] = at
            times.append(at)
        return times

    def resend_at(self, now: float, a: int, b: int) -> float:
        """When a frame held back on link a->b and sent again now arrives: no fault draws
        (TCP's retransmission), and never before an earlier frame on that link."""
        at = now + self.latency(a, b)
        if self._jittered:
            at = max(at, self._last.get((a, b), 0.0))
            self._last[(a, b)] = at
        return at
