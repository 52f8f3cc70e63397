"""A command-line simulation's heap: the cyclic collector paused, and no teardown at exit.

A simulation allocates millions of objects that live as long as it does (cores, their
components, peer tables, queued events) and makes almost no reference cycles: a 10,000-node
subscribe run leaves 15 objects for the collector. Yet the collector's passes, which are
triggered by allocations and traverse the live heap, took a quarter of that run's time and
40% of building the network. So the command-line runs pause it; library callers (the
tests) keep the interpreter's setting.

At exit the interpreter would free that heap object by object, and collect it: 16 s after
a 30,000-node run had printed its report. A command that is done skips it
(``exit_now``). ``run_command`` ends a command that way, and cleanly when it is stopped:
Ctrl-C or SIGTERM exit 130 or 143 (128 + the signal's number), and a reader that went away
(``| head``) ends it quietly; neither prints a traceback.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import NoReturn


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block; restore its setting after. What the
    block allocated is frozen first (``gc.freeze``): nothing was collected meanwhile, so it
    all sits in the youngest generation, and the first allocation after re-enabling would
    traverse the whole simulation (10 s of a 64,000-node run, after its report was made).
    Cycles made meanwhile (a core replaced by a restart) are never collected; a command
    ends soon after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.enable()


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once standard output and error are flushed, without
    the interpreter's teardown. Only for a command's ``__main__``: nothing else may be
    left to run (no ``atexit`` handler, no open file but the standard streams)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_command(main: Callable[[], int]) -> NoReturn:
    """Run a command's ``main`` and end the process with its status (``exit_now``), or
    with 130 after Ctrl-C, 143 after SIGTERM, 0 if standard output's reader went away."""
    stopped_by: list[int] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stopped_by.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        code = main()
    except KeyboardInterrupt:
        code = 128 + (stopped_by[0] if stopped_by else signal.SIGINT)
    except BrokenPipeError:
        # What is left in the buffer has nowhere to go: let the flush write it to nothing.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    exit_now(code)
