"""The questions a member asks its new parent about a gap, and the packets above the gap
that wait for the answer (``early_packets``, whose notes say why), by timer token.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.early_packets import EARLY_TIMER, EarlyPackets
from overlay.core.stats import NodeStats
from overlay.core.streams import Stream
from overlay.core.timers import TimerQueue
from overlay.core.tokens import Tokens
from overlay.messages import SubscribeData


class EarlyWaits:
    """Each stream's question to its parent (``Stream.early``) and its timer."""

    __slots__ = (
        "config",
        "early_waits",
        "missing",
        "stats",
        "store",
        "streams",
        "timers",
        "tokens",
    )

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        timers: TimerQueue,
        tokens: Tokens,
        store: Callable[[Stream, SubscribeData], None],
        missing: Callable[[Stream, int, int], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.timers = timers
        self.tokens = tokens
        self.store = store
        self.missing = missing
        self.early_waits: dict[int, bytes] = {}  # questions to a parent, by timer token
        timers.on(EARLY_TIMER, self.on_early_timer)

    def expect_fill(self, now: float, stream: Stream, first: int, last: int) -> None:
        """We asked our new parent for ``first..last`` (``Restarts.hang_from``): packets
        above the gap wait for the answer (``early_packets``)."""
        self.release(stream, give_up=True)  # (an earlier question is over)
        token = self.tokens.take()
        config = self.config
        stream.early = EarlyPackets(first, last, token, config.window_packets, config.window_bytes)
        self.early_waits[token] = stream.key
        self.timers.add(now + config.fill_timeout, (EARLY_TIMER, token, 0))

    def on_early_timer(self, now: float, token: int, attempt: int) -> None:
        """A question to the parent has waited ``fill_timeout``: give it up."""
        key = self.early_waits.pop(token, None)
        stream = None if key is None else self.streams.get(key)
        if stream is not None and stream.early is not None and stream.early.token == token:
            self.release(stream, give_up=True)

    def release(self, stream: Stream, give_up: bool = False) -> None:
        """Take the waiting packets that are next in order; with ``give_up``, all of them,
        each gap before one announced missed (as it would have been without the wait)."""
        early = stream.early
        if early is None:
            return
        if give_up:
            stream.early = None
            self.early_waits.pop(early.token, None)
        while (lowest := early.lowest()) is not None:
            next_in = stream.next_in
            if next_in is not None and lowest < next_in:
                early.pop_lowest()
                self.stats.duplicates += 1
                continue
            if next_in is not None and lowest > next_in:
                if not give_up and early.covers(next_in):
                    return  # still asked for: the answer comes
                self.missing(stream, next_in, lowest - 1)
            packet = early.pop_lowest()
            assert packet is not None
            self.store(stream, packet)
        if stream.early is early and (stream.next_in is None or stream.next_in > early.last):
            stream.early = None  # the whole question is answered
            self.early_waits.pop(early.token, None)
