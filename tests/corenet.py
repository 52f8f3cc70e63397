"""A tiny deterministic in-memory network of protocol cores, for the core's unit tests.

Each node is a real ``overlay.core.node.Node``; the network carries out its effects: ``Send``
goes into one FIFO queue (through the wire codec, so every message the core builds must be
valid on the wire), ``Deliver`` is recorded per (node, client), ``SetTimer`` is remembered and
fired by ``advance``, ``DropPeer`` is recorded. Time moves only when a test calls ``advance``.
Messages in flight on a link that goes down are lost, as on a real connection.

This is not the simulator (``testnet/sim``): no latency, loss or scale, just enough plumbing to
check a handful of nodes end to end with explicit time.

Its clock stands still unless a test advances it, so a root's commit notice, which waits
``mark_delay`` after the last packet it sent (``overlay.core.showing``), or longer on a
steady stream (``mark_patience``: ``overlay.core.packet_pace``), would never go: every
node's ``mark_delay`` and ``mark_patience`` are this network's, 0 (at once) unless a test
sets them.
"""

from __future__ import annotations

import dataclasses
import random
from collections import deque
from collections.abc import Callable
from typing import Any

from overlay.codec import decode, encode
from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, DropPeer, Effect, PeerId, Remember, Send, SetTimer
from overlay.core.events import (
    BatchAcked,
    ClientEvent,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    Subscribed,
    SubscribeFailed,
)
from overlay.core.node import Node
from overlay.core.streams import State, Stream
from overlay.messages import KEY_SIZE, Accepted, Heartbeat, Hello, Message, Neighbours
from overlay.runtime.runs import Runs


def key_at(location: float, tag: int = 0) -> bytes:
    """An open stream's key whose location is ``location`` (``tag`` makes distinct keys
    there). The last bit stays 0: a set one marks a signed stream's key."""
    return int(location * 2**64).to_bytes(8, "big") + (tag << 1).to_bytes(KEY_SIZE - 8, "big")


class CoreNet:
    def __init__(
        self,
        seed: int = 0,
        config: NodeConfig | None = None,
        mark_delay: float = 0.0,
        mark_patience: float = 0.0,
        gather: bool = False,
    ) -> None:
        self.seed = seed
        # Send what one call into a node produced for a peer as the runtime does: packets
        # as runs, publish-path messages as bundles (``overlay.runtime.runs``).
        self.gather = gather
        self.config = config
        self.mark_delay = mark_delay
        self.mark_patience = mark_patience
        self.now = 0.0
        self.nodes: dict[PeerId, Node] = {}
        self.links: set[frozenset[PeerId]] = set()
        self.queue: deque[tuple[PeerId, PeerId, bytes]] = deque()
        self.timers: dict[PeerId, float] = {}
        self.events: dict[tuple[PeerId, int], list[ClientEvent]] = {}
        self.dropped: list[tuple[PeerId, DropPeer]] = []
        # Every message delivered, as (sender, receiver, message): tests read the traffic.
        self.trace: list[tuple[PeerId, PeerId, Message]] = []
        # Every effect every node returned, in order (for determinism checks).
        self.effects: list[tuple[PeerId, Effect]] = []
        # Messages to a held node wait here until ``release``: a slow node, in order.
        self.held: dict[PeerId, list[tuple[PeerId, PeerId, bytes]]] = {}
        # What each node keeps on disk (its ``Remember`` effects), for ``restart``.
        self.disks: dict[PeerId, dict[bytes, int]] = {}
        self._uids = 0

    # --- building ----------------------------------------------------------------------------

    def add(self, name: bytes, location: float, config: NodeConfig | None = None) -> Node:
        rng = random.Random(f"{self.seed}/{name!r}")
        config = config if config is not None else self.config
        config = dataclasses.replace(
            config or NodeConfig(), mark_delay=self.mark_delay, mark_patience=self.mark_patience
        )
        node = Node(name, location, rng, config, remembered=self.disks.get(name))
        self.nodes[name] = node
        return node

    def restart(self, name: bytes, *, wiped: bool = False) -> Node:
        """Kill node ``name`` (its links close) and start it again: a new boot id, no state
        but its disk (``wiped``: none). Its links are not dialled again: ``connect`` them."""
        for link in [link for link in self.links if name in link]:
            (other,) = link - {name}
            self.disconnect(name, other)
        self.timers.pop(name, None)
        if wiped:
            self.disks.pop(name, None)
        old = self.nodes[name]
        rng = random.Random(f"{self.seed}/{name!r}/after {old.boot_id}")  # a new boot id
        node = Node(name, old.location, rng, old.config, remembered=self.disks.get(name))
        self.nodes[name] = node
        return node

    def connect(self, a: bytes, b: bytes) -> None:
        self.links.add(frozenset((a, b)))
        self._apply(a, self.nodes[a].link_up(self.now, b))
        self._apply(b, self.nodes[b].link_up(self.now, a))
        self.run()

    def disconnect(self, a: bytes, b: bytes) -> None:
        self.links.discard(frozenset((a, b)))
        self.queue = deque(m for m in self.queue if frozenset(m[:2]) != frozenset((a, b)))
        self._apply(a, self.nodes[a].link_down(self.now, b))
        self._apply(b, self.nodes[b].link_down(self.now, a))
        self.run()

    # --- driving -----------------------------------------------------------------------------

    def subscribe(self, name: bytes, key: bytes, client: int = 1, **options: Any) -> None:
        """Subscribe ``client`` at node ``name``; ``options`` go to ``Node.subscribe``
        (``last_seen``, ``atomic``, ``descriptor``)."""
        self._apply(name, self.nodes[name].subscribe(self.now, key, client, **options))
        self.run()

    def publish(
        self,
        name: bytes,
        key: bytes,
        data: bytes,
        client: int = 1,
        uid: int | None = None,
        **options: Any,
    ) -> int:
        """Publish from ``client`` at node ``name`` and run to quiescence; returns the uid.
        ``options`` go to ``Node.publish`` (``packet``, ``epoch``, ``kind``, ``sig`` ...)."""
        if uid is None:
            self._uids += 1
            uid = self._uids
        self._apply(name, self.nodes[name].publish(self.now, key, client, uid, data, **options))
        self.run()
        return uid

    def publish_batch(
        self, name: bytes, key: bytes, items: list[tuple[int, bytes]], client: int = 1
    ) -> None:
        """Publish ``(uid, data)`` pairs from ``client`` at ``name`` as one batch and run
        to quiescence."""
        self._apply(name, self.nodes[name].publish_batch(self.now, key, client, items))
        self.run()

    def received(self, name: bytes, client: int = 1) -> list[ClientEvent]:
        """The events ``client`` at ``name`` got about packets (not publish answers)."""
        answers = (
            PublishAcked,
            BatchAcked,
            PublishCollided,
            PublishFailed,
            Subscribed,
            SubscribeFailed,
        )
        return [e for e in self.events.get((name, client), []) if not isinstance(e, answers)]

    def answers(self, name: bytes, client: int = 1) -> list[ClientEvent]:
        """The publish answers ``client`` at ``name`` got, in order."""
        answers = (PublishAcked, BatchAcked, PublishCollided, PublishFailed)
        return [e for e in self.events.get((name, client), []) if isinstance(e, answers)]

    def unsubscribe(self, name: bytes, key: bytes, client: int = 1) -> None:
        self._apply(name, self.nodes[name].unsubscribe(self.now, key, client))
        self.run()

    def remove_client(self, name: bytes, client: int = 1) -> None:
        """``client`` at ``name`` went away (disconnected): it leaves every stream."""
        self._apply(name, self.nodes[name].remove_client(self.now, client))
        self.run()

    def start_swap(self, name: bytes) -> None:
        """``name`` starts a location swap now; run to quiescence."""
        self._apply(name, self.nodes[name].start_swap(self.now))
        self.run()

    def relocate(self, name: bytes, location: float) -> None:
        """``name`` takes ``location``, as a location swap would move it; run to quiescence."""
        node = self.nodes[name]
        node.relocate(self.now, location)
        self._apply(name, node.handle_timer(self.now))
        self.run()

    def inject(self, src: bytes, dst: bytes, message: Message) -> None:
        """Deliver ``message`` to ``dst`` as if ``src`` had sent it, then run to quiescence."""
        self.queue.append((src, dst, encode(message)))
        self.run()

    def hold(self, name: bytes) -> None:
        """Park every message to ``name`` (in order) until ``release(name)``."""
        self.held.setdefault(name, [])

    def release(self, name: bytes) -> None:
        self.queue.extend(self.held.pop(name, []))
        self.run()

    def run(self, limit: int = 10_000) -> None:
        """Deliver queued messages in FIFO order until none is left."""
        for _ in range(limit):
            if not self.queue:
                return
            src, dst, frame = self.queue.popleft()
            if frozenset((src, dst)) not in self.links:
                continue
            if dst in self.held:
                self.held[dst].append((src, dst, frame))
                continue
            message = decode(frame)
            self.trace.append((src, dst, message))
            self._apply(dst, self.nodes[dst].receive(self.now, src, message))
        raise AssertionError(f"no quiescence after {limit} messages")

    def advance(self, to: float) -> None:
        """Move the clock to ``to``, firing every node's timers that fall due, in order."""
        while True:
            due = sorted((at, name) for name, at in self.timers.items() if at <= to)
            if not due:
                break
            at, name = due[0]
            self.now = max(self.now, at)
            del self.timers[name]
            self._apply(name, self.nodes[name].handle_timer(self.now))
            self.run()
        self.now = max(self.now, to)

    def _apply(self, name: bytes, effects: list[Effect]) -> None:
        runs = Runs(self._sender(name)) if self.gather else None
        for effect in effects:
            self.effects.append((name, effect))
            match effect:
                case Send(peer, message):
                    if runs is None or not runs.offer(peer, peer, message):
                        self.queue.append((name, peer, encode(message)))
                case Deliver(client, event):
                    self.events.setdefault((name, client), []).append(event)
                case SetTimer(at):
                    self.timers[name] = at
                case DropPeer():
                    self.dropped.append((name, effect))
                case Remember(key, number):
                    self.disks.setdefault(name, {})[key] = number
        if runs is not None:
            runs.send_all()

    def _sender(self, name: bytes) -> Callable[[PeerId, PeerId, Message], None]:
        def send(link: PeerId, peer: PeerId, message: Message) -> None:
            self.queue.append((name, peer, encode(message)))

        return send

    # --- reading -----------------------------------------------------------------------------

    def stream(self, name: bytes, key: bytes) -> Stream | None:
        return self.nodes[name].streams.get(key)

    def state(self, name: bytes, key: bytes) -> State | None:
        stream = self.stream(name, key)
        return None if stream is None else stream.state

    def sent(self, kind: type[Message]) -> list[tuple[PeerId, PeerId, Message]]:
        return [t for t in self.trace if isinstance(t[2], kind)]

    def flow(self) -> list[tuple[PeerId, PeerId, type[Message]]]:
        """The trace as (sender, receiver, message type), without link chatter (Hello,
        Neighbours and Heartbeat) and without Accepted (a hop's acknowledgement, checked by
        the single-node tests): the subscription protocol's own traffic."""
        chatter = Hello | Neighbours | Accepted | Heartbeat
        return [(s, d, type(m)) for s, d, m in self.trace if not isinstance(m, chatter)]

    def tree_problems(self, key: bytes) -> list[str]:
        """Inconsistencies of ``key``'s trees: parent/child links that disagree, cycles."""
        problems: list[str] = []
        carriers = {n: s for n, s in ((n, self.stream(n, key)) for n in self.nodes) if s}
        for name, stream in carriers.items():
            if stream.parent is not None:
                parent = carriers.get(stream.parent)
                if parent is None or name not in parent.children:
                    problems.append(f"{name!r} names {stream.parent!r}, which does not list it")
            for child in stream.children:
                if child not in carriers or carriers[child].parent != name:
                    problems.append(f"{name!r} lists child {child!r}, which does not name it")
            seen = {name}
            up = stream.parent
            while up is not None and up in carriers:
                if up in seen:
                    problems.append(f"parent links from {name!r} run in a cycle")
                    break
                seen.add(up)
                up = carriers[up].parent
        return problems

    def roots(self, key: bytes) -> list[bytes]:
        return sorted(n for n in self.nodes if self.state(n, key) is State.ROOT)


def held(net: CoreNet, name: bytes) -> list[tuple[bytes, bytes, Message]]:
    """What waits to be delivered to ``name`` (``net.hold``)."""
    return [(s, d, decode(frame)) for s, d, frame in net.held[name]]
