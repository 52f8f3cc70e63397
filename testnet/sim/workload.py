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
