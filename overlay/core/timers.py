"""The core's timers: a heap of (deadline, token). Cancelling is lazy: a handler that finds
its token stale ignores it, which is cheaper than deleting from the middle of a heap."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

# (what, uid, attempt): what a timer is for; handlers check it is still current.
TimerToken = tuple[str, int, int]
# What runs a timer of one kind: (now, uid, attempt).
Handler = Callable[[float, int, int], None]


class TimerQueue:
    __slots__ = ("_handlers", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerToken]] = []
        self._seq = 0  # keeps equal deadlines in insertion order, so runs are deterministic
        self._handlers: dict[str, Handler] = {}

    def on(self, kind: str, handler: Handler) -> None:
        """Run ``handler`` for each timer of ``kind`` that falls due (``run``): the table
        of timer kinds, each registered by the component that arms them."""
        if kind in self._handlers:
            raise ValueError(f"timer kind {kind!r} has a handler already")
        self._handlers[kind] = handler

    def run(self, now: float) -> None:
        """Run the handler of every timer due at ``now`` (see ``due``)."""
        handlers = self._handlers
        for kind, uid, attempt in self.due(now):
            handlers[kind](now, uid, attempt)

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, at: float, token: TimerToken) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, token))

    def earliest(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> Iterator[TimerToken]:
        """The tokens of the timers due at ``now``, earliest first, each removed only as it
        is handed out: a handler that raises leaves the timers after it queued (a driver
        that contains the fault runs them next), and only the one that raised is gone, so
        a fault never repeats for ever. Timers added while these run are not among them,
        even if already due: they wait for the next call."""
        heap = self._heap
        last = self._seq
        while heap and heap[0][0] <= now and heap[0][1] <= last:
            yield heapq.heappop(heap)[2]
