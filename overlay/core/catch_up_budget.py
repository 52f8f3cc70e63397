"""How much catch-up one peer may draw from this node: a token bucket per peer.

A search that ends here adopts its sender and sends it every packet we hold after its
``last_seen`` (``joining.catch_up``): up to a whole window, a thousand frames and megabytes,
for a 70-byte request. Unbounded, one peer sending fresh uids in a loop turns that into a
flood that fills our links and stalls the live stream for every honest child. So each peer
has a bucket of frames (packets and PacketsMissed) and of payload bytes, across all
streams, filled at a steady rate up to a burst, with the core's explicit ``now``; a
catch-up is served only if both hold its cost, which it then takes out.

A catch-up is charged at most the whole burst, so any one catch-up fits a full bucket: a
window may hold up to twice its bounds (packets a local client is still owed, ``window``),
and a peer asking for all of it once must still get it.

A peer refused keeps being refused cheaply; one refused again and again, far past what
refusals teach an honest peer, has ``strikes`` that outrun their decay (one a second), and
the caller cuts it off (``Verdict.CUT_OFF``).

Memory: a bucket exists only for a peer that drew a catch-up; it is dropped when the peer's
link goes down (``forget``), and at most ``capacity`` are kept, the least recently charged
dropped first (a dropped bucket only makes its peer start again from a full burst).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from overlay.core.effects import PeerId
from overlay.core.window import Window

# Refusals a peer may pile up (each decays in a second) before it is cut off. An honest peer
# that outran its budget (many streams rejoining at once through us) is refused a few times
# and backtracks to other peers; only one that keeps asking, dozens of times a second, whose
# requests are all refused, gets here.
MAX_STRIKES = 32.0
# Buckets kept at once: above the runtime's ``max_links`` (256), so a bucket is normally
# dropped only when its peer's link goes down.
CAPACITY = 4096


class Verdict(Enum):
    SERVE = "serve"  # the cost is taken out: send the catch-up
    REFUSE = "refuse"  # over the budget: refuse the search (RejectOverload)
    CUT_OFF = "cut off"  # refused far past the budget, again and again: drop the peer


@dataclass(slots=True)
class _Bucket:
    frames: float
    size: float  # payload bytes
    strikes: float
    at: float  # when the bucket was last filled


class CatchUpBudget:
    """The per-peer catch-up budget of one node: ``frame_rate`` frames and ``byte_rate``
    payload bytes a second, up to ``frame_burst`` and ``byte_burst`` at once."""

    __slots__ = ("_buckets", "byte_burst", "byte_rate", "capacity", "frame_burst", "frame_rate")

    def __init__(
        self,
        frame_rate: float,
        byte_rate: float,
        frame_burst: float,
        byte_burst: float,
        capacity: int = CAPACITY,
    ) -> None:
        if not (frame_rate > 0 and byte_rate > 0 and frame_burst >= 1 and byte_burst >= 1):
            raise ValueError(
                "catch-up rates must be positive and bursts at least 1, got "
                f"{frame_rate}, {byte_rate}, {frame_burst}, {byte_burst}"
            )
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.frame_rate = frame_rate
        self.byte_rate = byte_rate
        self.frame_burst = frame_burst
        self.byte_burst = byte_burst
        self.capacity = capacity
        self._buckets: OrderedDict[PeerId, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, now: float, peer: PeerId, frames: int, size: Callable[[], int]) -> Verdict:
        """Charge ``peer`` for a catch-up of ``frames`` frames whose payload is ``size()``
        bytes, if its bucket holds both. ``size`` is weighed only once the frames fit: a
        peer refused in a loop costs us a count, not a walk over the window each time."""
        if frames <= 0:
            return Verdict.SERVE  # nothing to send: no state for it either
        bucket = self._filled(now, peer)
        frames_cost = min(float(frames), self.frame_burst)
        if bucket.frames >= frames_cost:
            bytes_cost = min(float(size()), self.byte_burst)
            if bucket.size >= bytes_cost:
                bucket.frames -= frames_cost
                bucket.size -= bytes_cost
                return Verdict.SERVE
        bucket.strikes += 1.0
        return Verdict.CUT_OFF if bucket.strikes > MAX_STRIKES else Verdict.REFUSE

    def charge(self, now: float, peer: PeerId, window: Window, first: int, last: int) -> Verdict:
        """``take`` for a replay of ``first..last`` from ``window`` to ``peer``: the packets
        it holds there are the frames, their payload the bytes."""
        return self.take(
            now, peer, window.held_in(first, last), lambda: window.payload_in(first, last)
        )

    def forget(self, peer: PeerId) -> None:
        """``peer``'s link is gone: its bucket with it."""
        self._buckets.pop(peer, None)

    def _filled(self, now: float, peer: PeerId) -> _Bucket:
        """``peer``'s bucket, filled for the time since it was last (a new one: full)."""
        bucket = self._buckets.get(peer)
        if bucket is None:
            bucket = _Bucket(self.frame_burst, self.byte_burst, 0.0, now)
            self._buckets[peer] = bucket
            while len(self._buckets) > self.capacity:
                self._buckets.popitem(last=False)
            return bucket
        self._buckets.move_to_end(peer)
        elapsed = max(0.0, now - bucket.at)  # (a driver's clock never runs back; be safe)
        bucket.at = max(bucket.at, now)
        bucket.frames = min(self.frame_burst, bucket.frames + elapsed * self.frame_rate)
        bucket.size = min(self.byte_burst, bucket.size + elapsed * self.byte_rate)
        bucket.strikes = max(0.0, bucket.strikes - elapsed)
        return bucket
