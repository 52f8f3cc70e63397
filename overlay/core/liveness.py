"""Liveness and friend-of-a-friend announcements: what a node tells every peer, stream or not.

Heartbeats (pub0sub): every ``heartbeat_interval`` a node sends each peer a Heartbeat and drops
any peer silent for ``dead_after``, so a dead or cut-off peer is noticed in bounded time
whatever the transport says. Announcements (Freenet 0.7.5): after links change, debounced by
``announce_delay``, each peer is told where our other peers are, one message per peer.
"""

from __future__ import annotations

from typing import Protocol

from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.stats import NodeStats
from overlay.core.timers import TimerQueue
from overlay.messages import MAX_NEIGHBOURS, Heartbeat, Message, Neighbours

ANNOUNCE_TIMER = "announce"
HEARTBEAT_TIMER = "heartbeat"


class _NodeParts(Protocol):
    """What these methods use of the ``Node`` they are mixed into (for the type checker)."""

    config: NodeConfig
    peers: PeerTable
    stats: NodeStats
    _timers: TimerQueue
    out: Outbox
    _beats: int
    _beating: bool
    _announce_at: float | None
    flow: PacketFlow
    catch_ups: CatchUpBudget

    def _send(self, peer: PeerId, message: Message) -> None: ...
    def _forget_peer(self, now: float, peer: PeerId, at_once: bool = True) -> None: ...
    def _links_changed(self, now: float) -> None: ...
    def _announce(self) -> None: ...
    def _probe_roots(self, now: float) -> None: ...
    def _beat(self, now: float) -> None: ...


class Liveness:
    """Mixed into ``Node``; each method's ``self`` is the node (``_NodeParts``)."""

    _announce_at: float | None  # a Neighbours announcement is due then (None: none is)

    def _on_heartbeat_timer(self: _NodeParts, now: float, round_: int, attempt: int) -> None:
        if round_ == self._beats:  # (an older round's timer is stale)
            self._beat(now)
            self.flow.on_beat(now)

    def _on_announce_timer(self: _NodeParts, now: float, token: int, attempt: int) -> None:
        if self._announce_at is not None:
            self._announce()

    def _beat(self: _NodeParts, now: float) -> None:
        """One heartbeat round: drop every peer silent for ``dead_after``, then tell every
        other peer we are alive. A dead peer is found within ``dead_after`` plus one
        interval of its last message, without help from the transport (a cut cable, a
        frozen process and a lost route all look the same: silence)."""
        config = self.config
        silent = [p for p in self.peers if now - p.heard > config.dead_after]
        self._beats += 1
        left = len(self.peers) > len(silent)
        if left:
            # The next round is armed before the dead are dropped: a fault in dropping one
            # (contained by the driver, which goes on with the queued timers) must not end
            # liveness for good.
            self._timers.add(now + config.heartbeat_interval, (HEARTBEAT_TIMER, self._beats, 0))
        else:
            self._beating = False  # the next Hello starts the rounds again
        for peer in silent:
            self.out.drop(
                peer.id,
                f"silent for {now - peer.heard:.1f} s (limit {config.dead_after} s)",
                fault=False,
            )
            self.peers.remove(peer.id)
            self.catch_ups.forget(peer.id)
            self.stats.dead_peers += 1
            self._forget_peer(now, peer.id, at_once=False)
        if silent:
            self._links_changed(now)
        if not left:
            return
        beat = Heartbeat(self._beats)
        for peer in self.peers:
            self._send(peer.id, beat)
        self._probe_roots(now)  # every few rounds (``probes``)
        self.flow.repeat_marks()  # a root's mark, lest a notice was lost (``showing``)
        self.flow.overdue()  # a root's unanswered HeldQuery (``commits``)
        self.flow.confirm_overdue()  # a root's unconfirmed publishes (``confirming``)

    def _links_changed(self: _NodeParts, now: float) -> None:
        if self._announce_at is None:
            at = now + self.config.announce_delay
            self._announce_at = at
            self._timers.add(at, (ANNOUNCE_TIMER, 0, 0))

    def _announce(self: _NodeParts) -> None:
        self._announce_at = None
        locations = sorted(peer.location for peer in self.peers)
        if len(locations) > MAX_NEIGHBOURS:
            # Keep an even spread around the circle rather than one arc of it.
            step = len(locations) / MAX_NEIGHBOURS
            locations = [locations[int(i * step)] for i in range(MAX_NEIGHBOURS)]
        message = Neighbours(tuple(locations))
        for peer in self.peers:
            self._send(peer.id, message)
