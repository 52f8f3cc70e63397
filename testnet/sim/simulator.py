"""A deterministic discrete-event simulator: the second driver of the sans-IO core.

It runs ``n`` ``overlay.core.Node`` cores on a seeded small-world topology with a virtual
clock. Every effect a core returns is carried out here exactly as the trio runtime does over
TCP: ``Send`` becomes a delivery after the link's latency (or a loss, or two deliveries),
``SetTimer`` an event at that time, ``DropPeer`` a closed link, ``Deliver`` an entry in the
log of the local client it names. Nothing else touches a core's state.

Determinism: one event heap ordered by (time, sequence number), every random draw from
seeded ``random.Random`` objects, no iteration over hash-ordered sets. The same seed gives the
same run, event for event; ``digest`` fingerprints it.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from keyspace.topology import Topology, small_world
from overlay.codec import decode, encode
from overlay.core.config import NodeConfig
from overlay.core.effects import ClientId, Deliver, DropPeer, Effect, Send, SetTimer
from overlay.core.events import ClientEvent, Epoch, Packet
from overlay.core.node import Node
from overlay.messages import (
    Hello,
    Message,
    PacketKind,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)
from testnet.sim.network import Network, NetworkModel

_MESSAGE, _TIMER, _CALL = 0, 1, 2
_PACKET_EVENTS = (Packet, Epoch)


@dataclass(frozen=True, slots=True)
class SimConfig:
    nodes: int = 1000
    degree: int = 16
    seed: int = 1
    node: NodeConfig = field(default_factory=NodeConfig)
    network: NetworkModel = field(default_factory=NetworkModel)
    # Encode and decode every message on the way, as the real runtime does. Slower; the
    # tests turn it on so the codec is exercised by every protocol exchange.
    wire: bool = False
    # Fingerprint every delivery, for determinism checks.
    trace: bool = False
    # Keep packet events (Packet, Epoch) in ``client_log`` too. A publish run at scale turns
    # it off and reads them through ``on_deliver`` instead: a million deliveries are a lot
    # of objects. Every other client event is always logged.
    log_packets: bool = True


def node_id(index: int) -> bytes:
    """The simulated node id of node ``index``: short, unique, and ordered like the index."""
    return index.to_bytes(4, "big")


class Simulator:
    def __init__(self, config: SimConfig, topology: Topology | None = None) -> None:
        self.config = config
        seed = config.seed
        self.topology = topology or small_world(
            config.nodes, config.degree, random.Random(f"topology-{seed}")
        )
        n = len(self.topology.locations)
        self.network = Network(n, config.network, random.Random(f"network-{seed}"))
        # One generator for every core: the event order is deterministic, so the draws are
        # too, and 10^5 nodes do not each carry a 2.5 KB Mersenne Twister state.
        self._node_rng = random.Random(f"nodes-{seed}")
        self.ids = [node_id(i) for i in range(n)]
        self.index = {nid: i for i, nid in enumerate(self.ids)}
        self.nodes = [self._new_node(i) for i in range(n)]
        self.alive = [True] * n
        self.now = 0.0
        self._queue: list[tuple[float, int, int, int, int, object]] = []
        self._seq = 0
        self._wake: dict[int, float] = {}
        self._cut: set[tuple[int, int]] = set()  # links that are down (partitions, crashes)
        self._digest = hashlib.sha256() if config.trace else None
        self.client_log: dict[tuple[int, ClientId], list[tuple[float, ClientEvent]]] = {}
        self.sent: Counter[str] = Counter()
        self.lost = 0
        self.duplicated = 0
        self.success_hops: Counter[int] = Counter()  # uid -> success replies relayed
        self.events = 0
        self.last_message_at = 0.0  # when the network last carried a message
        self.on_deliver: Callable[[int, ClientId, ClientEvent], None] | None = None
        self._connect_all()

    def _new_node(self, i: int) -> Node:
        return Node(self.ids[i], self.topology.locations[i], self._node_rng, self.config.node)

    # --- topology ---------------------------------------------------------------------------

    def _connect_all(self) -> None:
        """Bring every topology link up at time 0. The Hello exchange is applied directly
        instead of over the simulated latency: at 10^5 nodes that is 1.6 million messages
        that only set up the start state."""
        for a, b in self.topology.edges():
            self._hello(a, b)
            self._hello(b, a)
        # Likewise the first friend-of-a-friend announcements, once every link is up.
        for i, node in enumerate(self.nodes):
            for effect in node.announce_neighbours(self.now):
                if type(effect) is Send:
                    j = self.index[effect.peer]
                    self._apply(j, self.nodes[j].receive(self.now, self.ids[i], effect.message))

    def _hello(self, a: int, b: int) -> None:
        node_b = self.nodes[b]
        self._apply(
            a, self.nodes[a].receive(self.now, self.ids[b], Hello(node_b.location, node_b.boot_id))
        )

    def linked(self, a: int, b: int) -> bool:
        return self.ids[b] in self.nodes[a].peers and (min(a, b), max(a, b)) not in self._cut

    # --- scheduling -------------------------------------------------------------------------

    def _push(self, at: float, kind: int, a: int, b: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, a, b, payload))

    def call_at(self, at: float, action: Callable[[], None]) -> None:
        """Run ``action`` (a workload step) at virtual time ``at``."""
        self._push(at, _CALL, -1, -1, action)

    def subscribe(self, i: int, key: bytes, client: ClientId) -> None:
        self._apply(i, self.nodes[i].subscribe(self.now, key, client))

    def subscribe_from(
        self, i: int, key: bytes, client: ClientId, last_seen: int | None, atomic: bool
    ) -> None:
        """Subscribe with catch-up (``last_seen``) or atomic epochs."""
        self._apply(
            i, self.nodes[i].subscribe(self.now, key, client, last_seen=last_seen, atomic=atomic)
        )

    def unsubscribe(self, i: int, key: bytes, client: ClientId) -> None:
        self._apply(i, self.nodes[i].unsubscribe(self.now, key, client))

    def publish(
        self,
        i: int,
        key: bytes,
        client: ClientId,
        uid: int,
        data: bytes,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
        packet: int | None = None,
    ) -> None:
        self._apply(
            i,
            self.nodes[i].publish(
                self.now, key, client, uid, data, epoch=epoch, kind=kind, packet=packet
            ),
        )

    def run(self, until: float | None = None) -> None:
        """Process events in order until none is left (or the next is after ``until``)."""
        queue = self._queue
        while queue:
            if until is not None and queue[0][0] > until:
                self.now = until
                return
            at, _, kind, a, b, payload = heapq.heappop(queue)
            self.now = at
            self.events += 1
            if kind == _MESSAGE:
                self._deliver_message(a, b, payload)  # type: ignore[arg-type]
            elif kind == _TIMER:
                if self._wake.get(a) == at and self.alive[a]:
                    del self._wake[a]
                    self._apply(a, self.nodes[a].handle_timer(at))
            else:
                payload()  # type: ignore[operator]

    def _deliver_message(self, src: int, dst: int, message: Message) -> None:
        if not self.alive[dst] or not self.linked(dst, src):
            self.lost += 1
            return
        self.last_message_at = self.now
        if self._digest is not None:
            self._digest.update(f"{self.now!r} {src} {dst} {message!r}\n".encode())
        if isinstance(message, SubscribeSucceeded | SubscribeSucceededNewRoot):
            self.success_hops[message.uid] += 1
        self._apply(dst, self.nodes[dst].receive(self.now, self.ids[src], message))

    # --- effects ----------------------------------------------------------------------------

    def _apply(self, i: int, effects: list[Effect]) -> None:
        for effect in effects:
            if type(effect) is Send:
                self._send(i, effect)
            elif type(effect) is SetTimer:
                at = max(effect.at, self.now)
                if self._wake.get(i) != at:
                    self._wake[i] = at
                    self._push(at, _TIMER, i, -1, None)
            elif type(effect) is Deliver:
                if self.config.log_packets or type(effect.event) not in _PACKET_EVENTS:
                    log = self.client_log.setdefault((i, effect.client), [])
                    log.append((self.now, effect.event))
                if self.on_deliver is not None:
                    self.on_deliver(i, effect.client, effect.event)
            elif type(effect) is DropPeer:
                self.disconnect(i, self.index[effect.peer])

    def _send(self, i: int, effect: Send) -> None:
        j = self.index.get(effect.peer)
        message = effect.message
        self.sent[type(message).__name__] += 1
        if j is None or not self.linked(i, j):
            self.lost += 1
            return
        if self.config.wire:
            message = decode(encode(message))
        arrivals = self.network.arrivals(self.now, i, j)
        if not arrivals:
            self.lost += 1
        self.duplicated += len(arrivals) > 1
        for at in arrivals:
            self._push(at, _MESSAGE, i, j, message)

    # --- faults -----------------------------------------------------------------------------

    def disconnect(self, a: int, b: int) -> None:
        """Close the link a-b on both sides (each core learns it at once, as TCP would)."""
        if self.ids[b] in self.nodes[a].peers:
            self._apply(a, self.nodes[a].link_down(self.now, self.ids[b]))
        if self.ids[a] in self.nodes[b].peers:
            self._apply(b, self.nodes[b].link_down(self.now, self.ids[a]))

    # --- results ----------------------------------------------------------------------------

    def digest(self) -> str:
        """Fingerprint of every delivery so far (requires ``trace``)."""
        if self._digest is None:
            raise ValueError("the simulator was built without trace=True")
        return self._digest.hexdigest()

    def events_for(self, i: int, client: ClientId) -> list[tuple[float, ClientEvent]]:
        return self.client_log.get((i, client), [])
