"""Keeping: a root holds on to a stream nobody is in any more, for ``keep_idle`` seconds.

Why. A stream's numbering, its uid table (a retried publish is acknowledged with its first
number, not stored twice) and its epochs live at its root. When the last member leaves
(a script's publisher disconnects, the last subscriber unsubscribes), were every node to
prune the stream, the root too, all of that would go with it: the next publisher would
start again at packet 0, a Spark task retried after that point would be stored a second
time, and a subscriber that comes a minute after a publisher left would find nothing to
catch up from.

How. A root whose stream has a history (it numbered a packet, or holds uids) stays when it
goes idle: an ordinary root with no members. A subscriber or publisher that comes within
``keep_idle`` is routed to it like to any root (it is still the node closest to the key),
joins, and numbering goes on where it stopped; a late subscriber is caught up from its
window. Meanwhile it probes for other roots and hands the stream to a closer node as any
root does; a kept stream that stops being the root (a merge, a handoff) is pruned as soon
as it is idle, since its history went up to the new root (``push_up``).

Bounds. A kept stream is not work pending (``Node.busy``): it is a steady state, like a
root with members. It counts against ``max_streams`` but yields: when the node needs room
for another stream, the stream kept longest is dropped first (``Admission.has_room`` asks
``Keeping.oldest_idle``). Its memory is one window and one uid table, as while it had
members.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.streams import State, Stream
from overlay.core.timers import TimerQueue

KEEP_TIMER = "keep"


class Keeping:
    """The streams a root keeps while idle, each with its keep timer."""

    __slots__ = ("_config", "_forget", "_streams", "_timers", "_tokens", "kept")

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        timers: TimerQueue,
        forget: Callable[[Stream], None],  # drop a stream, leaving its parent (``leaving``)
    ) -> None:
        self._config = config
        self._streams = streams
        self._timers = timers
        self._forget = forget
        self.kept: dict[int, bytes] = {}  # keep timer token -> key, oldest first
        self._tokens = 0
        timers.on(KEEP_TIMER, self.on_timer)

    def keep(self, now: float, stream: Stream) -> bool:
        """``stream`` is idle: whether it stays, as a root with a history (see the notes).
        A stream already kept keeps its first deadline: a root's own probes and looks end
        in ``Leaving.prune`` too, and must not put its end off for ever."""
        if stream.state is not State.ROOT or self._config.keep_idle <= 0:
            return False
        if stream.root.kept is not None:
            return True
        if stream.high is None and not stream.uids:
            return False  # nothing numbered: nothing to keep
        self._tokens += 1
        token = self._tokens
        stream.root.kept = token
        self.kept[token] = stream.key
        self._timers.add(now + self._config.keep_idle, (KEEP_TIMER, token, 0))
        return True

    def unkeep(self, stream: Stream) -> None:
        """``stream`` has a member again (or goes): it is no longer kept."""
        if stream.root.kept is not None:
            self.kept.pop(stream.root.kept, None)
            stream.root.kept = None

    def on_timer(self, now: float, token: int, attempt: int) -> None:
        key = self.kept.pop(token, None)
        stream = None if key is None else self._streams.get(key)
        if stream is not None and stream.root.kept == token:
            stream.root.kept = None
            if stream.idle:
                self._forget(stream)

    def oldest_idle(self) -> Stream | None:
        """The stream kept longest that is still idle, if any: the first to give up its
        place when the node needs room for another (``Admission.has_room``)."""
        for kept in self.kept.values():  # oldest first: tokens only grow
            stream = self._streams.get(kept)
            if stream is not None and stream.idle:
                return stream
        return None
