"""A wave: the heartbeats every node sent at one moment, delivered in arrival order.

In calm weather every node's heartbeat rounds run in step, so one moment sends a heartbeat
over every link: 16 million at 10^6 nodes of degree 16. As tuples of (arrival, sequence
number, sender, receiver, message) with their sort keys they held about 200 bytes each,
3 GB a wave. Here they sit in typed arrays, 36 bytes each with their place in the order
(the message is a reference: a node sends one ``Heartbeat`` object to all its peers).

Order: by arrival, then by sequence number. The sequence numbers rise with the order the
heartbeats were added, so among equal arrivals the order of adding decides, as it would.
The wave is not sorted whole (a sort of 16 million keys holds as many Python objects at
once): ``sort`` deals the heartbeats into buckets of arrival ranges, in order, and each
bucket is sorted when the taking reaches it. Arrival times map to buckets monotonically,
so equal arrivals share a bucket, and a stable sort there keeps the order of adding.
"""

from __future__ import annotations

import math
from array import array

from overlay.messages import Message

BUCKET = 64  # heartbeats a bucket, on average


class Wave:
    __slots__ = ("_at", "_current", "_dst", "_left", "_messages", "_pos", "_rows", "_seq", "_src")

    def __init__(self) -> None:
        self._at = array("d")  # arrival times, in the order added
        self._seq = array("q")  # the simulator's sequence numbers, rising
        self._src = array("i")  # (node indexes)
        self._dst = array("i")
        self._messages: list[Message] = []
        # Once sorted: the buckets not reached yet, the last one first, each the indexes of
        # its heartbeats in the order added; the reached bucket, sorted; the place in it.
        self._rows: list[array[int]] = []
        self._current: list[int] = []
        self._pos = 0
        self._left = 0

    def add(self, at: float, seq: int, sender: int, receiver: int, message: Message) -> None:
        self._at.append(at)
        self._seq.append(seq)
        self._src.append(sender)
        self._dst.append(receiver)
        self._messages.append(message)
        self._left += 1

    def sort(self) -> None:
        """Deal the heartbeats into buckets by arrival, for taking in order."""
        at = self._at
        if not at:
            return
        count = len(at) // BUCKET + 1
        low, high = min(at), max(at)
        spread = high - low
        scale = (count - 1) / spread if 0.0 < spread < math.inf else math.inf
        if count == 1 or not math.isfinite(scale):
            # One arrival time, or a spread a float cannot scale: one bucket, sorted whole.
            self._rows = [array("i", range(len(at)))]
            return
        rows = [array("i") for _ in range(count)]
        last = count - 1
        for k, arrival in enumerate(at):
            rows[min(int((arrival - low) * scale), last)].append(k)
        rows.reverse()
        self._rows = rows

    def __len__(self) -> int:
        return self._left

    def _peek(self) -> int:
        """The index of the next heartbeat; the wave must be sorted and not empty."""
        current = self._current
        while self._pos == len(current):
            current = self._current = sorted(self._rows.pop(), key=self._at.__getitem__)
            self._pos = 0
        return current[self._pos]

    def head(self) -> tuple[float, int]:
        """The next heartbeat's (arrival, sequence number)."""
        k = self._peek()
        return self._at[k], self._seq[k]

    def take(self) -> tuple[float, int, int, Message]:
        """The next heartbeat, taken: (arrival, sender, receiver, message)."""
        k = self._peek()
        self._pos += 1
        self._left -= 1
        return self._at[k], self._src[k], self._dst[k], self._messages[k]
