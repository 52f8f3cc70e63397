"""A command-line simulation's heap: the cyclic collector paused, and no teardown at exit.

A simulation allocates millions of objects that live as long as it does (cores, their
components, peer tables, queued events) and makes almost no reference cycles: a 10,000-node
subscribe run leaves 15 objects for the collector. Yet the collector's passes, which are
triggered by allocations and traverse the live heap, took a quarter of that run's time and
40% of building the network. So the command-line runs pause it; library callers (the
tests) keep the interpreter's setting.

At exit the interpreter would free that heap object by object, and collect it: 16 s after
a 30,000-node run had printed its report. A command that is done skips it
(``exit_now``).
"""

from __future__ import annotations

import gc
import os
import sys
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


def exit_now(code: int) -> None:
    """End the process with ``code`` once standard output and error are flushed, without
    the interpreter's teardown. Only for a command's ``__main__``: nothing else may be
    left to run (no ``atexit`` handler, no open file but the standard streams)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
