"""Pace: how many of its clients' publishes a node keeps in a stream's tree at once, set by
how long the tree takes to answer them.

Why. A fixed credit (``publish_credit_packets``) is too small for one tree and too large
for another. Where the tree answers more slowly than the publisher publishes, whatever is
out beyond the tree's pace waits in queues inside it (the root's backlog, the links), and
every publish's answer, and its delivery, waits as long as the queue before it. Measured
with 50 nodes in one process (``testnet.bench.latency --saturate``): 256 publishes out
took p99 690 ms from publish to delivery (506 packets a second), 128 out 294 ms (627).

How: a delay-based window, as LEDBAT (RFC 6817) and FAST TCP set a congestion window.

* The node times each publish from when it goes up to the tree's answer, a number or a
  collision, on its first try only: a retry's answer says nothing of the queue (Karn's
  rule, as TCP times its segments). Nor does a refusal, an answer the node had at once (a
  uid it knows), or a publish given up (its client left, or it timed out).
* The *base* is the least such delay over the last minute (RFC 6817 2.4.1: minima per
  interval, a few intervals kept, so that a route that got slower is learned within
  ``BASE_PERIODS`` periods): the tree's answer time with nothing queued. (A node that was
  the stream's root and becomes a member keeps its root's base, and so a small window,
  until that minute has passed.)
* The window changes once a *round*, a window's worth of answers, by what the round's
  least delay says. Only a queue that stands for a whole round delays every answer of it;
  a node busy for a moment (other work, another process on its core) delays some. So the
  least, as CoDel judges a queue by the least sojourn over an interval, tells a standing
  queue from jitter, which on a loaded machine is many times the target. The window moves
  toward the size at which that least delay is ``base + allowed``, where ``allowed`` is
  ``target`` (``publish_queue_delay``) or the base itself, whichever is more:

      window *= (base + allowed) / least     (by at most half, or twice, in one round)

  ``allowed`` grows with the base because a long path varies by more than ``target`` with
  nothing queued (a commit waiting for a far child): a window held to ``target`` there
  would shrink to its floor and cap the stream at a few packets a round trip. So the tree's
  queues add at most ``target`` to a short path's answer time, and at most double a long
  one's.

The window stays within ``[MIN_WINDOW, top]`` (``publish_credit_packets``; a top below
``MIN_WINDOW`` is a fixed credit). It starts at ``INITIAL_WINDOW`` and doubles each round
while answers come well within the allowance (as TCP's slow start): started at the top, a
burst's first answers would wait behind the whole burst, and the base they set, and the
allowance with it, would let the queue stand. A target of 0 keeps the window at the top
(a fixed credit).
"""

from __future__ import annotations

import math
from collections import deque

# Publishes out at least: below a few, a stream's packets travel alone and the tree's fixed
# costs per packet (marks, commit questions) grow.
MIN_WINDOW = 8
# Publishes out at first: enough for a stream of tens of packets a second over a long path
# before the first answers come back (a light stream never waits for the window).
INITIAL_WINDOW = 32
BASE_PERIOD = 10.0  # seconds per kept minimum of the answer delay
BASE_PERIODS = 6  # minima kept: the base is the least over the last minute


def first_window(top: int, target: float) -> int:
    """The window a new pace starts with."""
    return top if target <= 0 else min(top, INITIAL_WINDOW)


class Pace:
    """One stream's window of publishes out, from the delays of their answers."""

    __slots__ = ("_counted", "_least", "_minima", "target", "top", "window")

    def __init__(self, top: int, target: float) -> None:
        self.top = top
        self.target = target
        self.window = float(first_window(top, target))
        # The least delay of each period that had answers, with when it began, oldest
        # first; those begun ``BASE_PERIODS`` periods ago or more are dropped.
        self._minima: deque[tuple[float, float]] = deque()
        self._counted = 0  # answers in this round so far
        self._least = math.inf  # their least delay

    @property
    def limit(self) -> int:
        """Publishes that may be out at once now."""
        return int(self.window)

    @property
    def base(self) -> float | None:
        """The least answer delay of the last ``BASE_PERIODS`` periods, as of the last
        answer (None: none yet)."""
        return min(least for _, least in self._minima) if self._minima else None

    def answered(self, now: float, delay: float, count: int = 1) -> None:
        """``count`` publishes sent up ``delay`` seconds before ``now`` (their first try)
        are answered (more than one: a batch a root numbered together; it ends at most one
        round)."""
        if self.target <= 0 or not delay >= 0:  # (NaN too)
            return
        minima = self._minima
        while minima and minima[0][0] <= now - BASE_PERIODS * BASE_PERIOD:
            minima.popleft()  # (a minute old: the path may have changed since)
        if not minima or now >= minima[-1][0] + BASE_PERIOD:
            minima.append((now, delay))
        elif delay < minima[-1][1]:
            minima[-1] = (minima[-1][0], delay)
        self._counted += count
        self._least = min(self._least, delay)
        if self._counted < self.window:
            return  # (the round goes on)
        base = min(least for _, least in minima)
        allowed = max(self.target, base)
        least, self._counted, self._least = self._least, 0, math.inf
        factor = 2.0 if least <= 0 else min(2.0, max(0.5, (base + allowed) / least))
        floor = min(MIN_WINDOW, self.top)
        self.window = max(float(floor), min(float(self.top), self.window * factor))
