"""Keeping: a root holds on to a stream nobody is in any more, for ``keep_idle`` seconds.

Why. A stream's numbering, its uid table (a retried publish is acknowledged with its first
number, not stored twice) and its epochs live at its root. When the last member left
(a script's publisher disconnected, the last subscriber unsubscribed), every node pruned
the stream, the root too, and all of that went with it: the next publisher started again
at packet 0, a Spark task retried after that point was stored a second time, and a
subscriber that came a minute after a publisher left found nothing to catch up from.

How. A root whose stream has a history (it numbered a packet, or holds uids) stays when it
goes idle: an ordinary root with no members. A subscriber or publisher that comes within
``keep_idle`` is routed to it like to any root (it is still the node closest to the key),
joins, and numbering goes on where it stopped; a late subscriber is caught up from its
window. Meanwhile it probes for other roots and hands the stream to a closer node as any
root does; a kept stream that stops being the root (a merge, a handoff) is pruned as soon
as it is idle, since its history went up to the new root (``push_up``).

Bounds. A kept stream is not work pending (``Node.busy``): it is a steady state, like a
root with members. It counts against ``max_streams`` but yields: when the node needs room
for another stream, the stream kept longest is dropped first (``_has_room``). Its memory
is one window and one uid table, as while it had members.
"""

from __future__ import annotations

from typing import Protocol

from overlay.core.config import NodeConfig
from overlay.core.streams import State, Stream
from overlay.core.timers import TimerQueue

KEEP_TIMER = "keep"


class _NodeParts(Protocol):
    """What these methods use of the ``Node`` they are mixed into (for the type checker)."""

    config: NodeConfig
    streams: dict[bytes, Stream]
    _routes_by_key: dict[bytes, dict[int, None]]
    _timers: TimerQueue
    _kept: dict[int, bytes]
    _keep_tokens: int

    def _unkeep(self, stream: Stream) -> None: ...
    def _forget(self, stream: Stream) -> None: ...


class Keeping:
    """Mixed into ``Node``; each method's ``self`` is the node (``_NodeParts``)."""

    def _keep(self: _NodeParts, now: float, stream: Stream) -> bool:
        """``stream`` is idle: whether it stays, as a root with a history (see the notes).
        A stream already kept keeps its first deadline: a root's own probes and looks end
        in ``_prune`` too, and must not put its end off for ever."""
        if stream.state is not State.ROOT or self.config.keep_idle <= 0:
            return False
        if stream.kept is not None:
            return True
        if stream.high is None and not stream.uids:
            return False  # nothing numbered: nothing to keep
        self._keep_tokens += 1
        token = self._keep_tokens
        stream.kept = token
        self._kept[token] = stream.key
        self._timers.add(now + self.config.keep_idle, (KEEP_TIMER, token, 0))
        return True

    def _unkeep(self: _NodeParts, stream: Stream) -> None:
        """``stream`` has a member again (or goes): it is no longer kept."""
        if stream.kept is not None:
            self._kept.pop(stream.kept, None)
            stream.kept = None

    def _on_keep_timer(self: _NodeParts, now: float, token: int, attempt: int) -> None:
        key = self._kept.pop(token, None)
        stream = None if key is None else self.streams.get(key)
        if stream is not None and stream.kept == token:
            stream.kept = None
            if stream.idle:
                self._forget(stream)

    def _has_room(self: _NodeParts, key: bytes) -> bool:
        """Streams carried plus streams being searched for stay within ``max_streams``; a
        kept stream gives up its place, the one kept longest first."""
        if key in self.streams or key in self._routes_by_key:
            return True
        busy = len(self.streams.keys() | self._routes_by_key.keys())
        if busy < self.config.max_streams:
            return True
        for kept in list(self._kept.values()):  # oldest first: tokens only grow
            stream = self.streams.get(kept)
            if stream is not None and stream.idle:
                self._forget(stream)
                return True
        return False
