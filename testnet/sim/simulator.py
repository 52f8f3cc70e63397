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

import dataclasses
import hashlib
import heapq
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from keyspace.topology import Topology, small_world
from overlay.codec import decode, encode
from overlay.core.config import NodeConfig
from overlay.core.effects import (
    ClientId,
    Deliver,
    DropPeer,
    Effect,
    PeerId,
    Remember,
    Send,
    SetTimer,
)
from overlay.core.events import ClientEvent, Epoch, Packet
from overlay.core.node import Node
from overlay.messages import (
    Heartbeat,
    Hello,
    Message,
    PacketKind,
    ProbeAnswer,
    RootProbe,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
)
from overlay.runtime.runs import Runs
from testnet.sim.links import Links
from testnet.sim.network import Network, NetworkModel
from testnet.sim.waves import Wave

# Event kinds. A heartbeat is its own kind: the most common event of an idle network, it
# takes a short path (``_deliver_beat``) that does what delivering it as a message would.
# In calm weather the heartbeats sent at one moment are a wave: one heap entry, sorted by
# arrival once due, delivered in a tight loop while they come first (``_WAVE``, and
# ``_SORTED_WAVE`` once sorted; see ``_run_wave``).
_MESSAGE, _TIMER, _CALL, _BEAT, _WAVE, _SORTED_WAVE = 0, 1, 2, 3, 4, 5

_PACKET_EVENTS = (Packet, Epoch)


@dataclass(frozen=True, slots=True)
class SimConfig:
    nodes: int = 1000
    degree: int = 16
    seed: int = 1
    # Proximity neighbour selection: each long link of the generated topology goes to the
    # nearest, by the network's latency, of this many nodes alike in keyspace usefulness
    # (``keyspace.topology.small_world``); 1: to the node closest to its drawn point.
    proximity: int = 16
    node: NodeConfig = field(default_factory=NodeConfig)
    network: NetworkModel = field(default_factory=NetworkModel)
    # Encode and decode every message on the way, as the real runtime does. Slower; the
    # tests turn it on so the codec is exercised by every protocol exchange.
    wire: bool = False
    # Send what one event of a node produced for a peer as the real runtime does: packets
    # as runs, publish-path messages as bundles (``overlay.runtime.runs``). Off by default,
    # so the figures count the protocol's messages; the chaos tests turn it on for some
    # scenarios, so the protocol's properties are checked with them too.
    gather: bool = False
    # Fingerprint every delivery, for determinism checks.
    trace: bool = False
    # Keep packet events (Packet, Epoch) in ``client_log`` too. A publish run at scale turns
    # it off and reads them through ``on_deliver`` instead: a million deliveries are a lot
    # of objects. Every other client event is always logged.
    log_packets: bool = True
    # How long after a link breaks (a drop, a liveness timeout) its ends dial each other
    # again, as the runtime's reconnect with backoff does. Links to a crashed node and links
    # cut by a partition stay down until ``restart`` or ``heal``.
    reconnect_delay: float = 1.0


# What a network sends however quiet it is: heartbeats and roots' probes. They are not
# protocol work, so running "until quiet" does not wait for them.
UPKEEP = frozenset({Heartbeat, RootProbe, ProbeAnswer})


def node_id(index: int) -> bytes:
    """The simulated node id of node ``index``: short, unique, and ordered like the index."""
    return index.to_bytes(4, "big")


class Simulator:
    def __init__(self, config: SimConfig, topology: Topology | None = None) -> None:
        self.config = config
        seed = config.seed
        # The network's points come from a generator of their own, so a topology drawn
        # with proximity and one drawn without place the nodes alike.
        n = config.nodes if topology is None else len(topology.locations)
        self.network = Network(n, config.network, random.Random(f"network-{seed}"))
        if topology is None:
            rng = random.Random(f"topology-{seed}")
            topology = small_world(n, config.degree, rng, self.network.latency, config.proximity)
        self.topology = topology
        # One generator for every core: the event order is deterministic, so the draws are
        # too, and 10^5 nodes do not each carry a 2.5 KB Mersenne Twister state.
        self._node_rng = random.Random(f"nodes-{seed}")
        # Every node of a network has links its simulator dials, as a deployed node has peers
        # to connect to: alone for a moment (restarted, its links not up yet) it waits.
        self._node_config = (
            dataclasses.replace(config.node, wait_for_peers=True) if n > 1 else config.node
        )
        self.ids = [node_id(i) for i in range(n)]
        self.index = {nid: i for i, nid in enumerate(self.ids)}
        self.locations = list(self.topology.locations)
        # The links that exist (topology edges, plus those of nodes added later), and those
        # of them that are open now. A message crosses only an open link.
        self.links = Links(self.topology.neighbours)
        self._open: set[tuple[int, int]] = set(self.topology.edges())
        self._cut: set[tuple[int, int]] = set()  # links a partition holds down
        self._sides: list[set[int]] = []  # the sides cut off, until the heal
        # Frames sent over (or arriving on) a cut link that is still open, per direction:
        # TCP would retransmit them, so they arrive, in order, if the partition heals before
        # either end gives the link up; once it does, they are lost with the connection.
        self._stalled: dict[tuple[int, int], list[Message]] = {}
        # What each node keeps on disk across restarts (``Remember``), as a runtime node
        # keeps its state file: how far each stream's numbering got.
        self.disks: list[dict[bytes, int]] = [{} for _ in range(n)]
        # Links closed while effects are being carried out (``_depth`` deep), whose ends
        # are told once those effects are done (``_tell_downs``).
        self._downs: list[tuple[int, int]] = []
        self._depth = 0
        self.nodes = [self._new_node(i) for i in range(n)]
        self.alive = [True] * n
        self.now = 0.0
        self._queue: list[tuple[float, int, int, int, int, object]] = []
        self._seq = 0
        self._wake: dict[int, float] = {}
        # Run-to-quiescence bookkeeping: events in the queue that are protocol work (every
        # message but upkeep (UPKEEP), every workload call), and nodes with work pending.
        self._work = 0
        self._busy: set[int] = set()
        self._digest = hashlib.sha256() if config.trace else None
        self.client_log: dict[tuple[int, ClientId], list[tuple[float, ClientEvent]]] = {}
        self.sent: Counter[str] = Counter()
        self.lost = 0
        self.duplicated = 0
        self.success_hops: Counter[int] = Counter()  # uid -> success replies relayed
        self.events = 0
        self.last_message_at = 0.0  # when the network last carried a message
        self.on_deliver: Callable[[int, ClientId, ClientEvent], None] | None = None
        self._halted = False  # ``halt``: the running ``run`` returns after this event
        # The wave of heartbeats sent at ``_wave_sent`` (``_send_beat``), until it is due.
        self._wave: Wave | None = None
        self._wave_sent = -1.0
        self._connect_all()

    def _new_node(self, i: int) -> Node:
        config, disk = self._node_config, self.disks[i]
        return Node(self.ids[i], self.locations[i], self._node_rng, config, remembered=disk)

    # --- topology ---------------------------------------------------------------------------

    def _connect_all(self) -> None:
        """Bring every topology link up at time 0. The Hello exchange is applied directly
        instead of over the simulated latency: at 10^5 nodes that is 1.6 million messages
        that only set up the start state."""
        # Effects are carried out without ``_apply``'s busy bookkeeping, which is done once
        # for every node at the end; nothing here closes a link.
        nodes, ids, now, carry_out = self.nodes, self.ids, self.now, self._carry_out
        hellos = [Hello(node.location, node.boot_id) for node in nodes]
        for a, b in self.topology.edges():
            carry_out(a, nodes[a].receive(now, ids[b], hellos[b]))
            carry_out(b, nodes[b].receive(now, ids[a], hellos[a]))
        # Likewise the first friend-of-a-friend announcements, once every link is up.
        for i, node in enumerate(nodes):
            for effect in node.announce_neighbours(now):
                if type(effect) is Send:
                    j = self.index[effect.peer]
                    carry_out(j, nodes[j].receive(now, ids[i], effect.message))
        assert not self._downs
        self._busy = {i for i, node in enumerate(nodes) if node.busy()}

    def linked(self, a: int, b: int) -> bool:
        """Whether a message from ``a`` can reach ``b`` now: the link is open, not cut."""
        pair = (a, b) if a < b else (b, a)
        return pair in self._open and not (self._cut and pair in self._cut)

    # --- scheduling -------------------------------------------------------------------------

    def _push(self, at: float, kind: int, a: int, b: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, a, b, payload))

    def call_at(self, at: float, action: Callable[[], None]) -> None:
        """Run ``action`` (a workload step) at virtual time ``at``."""
        self._work += 1
        self._push(at, _CALL, -1, -1, action)

    # Client calls on a dead node do nothing: its clients died with it. (A call scheduled
    # before a crash would otherwise run the dead core and mark it busy for ever, so the
    # network never counted as quiet.)

    def subscribe(self, i: int, key: bytes, client: ClientId) -> None:
        if not self.alive[i]:
            return
        self._apply(i, self.nodes[i].subscribe(self.now, key, client))

    def subscribe_from(
        self, i: int, key: bytes, client: ClientId, last_seen: int | None, atomic: bool
    ) -> None:
        """Subscribe with catch-up (``last_seen``) or atomic epochs."""
        if not self.alive[i]:
            return
        self._apply(
            i, self.nodes[i].subscribe(self.now, key, client, last_seen=last_seen, atomic=atomic)
        )

    def unsubscribe(self, i: int, key: bytes, client: ClientId) -> None:
        if not self.alive[i]:
            return
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
        if not self.alive[i]:
            return
        self._apply(
            i,
            self.nodes[i].publish(
                self.now, key, client, uid, data, epoch=epoch, kind=kind, packet=packet
            ),
        )

    def halt(self) -> None:
        """Make the running ``run`` return once the event being handled is done (from an
        ``on_deliver`` hook or a workload step: a measurement that has what it waited for
        need not simulate the network going quiet). The queue is kept; ``run`` goes on."""
        self._halted = True

    def run(self, until: float | None = None) -> None:
        """Process events in order up to ``until``; without it, until the network is quiet:
        no protocol message in flight, no workload step left, no node with work pending.
        Upkeep (heartbeats, probes) never stops, so it does not count. ``halt`` ends it
        sooner."""
        queue = self._queue
        self._halted = False
        while queue and not self._halted:
            if until is None:
                if not self._work and not self._busy:
                    return
            elif queue[0][0] > until:
                self.now = until
                return
            at, _, kind, a, b, payload = heapq.heappop(queue)
            if kind >= _WAVE:
                self._run_wave(payload, kind == _WAVE, until)  # type: ignore[arg-type]
                continue
            self.now = at
            self.events += 1
            if kind == _BEAT:
                self._deliver_beat(a, b, payload)  # type: ignore[arg-type]
            elif kind == _MESSAGE:
                if type(payload) not in UPKEEP:
                    self._work -= 1
                self._deliver_message(a, b, payload)  # type: ignore[arg-type]
            elif kind == _TIMER:
                if self._wake.get(a) == at and self.alive[a]:
                    del self._wake[a]
                    self._apply(a, self.nodes[a].handle_timer(at))
            else:
                self._work -= 1
                payload()  # type: ignore[operator]
        if until is not None and not self._halted:
            self.now = max(self.now, until)

    def _deliver_message(self, src: int, dst: int, message: Message) -> None:
        if not self.alive[dst] or not self.linked(dst, src):
            if self.alive[dst] and self._stall(src, dst, message):
                return
            self.lost += 1
            return
        if type(message) not in UPKEEP:
            self.last_message_at = self.now
        if self._digest is not None:
            self._digest.update(f"{self.now!r} {src} {dst} {message!r}\n".encode())
        if isinstance(message, SubscribeSucceeded | SubscribeSucceededNewRoot):
            self.success_hops[message.uid] += 1
        self._apply(dst, self.nodes[dst].receive(self.now, self.ids[src], message))

    def _deliver_beat(self, src: int, dst: int, message: Message) -> None:
        """A heartbeat arrives: the receiving core hears its peer (``Node.heartbeat``). If
        anything more is involved (a link that is down, a peer not known, work at the end of
        the core's event), it is delivered as any message is. Hearing a peer changes
        neither a core's effects nor whether it is busy, so nothing else follows."""
        if (
            not self.alive[dst]
            or not self.linked(dst, src)
            or not self.nodes[dst].heartbeat(self.now, self.ids[src])
        ):
            self._deliver_message(src, dst, message)
        elif self._digest is not None:
            self._digest.update(f"{self.now!r} {src} {dst} {message!r}\n".encode())

    # --- effects ----------------------------------------------------------------------------

    def _apply(self, i: int, effects: list[Effect]) -> None:
        self._depth += 1
        try:
            self._carry_out(i, effects)
        finally:
            self._depth -= 1
        if self.alive[i] and self.nodes[i].busy():
            self._busy.add(i)
        else:
            self._busy.discard(i)
        if self._depth == 0:
            self._tell_downs()

    def _carry_out(self, i: int, effects: list[Effect]) -> None:
        calm = self.network.calm and not self.config.wire
        runs = Runs(self._sender(i)) if self.config.gather else None
        for effect in effects:
            if type(effect) is Send:
                if runs is not None and runs.offer(None, effect.peer, effect.message):
                    continue
                if calm and type(effect.message) is Heartbeat:
                    self._send_beat(i, effect)
                else:
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
            elif type(effect) is Remember:
                self.disks[i][effect.key] = effect.number
        if runs is not None:
            runs.send_all()

    def _sender(self, i: int) -> Callable[[None, PeerId, Message], None]:
        """How node ``i``'s gathered runs and bundles go (``SimConfig.gather``)."""

        def send(link: None, peer: PeerId, message: Message) -> None:
            self._send(i, Send(peer, message))

        return send

    def _send_beat(self, i: int, effect: Send) -> None:
        """``_send`` for a heartbeat in calm weather (no loss, duplicate or jitter draws a
        number, so its arrival is just the link's latency): into the wave of heartbeats
        sent now, with the sequence number ``_push`` would give it."""
        j = self._receiver(i, effect)
        if j is None:
            return
        wave = self._wave
        if wave is None or self._wave_sent != self.now:
            # The wave's entry comes due no later than any heartbeat in it: none arrives
            # sooner than the base latency, and its sequence number is below theirs.
            wave = self._wave = Wave()
            self._wave_sent = self.now
            self._push(self.now + self.network.model.base_latency, _WAVE, -1, -1, wave)
        self._seq += 1
        wave.add(self.now + self.network.latency(i, j), self._seq, i, j, effect.message)

    def _run_wave(self, wave: Wave, fresh: bool, until: float | None) -> None:
        """Deliver a wave's heartbeats in (arrival, sequence number) order while each is
        the next event of the whole simulation, then put the wave back in the heap under
        its next heartbeat's key. A merge of the wave into the heap: events happen in
        exactly the order they would with every heartbeat in the heap on its own, and the
        heap holds one entry per wave (a round of every node's heartbeats, 1.6 million at
        10^5 nodes) instead of one per heartbeat. ``run``'s stops (``until``, quiet,
        ``halt``) apply between any two heartbeats, as between any two events."""
        if fresh:
            if wave is self._wave:
                self._wave = None  # due now: heartbeats sent later start another wave
            wave.sort()
        queue, deliver = self._queue, self._deliver_beat
        while wave and not self._halted:
            at, seq = wave.head()
            if queue:
                first = queue[0]
                if first[0] < at or (first[0] == at and first[1] < seq):
                    break
            if until is None:
                if not self._work and not self._busy:
                    break
            elif at > until:
                break
            at, i, j, message = wave.take()
            self.now = at
            self.events += 1
            deliver(i, j, message)
        if wave:
            at, seq = wave.head()
            heapq.heappush(queue, (at, seq, _SORTED_WAVE, -1, -1, wave))

    def _tell_downs(self) -> None:
        """Tell the ends of links that closed while effects were being carried out. Not at
        once: a node's effects go out in order, as the runtime's do (a closed link's task
        reports it later). Told in the middle of its effects, a node would react to a link
        lost by one send before its later sends left, an order the runtime never produces:
        a relay's restart label could then reach a child ahead of the success that attaches
        it, and the child, refusing the label, could accept that relay's resubscribe from
        its own subtree and close a cycle."""
        while self._downs:
            x, y = self._downs.pop(0)
            if self.alive[x] and self.ids[y] in self.nodes[x].peers:
                self._apply(x, self.nodes[x].link_down(self.now, self.ids[y]))

    def _receiver(self, i: int, effect: Send) -> int | None:
        """Count ``effect``'s message as sent from ``i``; the index of its receiver if the
        link to it is up. Otherwise None: the frame is held back by a partition the link
        has not noticed (``_stall``), or lost."""
        j = self.index.get(effect.peer)
        self.sent[type(effect.message).__name__] += 1
        if j is None or not self.linked(i, j):
            if j is None or not self._stall(i, j, effect.message):
                self.lost += 1
            return None
        return j

    def _send(self, i: int, effect: Send) -> None:
        j = self._receiver(i, effect)
        if j is None:
            return
        message = effect.message
        if self.config.wire:
            message = decode(encode(message))
        arrivals = self.network.arrivals(self.now, i, j)
        if not arrivals:
            # A TCP link does not lose a frame and go on: the connection fails. So does this
            # one (its ends notice at once and dial again after ``reconnect_delay``).
            self.lost += 1
            self.disconnect(i, j)
            return
        self.duplicated += len(arrivals) > 1
        if type(message) is Heartbeat:
            for at in arrivals:
                self._push(at, _BEAT, i, j, message)
            return
        counts = type(message) not in UPKEEP
        for at in arrivals:
            self._work += counts
            self._push(at, _MESSAGE, i, j, message)

    @property
    def in_flight(self) -> int:
        """Protocol messages (upkeep aside) and workload steps still queued: a network with
        any is not quiet, however long ago the last message arrived."""
        return self._work

    def held_back(self) -> int:
        """Frames a partition holds back on links still up (delivered at ``heal``)."""
        return sum(len(frames) for frames in self._stalled.values())

    def _stall(self, a: int, b: int, message: Message) -> bool:
        """Hold a frame from ``a`` to ``b`` if only a partition stops it (see ``_stalled``)."""
        pair = (a, b) if a < b else (b, a)
        if pair not in self._open or pair not in self._cut:
            return False
        self._stalled.setdefault((a, b), []).append(message)
        return True

    # --- faults -----------------------------------------------------------------------------

    def disconnect(self, a: int, b: int) -> None:
        """Close the link a-b on both sides (each live core learns it at once, as TCP would)
        and dial it again after ``reconnect_delay`` if both ends are still up then."""
        pair = (a, b) if a < b else (b, a)
        if pair not in self._open:
            return
        self._open.discard(pair)
        self._stalled.pop((a, b), None)  # lost with the connection
        self._stalled.pop((b, a), None)
        self._downs += [(a, b), (b, a)]
        if self._depth == 0:
            self._tell_downs()
        if self.alive[a] and self.alive[b] and pair not in self._cut:
            self.call_at(self.now + self.config.reconnect_delay, lambda: self._redial(a, b))

    def _redial(self, a: int, b: int) -> None:
        pair = (a, b) if a < b else (b, a)
        if self.alive[a] and self.alive[b] and pair not in self._cut and b in self.links[a]:
            self.connect(a, b)

    def connect(self, a: int, b: int) -> None:
        """Open the link a-b (a no-op if it is open): both ends say Hello over it."""
        pair = (a, b) if a < b else (b, a)
        if pair in self._open or not (self.alive[a] and self.alive[b]):
            return
        self._open.add(pair)
        self.links.add(a, b)
        self._apply(a, self.nodes[a].link_up(self.now, self.ids[b]))
        self._apply(b, self.nodes[b].link_up(self.now, self.ids[a]))

    def crash(self, i: int, *, silent: bool = True) -> None:
        """Node ``i`` dies. ``silent``: its peers are not told and find out by liveness (a
        power cut, a frozen machine); otherwise they learn at once, as when a killed
        process's sockets are closed by its operating system."""
        if not self.alive[i]:
            return
        # Dead first: a killed process handles nothing more, not even its own sockets
        # closing. Otherwise a dying root, told its links are down, could number a waiting
        # publish and deliver it to its local subscriber as it dies.
        self.alive[i] = False
        if not silent:
            for j in sorted(self.links[i]):
                self.disconnect(i, j)
        self._busy.discard(i)
        self._wake.pop(i, None)
        for j in self.links[i]:
            self._open.discard((i, j) if i < j else (j, i))
            self._stalled.pop((i, j), None)
            self._stalled.pop((j, i), None)

    def restart(self, i: int, *, wiped: bool = False) -> None:
        """Start node ``i`` again: same id and location, a new boot id, no stream state
        but what it remembered on disk (``wiped``: a new machine, nothing), and its links
        dialled afresh."""
        if self.alive[i]:
            self.crash(i, silent=False)
        if wiped:
            self.disks[i] = {}
        self.nodes[i] = self._new_node(i)
        self.alive[i] = True
        for j in sorted(self.links[i]):
            self.connect(i, j)

    def add_node(self, location: float, peers: list[int]) -> int:
        """A new node at ``location``, linked to ``peers``; returns its index."""
        i = len(self.nodes)
        self.ids.append(node_id(i))
        self.index[self.ids[i]] = i
        self.locations.append(location)
        self.links.add_node()
        self.network.add_node()
        self.disks.append({})
        self.nodes.append(self._new_node(i))
        self.alive.append(True)
        for j in peers:
            if any(j in side for side in self._sides):
                # A node that joins during a partition is on the rest's side: a link to
                # the side cut off would bridge the cut, carrying the rest's publishes to
                # that side's root. Dialled at heal.
                self.links.add(i, j)
                self._cut.add((j, i))
                continue
            self.connect(i, j)
        return i

    def partition(self, side: set[int]) -> None:
        """Cut every link between ``side`` and the rest, silently: messages stop crossing
        and each end finds out by liveness."""
        self._sides.append(set(side))
        for a in side:
            for b in self.links[a]:
                if b not in side:
                    self._cut.add((a, b) if a < b else (b, a))

    def heal(self) -> None:
        """Lift every partition and dial the links it broke."""
        cut, self._cut = self._cut, set()
        self._sides = []
        stalled, self._stalled = self._stalled, {}
        for a, b in sorted(cut):
            if (a, b) in self._open:
                # Neither end noticed the cut: the link just works again, and what it held
                # back arrives now, in order (FIFO with whatever is sent after).
                for x, y in ((a, b), (b, a)):
                    for message in stalled.get((x, y), ()):
                        self._work += type(message) not in UPKEEP
                        self._push(self.network.resend_at(self.now, x, y), _MESSAGE, x, y, message)
                continue
            self.connect(a, b)

    def reachable(self, start: int, without: frozenset[int] = frozenset()) -> set[int]:
        """The live nodes ``start`` can reach over links a partition does not cut, not
        passing through ``without``: who could still hear from whom, whatever links happen
        to be redialling."""
        if not self.alive[start] or start in without:
            return set()
        seen = {start}
        todo = [start]
        while todo:
            a = todo.pop()
            for b in self.links[a]:
                cut = (a, b) if a < b else (b, a)
                if b in seen or b in without or not self.alive[b] or cut in self._cut:
                    continue
                seen.add(b)
                todo.append(b)
        return seen

    # --- results ----------------------------------------------------------------------------

    def digest(self) -> str:
        """Fingerprint of every delivery so far (requires ``trace``)."""
        if self._digest is None:
            raise ValueError("the simulator was built without trace=True")
        return self._digest.hexdigest()

    def events_for(self, i: int, client: ClientId) -> list[tuple[float, ClientEvent]]:
        return self.client_log.get((i, client), [])
