"""Timer tokens: one counter a node's packet flow draws from for the timers that name a
wait by token (a root's takeover grace, ``takeover``; a question to a parent,
``early_packets``), so no two waits share one."""

from __future__ import annotations


class Tokens:
    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = 0

    def take(self) -> int:
        """A token no earlier wait had."""
        self.last += 1
        return self.last
