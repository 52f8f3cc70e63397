"""The subscribe experiment: build a network, join many subscribers to many streams, let the
network go quiet, check every tree invariant and measure the trees."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from testnet.sim.invariants import check_all, violations
from testnet.sim.report import (
    greedy_baseline,
    route_probes,
    subscription_results,
    tree_results,
)
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import schedule_subscribes, stream_keys


@dataclass(frozen=True, slots=True)
class SubscribeExperiment:
    sim: SimConfig
    streams: int = 100
    subscribers: int = 100
    join_window: float = 10.0  # virtual seconds over which the joins are spread
    greedy_samples: int = 1000
    route_samples: int = 1000


def run_subscribe(exp: SubscribeExperiment) -> tuple[Simulator, dict[str, object]]:
    """Run ``exp`` to quiescence; return the simulator (for further checks) and the report."""
    started = time.perf_counter()
    sim = Simulator(exp.sim)
    setup = time.perf_counter() - started
    rng = random.Random(f"workload-{exp.sim.seed}")
    keys = stream_keys(exp.streams)
    subs = schedule_subscribes(sim, keys, exp.subscribers, exp.join_window, rng)
    started = time.perf_counter()
    sim.run()
    run = time.perf_counter() - started
    quiet_at = sim.last_message_at
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    found = violations(shapes.values())
    messages = sum(sim.sent.values())
    search_hops = sim.sent["SubscribeRequest"] + sim.sent["ResubscribeRequest"]
    report: dict[str, object] = {
        "nodes": len(sim.nodes),
        "degree": exp.sim.degree,
        "seed": exp.sim.seed,
        "per_stream": exp.subscribers,
        **subscription_results(sim, subs, shapes),
        **tree_results(sim, keys, shapes),
        **greedy_baseline(sim, exp.greedy_samples, random.Random(f"greedy-{exp.sim.seed}")),
        "messages": messages,
        "messages_per_join": messages / len(subs) if subs else 0.0,
        "search_hops_per_join": search_hops / len(subs) if subs else 0.0,
        "messages_lost": sim.lost,
        # Probes run after the workload is measured, on the same network.
        **route_probes(sim, exp.route_samples, random.Random(f"probes-{exp.sim.seed}")),
        "violation_count": len(found),
        "violations": found[:20],
        "virtual_time": quiet_at,
        "events": sim.events,
        "wall_setup": setup,
        "wall_run": run,
    }
    return sim, report
