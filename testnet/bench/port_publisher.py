"""A fast publisher on a node's client port: keeping to the node's publish windows, beside
one that keeps only its own bound, on the same network in the same invocation.

    python -m testnet.bench.port_publisher [--nodes 50] [--subscribers 49]
                                           [--duration 10] [--repeats 2]
                                           [--max-in-flight 1000] [--payload 1024]
                                           [--seed 1] [--json]

Method. Each run builds ``testnet.bench.latency``'s network afresh (``--nodes`` full nodes
of a seeded small world in this process, local sinks subscribed on ``--subscribers`` of
them, never node 0), connects the async client (``overlay.client.aio``) to node 0's client
port over loopback TCP, and publishes stamped ``--payload``-byte packets to the stream as
fast as the network takes them for ``--duration`` seconds:

* *windows*: before each ``publish_nowait`` it awaits ``room(stream)``: fewer than
  ``--max-in-flight`` unanswered, and fewer of the stream's than the window node 0 told
  it (``PublishWindow``: how many publishes node 0 sends up the tree at once);
* *own bound*: it keeps ``--max-in-flight`` unanswered and nothing else (on
  ``trio.WouldBlock`` it waits for its oldest answer), as a client that ignores the windows,
  or one of protocol version 1, does. What the node does not send up yet waits at it.

Node 0 is not the stream's root (the seed decides; the report shows the subscribers'
depths), so its publishes climb a tree whose pace the node follows (``overlay.core.pace``).
The variants alternate, ``--repeats`` runs each, so that load from elsewhere hits both
alike. Reported per run: publishes a second, unique deliveries a second, publish-to-delivery
p50, p90, p99 and max over every (packet, subscriber), delivered against expected,
duplicates and order violations (both must be 0), the last window node 0 told, and the
load average before the runs.

Caveat: every node, the client and the sinks share this process's one thread, so the rates
are those of a whole 50-node network on one core, and what the windows change is where
publishes wait, not how fast the tree forwards.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import deque
from collections.abc import Sequence
from typing import Any

import trio

from keyspace.topology import small_world
from overlay.client.aio import Client, open_client
from overlay.runtime.collector import tune_for_nodes
from testnet.bench.latency import (
    DEGREE,
    DRAIN_TIMEOUT,
    SETUP_TIMEOUT,
    STREAM,
    attach_sinks,
    deliveries,
    payload_of,
    summarize,
    until_delivered,
    warmed_up,
)
from testnet.local import LocalNetwork

VARIANTS = ("windows", "own bound")


async def measure(
    *,
    nodes: int,
    subscribers: int,
    duration: float,
    payload: int,
    seed: int,
    windows: bool,
    max_in_flight: int,
) -> dict[str, Any]:
    """One run of one variant (module notes)."""
    rng = random.Random(seed)
    topology = small_world(nodes, DEGREE, rng)
    chosen = sorted(rng.sample(range(1, nodes), subscribers))
    async with LocalNetwork(topology, seed=seed) as net:
        with trio.fail_after(SETUP_TIMEOUT):
            await net.wait_linked()
            sinks = await attach_sinks(net, chosen)
        address = net.node(0).client_address
        async with open_client(
            f"{address.host}:{address.port}", max_in_flight=max_in_flight
        ) as client:
            with trio.fail_after(SETUP_TIMEOUT):
                await client.publish(STREAM, payload_of(payload))  # (the tree and routes)
                await warmed_up(net, chosen, sinks)
            start = trio.current_time()
            numbers = await _publish(client, windows, duration, payload)
            elapsed = trio.current_time() - start
            window = client.connection.publish_window(STREAM.key)
        await until_delivered(sinks, numbers)
    latencies, delivered, duplicates, order_violations = deliveries(sinks, numbers)
    return {
        "variant": VARIANTS[0] if windows else VARIANTS[1],
        "published": len(numbers),
        "per_s": len(numbers) / elapsed,
        "deliveries_per_s": delivered / elapsed,
        "expected": len(numbers) * len(sinks),
        "delivered": delivered,
        "duplicates": duplicates,
        "order_violations": order_violations,
        "window": window,
        "latency_ms": summarize(latencies),
    }


async def _publish(client: Client, windows: bool, duration: float, payload: int) -> set[int]:
    """Publish for ``duration`` s as the variant does; the numbers of every publish."""
    numbers: set[int] = set()
    uids: deque[int] = deque()
    with trio.move_on_after(duration):
        while True:
            if windows:
                await client.room(STREAM)
            try:
                uids.append(client.publish_nowait(STREAM, payload_of(payload)))
            except trio.WouldBlock:
                numbers.add(await client.wait(uids.popleft()))
    with trio.fail_after(DRAIN_TIMEOUT):
        numbers.update(await client.flush())
    return numbers


async def run_benchmark(
    *,
    nodes: int = 50,
    subscribers: int = 49,
    duration: float = 10.0,
    repeats: int = 2,
    max_in_flight: int = 1000,
    payload: int = 1024,
    seed: int = 1,
) -> dict[str, Any]:
    """Both variants, alternating, ``repeats`` runs each."""
    runs = []
    for _ in range(repeats):
        for windows in (True, False):
            runs.append(
                await measure(
                    nodes=nodes,
                    subscribers=subscribers,
                    duration=duration,
                    payload=payload,
                    seed=seed,
                    windows=windows,
                    max_in_flight=max_in_flight,
                )
            )
    return {
        "parameters": {
            "nodes": nodes,
            "subscribers": subscribers,
            "duration": duration,
            "max_in_flight": max_in_flight,
            "payload": payload,
            "seed": seed,
            "load_average": os.getloadavg(),
        },
        "runs": runs,
    }


def format_report(result: dict[str, Any]) -> str:
    p = result["parameters"]
    lines = [
        f"A publisher on node 0's client port at saturation: {p['nodes']} nodes (small "
        f"world, seed {p['seed']}), {p['subscribers']} subscribers, {p['payload']}-byte "
        f"packets for {p['duration']:g} s a run, max_in_flight {p['max_in_flight']}; load "
        "average before: " + ", ".join(f"{x:.2f}" for x in p["load_average"]),
        "",
        f"{'variant':<10}{'pkts/s':>8}{'deliv/s':>9}{'p50 ms':>9}{'p90 ms':>9}"
        f"{'p99 ms':>9}{'max ms':>9}{'window':>8}  delivered, duplicates, order",
    ]
    for run in result["runs"]:
        ms = run["latency_ms"]
        lines.append(
            f"{run['variant']:<10}{run['per_s']:>8,.0f}{run['deliveries_per_s']:>9,.0f}"
            + "".join(f"{ms.get(k, float('nan')):>9,.0f}" for k in ("p50", "p90", "p99", "max"))
            + f"{run['window']:>8}  {run['delivered']:,} of {run['expected']:,}, "
            f"{run['duplicates']}, {run['order_violations']}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testnet.bench.port_publisher",
        description="A fast publisher on a node's client port, keeping to the node's publish "
        "windows and not, on the same network in one invocation.",
    )
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--subscribers", type=int, default=49)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds a run")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each variant")
    parser.add_argument("--max-in-flight", type=int, default=1000)
    parser.add_argument("--payload", type=int, default=1024, help="bytes per packet (>= 8)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.duration <= 0 or args.repeats < 1 or args.max_in_flight < 1 or args.payload < 8:
        parser.error(
            "--duration must be positive, --repeats and --max-in-flight at least 1, "
            "--payload at least 8"
        )
    if not 1 <= args.subscribers < args.nodes:
        parser.error("need 1 <= --subscribers < --nodes")
    result = trio.run(
        lambda: run_benchmark(
            nodes=args.nodes,
            subscribers=args.subscribers,
            duration=args.duration,
            repeats=args.repeats,
            max_in_flight=args.max_in_flight,
            payload=args.payload,
            seed=args.seed,
        )
    )
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    ok = all(
        run["delivered"] == run["expected"]
        and not run["duplicates"]
        and not run["order_violations"]
        for run in result["runs"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    tune_for_nodes()  # (this process hosts the nodes: it collects garbage as a node's does)
    sys.exit(main())
