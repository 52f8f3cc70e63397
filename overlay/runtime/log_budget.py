"""A budget for log lines a peer can bring on: at most ``burst`` in any ``period`` seconds.

A node warns once for each peer input it refuses and logs each fault it contains with its
traceback, but a peer that reconnects and misbehaves in a loop must not fill the disk with
them. Lines beyond the budget are counted, not written; the next line written says how many
were left out, so the log never hides that something happened.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

# Enough for a burst of real trouble (a handful of peers dropped at once) to be read in full.
BURST = 20
# A minute: a steady offender shows up about once every three seconds.
PERIOD = 60.0


class LogBudget:
    def __init__(
        self, clock: Callable[[], float], burst: int = BURST, period: float = PERIOD
    ) -> None:
        self._clock = clock
        self._burst = burst
        self._period = period
        self._written: deque[float] = deque()
        self.left_out = 0  # lines not written since the last one that was

    def allow(self) -> int | None:
        """Whether a line may be written now: None if not (it is counted), else how many
        were left out before it (the caller says so in the line)."""
        now = self._clock()
        written = self._written
        while written and now - written[0] >= self._period:
            written.popleft()
        if len(written) >= self._burst:
            self.left_out += 1
            return None
        written.append(now)
        left_out, self.left_out = self.left_out, 0
        return left_out
