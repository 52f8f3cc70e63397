"""A bounded memory of recently seen ids (uids for loop detection, restart uids...).

An id is remembered for ``ttl`` seconds of core time and at most ``capacity`` ids are kept,
the oldest forgotten first, so memory stays bounded whatever a peer sends.
"""

from __future__ import annotations

from collections import OrderedDict


class RecentIds:
    __slots__ = ("_capacity", "_expiry", "_ttl")

    def __init__(self, ttl: float, capacity: int) -> None:
        self._ttl = ttl
        self._capacity = capacity
        self._expiry: OrderedDict[int, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._expiry)

    def _expire(self, now: float) -> None:
        expiry = self._expiry
        while expiry:
            oldest, at = next(iter(expiry.items()))
            if at > now and len(expiry) <= self._capacity:
                break
            del expiry[oldest]

    def contains(self, uid: int, now: float) -> bool:
        self._expire(now)
        return uid in self._expiry

    def add(self, uid: int, now: float) -> None:
        """Remember ``uid`` until ``now + ttl`` (refreshing it if already known)."""
        self._expiry.pop(uid, None)
        self._expiry[uid] = now + self._ttl
        self._expire(now)
