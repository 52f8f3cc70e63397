"""What a simulator run measured, as one flat dict (for --json) and as a human summary."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from keyspace.location import key_location
from keyspace.topology import closest_node, greedy_route
from overlay.core.events import Subscribed, SubscribeFailed
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


SUMMARY = """\
{nodes} nodes, degree {degree}, seed {seed}: {streams} streams x {per_stream} subscribers
  subscribed            {subscribed}/{subscriptions}  (failed {subscribe_failed})
  in the stream's tree  {in_single_tree}/{subscriptions}  ({in_single_tree_pct:.2f}%)
  one tree per stream   {streams_one_tree}/{streams}
  root globally closest {root_globally_closest_pct:.2f}% of streams
  join hops             mean {join_hops_mean:.2f}, p99 {join_hops_p99:.0f}; first subscriber \
of a stream {first_join_hops_mean:.2f}
  greedy routing        {greedy_success_pct:.2f}% reach the closest node, mean \
{greedy_steps_mean:.2f} steps (Sandberg: 99.6% in 6.04 at 64,000 nodes)
  tree depth            subscribers at mean depth {subscriber_depth_mean:.2f}, max depth \
{tree_depth_max}; {tree_members_mean:.0f} nodes a tree
  children per node     max {children_per_node_max:.0f}, p99 {children_per_node_p99:.0f}
  messages              {messages} ({messages_per_join:.1f} a subscription), \
{search_hops_per_join:.1f} search hops a subscription
  invariant violations  {violation_count}
  quiet after           {virtual_time:.2f} virtual s;  wall time {wall_setup:.2f} s setup + \
{wall_run:.2f} s run
"""
