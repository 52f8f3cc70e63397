"""``python -m testnet.sim.cost``: what a subscription and a packet cost as the network grows.

    python -m testnet.sim.cost [--sizes 1000,10000,100000] [--streams 20]
        [--subscribers 100] [--packets 10] [--seed 1] [--plot FILE] [--json]

The same workload (``--streams`` streams of ``--subscribers`` subscribers each, then
``--packets`` packets a stream) is simulated on networks of each size in ``--sizes``, each
run a ``python -m testnet.sim`` process of its own, so each size's peak memory is its own.
Printed per size: messages a subscription (every message its joins sent but heartbeats,
which are a cost of links and time, not of the workload) and the search hops among them;
messages a published packet and a delivery; the mean tree size; the simulation's own
peak memory a node; wall seconds. ``--plot`` draws the four curves against the network
size (matplotlib, ``pip install -e '.[viz]'``). These are the curves an operator needs to
predict what a larger network costs.

A size whose run breaks an invariant or loses a delivery, or whose process fails (killed
for want of memory, say), is reported as such and the other sizes go on; the command then
ends with status 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from testnet.sim.collector import run_command

# The figures taken from each run's report, with their column heads.
COLUMNS = (
    ("nodes", "nodes", "{:,}"),
    ("messages_per_join", "msgs/sub", "{:.1f}"),
    ("search_hops_per_join", "hops/sub", "{:.1f}"),
    ("messages_per_packet", "msgs/packet", "{:.1f}"),
    ("messages_per_delivery", "msgs/delivery", "{:.2f}"),
    ("tree_members_mean", "tree size", "{:.0f}"),
    ("bytes_per_node", "bytes/node", "{:,.0f}"),
    ("wall_s", "wall s", "{:.1f}"),
)


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of sizes") from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(f"sizes must be at least 2 nodes, got {text!r}")
    return sorted(set(sizes))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m testnet.sim.cost",
        description="Simulate one workload on networks of several sizes and report what a "
        "subscription and a packet cost at each.",
    )
    p.add_argument("--sizes", type=_sizes, default=[1000, 10_000, 100_000])
    p.add_argument("--streams", type=int, default=20, help="streams (20)")
    p.add_argument("--subscribers", type=int, default=100, help="per stream (100)")
    p.add_argument("--packets", type=int, default=10, help="packets a stream (10)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--proximity",
        type=int,
        default=16,
        help="long links to the nearest of this many alike nodes, as the simulator's (16)",
    )
    p.add_argument("--plot", type=Path, help="write the curves to this PNG")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if min(args.streams, args.subscribers, args.packets, args.proximity) < 1:
        p.error("--streams, --subscribers, --packets and --proximity must be at least 1")
    if args.subscribers > args.sizes[0]:
        p.error(f"--subscribers {args.subscribers} exceeds the smallest size {args.sizes[0]}")
    if args.plot is not None:
        # Before the runs, not after them: a plot that cannot be made must not cost them.
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error("--plot needs matplotlib: pip install -e '.[viz]'")
        if not args.plot.parent.is_dir():
            p.error(f"--plot {args.plot}: no directory {args.plot.parent}")
    return args


def measure(size: int, args: argparse.Namespace) -> dict[str, Any] | str:
    """One size's run of the workload, as ``python -m testnet.sim --json`` reports it, or
    why there is no report."""
    command = [
        sys.executable, "-m", "testnet.sim", "--nodes", str(size),
        "--streams", str(args.streams), "--subscribers", str(args.subscribers),
        "--packets", str(args.packets), "--seed", str(args.seed),
        "--proximity", str(args.proximity),
        "--greedy-samples", "0", "--route-samples", "0", "--json",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1) or not done.stdout.strip():
        code = done.returncode
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        last = done.stderr.strip().splitlines()[-1:] or ["no message"]
        return f"{how}: {last[0]}"
    report: dict[str, Any] = json.loads(done.stdout)
    report["wall_s"] = wall
    report["failed"] = done.returncode == 1
    return report


def table(rows: list[dict[str, Any]]) -> str:
    heads = [head for _, head, _ in COLUMNS]
    cells = [[form.format(row[key]) for key, _, form in COLUMNS] for row in rows]
    widths = [max(len(head), *(len(line[i]) for line in cells)) for i, head in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["nodes"] for row in rows]
    panels = (
        ("messages_per_join", "messages a subscription"),
        ("messages_per_delivery", "messages a delivery"),
        ("bytes_per_node", "peak bytes a node"),
        ("wall_s", "wall seconds a run"),
    )
    figure, axes = plt.subplots(2, 2, figsize=(9, 6.5), constrained_layout=True)
    for axis, (key, label) in zip(axes.flat, panels, strict=True):
        axis.plot(sizes, [row[key] for row in rows], marker="o")
        axis.set_xscale("log")
        if key == "wall_s":
            axis.set_yscale("log")
        axis.set_xlabel("nodes")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0 if key != "wall_s" else None)
        axis.grid(True, which="both", alpha=0.3)
    figure.suptitle(title)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[dict[str, Any]] = []
    broken: dict[int, str] = {}  # size -> why its run has no report
    for size in args.sizes:
        measured = measure(size, args)
        if isinstance(measured, str):
            broken[size] = measured
            print(f"{size:,} nodes: no report ({measured})", file=sys.stderr, flush=True)
            continue
        rows.append(measured)
        if not args.json:
            print(f"{size:,} nodes: {measured['wall_s']:.1f} s", file=sys.stderr, flush=True)
    title = (
        f"{args.streams} streams x {args.subscribers} subscribers, {args.packets} packets a "
        f"stream (seed {args.seed})"
    )
    if args.json:
        keys = [key for key, _, _ in COLUMNS] + ["failed"]
        print(json.dumps([{key: row[key] for key in keys} for row in rows]))
    elif rows:
        print(title)
        print(table(rows))
    if args.plot is not None and rows:
        plot(rows, args.plot, title)
    failed = [row["nodes"] for row in rows if row["failed"]]
    if failed:
        print(f"invariant or delivery problems at {failed} nodes", file=sys.stderr)
    return 1 if failed or broken else 0


if __name__ == "__main__":
    run_command(main)
