"""The core's timers: a heap of (deadline, token). Cancelling is lazy: a handler that finds
its token stale ignores it, which is cheaper than deleting from the middle of a heap."""

from __future__ import annotations

import heapq

# (what, uid, attempt): what a timer is for; handlers check it is still current.
TimerToken = tuple[str, int, int]


class TimerQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerToken]] = []
        self._seq = 0  # keeps equal deadlines in insertion order, so runs are deterministic

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, at: float, token: TimerToken) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, token))

    def earliest(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[TimerToken]:
        """Remove and return the tokens of every timer due at ``now``, earliest first."""
        due: list[TimerToken] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            due.append(heapq.heappop(heap)[2])
        return due
