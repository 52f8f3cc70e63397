"""The subscribe experiment: build a network, join many subscribers to many streams, let the
network go quiet, check every tree invariant and measure the trees."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from overlay.messages import PacketKind
from testnet.sim.deliveries import DeliveryLog
from testnet.sim.invariants import check_all, violations
from testnet.sim.report import (
    greedy_baseline,
    percentile,
    route_probes,
    subscription_results,
    tree_results,
)
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import PublishLoad, schedule_publishes, schedule_subscribes, stream_keys


@dataclass(frozen=True, slots=True)
class SubscribeExperiment:
    sim: SimConfig
    streams: int = 100
    subscribers: int = 100
    join_window: float = 10.0  # virtual seconds over which the joins are spread
    greedy_samples: int = 1000
    route_samples: int = 1000
    # Publishing after the joins (None: subscribe only).
    publish: PublishLoad | None = None


def run_subscribe(exp: SubscribeExperiment) -> tuple[Simulator, dict[str, object]]:
    """Run ``exp`` to quiescence; return the simulator (for further checks) and the report."""
    started = time.perf_counter()
    sim = Simulator(exp.sim)
    setup = time.perf_counter() - started
    rng = random.Random(f"workload-{exp.sim.seed}")
    keys = stream_keys(exp.streams)
    subs = schedule_subscribes(sim, keys, exp.subscribers, exp.join_window, rng)
    log = DeliveryLog(lambda: sim.now)
    if exp.publish is not None:
        for sub in subs:
            log.expect(sub.node, sub.client, sub.key, atomic=False, last_seen=None)
        sim.on_deliver = log.on_event

        def before_publish(node: int, uid: int, key: bytes, data: bytes) -> None:
            log.published_as(node, uid, key, None, PacketKind.DATA, data)

        schedule_publishes(sim, keys, exp.publish, rng, before_publish)
    # What the joins cost is what was sent before the first publish (they are over by
    # then: the publishes start 5 s after the join window); the rest is publishing's.
    joins_sent: Counter[str] = Counter()
    if exp.publish is not None:
        sim.call_at(exp.publish.start, lambda: joins_sent.update(sim.sent))
    started = time.perf_counter()
    sim.run()
    run = time.perf_counter() - started
    run_sent = Counter(sim.sent)  # (the probes below send more)
    if exp.publish is None:
        joins_sent.update(run_sent)
    # Heartbeats are a steady cost of the links, not of the workload: left out.
    del run_sent["Heartbeat"], joins_sent["Heartbeat"]
    quiet_at = sim.last_message_at
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    found = violations(shapes.values())
    messages = joins_sent.total()
    search_hops = joins_sent["SubscribeRequest"] + joins_sent["ResubscribeRequest"]
    report: dict[str, object] = {
        "nodes": len(sim.nodes),
        "degree": exp.sim.degree,
        "proximity": exp.sim.proximity,
        "seed": exp.sim.seed,
        "per_stream": exp.subscribers,
        **subscription_results(sim, subs, shapes),
        **tree_results(sim, keys, shapes),
        **greedy_baseline(sim, exp.greedy_samples, random.Random(f"greedy-{exp.sim.seed}")),
        "messages": messages,
        "messages_per_join": messages / len(subs) if subs else 0.0,
        "join_messages_by_kind": dict(joins_sent.most_common()),
        "search_hops_per_join": search_hops / len(subs) if subs else 0.0,
        "messages_lost": sim.lost,
        # Probes run after the workload is measured, on the same network.
        **_timed(
            "wall_probes",
            lambda: route_probes(sim, exp.route_samples, random.Random(f"probes-{exp.sim.seed}")),
        ),
        **(publish_results(sim, exp, log, run_sent - joins_sent) if exp.publish else {}),
        "violation_count": len(found),
        "violations": found[:20],
        "virtual_time": quiet_at,
        "events": sim.events,
        "wall_setup": setup,
        "wall_run": run,
    }
    return sim, report


def _timed(name: str, measure: Callable[[], dict[str, float]]) -> dict[str, float]:
    """``measure()``'s figures, and the wall time it took as ``name``."""
    started = time.perf_counter()
    figures = measure()
    return {**figures, name: time.perf_counter() - started}


def publish_results(
    sim: Simulator, exp: SubscribeExperiment, log: DeliveryLog, publishing: Counter[str]
) -> dict[str, object]:
    """Did every subscriber get every packet once, in order; what did it cost and take?
    ``publishing``: the messages sent from the first publish on, by kind."""
    assert exp.publish is not None
    faults = exp.sim.network.drop > 0 or exp.sim.network.duplicate > 0
    problems = list(log.problems(complete=not faults))
    latency, penalty = log.latencies(sim.network.latency)
    ordered = sum(len(t) for t in log.truth.values())
    deliveries = sum(len(sub.numbers) for sub in log.subs.values())
    # Link stress: SubscribeData messages sent over packets taken in by non-root nodes. Each
    # node takes a packet from its parent once; anything more (a duplicate, data sent to a
    # node that is not a child) raises it above 1.
    taken = sum(node.stats.stored - node.stats.published for node in sim.nodes)
    carried = sim.sent["SubscribeData"]
    return {
        "packets_scheduled": exp.streams * exp.publish.packets,
        "packets_ordered": ordered,
        "publish_acks": log.acks,
        "deliveries": deliveries,
        "deliveries_expected": ordered // max(exp.streams, 1) * len(log.subs),
        "delivery_problem_count": len(problems),
        "delivery_problems": problems[:20],
        "duplicates": sum(node.stats.duplicates for node in sim.nodes),
        "link_stress": carried / taken if taken else 0.0,
        "publish_messages": publishing.total(),
        "messages_per_packet": publishing.total() / ordered if ordered else 0.0,
        "messages_per_delivery": publishing.total() / deliveries if deliveries else 0.0,
        "publish_messages_by_kind": dict(publishing.most_common()),
        "latency_p50_ms": 1000 * percentile(latency, 50),
        "latency_p99_ms": 1000 * percentile(latency, 99),
        "rdp_median": percentile(penalty, 50),
        "rdp_p95": percentile(penalty, 95),
        "signature_checks": sum(
            node.flow.signatures.verified for node in sim.nodes if node.flow.built
        ),
    }
