"""Publish windows: what a node tells each client of its port about a stream's publishes.

Why. A node sends a stream's local publishes up its tree only as fast as the tree answers
them (``overlay.core.credit``, paced by ``overlay.core.pace``) and holds the rest in order.
A held publish only waits, and its wait is in its packet's latency: a client that keeps
1,000 unanswered on a tree that takes 80 at once makes every packet wait behind 920 others.
So the node tells each client how many of a stream's publishes are worth keeping
unanswered (``PublishWindow``, client protocol version 2), and a publisher that asks for
room before each publish (``overlay.client.connection.ClientConnection.may_publish``, the
clients' ``room``) keeps to it: it then waits in its own call, and its packets reach the
tree about as soon as they are made. Keeping to it is the publisher's choice: on a loaded
machine, the wait for the client's next publish to cross the port after each answer cost a
1,000-node testnet a third of its rate in some runs, where the node's own hold costs none.

What is told. The stream's window at this node (``NodeHost.publish_window``: the pace's
window, and no more publishes than the byte credit takes at their recent size), shared
among the sessions that have publishes of the stream unanswered (``Publishers``, version 1
clients counted though told nothing): what the others leave of it, and at least an even
share (and at least 1). The credit is one per stream and node, so eight clients each told
the whole window would together hold seven windows at the node; a client that publishes
one at a time takes one, not an eighth.

When. A session looks at a stream's window once the step that read a publish of it, or
delivered an answer to one, has ended (``ClientSession.flush``), and tells it if it differs
from what it told last. So a window that moves reaches a client with its next publish or
answer of that stream, which a publisher waiting for room is about to get.

Bounds. A session keeps the uid and stream of each of its publishes unanswered (bounded by
``max_unanswered_publishes``: past it the session stops reading) and the windows of the
``TOLD_STREAMS`` streams it told most recently, as many as it may have publishes
unanswered by default; one forgotten is told again when next published to or answered.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from overlay.client.protocol import MAX_PUBLISH_WINDOW, PublishWindow

# Streams whose window a session remembers telling: as many as the streams it may have
# publishes unanswered in (``ClientPortConfig.max_unanswered_publishes``), so that a
# stream in use is not told its window again with every answer.
TOLD_STREAMS = 4096


class WindowSource(Protocol):
    def publish_window(self, key: bytes) -> int: ...


class Publishers:
    """For one node's port, per stream: how many sessions have publishes unanswered
    (``counts``), and how many publishes those are in all (``out``)."""

    __slots__ = ("counts", "out")

    def __init__(self) -> None:
        self.counts: dict[bytes, int] = {}
        self.out: dict[bytes, int] = {}

    def join(self, key: bytes) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def leave(self, key: bytes) -> None:
        count = self.counts[key] - 1
        if count:
            self.counts[key] = count
        else:
            del self.counts[key]

    def add(self, key: bytes, publishes: int) -> None:
        """``publishes`` more (fewer, if negative) are unanswered of stream ``key``."""
        out = self.out.get(key, 0) + publishes
        if out:
            self.out[key] = out
        else:
            del self.out[key]


class PublishWindows:
    """One session's publishes unanswered by stream, and the windows it told (the notes)."""

    __slots__ = ("_host", "_out", "_publishers", "_told", "_uids", "moved")

    def __init__(self, host: WindowSource, publishers: Publishers) -> None:
        self._host = host
        self._publishers = publishers
        self._uids: dict[int, bytes] = {}  # publish uid -> its stream, while unanswered
        self._out: dict[bytes, int] = {}  # stream -> publishes unanswered
        self._told: OrderedDict[bytes, int] = OrderedDict()
        self.moved: set[bytes] = set()  # streams to look at once the step ends

    def published(self, uid: int, key: bytes) -> None:
        """The client published ``uid`` to stream ``key`` (again, if it is unanswered)."""
        self.moved.add(key)
        if uid in self._uids:
            return
        self._uids[uid] = key
        out = self._out.get(key, 0)
        if not out:
            self._publishers.join(key)
        self._out[key] = out + 1
        self._publishers.add(key, 1)

    def answered(self, uid: int) -> None:
        """Publish ``uid`` was answered (or was never this session's)."""
        key = self._uids.pop(uid, None)
        if key is None:
            return
        self.moved.add(key)
        self._publishers.add(key, -1)
        out = self._out[key] - 1
        if out:
            self._out[key] = out
        else:
            del self._out[key]
            self._publishers.leave(key)

    def tell(self) -> list[PublishWindow]:
        """The windows of the streams looked at that differ from what was told last."""
        told, publishers = self._told, self._publishers
        changed = []
        for key in self.moved:
            mine = self._out.get(key, 0)
            sharing = publishers.counts.get(key, 0) + (not mine)  # (this session counted)
            whole = self._host.publish_window(key)
            others = publishers.out.get(key, 0) - mine
            window = min(max(1, whole // sharing, whole - others), MAX_PUBLISH_WINDOW)
            if told.get(key) != window:
                changed.append(PublishWindow(key, window))
            told[key] = window
            told.move_to_end(key)
        self.moved.clear()
        while len(told) > TOLD_STREAMS:
            told.popitem(last=False)
        return changed

    def close(self) -> None:
        """The session ended: its publishes no longer share any stream's window."""
        for key, out in self._out.items():
            self._publishers.leave(key)
            self._publishers.add(key, -out)
        self._out.clear()
        self._uids.clear()
