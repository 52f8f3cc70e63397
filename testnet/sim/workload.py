"""Workloads: which nodes subscribe to which streams, and when.

Subscribers of a stream are distinct random nodes; their joins are spread uniformly over a
join window so that searches for the same key really run concurrently, as they do when a
stream becomes popular.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from keyspace.stream_key import StreamKey
from testnet.sim.simulator import Simulator


@dataclass(slots=True)
class Subscription:
    stream: int  # index of the stream in the workload
    key: bytes
    node: int
    client: int
    at: float
    uid: int | None = None  # the node's own search, if the node had to search


def stream_keys(count: int) -> list[bytes]:
    """Open streams named stream-0, stream-1 ...: anyone can reproduce the keys."""
    return [StreamKey.open(f"stream-{s}").key for s in range(count)]


def schedule_subscribes(
    sim: Simulator, keys: list[bytes], per_stream: int, window: float, rng: random.Random
) -> list[Subscription]:
    """Schedule ``per_stream`` subscribers for each key, at random times in ``window``."""
    n = len(sim.nodes)
    if per_stream > n:
        raise ValueError(f"{per_stream} subscribers per stream need at least as many nodes ({n})")
    subs: list[Subscription] = []
    client = 0
    for s, key in enumerate(keys):
        for node in rng.sample(range(n), per_stream):
            client += 1
            sub = Subscription(s, key, node, client, start_time(rng, window))
            subs.append(sub)
            sim.call_at(sub.at, _subscriber(sim, sub))
    return subs


def start_time(rng: random.Random, window: float) -> float:
    return rng.random() * window if window > 0 else 0.0


def _subscriber(sim: Simulator, sub: Subscription) -> Callable[[], None]:
    def join() -> None:
        sim.subscribe(sub.node, sub.key, sub.client)
        stream = sim.nodes[sub.node].streams.get(sub.key)
        if stream is not None:
            sub.uid = stream.join_uid

    return join


@dataclass(frozen=True, slots=True)
class PublishLoad:
    """How each stream is published: ``packets`` in all, from ``publishers`` random nodes
    taking turns, ``rate`` packets a second, ``size`` payload bytes each, from ``start``."""

    packets: int = 100
    publishers: int = 2
    rate: float = 10.0
    size: int = 100
    start: float = 15.0

    def __post_init__(self) -> None:
        if self.packets < 0 or self.publishers < 1 or self.size < 0:
            raise ValueError("packets and size must not be negative; publishers at least 1")
        if not self.rate > 0:
            raise ValueError(f"rate must be positive, got {self.rate}")


# Publisher clients are numbered from here, apart from subscriber clients.
PUBLISHER_CLIENTS = 1 << 40


def payload(stream: int, index: int, size: int) -> bytes:
    """The data of packet ``index`` of ``stream``: recognisable, and exactly ``size`` bytes."""
    head = f"stream-{stream} packet-{index} ".encode()
    return (head * (size // len(head) + 1))[:size]


def schedule_publishes(
    sim: Simulator,
    keys: list[bytes],
    load: PublishLoad,
    rng: random.Random,
    before_publish: Callable[[int, int, bytes, bytes], None] | None = None,
) -> int:
    """Schedule ``load`` on every key; returns the number of publishes scheduled.
    ``before_publish(node, uid, key, data)`` is called just before each one is made."""
    n = len(sim.nodes)
    uid = 0
    for s, key in enumerate(keys):
        publishers = rng.sample(range(n), min(load.publishers, n))
        for index in range(load.packets):
            uid += 1
            node = publishers[index % len(publishers)]
            client = PUBLISHER_CLIENTS + s * load.publishers + index % len(publishers)
            at = load.start + (index + rng.random()) / load.rate
            data = payload(s, index, load.size)
            sim.call_at(at, _publisher(sim, node, key, client, uid, data, before_publish))
    return uid


def _publisher(
    sim: Simulator,
    node: int,
    key: bytes,
    client: int,
    uid: int,
    data: bytes,
    before_publish: Callable[[int, int, bytes, bytes], None] | None,
) -> Callable[[], None]:
    def publish() -> None:
        if before_publish is not None:
            before_publish(node, uid, key, data)
        sim.publish(node, key, client, uid, data)

    return publish
