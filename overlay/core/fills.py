"""A child waiting for packets from before we joined (``overlay.core.refills``), as the
stream record keeps it (``Stream.fills``)."""

from __future__ import annotations

from dataclasses import dataclass

from overlay.core.effects import PeerId

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
