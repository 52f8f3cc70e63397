"""Leaving a tree: the Unsubscribe that tells a parent we are not its child, held back while
a search of ours still waits on that peer, and pruning a stream nobody needs, after a while
if its last child died.

Why the hold. A search of ours that waits on ``peer`` may yet succeed there, and ``peer``
adopts us as it sends the success. An Unsubscribe sent meanwhile would reach it after the
adoption and undo it, leaving a child that names a parent that does not list it. So
``_leave`` notes it (``_unsettled``), and ``_settle`` sends it once the search stops waiting
on that peer, if we still are not its child.

Why the linger. A node whose last child *died* (not one that unsubscribed) may hold the only
live copies of recent packets: the branch below it is gone, and if its parent dies next,
the new root gathers the stream's past from whoever is left in the tree. Leaving at once
took those packets out of reach (chaos: a relay whose children had both died left; the root
died 0.3 s later, and packets 11 and 12 then reached no subscriber, though the relay held
them). So such a node stays for ``linger`` seconds, an ordinary member with no children:
it takes packets, answers queries, and restarts like any other if its parent dies. Then it
leaves, if nobody needs it by then. Only a node holding packets lingers: one without has
nothing to keep.
"""

from __future__ import annotations

from typing import Protocol

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.peers import PeerTable
from overlay.core.routing import Route
from overlay.core.streams import Stream
from overlay.core.timers import TimerQueue
from overlay.messages import Message, Unsubscribe

LINGER_TIMER = "linger"


class _NodeParts(Protocol):
    """What these methods use of the ``Node`` they are mixed into (for the type checker)."""

    config: NodeConfig
    peers: PeerTable
    streams: dict[bytes, Stream]
    routes: dict[int, Route]
    _routes_by_key: dict[bytes, dict[int, None]]
    _parked: dict[int, None]
    _unsettled: set[tuple[PeerId, bytes]]
    _timers: TimerQueue
    _linger_keys: dict[int, bytes]
    _linger_tokens: int

    def _send(self, peer: PeerId, message: Message) -> None: ...
    def _leave(self, peer: PeerId, key: bytes) -> None: ...
    def _waiting_on(self, peer: PeerId, key: bytes) -> bool: ...
    def _child_gone(self, now: float, stream: Stream, peer: PeerId) -> None: ...
    def _prune(self, now: float, stream: Stream) -> None: ...
    def _keep(self, now: float, stream: Stream) -> bool: ...
    def _unkeep(self, stream: Stream) -> None: ...
    def _forget(self, stream: Stream) -> None: ...
    def _drop_route(self, route: Route) -> None: ...


class Leaving:
    """Mixed into ``Node``; each method's ``self`` is the node (``_NodeParts``)."""

    def _refuse_parent(self: _NodeParts, peer: PeerId, key: bytes) -> None:
        stream = self.streams.get(key)
        if stream is None or stream.parent != peer:
            self._leave(peer, key)

    def _leave(self: _NodeParts, peer: PeerId, key: bytes) -> None:
        """Tell ``peer`` we are not its child in ``key``'s tree, or, while a search of ours
        waits on ``peer``, leave that to ``_settle`` (see the module notes)."""
        if self._waiting_on(peer, key):
            self._unsettled.add((peer, key))
        else:
            self._send(peer, Unsubscribe(key))

    def _waiting_on(self: _NodeParts, peer: PeerId, key: bytes) -> bool:
        routes = self.routes
        return any(routes[uid].current == peer for uid in self._routes_by_key.get(key, ()))

    def _settle(self: _NodeParts, peer: PeerId | None, key: bytes) -> None:
        """A search stopped waiting on ``peer``: send the Unsubscribe ``_leave`` held back,
        if we still are not its child."""
        if peer is None or (peer, key) not in self._unsettled or self._waiting_on(peer, key):
            return
        self._unsettled.discard((peer, key))
        stream = self.streams.get(key)
        if peer in self.peers and (stream is None or stream.parent != peer):
            self._send(peer, Unsubscribe(key))

    def _on_unsubscribe(self: _NodeParts, now: float, peer: PeerId, key: bytes) -> None:
        stream = self.streams.get(key)
        if stream is not None and peer in stream.children:
            self._child_gone(now, stream, peer)

    def _prune(self: _NodeParts, now: float, stream: Stream) -> None:
        """Leave the tree if nobody needs us: "Unsubscribe prunes the tree: a node with no
        children and no local subscribers leaves its parent" (DESIGN). A root with a
        history stays a while (``keeping``)."""
        if not stream.idle or self.streams.get(stream.key) is not stream:
            return
        if not self._keep(now, stream):
            self._forget(stream)

    def _forget(self: _NodeParts, stream: Stream) -> None:
        """Drop ``stream``, leaving our parent."""
        # A JOINING stream nobody waits for goes too; its search, still running, ends in a
        # membership that is pruned at once, or fails quietly.
        self._unkeep(stream)
        if stream.parent is not None and stream.parent in self.peers:
            self._leave(stream.parent, stream.key)
        del self.streams[stream.key]
        # Our own search for it that waits for a peer to come up (``hops``) serves nobody
        # now: it would join the tree only to leave it. A node cut off from every peer kept
        # one for good (chaos: a relay whose five neighbours all died).
        for uid in [u for u in self._routes_by_key.get(stream.key, ()) if u in self._parked]:
            self._drop_route(self.routes[uid])

    def _linger(self: _NodeParts, now: float, stream: Stream) -> None:
        """Our last child died and nobody else needs us: stay ``linger`` seconds if we hold
        packets (see the module notes)."""
        if not stream.idle or not len(stream.window) or self.config.linger <= 0:
            return
        self._linger_tokens += 1
        token = self._linger_tokens
        stream.linger = token
        self._linger_keys[token] = stream.key
        self._timers.add(now + self.config.linger, (LINGER_TIMER, token, 0))

    def _on_linger_timer(self: _NodeParts, now: float, token: int, attempt: int) -> None:
        key = self._linger_keys.pop(token, None)
        stream = None if key is None else self.streams.get(key)
        if stream is not None and stream.linger == token:
            stream.linger = None
            self._prune(now, stream)
