"""The catch-up budget (``overlay.core.catch_up_budget``) in a whole network: subscribers
that join several streams from the first packet at once, through peers whose budget for
them is far tighter than the default, are refused again and again (RejectOverload), back
off to other peers, and still all join and receive every packet, none of it reported
missed, in trees the checker finds sound."""

from __future__ import annotations

import random

from corenet import key_at

from keyspace.topology import small_world
from overlay.core.config import NodeConfig
from overlay.core.events import Missed, Packet, SubscribeFailed
from testnet.sim.invariants import check_all, violations
from testnet.sim.network import NetworkModel
from testnet.sim.simulator import SimConfig, Simulator

WINDOW = 64
# Three streams at one location: a subscriber's three searches all go to the same closest
# peer first, which can afford one of their catch-ups (a burst of one window, refilled in
# ten seconds) and refuses the others.
KEYS = [key_at(0.5, tag=tag) for tag in range(3)]
PUBLISHER = 99


def test_subscribers_refused_for_their_catch_up_budget_still_join_and_receive_everything() -> None:
    n, seed = 30, 5
    node = NodeConfig(window_packets=WINDOW, catch_up_burst=1.0, catch_up_rate=0.1)
    config = SimConfig(
        nodes=n, degree=6, seed=seed, node=node, network=NetworkModel(jitter=0.01), wire=True
    )
    sim = Simulator(config, small_world(n, 6, random.Random(seed)))
    for key in KEYS:
        for early in (1, 2, 3):
            sim.subscribe(early, key, 0)
    sim.run()
    uid = 0

    def publish(count: int) -> None:
        nonlocal uid
        for key in KEYS:
            for _ in range(count):
                uid += 1
                sim.publish(0, key, PUBLISHER, uid, b"p%d" % uid)
        sim.run()

    publish(WINDOW)  # a full window of each stream, then the late joiners from packet 0
    late = range(4, n)
    for subscriber in late:
        for client, key in enumerate(KEYS):
            sim.subscribe_from(subscriber, key, client, -1, False)
    sim.run()
    publish(10)
    assert sum(core.stats.catch_ups_refused for core in sim.nodes) > 0
    for subscriber in late:
        for client in range(len(KEYS)):
            events = [event for _, event in sim.events_for(subscriber, client)]
            assert not [e for e in events if isinstance(e, Missed | SubscribeFailed)]
            numbers = [e.number for e in events if isinstance(e, Packet)]
            assert numbers == list(range(WINDOW + 10)), (subscriber, client)
    assert violations(check_all(sim.nodes, sim.alive, sim.index).values()) == []
