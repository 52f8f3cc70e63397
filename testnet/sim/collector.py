"""Python's cyclic garbage collector, paused for a simulation run from the command line.

A simulation allocates millions of objects that live as long as it does (cores, their
components, peer tables, queued events) and makes almost no reference cycles: a 10,000-node
subscribe run leaves 15 objects for the collector. Yet the collector's passes, which are
triggered by allocations and traverse the live heap, took a quarter of that run's time and
40% of building the network. So the command-line runs pause it; library callers (the
tests) keep the interpreter's setting.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block; restore its setting after. Cycles made
    meanwhile (a core replaced by a restart) wait for the next collection after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
