"""Streams published while a darknet swaps: do the delivery guarantees and the one tree hold?

Swapping moves nodes around and inside the trees (``overlay.core.swaps``): a root does
not swap, a member moves only away from its streams' keys, and a node that moves next to
a root, closer to its key, makes it hand its tree on. This load
subscribes ``subscribers`` random nodes to each of ``streams`` streams in the first
``JOIN_WINDOW`` seconds, while the nodes swap from the start, and publishes ``packets`` a
stream from two random nodes, spread over the first ``PUBLISH_SHARE`` of the run, so that
every packet has had time to arrive when the run ends. Then it checks, as the subscribe
experiment does (``testnet.sim.experiment``):

* every subscriber got every packet once and in order, with no gap (``DeliveryLog``);
* every stream has one tree, with no broken invariant (``invariants``);
* and how many roots are the globally closest node at the locations the run ended with.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from keyspace.location import key_location
from keyspace.topology import Topology, closest_node
from overlay.core.streams import State
from overlay.messages import PacketKind
from testnet.sim.deliveries import DeliveryLog
from testnet.sim.invariants import check_all, violations
from testnet.sim.simulator import Simulator
from testnet.sim.workload import PublishLoad, schedule_publishes, schedule_subscribes, stream_keys

JOIN_WINDOW = 10.0  # seconds over which the subscribers join
PUBLISH_START = 15.0  # seconds: the publishing starts once the trees stand
PUBLISH_SHARE = 0.6  # of the run: the publishing ends by then


@dataclass(frozen=True, slots=True)
class StreamsLoad:
    streams: int
    subscribers: int  # per stream
    packets: int  # per stream

    def __post_init__(self) -> None:
        if self.streams < 1 or self.subscribers < 1 or self.packets < 0:
            raise ValueError("a streams load needs streams and subscribers, and packets >= 0")


class StreamsWatch:
    """``load`` scheduled on ``sim``, whose run lasts ``duration`` seconds; ``results``
    once it has run."""

    def __init__(self, sim: Simulator, load: StreamsLoad, duration: float, seed: int) -> None:
        end = PUBLISH_SHARE * duration
        if end <= PUBLISH_START:
            raise ValueError(
                f"a run of {duration:g} s leaves no time to publish: the publishing runs from "
                f"{PUBLISH_START:g} s to {PUBLISH_SHARE:.0%} of the run"
            )
        self.sim = sim
        self.keys = stream_keys(load.streams)
        rng = random.Random(f"darknet-streams-{seed}")
        self.log = log = DeliveryLog(lambda: sim.now)
        subs = schedule_subscribes(sim, self.keys, load.subscribers, JOIN_WINDOW, rng)
        for sub in subs:
            log.expect(sub.node, sub.client, sub.key, atomic=False, last_seen=None)
        sim.on_deliver = log.on_event

        def before_publish(node: int, uid: int, key: bytes, data: bytes) -> None:
            log.published_as(node, uid, key, None, PacketKind.DATA, data)

        rate = max(load.packets, 1) / (end - PUBLISH_START)
        publish = PublishLoad(load.packets, rate=rate, start=PUBLISH_START)
        schedule_publishes(sim, self.keys, publish, rng, before_publish)

    def results(self, topology: Topology) -> dict[str, Any]:
        """The checks (see the notes), at the nodes' locations as ``topology`` has them."""
        sim, log = self.sim, self.log
        problems = list(log.problems(complete=True))
        shapes = check_all(sim.nodes, sim.alive, sim.index)
        found = violations(shapes.values())
        one_tree = closest = 0
        for key in self.keys:
            roots = [
                i
                for i, node in enumerate(sim.nodes)
                if (stream := node.streams.get(key)) is not None and stream.state is State.ROOT
            ]
            one_tree += len(roots) == 1
            closest += roots == [closest_node(topology, key_location(key))]
        return {
            "streams": len(self.keys),
            "packets_ordered": sum(len(t) for t in log.truth.values()),
            "deliveries": sum(len(sub.numbers) for sub in log.subs.values()),
            "delivery_problem_count": len(problems),
            "delivery_problems": problems[:20],
            "duplicates": sum(node.stats.duplicates for node in sim.nodes),
            "streams_one_tree": one_tree,
            "roots_closest": closest,
            "violation_count": len(found),
            "violations": found[:20],
        }
