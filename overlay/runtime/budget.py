"""The node-wide bound on bytes held for sending: every link's and client session's queue.

Each link and each client session bounds its own queue (``send_queue_bytes``,
``client_queue_bytes``), but a node with many of them could still hold their sum. The
budget bounds the sum: every queue reports the bytes it takes on (``grow``) and lets go of
(``shrink``), counting a batch being written until its write ends, since that memory is
held too. When a ``grow`` takes the total past ``limit``, the member holding the most is
cut off, as a single slow reader is (``Member.cut``): dropping a whole link or session,
never single messages, keeps each link's in-order delivery true, and the member holding
the most is the one furthest behind, so the readers that keep up keep their links.

Invariant: after every ``grow`` returns, the total is at most ``limit`` plus what members
being cut still hold for the write under way (each cut member lets go of its queue at once).
"""

from __future__ import annotations

from typing import Protocol


class Member(Protocol):
    """A queue the budget covers (``overlay.runtime.link.Link``, a client session)."""

    @property
    def held_bytes(self) -> int:
        """Bytes queued or being written."""

    def cut(self, reason: str) -> None:
        """Close for holding too much of the node's budget; lets go of the queue at once."""


class QueueBudget:
    """The sum of every member's held bytes, and the cut when it passes ``limit``."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError(f"a queue budget must be positive, got {limit}")
        self.limit = limit
        self.total = 0
        self.cuts = 0
        self._members: set[Member] = set()

    def join(self, member: Member) -> None:
        self._members.add(member)

    def leave(self, member: Member) -> None:
        """``member`` is gone; it must have shrunk by everything it held first."""
        self._members.discard(member)

    def grow(self, size: int) -> None:
        """A member took on ``size`` bytes; past the limit, the fullest members are cut."""
        self.total += size
        while self.total > self.limit:
            fullest = max(self._members, key=lambda m: m.held_bytes, default=None)
            if fullest is None or fullest.held_bytes == 0:
                return  # only writes under way hold the rest; each ends soon
            self.cuts += 1
            before = self.total
            self._members.discard(fullest)  # what it still writes is counted until it ends
            fullest.cut(
                f"the node's queues hold {before} bytes, over max_queued_bytes ({self.limit}); "
                f"this reader held the most ({fullest.held_bytes} bytes)"
            )
            if self.total >= before:
                return  # a member that let go of nothing: never loop on it

    def shrink(self, size: int) -> None:
        self.total -= size
