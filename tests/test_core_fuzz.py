"""Fuzzing the core: hostile peers send random protocol-valid messages into a small network
of real cores, among honest traffic and timers, and no core may raise or let its tables
disagree.

Four honest nodes, fully linked, subscribe and publish on three streams; two hostile peers
(one attacker with two identities) link to the two nodes nearest the streams, drop and
redial their links, and send messages that each decode (every field valid on the wire, the
fields consistent: ``overlay.codec``) but whose values are drawn from what the attacker has
heard: uids of searches and restarts, stream keys, packet numbers near the streams' heads,
claims and pushes, locations that claim to be closer than anyone. Time jumps far enough for
searches, restarts' confirmations and takeover graces to end.

Checked after every core call: it returned (a raise fails the test, as in the simulator:
no fault is contained here), every effect it returned encodes (``CoreNet._apply``), and its
tables of searches agree (one uid, one search, one key: ``Hops._start_route``).

A fixed set of seeds, derandomized, so the test is the same on every run and bounded in time
(a few seconds); ``FUZZ_SEEDS`` widens it for a hunt:
``FUZZ_SEEDS=1000 pytest tests/test_core_fuzz.py``.
"""

from __future__ import annotations

import os
import random
from collections import deque
from typing import Any

import pytest
from corenet import CoreNet, key_at

from overlay.codec import EncodeError, decode, encode
from overlay.core.config import NodeConfig
from overlay.core.effects import DropPeer, Effect, PeerId
from overlay.core.node import Node
from overlay.messages import (
    BUNDLED,
    DIGEST_SIZE,
    MAX_PACKET,
    MAX_WIRE_HTL,
    MESSAGE_TYPES,
    Heartbeat,
    Hello,
    Kind,
    Message,
    PacketKind,
    PublishData,
    PublishError,
    PublishRejected,
    ResubscribeRequest,
    SubscribeRequest,
    SubscribeRestarted,
    field_kinds,
)

KEYS = (key_at(0.5), key_at(0.5, tag=1), key_at(0.2))
STRANGER = key_at(0.9, tag=5)  # a stream nobody carries
HONEST = {b"N0": 0.1, b"N1": 0.3, b"N2": 0.45, b"N3": 0.7}
# The attacker's two identities, each linked to the two honest nodes closest to KEYS (the
# roots): one identity's redial can make a root restart while the other is its child.
HOSTILE = [(b"H1", b"N2"), (b"H2", b"N2"), (b"H1", b"N1"), (b"H2", b"N1")]
# Small bounds, so backlogs, queues and windows fill within a short run.
CONFIG = NodeConfig(
    window_packets=4,
    max_queued_publishes=3,
    heartbeat_interval=2.0,
    dead_after=6.0,
    takeover_grace=4.0,
    confirm_timeout=3.0,
    accept_timeout=1.0,
    request_timeout=5.0,
)
SEEDS = range(int(os.environ.get("FUZZ_SEEDS", "24")))
BUSY = int(PublishError.BUSY)
STEPS = 250
# Messages the attacker sends most: the ones that name searches, restarts and packets,
# searches most of all (each type's weight).
FAVOURED = {
    "SubscribeRequest": 3,
    "ResubscribeRequest": 6,
    "RestartConfirmed": 1,
    "PublishData": 4,
    "FillRequest": 1,
    "RootProbe": 1,
    "Held": 1,
    "PastQuery": 1,
}


def consistent(node: Node) -> None:
    """The core's tables of searches agree: every uid listed by key is a search in flight
    for that key, and the per-peer counts add up to the relayed searches."""
    listed = 0
    for key, uids in node.searches.by_key.items():
        for uid in uids:
            route = node.routes.get(uid)
            assert route is not None and route.key == key, f"uid {uid} lists no search of its key"
            listed += 1
    assert listed == len(node.routes), "a search in flight is not listed by its key"
    relayed = sum(1 for route in node.routes.values() if route.upstream is not None)
    assert sum(node.searches.by_peer.values()) == relayed, "per-peer search counts disagree"


class HostileNet(CoreNet):
    """``CoreNet`` with peers that are not cores: what is sent to them is kept (the
    attacker hears it), and the test sends in their name."""

    def __init__(self, seed: int) -> None:
        # Odd seeds send as the runtime does, runs and bundles: both paths are fuzzed.
        super().__init__(seed, CONFIG, gather=seed % 2 == 1)
        self.heard: deque[Message] = deque(maxlen=64)
        self.calls = 0

    def link_hostile(self, peer: PeerId, victim: PeerId) -> None:
        if frozenset((peer, victim)) not in self.links:
            self.links.add(frozenset((peer, victim)))
            self._apply(victim, self.nodes[victim].link_up(self.now, peer))
            self.run()

    def cut(self, a: PeerId, b: PeerId) -> None:
        """Close the link between ``a`` and ``b`` (either may be hostile)."""
        if frozenset((a, b)) not in self.links:
            return
        self.links.discard(frozenset((a, b)))
        self.queue = deque(m for m in self.queue if frozenset(m[:2]) != frozenset((a, b)))
        for here, there in ((a, b), (b, a)):
            if here in self.nodes:
                self._apply(here, self.nodes[here].link_down(self.now, there))
        self.run()

    def run(self, limit: int = 20_000) -> None:
        for _ in range(limit):
            if not self.queue:
                self._carry_out_drops()
                if not self.queue:
                    return
                continue
            src, dst, frame = self.queue.popleft()
            if frozenset((src, dst)) not in self.links:
                continue
            message = decode(frame)
            self.trace.append((src, dst, message))
            if dst not in self.nodes:
                self.heard.append(message)
                continue
            self._apply(dst, self.nodes[dst].receive(self.now, src, message))
        raise AssertionError(f"no quiescence after {limit} messages")

    def _apply(self, name: bytes, effects: list[Effect]) -> None:
        self.calls += 1
        super()._apply(name, effects)  # (encodes every Send: a message that cannot, raises)
        consistent(self.nodes[name])

    def _carry_out_drops(self) -> None:
        dropped, self.dropped = self.dropped, []
        for name, drop in dropped:
            assert isinstance(drop, DropPeer)
            self.cut(name, drop.peer)


class Attacker:
    """Draws protocol-valid messages from what it has heard (``HostileNet.heard``)."""

    def __init__(self, net: HostileNet, rng: random.Random) -> None:
        self.net = net
        self.rng = rng
        self.types = [c for c in MESSAGE_TYPES for _ in range(FAVOURED.get(c.__name__, 0))]

    def uids(self) -> list[int]:
        """Uids heard, the latest first (a restart's uid is worth most while it runs)."""
        found = [1, 2, 3]
        heard = list(self.net.heard)
        if self.rng.random() < 0.5:
            heard = heard[-8:]
        for message in heard:
            for name in ("uid", "restart"):
                value = getattr(message, name, None)
                if isinstance(value, int):
                    found.append(value)
        return found

    def packets(self) -> list[int]:
        found = [0, 1, 2]
        for message in self.net.heard:
            for name in ("packet", "last_packet", "first", "last", "upto", "mark"):
                value = getattr(message, name, None)
                if isinstance(value, int):
                    found += [value, value + 1, max(0, value - 1)]
        return found

    def value(self, kind: Kind) -> Any:
        rng = self.rng
        match kind:
            case Kind.UID:
                return rng.choice(self.uids()) if rng.random() < 0.8 else rng.getrandbits(64)
            case Kind.OPT_UID:
                return None if rng.random() < 0.3 else self.value(Kind.UID)
            case Kind.KEY:
                return rng.choice((*KEYS, *KEYS, STRANGER))
            case Kind.HTL:
                return rng.choice((0, 1, 3, 10, MAX_WIRE_HTL))
            case Kind.DIGEST:
                return rng.choice((bytes(DIGEST_SIZE), rng.randbytes(DIGEST_SIZE)))
            case Kind.LOCATION:
                return rng.choice((0.5, 0.499, 0.45, 0.2, rng.random()))
            case Kind.OPT_LOCATION:
                return None if rng.random() < 0.3 else self.value(Kind.LOCATION)
            case Kind.PACKET:
                return rng.choice(self.packets()) if rng.random() < 0.9 else MAX_PACKET
            case Kind.OPT_PACKET:
                return None if rng.random() < 0.3 else self.value(Kind.PACKET)
            case Kind.OPT_SEEN:
                return rng.choice((None, -1, self.value(Kind.PACKET)))
            case Kind.DATA:
                return rng.choice((b"", b"x", b"evil"))
            case Kind.OPT_SIGNATURE | Kind.OPT_DESCRIPTOR:
                return None
            case Kind.PACKET_KIND:
                return rng.choice(list(PacketKind))
            case Kind.BOOT_ID:
                return rng.choice((1, 1, 1, 2))
            case Kind.COUNT:
                return rng.choice((0, 1, *PublishError))
            case Kind.LOCATIONS:
                return tuple(rng.random() for _ in range(rng.randrange(3)))
            case Kind.VOUCHES:
                return ()  # (the core never reads them)
            case Kind.EPOCH_STARTS:
                return rng.choice(((), ((0, 0),)))
            case Kind.FLAG:
                return rng.random() < 0.5
            case Kind.RUN:
                kinds = (
                    Kind.DATA,
                    Kind.OPT_PACKET,
                    Kind.PACKET_KIND,
                    Kind.OPT_SIGNATURE,
                    Kind.OPT_PACKET,
                    Kind.OPT_UID,
                    Kind.OPT_PACKET,
                )
                return tuple(
                    tuple(self.value(k) for k in kinds) for _ in range(rng.randrange(1, 4))
                )
            case Kind.BUNDLE:
                # A burst of one publish-path message about one stream.
                cls = rng.choice(BUNDLED)
                key = self.value(Kind.KEY)
                return tuple(
                    cls(**{n: key if k is Kind.KEY else self.value(k) for n, k in field_kinds(cls)})
                    for _ in range(rng.randrange(2, 4))
                )
        raise AssertionError(f"no values for {kind!r}")

    def message(self) -> Message | None:
        """A random message, or None if it does not encode (not protocol-valid)."""
        rng = self.rng
        cls = rng.choice(self.types) if rng.random() < 0.8 else rng.choice(MESSAGE_TYPES)
        if cls is Hello:
            # A Hello that claims to be closer than anyone to a stream (a handoff).
            return Hello(rng.choice((0.5, 0.4999, 0.2001, rng.random())), self.value(Kind.BOOT_ID))
        message = cls(**{name: self.value(kind) for name, kind in field_kinds(cls)})
        try:
            return decode(encode(message))  # what a real node would have received
        except EncodeError:
            return None


def step(net: HostileNet, attacker: Attacker, rng: random.Random) -> None:
    roll = rng.random()
    if roll < 0.55:
        peer, victim = rng.choice(HOSTILE)
        if frozenset((peer, victim)) not in net.links:
            redial(net, peer, victim, rng)
        message = attacker.message()
        if message is not None:
            net.inject(peer, victim, message)
    elif roll < 0.6:
        # A burst of fresh publishes it never confirms: its root holds them pending, then
        # back (``backlog``), then refuses the rest BUSY.
        peer, victim = rng.choice(HOSTILE)
        if frozenset((peer, victim)) in net.links:
            key = rng.choice(KEYS)
            net.inject(peer, victim, SubscribeRequest(rng.getrandbits(64), key, 5, 0.3, None))
            for _ in range(10):
                uid = rng.getrandbits(64)
                data = PublishData(uid, key, None, 0.3, 10, b"burst", None, PacketKind.DATA, None)
                net.inject(peer, victim, data)
    elif roll < 0.7:
        # The attacker keeps its links alive (a heartbeat each interval), so it stays a
        # child long enough to be told restarts and to publish into graces.
        until = net.now + rng.choice((0.1, 0.5, 1.0, 3.0, 5.0, 12.0))
        while net.now < until:
            net.advance(min(until, net.now + CONFIG.heartbeat_interval))
            for peer, victim in HOSTILE:
                if frozenset((peer, victim)) in net.links:
                    net.inject(peer, victim, Heartbeat(1))
    elif roll < 0.82:
        name = rng.choice(list(HONEST))
        net.publish(name, rng.choice(KEYS), b"p", client=rng.choice((1, 2)))
    elif roll < 0.9:
        name = rng.choice(list(HONEST))
        net.subscribe(name, rng.choice(KEYS), client=rng.choice((1, 2)))
    elif roll < 0.93:
        name = rng.choice(list(HONEST))
        net.unsubscribe(name, rng.choice(KEYS), client=rng.choice((1, 2)))
    else:
        # Drop and redial a hostile link: the victim loses a child (a root's grace) and
        # meets a "new" peer (a root hands its tree to one that claims to be closer).
        peer, victim = rng.choice(HOSTILE)
        net.cut(peer, victim)
        redial(net, peer, victim, rng)


def redial(net: HostileNet, peer: PeerId, victim: PeerId, rng: random.Random) -> None:
    net.link_hostile(peer, victim)
    net.inject(peer, victim, Hello(rng.choice((0.4999, 0.2001, 0.3, 0.6)), 1))


def fuzz(seed: int, steps: int = STEPS) -> HostileNet:
    rng = random.Random(seed)
    net = HostileNet(seed)
    for name, location in HONEST.items():
        net.add(name, location)
    names = list(HONEST)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            net.connect(a, b)
    attacker = Attacker(net, rng)
    for peer, victim in HOSTILE:
        net.link_hostile(peer, victim)
        net.inject(peer, victim, Hello(0.3 if peer == b"H1" else 0.6, 1))
        # A child of each stream, so its publishes, claims and restarts reach the root.
        for key in KEYS:
            net.inject(peer, victim, SubscribeRequest(attacker.value(Kind.UID), key, 5, 0.3, -1))
    for name in names:
        net.subscribe(name, KEYS[0])
    for _ in range(steps):
        step(net, attacker, rng)
    return net


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_messages_never_break_a_core(seed: int) -> None:
    net = fuzz(seed)
    assert net.calls > STEPS  # (the run did something)


def test_the_attacker_reaches_the_paths_the_fuzzer_is_for() -> None:
    """Within a few seeds the attacker sends back restart uids it heard as searches, sends
    claims (with numbers: the codec refuses one without), and fills a root's backlog until
    it refuses publishes BUSY: the paths on which the core once raised or built a message
    that did not encode."""
    reused = claims = backlogs = 0
    for seed in range(12):
        net = fuzz(seed)
        restarts = set()
        busy = False
        for src, dst, message in net.trace:
            if isinstance(message, SubscribeRestarted) and dst not in net.nodes:
                restarts.add(message.uid)
            if src in net.nodes:
                busy |= isinstance(message, PublishRejected) and message.reason == BUSY
                continue
            if isinstance(message, ResubscribeRequest | SubscribeRequest):
                reused += message.uid in restarts
            claims += isinstance(message, PublishData) and message.claim
        backlogs += busy and any(node.stats.held_back for node in net.nodes.values())
    assert reused and claims and backlogs
