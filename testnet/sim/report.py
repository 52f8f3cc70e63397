"""What a simulator run measured, as one flat dict (for --json) and as a human summary."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from keyspace.location import key_location
from keyspace.stream_key import StreamKey
from keyspace.topology import closest_node, greedy_route
from overlay.core.effects import ClientId
from overlay.core.events import ClientEvent, Subscribed, SubscribeFailed
from testnet.sim.invariants import TreeShape
from testnet.sim.simulator import Simulator
from testnet.sim.workload import Subscription


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[rank - 1])


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def subscription_results(
    sim: Simulator, subs: Sequence[Subscription], shapes: dict[bytes, TreeShape]
) -> dict[str, float]:
    """Did every subscriber join, and is it in its stream's single tree?"""
    joined = failed = in_tree = 0
    hops: list[float] = []
    first_hops: list[float] = []
    seen_streams: set[int] = set()
    for sub in sorted(subs, key=lambda s: s.at):
        events = [e for _, e in sim.events_for(sub.node, sub.client)]
        if any(isinstance(e, SubscribeFailed) for e in events):
            failed += 1
        elif any(isinstance(e, Subscribed) for e in events):
            joined += 1
        shape = shapes.get(sub.key)
        if shape is not None and not shape.violations and sub.node in shape.depth:
            in_tree += 1
        h = float(sim.success_hops.get(sub.uid, 0)) if sub.uid is not None else 0.0
        hops.append(h)
        if sub.stream not in seen_streams:
            seen_streams.add(sub.stream)
            first_hops.append(h)
    total = len(subs)
    return {
        "subscriptions": total,
        "subscribed": joined,
        "subscribe_failed": failed,
        "in_single_tree": in_tree,
        "in_single_tree_pct": 100.0 * in_tree / total if total else 100.0,
        "join_hops_mean": mean(hops),
        "join_hops_p99": percentile(hops, 99),
        "first_join_hops_mean": mean(first_hops),
    }


def tree_results(
    sim: Simulator, keys: Sequence[bytes], shapes: dict[bytes, TreeShape]
) -> dict[str, float]:
    """Shape of the trees, and whether each root is the globally closest node."""
    one_tree = root_closest = 0
    depths: list[float] = []
    max_depth = 0
    children: list[float] = []
    for key in keys:
        shape = shapes.get(key)
        if shape is None:
            continue
        if not shape.violations:
            one_tree += 1
        if shape.root is not None and shape.root == closest_node(sim.topology, key_location(key)):
            root_closest += 1
        for i, stream in shape.members.items():
            children.append(float(len(stream.children)))
            if stream.local and i in shape.depth:
                depths.append(float(shape.depth[i]))
        if shape.depth:
            max_depth = max(max_depth, max(shape.depth.values()))
    streams = len(keys)
    return {
        "streams": streams,
        "streams_one_tree": one_tree,
        "root_globally_closest_pct": 100.0 * root_closest / streams if streams else 100.0,
        "subscriber_depth_mean": mean(depths),
        "tree_depth_max": max_depth,
        "children_per_node_max": max(children, default=0.0),
        "children_per_node_p99": percentile(children, 99),
        "tree_members_mean": mean([float(len(shapes[k].members)) for k in keys if k in shapes]),
    }


def greedy_baseline(sim: Simulator, samples: int, rng: random.Random) -> dict[str, float]:
    """Plain greedy routing on the same topology (Sandberg's measure): from random nodes to
    random targets, the share that reach the globally closest node and the steps taken."""
    n = len(sim.nodes)
    steps: list[float] = []
    success = 0
    for _ in range(samples):
        start, target = rng.randrange(n), rng.random()
        path = greedy_route(sim.topology, start, target, max_steps=10 * n)
        steps.append(float(len(path) - 1))
        success += path[-1] == closest_node(sim.topology, target)
    return {
        "greedy_success_pct": 100.0 * success / samples if samples else 100.0,
        "greedy_steps_mean": mean(steps),
    }


def root_of(sim: Simulator, node: int, key: bytes) -> int | None:
    """Follow parent links from ``node`` to its tree's root (None if it is not in a tree)."""
    for _ in range(len(sim.nodes)):
        stream = sim.nodes[node].streams.get(key)
        if stream is None:
            return None
        if stream.parent is None:
            return node
        node = sim.index[stream.parent]
    return None  # a cycle: the checker reports those


# The client id every route probe subscribes with (workload clients count up from 1).
PROBE_CLIENT = -1


def route_probes(
    sim: Simulator, samples: int, rng: random.Random, concurrent: int | None = None
) -> dict[str, float]:
    """The overlay's own routing, measured with the real cores (friend-of-a-friend greedy
    routing, HTL, backtracking): random nodes subscribe to fresh streams, so each search
    must find its root; count the hops of the path it joins by, and check the root is the
    globally closest node. This is the figure to set beside Sandberg's.

    ``concurrent`` searches run at once, each for its own stream, so they do not meet; the
    more run together, the fewer seconds of every link's heartbeats each one costs (a
    search takes about as long whether it runs alone or beside a thousand others). By
    default one node in twenty, at least 10: more at once on a small network would meet
    nodes at their ``max_streams`` (refused there, a probe counts as a miss).
    A probe is measured as soon as its search has its answer; then it unsubscribes and the
    next probe starts. Nothing waits for the network to go quiet: the new roots' own
    checks for another root, and the leaving, go on beside the later probes."""
    n = len(sim.nodes)
    if concurrent is None:
        concurrent = max(10, n // 20)
    hops: list[float] = []
    exact = 0
    launched = 0
    waiting: dict[tuple[int, bytes], int | None] = {}  # probes out -> their search's uid
    workload_hook = sim.on_deliver

    def launch() -> None:
        nonlocal launched
        key = StreamKey.open(f"route-probe-{sim.config.seed}-{launched}").key
        launched += 1
        node = rng.randrange(n)
        waiting[(node, key)] = None
        sim.subscribe(node, key, PROBE_CLIENT)
        stream = sim.nodes[node].streams.get(key)
        if (node, key) in waiting and stream is not None:  # (not answered at once)
            waiting[(node, key)] = stream.join_uid

    def answered(node: int, key: bytes) -> None:
        nonlocal exact
        uid = waiting.pop((node, key))
        hops.append(float(sim.success_hops.get(uid, 0)) if uid is not None else 0.0)
        exact += root_of(sim, node, key) == closest_node(sim.topology, key_location(key))
        sim.call_at(sim.now, lambda: sim.unsubscribe(node, key, PROBE_CLIENT))
        if launched < samples:
            sim.call_at(sim.now, launch)
        elif not waiting:
            sim.halt()

    def on_deliver(node: int, client: ClientId, event: ClientEvent) -> None:
        if workload_hook is not None:
            workload_hook(node, client, event)
        if (
            client == PROBE_CLIENT
            and isinstance(event, Subscribed | SubscribeFailed)
            and (node, event.key) in waiting
        ):
            answered(node, event.key)

    sim.on_deliver = on_deliver
    try:
        while launched < min(samples, concurrent):
            launch()
        if waiting or launched < samples:
            sim.run()
    finally:
        sim.on_deliver = workload_hook
    return {
        "route_samples": samples,
        "route_exact_pct": 100.0 * exact / samples if samples else 100.0,
        "route_hops_mean": mean(hops),
        "route_hops_p99": percentile(hops, 99),
    }


SUMMARY = """\
{nodes} nodes, degree {degree} (proximity {proximity}), seed {seed}: {streams} streams x \
{per_stream} subscribers
  subscribed            {subscribed}/{subscriptions}  (failed {subscribe_failed})
  in the stream's tree  {in_single_tree}/{subscriptions}  ({in_single_tree_pct:.2f}%)
  one tree per stream   {streams_one_tree}/{streams}
  root globally closest {root_globally_closest_pct:.2f}% of streams
  join hops             mean {join_hops_mean:.2f}, p99 {join_hops_p99:.0f}; first subscriber \
of a stream {first_join_hops_mean:.2f}
  overlay routing       {route_exact_pct:.2f}% of {route_samples} searches root at the \
closest node, in mean {route_hops_mean:.2f} hops, p99 {route_hops_p99:.0f} \
(Sandberg: 99.6% in 6.04 steps at 64,000 nodes)
  plain greedy          {greedy_success_pct:.2f}% reach the closest node, mean \
{greedy_steps_mean:.2f} steps (no friend-of-a-friend, on the same graph)
  tree depth            subscribers at mean depth {subscriber_depth_mean:.2f}, max depth \
{tree_depth_max}; {tree_members_mean:.0f} nodes a tree
  children per node     max {children_per_node_max:.0f}, p99 {children_per_node_p99:.0f}
  messages              {messages} ({messages_per_join:.1f} a subscription), \
{search_hops_per_join:.1f} search hops a subscription
  invariant violations  {violation_count}
  quiet after           {virtual_time:.2f} virtual s;  wall time {wall_setup:.2f} s setup + \
{wall_run:.2f} s run + {wall_probes:.2f} s routing probes
"""

# The process's figures, printed after both summaries (``python -m testnet.sim``).
MEMORY_SUMMARY = """\
  peak memory           {peak_mib:,.0f} MiB in all; {bytes_per_node:,.0f} bytes a node \
(the peak above what the process held before building the network)
"""

PUBLISH_SUMMARY = """\
publishing: {packets_scheduled} packets ({packets_ordered} ordered by the roots, \
{publish_acks} acknowledged)
  delivered             {deliveries}/{deliveries_expected} packets to subscribers; \
{delivery_problem_count} order, gap or content problems
  duplicates            {duplicates};  link stress {link_stress:.3f} \
(SubscribeData sent per packet taken in; 1 is ideal)
  messages              {publish_messages} ({messages_per_packet:.1f} a packet, \
{messages_per_delivery:.2f} a delivery)
  publish to delivery   p50 {latency_p50_ms:.0f} ms, p99 {latency_p99_ms:.0f} ms (virtual)
  relative delay        median {rdp_median:.2f}, p95 {rdp_p95:.2f} \
(tree path over direct latency, publisher to subscriber)
"""
