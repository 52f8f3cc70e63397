"""``python -m testnet.sim.darknet``: does location swapping make a darknet route?

    python -m testnet.sim.darknet [--nodes 1000] [--degree 16] [--rounds 100] [--seed 1]
        [--samples 1000] [--interval 10] [--no-swap] [--plot FILE] [--json]

A darknet's links follow trust and cannot be rewired, so its nodes swap locations instead
(``keyspace.swapping``, carried out by the cores when ``NodeConfig.swap_interval`` is set).
The experiment builds Sandberg's model (``keyspace.darknet``): a Kleinberg small world whose
nodes start at a random permutation of their ideal locations. The simulator runs it with
every node starting a swap every ``--interval`` virtual seconds (a round), and at a few
checkpoints (``checkpoints``: round 0, then halving back from ``--rounds``) the routing of
the locations reached is measured; finally that of the ideal locations.

Measuring: each checkpoint's locations are measured on a simulator of their own, built on the
same links at those locations with swapping off. Measured in the swapping simulator itself,
a search's globally closest node could change under it, as its neighbours swap, between its
start and its answer; and the probes' subscriptions would become part of the run being
measured. So the figures rate the locations reached, not how fast the cores tell their peers
of a move. Two figures each: the cores' own routing (``route_probes``: friend-of-a-friend,
backtracking, HTL), the share of searches whose root is the globally closest node, and their
hops; and plain greedy routing (``greedy_baseline``), as Sandberg measured. Each checkpoint
uses the same probes (same seeds), so two checkpoints at the same locations read the same.

Swapping only exchanges locations, but a swap's two ends take their new locations at
different moments, each as its own message arrives; so at a checkpoint a few swaps are half
done, and a few locations are held by two nodes (``astray``) while others are held by none.
The count stays near the number of swaps in flight; one that grows from checkpoint to
checkpoint means locations are being lost.

The goal: after swapping, at least ``GOAL_ROUTED_PCT`` of searches root at the
closest node, in mean hops within ``GOAL_HOPS_FACTOR`` of the ideal locations'.
``--no-swap`` runs the same rounds with swapping off: the control, whose rows stay as round
0's.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from keyspace.darknet import Darknet, darknet, link_length_gmean, relocated
from keyspace.location import distance
from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from testnet.arguments import positive, seconds
from testnet.sim.collector import collector_paused, run_command
from testnet.sim.darknet_streams import StreamsLoad, StreamsWatch
from testnet.sim.report import greedy_baseline, route_probes
from testnet.sim.simulator import SimConfig, Simulator

# The goal for a darknet after swapping: searches root at the closest node nearly as
# often as on an opennet (95%), and a search takes at most twice the hops it would on the
# ideal locations (the same links, so any extra hops are the locations' fault).
GOAL_ROUTED_PCT = 95.0
GOAL_HOPS_FACTOR = 2.0

# Checkpoints after round 0: the last round, and this many halvings back from it. Swapping
# changes the most early on, so halving puts the checkpoints where the change is.
CHECKPOINT_HALVINGS = 3

# One measurement: what each checkpoint and the ideal row report.
Row = dict[str, float]


@dataclass(frozen=True, slots=True)
class DarknetExperiment:
    nodes: int = 1000
    degree: int = 16
    rounds: int = 100
    seed: int = 1
    # Probes per measurement, for the cores' routing and for plain greedy routing alike.
    samples: int = 1000
    # Virtual seconds between a node's swap attempts (``NodeConfig.swap_interval``): one round.
    # A swap takes about a second (four passes over a 10-hop walk), so a node is seldom
    # busy with one when asked to be a partner.
    interval: float = 10.0
    # False: the control, the same rounds with swapping off.
    swap: bool = True
    # Streams subscribed and published while the nodes swap (0: none): ``darknet_streams``.
    streams: int = 0
    subscribers: int = 10  # per stream
    packets: int = 20  # per stream

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.rounds < 0 or self.samples < 0:
            raise ValueError(
                f"need nodes >= 1, rounds >= 0, samples >= 0; got {self.nodes}, "
                f"{self.rounds}, {self.samples}"
            )
        if not 0 < self.interval < math.inf:
            raise ValueError(f"interval must be a positive number of seconds: {self.interval}")


@dataclass(frozen=True, slots=True)
class DarknetRun:
    """What ``run_darknet`` found: a row per checkpoint, the ideal row, and the graph at
    the last round's locations."""

    experiment: DarknetExperiment
    net: Darknet
    rows: tuple[Row, ...]
    ideal: Row
    final: Topology
    wall: dict[str, float]
    streams: dict[str, Any] | None = None  # ``StreamsWatch.results``, with streams

    @property
    def goal_met(self) -> bool:
        last = self.rows[-1]
        return (
            last["route_exact_pct"] >= GOAL_ROUTED_PCT
            and last["route_hops_mean"] <= GOAL_HOPS_FACTOR * self.ideal["route_hops_mean"]
        )


def checkpoints(rounds: int) -> list[int]:
    """Round 0, ``rounds``, and ``CHECKPOINT_HALVINGS`` halvings back from it (rounded
    down), ascending and without repeats: 0, 12, 25, 50, 100 for 100 rounds."""
    return sorted({0} | {rounds >> k for k in range(CHECKPOINT_HALVINGS + 1)})


def measure(topology: Topology, exp: DarknetExperiment) -> Row:
    """Routing on ``topology`` as its locations stand: the cores' (on a simulator of its own,
    swapping off, same seed and so same latencies) and plain greedy routing's."""
    # Swapping off: the locations measured hold still while the probes search.
    still = NodeConfig(swap_interval=0.0)
    sim = Simulator(SimConfig(nodes=len(topology), seed=exp.seed, node=still), topology)
    return {
        **route_probes(sim, exp.samples, random.Random(f"probes-{exp.seed}")),
        **greedy_baseline(sim, exp.samples, random.Random(f"greedy-{exp.seed}")),
        "link_length_gmean": link_length_gmean(topology),
    }


def _swap_counts(sim: Simulator) -> tuple[int, int]:
    """Swaps done (each changes two nodes' locations) and swaps started, over all nodes."""
    changed = sum(node.stats.swaps for node in sim.nodes)
    started = sum(node.stats.swap_attempts for node in sim.nodes)
    return changed // 2, started


def run_darknet(exp: DarknetExperiment) -> DarknetRun:
    """Swap for ``exp.rounds`` rounds, measuring at each of ``checkpoints``; then measure
    the ideal locations."""
    started = time.perf_counter()
    net = darknet(exp.nodes, exp.degree, random.Random(f"darknet-{exp.seed}"))
    swapping = NodeConfig(swap_interval=exp.interval if exp.swap else 0.0)
    sim = Simulator(SimConfig(nodes=exp.nodes, seed=exp.seed, node=swapping), net.topology)
    wall = {"wall_build": time.perf_counter() - started, "wall_swap": 0.0, "wall_measure": 0.0}
    watch = None
    if exp.streams:
        load = StreamsLoad(exp.streams, exp.subscribers, exp.packets)
        watch = StreamsWatch(sim, load, exp.rounds * exp.interval, exp.seed)
    rows: list[Row] = []
    at = net.topology
    start = Counter(at.locations)
    for mark in checkpoints(exp.rounds):
        started = time.perf_counter()
        sim.run(until=mark * exp.interval)
        at = relocated(net.topology, [node.location for node in sim.nodes])
        wall["wall_swap"] += time.perf_counter() - started
        started = time.perf_counter()
        swaps, attempts = _swap_counts(sim)
        astray = (Counter(at.locations) - start).total()
        rows.append(
            {
                "rounds": mark,
                "swaps": swaps,
                "swap_attempts": attempts,
                "astray": astray,
                **measure(at, exp),
            }
        )
        wall["wall_measure"] += time.perf_counter() - started
    streams = None if watch is None else watch.results(at)
    started = time.perf_counter()
    ideal = measure(net.ideal, exp)
    wall["wall_measure"] += time.perf_counter() - started
    return DarknetRun(exp, net, tuple(rows), ideal, at, wall, streams)


def report(run: DarknetRun) -> dict[str, object]:
    """The run as one flat JSON-ready dict."""
    exp = run.experiment
    return {
        "nodes": exp.nodes,
        "degree": exp.degree,
        "rounds": exp.rounds,
        "seed": exp.seed,
        "samples": exp.samples,
        "interval": exp.interval,
        "swap": exp.swap,
        "checkpoints": list(run.rows),
        "ideal": run.ideal,
        "goal_met": run.goal_met,
        "streams": run.streams,
        **run.wall,
    }


# The table's columns: a row's key, its head, and how a value is shown.
COLUMNS = (
    ("rounds", "rounds", "{:,}"),
    ("swaps", "swaps", "{:,}"),
    ("swap_attempts", "attempts", "{:,}"),
    ("astray", "astray", "{:,}"),
    ("route_exact_pct", "routed %", "{:.2f}"),
    ("route_hops_mean", "hops", "{:.2f}"),
    ("greedy_success_pct", "greedy %", "{:.2f}"),
    ("greedy_steps_mean", "steps", "{:.2f}"),
    ("link_length_gmean", "link gmean", "{:.2e}"),
)


def table(run: DarknetRun) -> str:
    """The checkpoints and the ideal row as aligned columns, with a title and a key."""
    exp = run.experiment
    heads = [head for _, head, _ in COLUMNS]
    cells = [[form.format(row[key]) for key, _, form in COLUMNS] for row in run.rows]
    cells.append(
        [
            form.format(run.ideal[key]) if key in run.ideal else ("ideal" if i == 0 else "-")
            for i, (key, _, form) in enumerate(COLUMNS)
        ]
    )
    widths = [max(len(head), *(len(line[i]) for line in cells)) for i, head in enumerate(heads)]
    swapping = f"a swap every {exp.interval:g} s a node" if exp.swap else "swapping off"
    lines = [
        f"darknet of {exp.nodes:,} nodes, degree {exp.degree}, seed {exp.seed}: {swapping}; "
        f"{exp.samples} probes a measurement",
        "  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    lines.append(
        "routed %: searches by the cores rooting at the globally closest node; hops: their "
        "mean; greedy %, steps: plain greedy routing; link gmean: geometric mean link "
        "length; astray: locations held by more nodes than at the start (swaps half done)"
    )
    return "\n".join(lines)


def streams_line(streams: dict[str, Any]) -> str:
    """The streams published while swapping, in one line (``darknet_streams``)."""
    return (
        f"streams while swapping: {streams['streams']} streams, {streams['packets_ordered']:,} "
        f"packets, {streams['deliveries']:,} deliveries; {streams['delivery_problem_count']} "
        f"delivery problems, {streams['duplicates']} duplicates; one tree: "
        f"{streams['streams_one_tree']}/{streams['streams']}; root the closest node: "
        f"{streams['roots_closest']}/{streams['streams']}; invariants broken: "
        f"{streams['violation_count']}"
    )


def verdict(run: DarknetRun) -> str:
    """One line: was the goal met at the last checkpoint, and by what figures."""
    last, ideal = run.rows[-1], run.ideal
    limit = GOAL_HOPS_FACTOR * ideal["route_hops_mean"]
    rounds = int(last["rounds"])
    return (
        f"goal {'met' if run.goal_met else 'not met'}: after {rounds:,} "
        f"round{'' if rounds == 1 else 's'} "
        f"{last['route_exact_pct']:.2f}% routed (goal >= {GOAL_ROUTED_PCT:g}%) in mean "
        f"{last['route_hops_mean']:.2f} hops (goal <= {GOAL_HOPS_FACTOR:g} x ideal "
        f"{ideal['route_hops_mean']:.2f} = {limit:.2f})"
    )


def plot(run: DarknetRun, path: Path) -> None:
    """Two panels into the PNG ``path``. Left: each node's location against its ideal
    position, at the start and after the last round; swapping succeeds when the points
    gather on a line of slope +1 or -1 (the circle's rotations and reflections route
    alike). Right: the link lengths at the start, after the last round and at the ideal
    locations, on a log scale; swapping should move the first towards the third."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed: this only writes files
    import matplotlib.pyplot as plt

    ideal, start, final = run.net.ideal, run.net.topology, run.final
    figure, (where, lengths) = plt.subplots(1, 2, figsize=(12, 5.5), constrained_layout=True)
    try:
        last = int(run.rows[-1]["rounds"])
        dot = 4.0 if len(ideal) <= 2000 else 1.0
        where.scatter(ideal.locations, start.locations, s=dot, color="0.7", label="start")
        where.scatter(
            ideal.locations, final.locations, s=dot, color="tab:blue", label=f"round {last:,}"
        )
        where.set_xlabel("ideal position")
        where.set_ylabel("location")
        where.set_xlim(0, 1)
        where.set_ylim(0, 1)
        where.set_aspect("equal")
        where.legend(loc="upper left", markerscale=4)
        n = len(ideal)
        # From 1/(200n), below which few ring links fall (their lengths are about
        # exponential with mean 1/n), to 1/2, the longest link on a circle; shorter links
        # count in the first bin.
        bins = [0.5 * (100.0 * n) ** (-k / 50) for k in range(51)][::-1]
        for topology, label, color in (
            (start, "start", "0.6"),
            (final, f"round {last:,}", "tab:blue"),
            (ideal, "ideal", "tab:green"),
        ):
            values = [
                max(distance(topology.locations[i], topology.locations[j]), bins[0])
                for i, j in topology.edges()
            ]
            lengths.hist(values, bins=bins, histtype="step", lw=1.5, color=color, label=label)
        lengths.set_xscale("log")
        lengths.set_xlabel("link length")
        lengths.set_ylabel("links")
        lengths.legend(loc="upper left")
        exp = run.experiment
        figure.suptitle(f"darknet of {exp.nodes:,} nodes, degree {exp.degree}, seed {exp.seed}")
        figure.savefig(path, dpi=100)
    finally:
        plt.close(figure)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m testnet.sim.darknet",
        description="Simulate a darknet (fixed trust links, random starting locations) whose "
        "nodes swap locations, and measure its routing at checkpoints and at the ideal "
        "locations.",
    )
    p.add_argument("--nodes", type=positive, default=1000, help="network size (1000)")
    p.add_argument("--degree", type=positive, default=16, help="mean links per node (16)")
    p.add_argument("--rounds", type=positive, default=100, help="swap rounds (100)")
    p.add_argument("--seed", type=int, default=1, help="seed: same seed, same run (1)")
    p.add_argument("--samples", type=positive, default=1000, help="probes a measurement (1000)")
    p.add_argument(
        "--interval",
        type=seconds,
        default=10.0,
        help="virtual seconds between a node's swap attempts: one round (10)",
    )
    p.add_argument(
        "--swap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="nodes swap locations (the default; --no-swap: the control, swapping off)",
    )
    p.add_argument(
        "--streams",
        type=int,
        default=0,
        help="streams subscribed and published while the nodes swap (0: none)",
    )
    p.add_argument("--subscribers", type=positive, default=10, help="per stream (10)")
    p.add_argument("--packets", type=positive, default=20, help="per stream (20)")
    p.add_argument("--plot", type=Path, help="write the locations and link lengths to this PNG")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.plot is not None:
        # Before the run, not after it: a plot that cannot be made must not cost the run.
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error("--plot needs matplotlib: pip install -e '.[viz]'")
        if not args.plot.parent.is_dir():
            p.error(f"--plot {args.plot}: no directory {args.plot.parent}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    exp = DarknetExperiment(
        nodes=args.nodes,
        degree=args.degree,
        rounds=args.rounds,
        seed=args.seed,
        samples=args.samples,
        interval=args.interval,
        swap=args.swap,
        streams=args.streams,
        subscribers=args.subscribers,
        packets=args.packets,
    )
    with collector_paused():
        run = run_darknet(exp)
    if args.json:
        print(json.dumps(report(run), sort_keys=True))
    else:
        print(table(run))
        if run.streams is not None:
            print(streams_line(run.streams))
        print(verdict(run))
    if args.plot is not None:
        plot(run, args.plot)
    return 0


if __name__ == "__main__":
    run_command(main)
