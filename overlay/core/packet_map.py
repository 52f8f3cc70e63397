"""The packets a window holds, by number, in number order.

Why not a general sorted map. A window's traffic is almost all at its two ends: each packet
of a stream comes with the next number and pushes the oldest out. A balanced sorted map
(``sortedcontainers.SortedDict``, which this replaces) pays a bisect and its bookkeeping for
both, about half of what a relay spends on a packet. Here they cost O(1): a dict for lookup,
beside a list of the numbers in order whose first ``_start`` entries are already gone (the
list is compacted once they are half of it, so each removal costs O(1) amortized).

Anything else (a packet filled in below the head) is a bisect and a list insert: O(n)
moves of machine words, over at most twice a window's ``max_packets`` numbers, and rare.

The interface is the part of ``SortedDict`` the core uses, with ``first`` and ``pop_first``
for its eviction; ``irange``, ``items``, ``values`` and iteration work on a copy of the
numbers, so the map may change while a caller walks it.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

from overlay.messages import SubscribeData

# Removed numbers kept at the list's front before it is compacted, at least.
_COMPACT_AFTER = 64


class PacketMap:
    __slots__ = ("_by", "_numbers", "_start")

    def __init__(self) -> None:
        self._by: dict[int, SubscribeData] = {}
        self._numbers: list[int] = []  # in order; those before ``_start`` are gone
        self._start = 0

    def __len__(self) -> int:
        return len(self._by)

    def __bool__(self) -> bool:
        return bool(self._by)

    def __contains__(self, number: object) -> bool:
        return number in self._by

    def __getitem__(self, number: int) -> SubscribeData:
        return self._by[number]

    def get(self, number: int) -> SubscribeData | None:
        return self._by.get(number)

    def __setitem__(self, number: int, packet: SubscribeData) -> None:
        by = self._by
        if number not in by:
            numbers = self._numbers
            if len(numbers) == self._start or number > numbers[-1]:
                numbers.append(number)
            else:
                insort(numbers, number, self._start)
        by[number] = packet

    def extend(self, run: list[SubscribeData]) -> None:
        """Add ``run``: packets with consecutive numbers past every number held."""
        numbers = self._numbers
        first = run[0].packet
        assert len(numbers) == self._start or first > numbers[-1], "a run goes past the end"
        numbers.extend(range(first, first + len(run)))
        self._by.update(zip(numbers[len(numbers) - len(run) :], run, strict=True))

    def __iter__(self) -> Iterator[int]:
        return iter(self._numbers[self._start :])

    def items(self) -> list[tuple[int, SubscribeData]]:
        by = self._by
        return [(number, by[number]) for number in self._numbers[self._start :]]

    def values(self) -> list[SubscribeData]:
        by = self._by
        return [by[number] for number in self._numbers[self._start :]]

    def run_from(self, low: int, high: int) -> list[SubscribeData]:
        """The packets held from ``low`` on, consecutive, up to ``high`` at most: empty if
        ``low`` is not held, ending before the first number missing."""
        by = self._by
        if high < low or low not in by:
            return []
        numbers, start = self._numbers, self._start
        first = bisect_left(numbers, low, start)
        end = bisect_right(numbers, high, first)
        # The numbers are distinct and in order: those at first..end-1 are consecutive
        # exactly when the last is low + (end - 1 - first); else find the first gap.
        if numbers[end - 1] - low != end - 1 - first:
            end = first + 1
            while end < len(numbers) and numbers[end] == low + end - first and numbers[end] <= high:
                end += 1
        return list(map(by.__getitem__, numbers[first:end]))

    def irange(self, low: int, high: int) -> Iterator[int]:
        """The numbers held in ``low..high``, both included, in order."""
        numbers, start = self._numbers, self._start
        return iter(numbers[bisect_left(numbers, low, start) : bisect_right(numbers, high, start)])

    def bisect_left(self, number: int) -> int:
        """How many numbers held are below ``number``."""
        return bisect_left(self._numbers, number, self._start) - self._start

    def bisect_right(self, number: int) -> int:
        """How many numbers held are at or below ``number``."""
        return bisect_right(self._numbers, number, self._start) - self._start

    def first(self) -> int:
        """The lowest number held (IndexError if none): the window's next eviction."""
        return self._numbers[self._start]

    def pop_first(self) -> tuple[int, SubscribeData]:
        """Remove and return the item with the lowest number (IndexError if none)."""
        number = self._numbers[self._start]
        packet = self._by.pop(number)
        self._drop_first()
        return number, packet

    def pop_firsts(self, count: int) -> list[SubscribeData]:
        """Remove and return the ``count`` items with the lowest numbers (at most all)."""
        numbers, start, by = self._numbers, self._start, self._by
        end = min(start + count, len(numbers))
        popped = list(map(by.pop, numbers[start:end]))
        self._gone_before(end)
        return popped

    def peekitem(self, index: int = -1) -> tuple[int, SubscribeData]:
        """The item at ``index`` in number order (negative: from the end)."""
        number = self._numbers[self._position(index)]
        return number, self._by[number]

    def _position(self, index: int) -> int:
        count = len(self._numbers) - self._start
        if not -count <= index < count:
            raise IndexError(f"index {index} out of range for {count} packets")
        return self._start + index if index >= 0 else len(self._numbers) + index

    def _drop_first(self) -> None:
        self._gone_before(self._start + 1)

    def _gone_before(self, start: int) -> None:
        """The numbers before index ``start`` are gone: compact once they are half."""
        numbers = self._numbers
        if start == len(numbers):
            numbers.clear()
            self._start = 0
        elif start >= _COMPACT_AFTER and 2 * start >= len(numbers):
            del numbers[:start]
            self._start = 0
        else:
            self._start = start
