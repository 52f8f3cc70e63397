"""A child waiting for packets from before we joined (``overlay.core.refills``), as the
stream record keeps it (``Stream.fills``), and the spans of numbers a node never had."""

from __future__ import annotations

from dataclasses import dataclass

from overlay.core.effects import PeerId
from overlay.core.window import Window
from overlay.messages import SubscribeData

# A range of packet numbers, both ends included.
Span = tuple[int, int]


@dataclass(slots=True, eq=False)
class Fill:
    """A child waiting until our gaps in ``first..`` are filled."""

    peer: PeerId
    first: int
    last: int | None  # None: up to our head when served (a search: its catch-up)
    uid: int | None  # the search to answer and adopt (None: a child's FillRequest)
    must_beat: float | None  # that search's, checked again when it is answered
    token: int  # its timer
    asked: Span  # what we asked our parent (a root: its subtree) for
    since: float  # when it began to wait
    held: int = 0  # timeouts that found our subtree detached (``Refills.on_fill_timer``)


def gaps(window: Window, first: int, last: int) -> list[Span]:
    """The numbers in ``first..last`` this node never had: not held, not a known hole, not
    below the floor (evicted, or never accepted). Work is bounded by the window's size."""
    spans: list[Span] = []
    for item in window.replay(max(first, window.floor), last):
        if isinstance(item, SubscribeData):
            continue
        number, end = item
        while number <= end:
            hole_end = window.missing_until(number)
            if hole_end is not None:
                number = hole_end + 1
                continue
            index = window.holes.bisect_right(number)
            stop = end
            if index < len(window.holes):
                stop = min(end, window.holes.peekitem(index)[0] - 1)
            spans.append((number, stop))
            number = stop + 1
    return spans


def outside(first: int, last: int, spans: list[Span]) -> list[Span]:
    """The parts of ``first..last`` that none of ``spans`` covers."""
    parts = [(first, last)]
    for a, b in spans:
        parts = [
            piece
            for x, y in parts
            for piece in ((x, min(y, a - 1)), (max(x, b + 1), y))
            if piece[0] <= piece[1]
        ]
    return parts
