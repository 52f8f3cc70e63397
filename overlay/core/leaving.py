"""Leaving a tree: the Unsubscribe that tells a parent we are not its child, held back while
a search of ours still waits on that peer, and pruning a stream nobody needs, after a while
if its last child died.

Why the hold. A search of ours that waits on ``peer`` may yet succeed there, and ``peer``
adopts us as it sends the success. An Unsubscribe sent meanwhile would reach it after the
adoption and undo it, leaving a child that names a parent that does not list it. So
``Leaving.leave`` notes it (``unsettled``), and ``settle`` sends it once the search stops waiting
on that peer, if we still are not its child.

Why the linger. A node whose last child *died* (not one that unsubscribed) may hold the only
live copies of recent packets: the branch below it is gone, and if its parent dies next,
the new root gathers the stream's past from whoever is left in the tree. Leaving at once
takes those packets out of reach: should the root die soon after, they reach no subscriber,
though the relay held them. So such a node stays for ``linger`` seconds, an ordinary member
with no children: it takes packets, answers queries, and restarts like any other if its
parent dies. Then it leaves, if nobody needs it by then. Only a node holding packets
lingers: one without has nothing to keep.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.keeping import Keeping
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.searches import Searches
from overlay.core.streams import Stream
from overlay.core.timers import TimerQueue
from overlay.messages import Unsubscribe

LINGER_TIMER = "linger"


class Leaving:
    """The Unsubscribes held back, the streams lingering, and pruning."""

    __slots__ = (
        "_child_gone",
        "_config",
        "_keeping",
        "_linger_tokens",
        "_out",
        "_peers",
        "_searches",
        "_streams",
        "_timers",
        "linger_keys",
        "unsettled",
    )

    def __init__(
        self,
        config: NodeConfig,
        peers: PeerTable,
        streams: dict[bytes, Stream],
        timers: TimerQueue,
        out: Outbox,
        searches: Searches,
        keeping: Keeping,
        child_gone: Callable[[float, Stream, PeerId], None],  # a child left (``restarts``)
    ) -> None:
        self._config = config
        self._peers = peers
        self._streams = streams
        self._timers = timers
        self._out = out
        self._searches = searches
        self._keeping = keeping
        self._child_gone = child_gone
        self.unsettled: set[tuple[PeerId, bytes]] = set()  # Unsubscribes held back: ``leave``
        self.linger_keys: dict[int, bytes] = {}  # linger timer token -> key
        self._linger_tokens = 0
        timers.on(LINGER_TIMER, self.on_timer)

    def refuse_parent(self, peer: PeerId, key: bytes) -> None:
        stream = self._streams.get(key)
        if stream is None or stream.parent != peer:
            self.leave(peer, key)

    def leave(self, peer: PeerId, key: bytes) -> None:
        """Tell ``peer`` we are not its child in ``key``'s tree, or, while a search of ours
        waits on ``peer``, leave that to ``settle`` (see the module notes)."""
        if self._searches.waiting_on(peer, key):
            self.unsettled.add((peer, key))
        else:
            self._out.send(peer, Unsubscribe(key))

    def settle(self, peer: PeerId | None, key: bytes) -> None:
        """A search stopped waiting on ``peer``: send the Unsubscribe ``leave`` held back,
        if we still are not its child."""
        if (
            peer is None
            or (peer, key) not in self.unsettled
            or self._searches.waiting_on(peer, key)
        ):
            return
        self.unsettled.discard((peer, key))
        stream = self._streams.get(key)
        if peer in self._peers and (stream is None or stream.parent != peer):
            self._out.send(peer, Unsubscribe(key))

    def forget_peer(self, peer: PeerId) -> None:
        """``peer`` is gone: no Unsubscribe to it is held back any more."""
        self.unsettled = {(p, key) for p, key in self.unsettled if p != peer}

    def on_unsubscribe(self, now: float, peer: PeerId, key: bytes) -> None:
        stream = self._streams.get(key)
        if stream is not None and peer in stream.children:
            self._child_gone(now, stream, peer)

    def prune(self, now: float, stream: Stream) -> None:
        """Leave the tree if nobody needs us: "Unsubscribe prunes the tree: a node with no
        children and no local subscribers leaves its parent" (DESIGN). A root with a
        history stays a while (``keeping``)."""
        if not stream.idle or self._streams.get(stream.key) is not stream:
            return
        if not self._keeping.keep(now, stream):
            self.forget(stream)

    def forget(self, stream: Stream) -> None:
        """Drop ``stream``, leaving our parent."""
        # A JOINING stream nobody waits for goes too; its search, still running, ends in a
        # membership that is pruned at once, or fails quietly.
        self._keeping.unkeep(stream)
        if stream.parent is not None and stream.parent in self._peers:
            self.leave(stream.parent, stream.key)
        del self._streams[stream.key]
        # Our own search for it that waits for a peer to come up (``searches``) serves
        # nobody now: it would join the tree only to leave it. Kept, it would stay for good
        # on a node cut off from every peer.
        self._searches.drop_parked(stream.key)

    def linger(self, now: float, stream: Stream) -> None:
        """Our last child died and nobody else needs us: stay ``linger`` seconds if we hold
        packets (see the module notes)."""
        if not stream.idle or not len(stream.window) or self._config.linger <= 0:
            return
        self._linger_tokens += 1
        token = self._linger_tokens
        stream.linger = token
        self.linger_keys[token] = stream.key
        self._timers.add(now + self._config.linger, (LINGER_TIMER, token, 0))

    def on_timer(self, now: float, token: int, attempt: int) -> None:
        key = self.linger_keys.pop(token, None)
        stream = None if key is None else self._streams.get(key)
        if stream is not None and stream.linger == token:
            stream.linger = None
            self.prune(now, stream)
