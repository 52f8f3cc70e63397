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
``mark_patience`` (30 ms: 67 events a second or more), a moved mark waits that long for
the next packet, which nearly always comes first and takes the mark down with it. A slower
stream waits ``mark_delay``: waiting for its next packet would cost each delivery more
than a notice costs the tree. So a packet of a steady stream whose successor is late past
``mark_delay`` is shown up to ``mark_patience - mark_delay`` later (a stream that falls
quiet: its last packet), and a stream that resumes after a pause learns the pause first
and waits ``mark_delay`` until its pace shows again, within ten to twenty packets. A new
stream starts as slow.

A sparse stream, one whose last ``SPARSE_GAPS`` gaps were each ``SPARSE`` times
``mark_delay`` or more (under about 33 events a second), does not wait for a packet at all:
its next one is not due within ``mark_delay``, so the wait would only delay each delivery
(by up to ``mark_delay``: a quarter of the publish-to-deliver p50 of 50 nodes at 20 packets
a second in one process) and save no notice. Its notices still come at most one a
``mark_delay`` (``Showing``: ``RootState.noticed_at``). Every one of those gaps must be long,
not their mean: packets that come in pairs or bunches (several publishers, a loaded root)
have a long mean gap, but the next packet of a bunch is due soon and takes the mark down;
and a stream that resumes after a pause waits ``mark_delay`` as before until three long
gaps show it sparse again.

The gaps are between events, not bursts. A loaded root takes a steady stream's packets in
bunches, events a fraction of a millisecond apart with 10 to 30 ms between bunches, and
the short gaps keep such a stream steady, so the next bunch takes the mark down. Counting
a bunch as one event (gaps between bunches only) tips that same load into a notice per
bunch: on the 50-node bench at 500 packets a second, 68,000 notices against 3,000. The
price: a slow stream whose packets come a few at a time (three within a millisecond, every
50 ms) can count as steady, and its marks then wait ``mark_patience`` where ``mark_delay``
would do, with no notice saved.
"""

from __future__ import annotations

from collections import deque

# A stream is steady when this many of its gaps fit in ``mark_patience``: its next packet is
# then due well within the wait, even behind the jitter of a loaded node, where a gap of
# twice the mean is common.
STEADY = 2.0
# The weight of each new gap in the smoothed one.
GAIN = 0.25
# The longest gap counted, and where a new stream starts: at least this, and long enough
# that one pause ends a steady pace at once whatever ``mark_patience`` is (one gap of
# ``2 * patience / (STEADY * GAIN)`` lifts any smoothed gap past ``patience / STEADY``).
LONGEST_GAP = 0.1
# A stream is sparse when each of its last ``SPARSE_GAPS`` gaps is at least ``SPARSE`` times
# ``mark_delay``: its next packet is then not due within the wait, whatever the jitter.
SPARSE = 3.0
SPARSE_GAPS = 3


def longest_gap(patience: float) -> float:
    """The longest gap a stream with ``mark_patience`` ``patience`` counts."""
    return max(LONGEST_GAP, 2.0 * patience / (STEADY * GAIN))


class PacketPace:
    """When a root last sent packets down one stream, and the gaps between the events that
    did: smoothed (None before the first event) and the last few."""

    __slots__ = ("gap", "last", "recent")

    def __init__(self) -> None:
        self.last: float | None = None
        self.gap: float | None = None
        self.recent: deque[float] = deque(maxlen=SPARSE_GAPS)  # the last gaps, oldest first

    def went_down(self, now: float, patience: float) -> None:
        """Packets of the stream went down at ``now`` (once per event, however many), on a
        node whose ``mark_patience`` is ``patience``."""
        last, self.last = self.last, now
        longest = longest_gap(patience)
        gap = longest if self.gap is None else self.gap
        if last is not None:
            latest = max(now - last, 0.0)
            gap += GAIN * (min(latest, longest) - gap)
            self.recent.append(latest)
        self.gap = gap

    def steady(self, patience: float) -> bool:
        """Whether ``STEADY`` gaps fit in ``patience``."""
        return self.gap is not None and STEADY * self.gap <= patience

    def sparse(self, delay: float) -> bool:
        """Whether each of the last ``SPARSE_GAPS`` gaps was ``SPARSE`` times ``delay`` or
        more (False before that many)."""
        recent = self.recent
        return len(recent) == SPARSE_GAPS and min(recent) >= SPARSE * delay

    def wait(self, delay: float, patience: float) -> float:
        """How long after the last packet a moved mark waits for the next one to take it
        down: ``patience`` on a steady stream, else ``delay`` (never less than ``delay``)."""
        return max(delay, patience) if self.steady(patience) else delay
