"""A wave: the heartbeats every node sent at one moment, delivered in arrival order.

In calm weather every node's heartbeat rounds run in step, so one moment sends a heartbeat
over every link: 16 million at 10^6 nodes of degree 16. As tuples of (arrival, sequence
number, sender, receiver, message) with their sort keys they held about 200 bytes each,
3 GB a wave. Here they sit in typed arrays, 32 bytes each (the message is a reference: a
node sends one ``Heartbeat`` object to all its peers), and are sorted through one list of
packed integer keys that is freed once the order is read off.

Order: by arrival, then by sequence number. The sequence numbers rise with the order the
heartbeats were added, so among equal arrivals the order of adding decides, as it would.
"""

from __future__ import annotations

from array import array

from overlay.messages import Message


class Wave:
    __slots__ = ("_at", "_dst", "_messages", "_next", "_order", "_seq", "_src")

    def __init__(self) -> None:
        self._at = array("d")  # arrival times, in the order added
        self._seq = array("q")  # the simulator's sequence numbers, rising
        self._src = array("i")  # (node indexes)
        self._dst = array("i")
        self._messages: list[Message] = []
        self._order: array[int] | None = None  # once sorted: indexes in arrival order
        self._next = 0  # the first of ``_order`` not yet taken

    def add(self, at: float, seq: int, sender: int, receiver: int, message: Message) -> None:
        self._at.append(at)
        self._seq.append(seq)
        self._src.append(sender)
        self._dst.append(receiver)
        self._messages.append(message)

    def sort(self) -> None:
        """Order the heartbeats for taking. A non-negative double's bits, read as an
        unsigned integer, sort as the double does; below them goes the index, so equal
        arrivals keep the order they were added in."""
        count = len(self._at)
        bits = array("Q")
        bits.frombytes(self._at.tobytes())
        shift = max(count, 1).bit_length()
        keys = [(b << shift) | k for k, b in enumerate(bits)]
        del bits
        keys.sort()
        mask = (1 << shift) - 1
        self._order = array("i", (key & mask for key in keys))

    def __len__(self) -> int:
        return len(self._at) - self._next

    def head(self) -> tuple[float, int]:
        """The next heartbeat's (arrival, sequence number); the wave must be sorted and
        not empty."""
        assert self._order is not None
        k = self._order[self._next]
        return self._at[k], self._seq[k]

    def take(self) -> tuple[float, int, int, Message]:
        """The next heartbeat, taken: (arrival, sender, receiver, message)."""
        assert self._order is not None
        k = self._order[self._next]
        self._next += 1
        return self._at[k], self._src[k], self._dst[k], self._messages[k]
