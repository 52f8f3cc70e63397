"""``python -m testnet.sim``: subscribe many clients to many streams, publish on every stream,
check every tree and delivery guarantee, and print a summary or JSON.

Example: python -m testnet.sim --nodes 10000 --streams 100 --subscribers 100 --packets 100
"""

from __future__ import annotations

import argparse
import json
import sys

from overlay.core.config import NodeConfig
from overlay.messages import MAX_PAYLOAD
from testnet.arguments import positive
from testnet.process_memory import memory_now, peak_memory
from testnet.sim.collector import collector_paused, run_command
from testnet.sim.experiment import SubscribeExperiment, run_subscribe
from testnet.sim.network import NetworkModel
from testnet.sim.report import MEMORY_SUMMARY, PUBLISH_SUMMARY, SUMMARY
from testnet.sim.simulator import SimConfig
from testnet.sim.workload import PublishLoad


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {value}")
    return value


def add_proximity(p: argparse.ArgumentParser) -> None:
    """``--proximity``: the simulated graph's long links (``SimConfig.proximity``)."""
    p.add_argument(
        "--proximity",
        type=positive,
        default=16,
        help="each long link goes to the nearest of this many alike nodes; 1: to the node "
        "closest to its drawn point (16)",
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m testnet.sim",
        description="Simulate a subscription-tree overlay: subscribe many clients to many "
        "streams, publish on each, check every tree invariant and that every subscriber got "
        "every packet once and in order, and report routing, trees, latency and link stress.",
    )
    p.add_argument("--nodes", type=positive, default=10_000, help="network size (10000)")
    p.add_argument("--degree", type=positive, default=16, help="mean links per node (16)")
    p.add_argument("--streams", type=positive, default=100, help="streams (100)")
    p.add_argument("--subscribers", type=positive, default=100, help="per stream (100)")
    p.add_argument("--seed", type=int, default=1, help="seed: same seed, same run (1)")
    p.add_argument("--join-window", type=float, default=10.0, help="seconds of joins (10)")
    add_proximity(p)
    p.add_argument("--max-htl", type=positive, default=10, help="max hops-to-live (10)")
    p.add_argument("--max-streams", type=positive, default=32, help="streams a node (32)")
    p.add_argument("--drop", type=_fraction, default=0.0, help="message loss probability")
    p.add_argument("--duplicate", type=_fraction, default=0.0, help="duplication probability")
    p.add_argument("--greedy-samples", type=int, default=1000, help="plain greedy samples")
    p.add_argument("--route-samples", type=int, default=1000, help="overlay routing probes")
    p.add_argument(
        "--packets",
        type=int,
        default=20,
        help="packets a stream, published after the joins (20; 0: subscribe only)",
    )
    p.add_argument("--publishers", type=positive, default=2, help="publishers a stream (2)")
    p.add_argument("--rate", type=float, default=10.0, help="packets a second a stream (10)")
    p.add_argument("--size", type=int, default=100, help="payload bytes a packet (100)")
    p.add_argument(
        "--confirm-publishes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="roots send a packet down only once its publisher's node confirms its number "
        "(the default; --no-confirm-publishes: at once, at half the latency)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.subscribers > args.nodes:
        p.error(f"--subscribers {args.subscribers} exceeds --nodes {args.nodes}")
    if args.packets < 0:
        p.error(f"--packets must not be negative, got {args.packets}")
    if not args.rate > 0:
        p.error(f"--rate must be positive, got {args.rate}")
    if not 0 <= args.size <= MAX_PAYLOAD:
        p.error(f"--size must be in [0, {MAX_PAYLOAD}], got {args.size}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        node = NodeConfig(
            max_htl=args.max_htl,
            max_streams=args.max_streams,
            confirm_publishes=args.confirm_publishes,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sim_config = SimConfig(
        nodes=args.nodes,
        degree=args.degree,
        seed=args.seed,
        proximity=args.proximity,
        node=node,
        network=NetworkModel(drop=args.drop, duplicate=args.duplicate),
        log_packets=args.packets == 0,
    )
    publish = None
    if args.packets:
        publish = PublishLoad(
            args.packets, args.publishers, args.rate, args.size, start=args.join_window + 5.0
        )
    exp = SubscribeExperiment(
        sim_config,
        args.streams,
        args.subscribers,
        args.join_window,
        args.greedy_samples,
        args.route_samples,
        publish,
    )
    # (The interpreter and its modules: not the network's. Without /proc, the peak so far
    # stands in for it: memory has only grown since the start.)
    before = memory_now() or peak_memory()
    with collector_paused():
        _, report = run_subscribe(exp)
    peak = peak_memory()
    report["peak_mib"] = peak / 2**20
    report["bytes_per_node"] = (peak - before) / args.nodes
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        print(SUMMARY.format(**report), end="")
        if publish is not None:
            print(PUBLISH_SUMMARY.format(**report), end="")
        print(MEMORY_SUMMARY.format(**report), end="")
        for line in report["violations"]:  # type: ignore[attr-defined]
            print(f"  ! {line}")
        for line in report.get("delivery_problems", []):  # type: ignore[attr-defined]
            print(f"  ! {line}")
    failed = report["violation_count"] or report.get("delivery_problem_count", 0)
    return 1 if failed else 0


if __name__ == "__main__":
    run_command(main)
