"""How often a root sends packets down a stream, and so how long a moved mark waits for one.

A root's commit mark rides the next packet it sends down (``overlay.core.showing``); a mark
that moved with no packet to take it goes as a standalone ``Committed`` notice, which every
member passes on: one message per tree edge. Waiting a fixed ``mark_delay`` (10 ms) for
that packet suits a stream whose packets come further apart than that. A steady stream at
100 to 200 packets a second reaches a loaded root with gaps of 10 to 20 ms, though, and
each gap past the delay sends a notice down the whole tree: on 50 nodes in one process at
150 packets a second, 15 notices a packet, a third of all control messages, whose load
more than doubles the publish-to-deliver p50 (``testnet.bench.latency``).

So a root learns its stream's pace: the time between the events in which its packets went
down, smoothed (``GAIN``). On a steady stream, one whose gaps fit ``STEADY`` times in
``mark_patience`` (30 ms: 67 packets a second or more), a moved mark waits that long for
the next packet, which nearly always comes first and takes the mark down with it. A slower
stream waits ``mark_delay``: waiting for its next packet would cost each delivery more
than a notice costs the tree. So a stream that falls quiet has its last mark told at most
the larger of the two after its last packet, and one that resumes after a pause learns the
pause first and waits ``mark_delay`` until its pace shows again.
"""

from __future__ import annotations

# A stream is steady when this many of its gaps fit in ``mark_patience``: its next packet is
# then due well within the wait, even behind the jitter of a loaded node, where a gap of
# twice the mean is common.
STEADY = 2.0
# The weight of each new gap in the smoothed one, and the longest gap it counts, which is
# also where a new stream starts: a pause shows at once, and a steady pace (after a pause,
# or from the start) within ten packets.
GAIN = 0.25
LONGEST_GAP = 0.1


class PacketPace:
    """When a root last sent packets down one stream, and the smoothed gap between such
    sends."""

    __slots__ = ("gap", "last")

    def __init__(self) -> None:
        self.last: float | None = None
        self.gap = LONGEST_GAP

    def went_down(self, now: float) -> None:
        """Packets of the stream went down at ``now`` (once per event, however many)."""
        last, self.last = self.last, now
        if last is not None:
            self.gap += GAIN * (min(max(now - last, 0.0), LONGEST_GAP) - self.gap)

    def steady(self, patience: float) -> bool:
        """Whether ``STEADY`` gaps fit in ``patience``."""
        return STEADY * self.gap <= patience

    def wait(self, delay: float, patience: float) -> float:
        """How long after the last packet a moved mark waits for the next one to take it
        down: ``patience`` on a steady stream, else ``delay`` (never less than ``delay``)."""
        return max(delay, patience) if self.steady(patience) else delay
