"""Local publishes that wait at a root for room to number a batch in one pass.

A root numbers a local batch in one pass (``batches``) only while its window has room for
the whole batch uncommitted, and after the single publishes already waiting (for credit,
or in the root's backlog). Were a batch that must wait taken publish by publish instead,
it would join those queues, every later batch would have to go after it the same way, and
a publisher that keeps the root busy would never see a batch numbered in one pass again.
So it waits here, whole, and so does every later publish of the stream from this node
(single or batch), so that publishes are numbered in the order they were made. After each
event (``Node._flush``) the queue runs from its head while its head can go.

Bounded: at most ``limit`` publishes wait in all; one past that is refused BUSY at once
(retryable), as a full relay table refuses one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

# A waiting publish, or batch: run it now; False if it must wait on (it stays at the head).
Attempt = Callable[[float], bool]


class BatchQueue:
    """Each stream's publishes waiting behind a batch, in the order they were made."""

    __slots__ = ("_queues", "count", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._queues: dict[bytes, deque[tuple[Attempt, int]]] = {}
        self.count = 0  # publishes waiting, over every stream

    def __bool__(self) -> bool:
        return bool(self._queues)

    def waits(self, key: bytes) -> bool:
        """Whether publishes of stream ``key`` wait here (a new one goes behind them)."""
        return key in self._queues

    def room(self, publishes: int) -> bool:
        return self.count + publishes <= self.limit

    def add(self, key: bytes, attempt: Attempt, publishes: int) -> None:
        """Queue ``attempt`` (``publishes`` of them) behind stream ``key``'s others."""
        self._queues.setdefault(key, deque()).append((attempt, publishes))
        self.count += publishes

    def run(self, now: float) -> None:
        """Run each stream's queue from its head while its head goes."""
        for key in list(self._queues):
            queue = self._queues[key]
            while queue:
                attempt, publishes = queue[0]
                if not attempt(now):
                    break
                queue.popleft()
                self.count -= publishes
            if not queue:
                del self._queues[key]
