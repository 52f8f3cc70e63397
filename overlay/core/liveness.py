"""Liveness and friend-of-a-friend announcements: what a node tells every peer, stream or not.

Heartbeats (pub0sub): every ``heartbeat_interval`` a node sends each peer a Heartbeat and drops
any peer silent for ``dead_after``, so a dead or cut-off peer is noticed in bounded time
whatever the transport says. Announcements (Freenet 0.7.5): after links change, debounced by
``announce_delay``, each peer is told where our other peers are, one message per peer.
"""

from __future__ import annotations

from collections.abc import Callable

from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.probes import Probes
from overlay.core.publishing import PacketFlow
from overlay.core.stats import NodeStats
from overlay.core.timers import TimerQueue
from overlay.messages import MAX_NEIGHBOURS, Heartbeat, Neighbours

ANNOUNCE_TIMER = "announce"
HEARTBEAT_TIMER = "heartbeat"


class Liveness:
    """The heartbeat rounds and the debounced Neighbours announcement, with their timers."""

    __slots__ = (
        "_catch_ups",
        "_config",
        "_flow",
        "_forget_peer",
        "_out",
        "_peers",
        "_probes",
        "_stats",
        "_timers",
        "announce_at",
        "beating",
        "beats",
    )

    def __init__(
        self,
        config: NodeConfig,
        peers: PeerTable,
        stats: NodeStats,
        timers: TimerQueue,
        out: Outbox,
        flow: PacketFlow,
        catch_ups: CatchUpBudget,
        probes: Probes,
        forget_peer: Callable[[float, PeerId, bool], None],  # (now, peer, at_once): ``restarts``
    ) -> None:
        self._config = config
        self._peers = peers
        self._stats = stats
        self._timers = timers
        self._out = out
        self._flow = flow
        self._catch_ups = catch_ups
        self._probes = probes
        self._forget_peer = forget_peer
        self.beats = 0  # heartbeat rounds so far; numbers the live heartbeat timer
        self.beating = False  # rounds run; they start at the first peer's Hello
        self.announce_at: float | None = None  # a Neighbours announcement is due then
        timers.on(HEARTBEAT_TIMER, self.on_heartbeat_timer)
        timers.on(ANNOUNCE_TIMER, self.on_announce_timer)

    def start(self, now: float) -> None:
        """A peer said Hello: the heartbeat rounds run, if they did not yet."""
        if not self.beating:
            self.beating = True
            self._timers.add(
                now + self._config.heartbeat_interval, (HEARTBEAT_TIMER, self.beats, 0)
            )

    def on_heartbeat_timer(self, now: float, round_: int, attempt: int) -> None:
        if round_ == self.beats:  # (an older round's timer is stale)
            self._beat(now)
            self._flow.on_beat(now)

    def on_announce_timer(self, now: float, token: int, attempt: int) -> None:
        if self.announce_at is not None:
            self.announce()

    def _beat(self, now: float) -> None:
        """One heartbeat round: drop every peer silent for ``dead_after``, then tell every
        other peer we are alive. A dead peer is found within ``dead_after`` plus one
        interval of its last message, without help from the transport (a cut cable, a
        frozen process and a lost route all look the same: silence)."""
        config = self._config
        peers = self._peers
        silent = [p for p in peers if now - p.heard > config.dead_after]
        self.beats += 1
        left = len(peers) > len(silent)
        if left:
            # The next round is armed before the dead are dropped: a fault in dropping one
            # (contained by the driver, which goes on with the queued timers) must not end
            # liveness for good.
            self._timers.add(now + config.heartbeat_interval, (HEARTBEAT_TIMER, self.beats, 0))
        else:
            self.beating = False  # the next Hello starts the rounds again
        for peer in silent:
            self._out.drop(
                peer.id,
                f"silent for {now - peer.heard:.1f} s (limit {config.dead_after} s)",
                fault=False,
            )
            peers.remove(peer.id)
            self._catch_ups.forget(peer.id)
            self._stats.dead_peers += 1
            self._forget_peer(now, peer.id, False)  # (not at once: it fell silent)
        if silent:
            self.links_changed(now)
        if not left:
            return
        beat = Heartbeat(self.beats)
        for peer in peers:
            self._out.send(peer.id, beat)
        self._probes.probe_roots(now, self.beats)  # every few rounds (``probes``)
        self._flow.on_round()  # a root's marks and unanswered questions again

    def links_changed(self, now: float) -> None:
        """Links came or went: announce our peers after ``announce_delay``, unless due."""
        if self.announce_at is None:
            at = now + self._config.announce_delay
            self.announce_at = at
            self._timers.add(at, (ANNOUNCE_TIMER, 0, 0))

    def announce(self) -> None:
        """Tell every peer where our other peers are, now."""
        self.announce_at = None
        locations = sorted(peer.location for peer in self._peers)
        if len(locations) > MAX_NEIGHBOURS:
            # Keep an even spread around the circle rather than one arc of it.
            step = len(locations) / MAX_NEIGHBOURS
            locations = [locations[int(i * step)] for i in range(MAX_NEIGHBOURS)]
        message = Neighbours(tuple(locations))
        for peer in self._peers:
            self._out.send(peer.id, message)
