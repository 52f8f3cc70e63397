"""The churn experiment: publish while nodes die, restart and join, then check that every
subscriber that stayed up got every acknowledged packet exactly once, in order, and that
each stream is one tree again.

Faults are silent by default (a crashed node just stops talking; its peers find out from
missed heartbeats), which is the slow case: a killed process whose sockets the operating
system closes is noticed at once. Publishers behave as a careful client does: a publish that
fails for a reason that may pass (TIMEOUT, BUSY, NOT_CARRIED) is sent again, same uid, until
its root acknowledges it, so the root's uid table keeps it from being ordered twice.

A restarted node's subscriber clients died with its process. Each comes back as a real
client does: it reconnects once the node is up and subscribes again with its ``last_seen``
(the last number it was told about, packet or gap), and from then on it is owed every
acknowledged packet after that number, each delivered or announced ``Missed`` (a gap that
outlived every window on the way); only a silent gap is lost. A subscriber whose node was
never killed is owed every acknowledged packet, delivered.

Repair time is measured per stream: from the kill until the stream is one healthy tree again
(one root, no orphans, no node still restarting, every surviving subscriber a member),
checked every ``poll`` virtual seconds.
"""

from __future__ import annotations

import functools
import random
import time
from dataclasses import dataclass, field

from overlay.core.effects import ClientId
from overlay.core.events import ClientEvent, PublishFailed
from overlay.core.streams import State
from overlay.messages import RETRYABLE, PacketKind
from testnet.sim.deliveries import DeliveryLog
from testnet.sim.invariants import TreeShape, check_all, check_stream, collect, violations
from testnet.sim.report import percentile
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import (
    PublishLoad,
    Subscription,
    schedule_publishes,
    schedule_subscribes,
    stream_keys,
)


@dataclass(frozen=True, slots=True)
class ChaosPlan:
    """What goes wrong, and when (seconds after publishing starts)."""

    kill_fraction: float = 0.2  # of all nodes, chosen at random...
    kill_roots: bool = True  # ...after every stream's root
    kill_at: float = 10.0
    silent: bool = True  # peers learn by liveness, not from the transport
    restart_after: float | None = None  # restart the killed nodes this long after
    add_nodes: int = 0  # new nodes joining at kill_at, each linked to ``add_links`` peers
    add_links: int = 8

    def __post_init__(self) -> None:
        if not 0.0 <= self.kill_fraction < 1.0:
            raise ValueError(f"kill_fraction must be in [0, 1), got {self.kill_fraction}")
        if self.kill_at < 0 or (self.restart_after is not None and self.restart_after < 0):
            raise ValueError("kill_at and restart_after must not be negative")
        if self.add_nodes < 0 or self.add_links < 1:
            raise ValueError("add_nodes must not be negative and add_links at least 1")


@dataclass(frozen=True, slots=True)
class ChaosExperiment:
    sim: SimConfig
    streams: int = 100
    subscribers: int = 100
    join_window: float = 10.0
    publish: PublishLoad = field(default_factory=PublishLoad)
    plan: ChaosPlan = field(default_factory=ChaosPlan)
    retry_delay: float = 1.0  # a publisher's pause before it sends a failed publish again
    retry_for: float = 300.0  # and how long after its first try it keeps trying
    poll: float = 0.5  # how often repair is checked, virtual seconds


class Publishers:
    """Publisher clients that send a failed publish again (same uid) until it is acked."""

    def __init__(self, sim: Simulator, log: DeliveryLog, delay: float, patience: float) -> None:
        self.sim = sim
        self.log = log
        self.delay = delay
        self.patience = patience
        self.data: dict[int, bytes] = {}  # uid -> payload, to send it again
        self.retries = 0
        self.given_up = 0

    def before_publish(self, node: int, uid: int, key: bytes, data: bytes) -> None:
        self.data[uid] = data
        self.log.published_as(node, uid, key, None, PacketKind.DATA, data)

    def on_event(self, node: int, client: ClientId, event: ClientEvent) -> None:
        self.log.on_event(node, client, event)
        if isinstance(event, PublishFailed) and event.error in RETRYABLE:
            self.sim.call_at(
                self.sim.now + self.delay, lambda: self._again(node, client, event.key, event.uid)
            )

    def _again(self, node: int, client: ClientId, key: bytes, uid: int) -> None:
        first = self.log.published[uid][1]
        if not self.sim.alive[node] or self.sim.now - first > self.patience:
            self.given_up += 1  # the publisher died with its node, or ran out of patience
            return
        self.retries += 1
        self.sim.publish(node, key, client, uid, self.data[uid])


def run_chaos(exp: ChaosExperiment) -> tuple[Simulator, dict[str, object]]:
    started = time.perf_counter()
    sim = Simulator(exp.sim)
    rng = random.Random(f"chaos-{exp.sim.seed}")
    keys = stream_keys(exp.streams)
    subs = schedule_subscribes(sim, keys, exp.subscribers, exp.join_window, rng)
    log = DeliveryLog(lambda: sim.now)
    for sub in subs:
        log.expect(sub.node, sub.client, sub.key, atomic=False, last_seen=None)
    publishers = Publishers(sim, log, exp.retry_delay, exp.retry_for)
    sim.on_deliver = publishers.on_event
    schedule_publishes(sim, keys, exp.publish, rng, publishers.before_publish)
    plan = exp.plan
    kill_time = exp.publish.start + plan.kill_at
    sim.run(until=kill_time)
    killed = _kill(sim, keys, plan, rng)
    added = [
        sim.add_node(rng.random(), rng.sample(range(len(sim.nodes)), plan.add_links))
        for _ in range(plan.add_nodes)
    ]
    restarted: list[Subscription] = []
    if plan.restart_after is not None:
        on_node: dict[int, list[Subscription]] = {}
        for sub in subs:
            on_node.setdefault(sub.node, []).append(sub)
        for i in killed:
            restarted += on_node.get(i, [])
            back = functools.partial(_restart, sim, log, i, on_node.get(i, []))
            sim.call_at(kill_time + plan.restart_after, back)
    survivors: dict[bytes, list[Subscription]] = {}
    for sub in subs:
        if sim.alive[sub.node]:
            survivors.setdefault(sub.key, []).append(sub)
    repair = _watch_repair(sim, keys, survivors, kill_time, exp.poll)
    sim.run()
    wall = time.perf_counter() - started
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    found = violations(shapes.values())
    alive_subs = [s for s in subs if sim.alive[s.node]]
    lost, missed, delivered, expected = _losses(log, alive_subs, restarted)
    problems = [p for p in log.problems(complete=False)]
    beat = exp.sim.node.heartbeat_interval
    repaired = sorted(t for t in repair.values() if t is not None)
    trees = [
        len([i for i, s in members.items() if s.state is State.ROOT])
        for members in collect(sim.nodes, sim.alive).values()
    ]
    report: dict[str, object] = {
        "nodes": exp.sim.nodes,
        "seed": exp.sim.seed,
        "streams": exp.streams,
        "per_stream": exp.subscribers,
        "killed": len(killed),
        "restarted": len(killed) if plan.restart_after is not None else 0,
        "added": len(added),
        "silent": plan.silent,
        "heartbeat": beat,
        "dead_after": exp.sim.node.dead_after,
        "subscribers_alive": len(alive_subs),
        "packets_acked": sum(len(t) for t in log.truth.values()),
        "deliveries": delivered,
        "deliveries_expected": expected,
        "lost": lost,
        "missed_announced": missed,
        "clients_restarted": len(restarted),
        "clients_resubscribed": sum(1 for s in restarted if _subscribed(sim, s)),
        "duplicates_delivered": _duplicates(log),
        "delivery_problem_count": len(problems),
        "delivery_problems": problems[:20],
        "streams_one_tree": sum(1 for k in keys if _one_tree(shapes.get(k))),
        "max_roots": max(trees, default=0),
        "violation_count": len(found),
        "violations": found[:20],
        "repaired": len(repaired),
        "repair_p50": percentile(repaired, 50),
        "repair_p90": percentile(repaired, 90),
        "repair_max": repaired[-1] if repaired else 0.0,
        "publish_retries": publishers.retries,
        "publishes_abandoned": publishers.given_up,
        "restarts": sum(node.stats.restarts for node in sim.nodes),
        "dead_peers": sum(node.stats.dead_peers for node in sim.nodes),
        "pushed_up": sum(node.stats.pushed_up for node in sim.nodes),
        "refilled": sum(node.stats.refilled for node in sim.nodes),
        "filled": sum(node.stats.filled for node in sim.nodes),
        "messages": sum(node.stats.sent for node in sim.nodes),
        "past_queries": sum(node.stats.past_queries for node in sim.nodes),
        "claims_refused": sum(node.stats.claims_refused for node in sim.nodes),
        "looks": sum(node.stats.looks for node in sim.nodes),
        "merges": sum(node.stats.merges for node in sim.nodes),
        "virtual_time": sim.now,
        "wall": wall,
    }
    return sim, report


def _restart(sim: Simulator, log: DeliveryLog, i: int, subs: list[Subscription]) -> None:
    """Node ``i`` starts again, and each of its subscriber clients subscribes again from
    the last number it was told about (-1: none yet; None: it never heard it was
    subscribed, so it starts afresh)."""
    sim.restart(i)
    for sub in subs:
        cursor = log.subs[(sub.node, sub.client)].cursor
        last_seen = None if cursor is None else cursor - 1
        log.expect(sub.node, sub.client, sub.key, atomic=False, last_seen=last_seen)
        sim.subscribe_from(sub.node, sub.key, sub.client, last_seen, atomic=False)


def _subscribed(sim: Simulator, sub: Subscription) -> bool:
    stream = sim.nodes[sub.node].streams.get(sub.key)
    return sim.alive[sub.node] and stream is not None and sub.client in stream.local


def _kill(sim: Simulator, keys: list[bytes], plan: ChaosPlan, rng: random.Random) -> list[int]:
    n = len(sim.nodes)
    count = int(plan.kill_fraction * n)
    victims: list[int] = []
    if plan.kill_roots and count:
        members = collect(sim.nodes, sim.alive)
        for key in keys:
            for i, stream in members.get(key, {}).items():
                if stream.state is State.ROOT and i not in victims:
                    victims.append(i)
    rest = [i for i in range(n) if i not in set(victims)]
    victims += rng.sample(rest, max(0, count - len(victims)))
    for i in victims:
        sim.crash(i, silent=plan.silent)
    return victims


def _watch_repair(
    sim: Simulator,
    keys: list[bytes],
    survivors: dict[bytes, list[Subscription]],
    since: float,
    poll: float,
) -> dict[bytes, float | None]:
    """Check every ``poll`` seconds which streams are healthy trees again; record when."""
    repair: dict[bytes, float | None] = {key: None for key in keys}

    def check() -> None:
        pending = [k for k, t in repair.items() if t is None]
        if not pending:
            return
        members = collect(sim.nodes, sim.alive)
        for key in pending:
            carried = members.get(key, {})
            shape = check_stream(key, carried, sim.index, sim.nodes)
            healthy = not shape.violations and all(
                s.node in carried for s in survivors.get(key, [])
            )
            if healthy:
                repair[key] = sim.now - since
        if any(t is None for t in repair.values()) and sim.now - since < 600:
            sim.call_at(sim.now + poll, check)

    sim.call_at(since + poll, check)
    return repair


def _losses(
    log: DeliveryLog, alive: list[Subscription], restarted: list[Subscription]
) -> tuple[int, int, int, int]:
    """Acknowledged packets a live subscriber is owed and was neither given nor told it
    missed (lost: a silent gap); those it was told it missed; deliveries; deliveries owed.
    A subscriber whose node never died is owed every packet, delivered (a ``Missed`` is a
    loss too); a restarted one every packet from its new subscription's start, delivered
    or announced missed."""
    again = {(sub.node, sub.client) for sub in restarted}
    lost = missed = delivered = expected = 0
    for sub in alive:
        record = log.subs[(sub.node, sub.client)]
        got = set(record.numbers)
        owed = log.truth.get(sub.key, {})
        gaps: list[tuple[int, int]] = []
        if (sub.node, sub.client) in again:
            # (never told it was subscribed again: owed everything, so it cannot pass)
            start = record.start if record.start is not None else 0
            owed = {n: t for n, t in owed.items() if n >= start}
            gaps = record.gaps
        expected += len(owed)
        delivered += len(got)
        for number in owed:
            if number not in got:
                if any(first <= number <= last for first, last in gaps):
                    missed += 1
                else:
                    lost += 1
    return lost, missed, delivered, expected


def _duplicates(log: DeliveryLog) -> int:
    return sum(len(s.numbers) - len(set(s.numbers)) for s in log.subs.values())


def _one_tree(shape: TreeShape | None) -> bool:
    return shape is not None and not shape.violations
