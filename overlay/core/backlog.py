"""Backlog: a root numbers no new packet while its window holds nothing but uncommitted ones.

Why. Members show their clients only what the root has committed (``showing``), so a
member's mark trails the newest packet it holds by everything numbered and not yet
committed. Nothing else bounds that: a fast publisher (thousands of packets in flight)
drives it past a window, a member's window evicts packets its clients have not been shown,
and they are told those were missed though every one was acknowledged. The root's own
clients are exposed the same way: a root shows only what it committed, and its window is
no larger than anyone's.

How. A root whose window is at its bounds (packets or bytes) and holds no committed packet
(``full``) holds a new publish in ``RootState.backlog`` instead of numbering it; each event
that moves its commit point lets the backlog go on, oldest first, until the window is full
again (``drain``, after every event: ``PacketFlow.after_event``). A new publish waits behind the
backlog too, so each publisher's packets keep their order. So the root runs at most one
window ahead of its commit point, and a member at most about that far ahead of its mark,
which its window holds (it keeps what its clients are owed up to twice its bounds).

Only new publishes wait. A retry of a numbered uid is answered, and pushes and claims,
which bring back numbers the tree already gave, are taken as before. A root that stops
being one, or enters a grace, routes its backlog as new publishes: up the tree it
joined, or to ``queued`` for the grace's end or its next parent. At most
``max_queued_publishes`` wait; past that a publish is refused ``BUSY``, as at any root
that cannot take it. A child that never answers holds the commit point for at most
``confirm_timeout`` (``commits``); then none applies, and the backlog goes on.

Rules that keep the bound, each a test in ``tests/test_backlog.py``: numbers pending
a publisher's confirmation count (a peer's burst went past a window through ``pending``);
a held publish whose child left is dropped, not numbered for a confirmation that cannot
come; a resend through another child is answered that way; and local publishes whose
pending numbers were dropped go back to the front (``requeue``), so a client's later
publish is not numbered before their retries.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.local_publishes import LocalPublish
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, State, Stream
from overlay.messages import PublishData, PublishError, PublishRejected


def full(stream: Stream) -> bool:
    """Whether a root must hold new publishes back: a window's worth of packets is
    uncommitted (those stored above its commit point, and those pending a publisher's
    confirmation, which reach the window only once confirmed), or its window is at its
    byte bound and every packet in it is uncommitted. Either way the next would push one
    out of a member's window before the member may show it. Packets, not numbers: a hole
    announced missed takes no room, and counted it would hold publishes back with nothing
    to commit."""
    committed, packets = stream.root.committed, stream.window.packets
    above = 0 if committed is None else len(packets) - packets.bisect_right(committed)
    if above + len(stream.root.pending) >= stream.window.max_packets:
        return True
    if committed is None or not packets or stream.window.bytes < stream.window.max_bytes:
        return False
    return packets.first() > committed


class Backlog:
    """The publishes roots hold back until their window has room (see the notes)."""

    __slots__ = ("backlogged", "config", "draining", "local", "reply", "route", "stats", "streams")

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        local: dict[int, LocalPublish],
        reply: Callable[[Source, PublishRejected], None],
        route: Callable[[float, Stream, Source, PublishData], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.local = local
        self.reply = reply
        self.route = route
        self.backlogged: dict[bytes, None] = {}  # roots holding publishes back
        self.draining: bytes | None = None  # the stream whose backlog ``drain`` lets go on

    def held_back(self, stream: Stream, source: Source, message: PublishData) -> bool:
        """At a root out of its grace, about to number ``message``: hold it in the backlog
        if it must wait. True if it was held (or refused for want of room)."""
        if message.pushed or (stream.uids is not None and message.uid in stream.uids):
            return False
        behind = bool(stream.root.backlog) and self.draining != stream.key
        if not behind and not full(stream):
            return False
        if message.uid in stream.root.backlog:
            # A resend of one that waits already: answered the way it came last (its node
            # may have moved under another child), in its first place.
            stream.root.backlog[message.uid] = (source, message)
            return True
        if len(stream.root.backlog) >= self.config.max_queued_publishes:
            self.stats.publish_rejected += 1
            self.reply(source, PublishRejected(message.uid, message.key, PublishError.BUSY))
            return True
        stream.root.backlog[message.uid] = (source, message)
        self.stats.held_back += 1
        self.backlogged[stream.key] = None
        return True

    def drain(self, now: float) -> None:
        """After an event: let each root's backlog go on while its window has room; a
        stream no longer a root out of its grace routes its backlog afresh."""
        for key in list(self.backlogged):
            stream = self.streams.get(key)
            if stream is None:
                del self.backlogged[key]
                continue
            backlog = stream.root.backlog
            if stream.state is not State.ROOT or stream.root.recover_until is not None:
                # Routed as they came: up the tree it joined, or to ``queued`` for the
                # grace's end or the next parent (``_route``).
                waiting = list(backlog.values())
                backlog.clear()
                for source, message in waiting:
                    if self._gone(stream, source, message.uid):
                        continue
                    self.route(now, stream, source, message)
            self.draining = key
            while backlog and not full(stream):
                uid = next(iter(backlog))
                source, message = backlog.pop(uid)
                if self._gone(stream, source, uid):
                    continue
                self.route(now, stream, source, message)
            self.draining = None
            if not backlog:
                del self.backlogged[key]

    def requeue(self, stream: Stream, dropped: list[tuple[Source, PublishData]]) -> None:
        """Local publishes whose pending numbers were dropped (``confirming``) go back to
        the front of the backlog, in their old order, ahead of what their clients
        published after them (a client's publish held back behind them was numbered
        before their retries). A peer's node retries its own. In place: ``drain`` may be
        going through this very backlog."""
        front = {m.uid: (source, m) for source, m in dropped if not isinstance(source, bytes)}
        if not front:
            return
        backlog = stream.root.backlog
        rest = [(u, e) for u, e in backlog.items() if u not in front]
        backlog.clear()
        backlog.update(front)
        backlog.update(rest)
        self.backlogged[stream.key] = None

    def _gone(self, stream: Stream, source: Source, uid: int) -> bool:
        """Whether a held publish has nobody to answer: its local client gave up or went
        away, or the child it came through left (a number sent that way could not be
        confirmed, and would stall what is pending behind it). Its node retries."""
        if isinstance(source, bytes):
            return source not in stream.children
        return uid not in self.local
