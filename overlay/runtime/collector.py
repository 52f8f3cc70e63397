"""The garbage collector of a process that hosts nodes, paced for how a node allocates.

Why. CPython collects its youngest generation whenever the tracked objects made exceed those
freed by a threshold, 700 by default. A node handling a burst of packets holds far more
than that at once for a moment (a batch's packets, their run items, the effects of one
event), so each burst sets off a collection that walks every object of the burst, moves
the survivors up a generation, and in turn sets off full collections over everything the
node keeps (its windows, its uid tables). Most of those objects are freed by their reference
counts moments later anyway; nodes make few reference cycles.

Measured with ``python -m testnet.bench.forwarding`` (root, one child): at the default
threshold, collections take about 7% of the forwarder's CPU (about 470 young, 40 middle and
4 full collections in 3 s); at ``YOUNG_THRESHOLD`` a handful, and the root forwarded 153k
and 150k packets per CPU-second against 129k and 120k, run alternately. Fifty nodes in one
process at saturation delivered 36.6k and 44.2k packets a second against 33.9k and 32.2k.

What ``tune_for_nodes`` changes, process-wide, once (a process's entry point calls it: the
``overlay node`` command, a testnet worker, the benchmarks; a program that embeds nodes
may): the youngest generation's threshold is raised to ``YOUNG_THRESHOLD`` (the older two
are kept), and what exists when it is called (modules, configuration) is frozen out of
collection (``gc.freeze``), so a full collection walks only what the process made since.
Cycles are still found, only less often: at most ``YOUNG_THRESHOLD`` more tracked objects
wait for it, a few megabytes.
"""

from __future__ import annotations

import gc

# Tracked objects made beyond those freed before the youngest generation is collected:
# above a node's bursts (a batch of 256 packets holds several objects a packet at once), so
# bursts come and go between collections.
YOUNG_THRESHOLD = 20_000


def tune_for_nodes() -> None:
    """Pace this process's collections for hosting nodes (see the notes)."""
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
