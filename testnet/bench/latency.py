"""Publish-to-delivery latency on a 20-node loopback network at a steady rate, or at
saturation.

    python -m testnet.bench.latency [--nodes 20] [--subscribers 5] [--rate 200]
                                    [--saturate] [--window 256] [--no-confirm-publishes]
                                    [--duration 20] [--payload 1024] [--seed 1] [--json]

Method. ``LocalNetwork`` runs ``--nodes`` full nodes (``run_node``: TCP, handshakes, sealed
frames, coalescing writers) of a seeded ``small_world`` topology in this process. Local sinks
attached straight to ``--subscribers`` nodes (chosen by the seed, never the publisher's) join
one open stream; a local client on node 0 publishes to it. One packet is published and
delivered everywhere first, so the tree and the publisher's route exist; then the publisher
sends ``--rate`` packets a second for ``--duration`` seconds on a fixed schedule (packet i at
start + i/rate, not "sleep between packets", so a slow moment does not lower the rate: a
publisher that wakes late publishes every packet due by then, in one batch). Each payload
starts with the time it was due (``trio.current_time()``'s clock, one for all nodes in the
process), so a late publisher's wait is in the latency; a subscriber's latency for a packet
is its arrival time minus that.

``--saturate``: instead of a schedule, the publisher keeps up to ``--window`` publishes
unanswered for ``--duration`` seconds, publishing again as each is acknowledged and while
its node sends publishes up at once (``NodeHost.publish_room``: the node's credit, paced by
how fast the tree answers), so the network's own pace sets the rate; the rate reported is
unique deliveries a second. (A client of the port is not told that room: one that keeps
more unanswered waits at its node, up to the port's bound, and that wait is in its
latency.) The baseline hop then sends as fast as it can too.

``--no-confirm-publishes``: every node runs with ``confirm_publishes`` off, so a root sends
a peer's publish down as soon as it numbers it instead of first telling the publisher's
node its number and waiting for the confirmation (``overlay.core.confirming``): what the
weaker guarantee saves, on the same network and load. The report counts the publishes
roots took confirmations for (0 with it off).

Reported: p50, p90, p99 and max over every (packet, subscriber) delivery, and over every
publish's acknowledgement (its arrival at the publishing client); packets delivered
against expected (acknowledged publishes times subscribers), duplicates and order violations
(both must be 0), publishes that failed, each subscriber's depth in the tree (hops below
the root; a packet also climbs from the publisher's node to the root), and the control
traffic: every message the nodes received while publishing that was not a packet
(SubscribeData), per packet that crossed a link (one per packet per tree edge), and the
CPU time the process used from the first publish until every delivery was seen, as a share of
a core and per delivery (the sinks' and the publisher's work is in it too, a small part): below
saturation, where the core has time to spare, the cost of a delivery, which latency alone
does not show. Two baselines run in the same invocation and process at the same rate and
size (or, at saturation, the same window). One plain loopback TCP hop: a trio task sends
length-prefixed frames stamped the same way to another task that reads them, so the reader
can see what one hop costs without the protocol. And a plain relay tree of the network's
own tree (``testnet.bench.relay_tree``: its root, its edges, the same subscribers, frames
the size of a packet sent alone, relayed as read with no protocol): the CPU the same
deliveries cost this process with nothing but moving the frames, so the overlay's CPU per
delivery reads as a multiple of a floor that no program relaying in one Python process
goes below; the report prints that multiple.

Caveats. All nodes share one Python thread and core: a packet's hops run one after another,
and a delivery waits for whatever else the loop is doing (other nodes' forwarding, heartbeats),
so these latencies are an upper bound for nodes on separate machines with idle CPUs, and on a
shared machine the tail (p99, max) mostly shows other processes' load: compare it with the
baseline's tail, measured under the same load.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import struct
import sys
import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from keyspace.topology import small_world
from overlay.core.config import NodeConfig
from overlay.core.events import (
    BatchAcked,
    ClientEvent,
    Packet,
    PublishAcked,
    PublishFailed,
    Subscribed,
)
from overlay.runtime.collector import tune_for_nodes
from overlay.runtime.framing import FrameReader, frame
from overlay.runtime.host import NodeHost
from testnet.bench.forwarding import plain_body_size
from testnet.bench.relay_tree import measure_relay_tree
from testnet.local import LOOPBACK, LocalNetwork

STREAM = StreamKey.open("bench/latency")
# The publish (or due) time at the front of every payload: a big-endian double of trio's clock.
_STAMP = struct.Struct(">d")
# Small-world degree of the testnet: the mean degree the simulator and tests use at this size.
DEGREE = 6
# Bounds on real time, so a broken network fails the run instead of hanging it.
SETUP_TIMEOUT = 60.0
DRAIN_TIMEOUT = 10.0  # after the last publish, for the last deliveries
BASELINE_DURATION = 5.0  # seconds of the baseline hop: plenty of samples for p99 at 200/s
QUANTILES = (0.5, 0.9, 0.99)


class Subscriber:
    """A local sink: (packet number, publish time, arrival time) of every packet. Made in
    a trio run, whose clock its times are on."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[int, float, float]] = []
        self.subscribed = False
        # Trio's clock is ``perf_counter()`` plus a fixed offset: a sink reads the counter
        # itself, one C call, where ``trio.current_time()`` costs several Python calls a
        # packet, about 2% of the process's CPU at saturation, which the report counts.
        self._offset = trio.current_time() - time.perf_counter()

    def deliver(self, event: ClientEvent) -> None:
        if type(event) is Packet:
            (stamp,) = _STAMP.unpack_from(event.data)
            self.arrivals.append((event.number, stamp, time.perf_counter() + self._offset))
        elif type(event) is Subscribed:
            self.subscribed = True


class _Publisher:
    def __init__(self) -> None:
        self.acked: dict[int, int] = {}  # uid -> packet number
        self.acked_at: dict[int, float] = {}  # uid -> when the acknowledgement arrived
        self.failed: list[PublishFailed] = []

    def deliver(self, event: ClientEvent) -> None:
        if type(event) is PublishAcked:
            self.acked[event.uid] = event.number
            self.acked_at.setdefault(event.uid, trio.current_time())
        elif type(event) is BatchAcked:
            now = trio.current_time()
            for uid, number in event.numbers:
                self.acked[uid] = number
                self.acked_at.setdefault(uid, now)
        elif type(event) is PublishFailed:
            self.failed.append(event)


def _subscribed(sink: Subscriber) -> Callable[[], bool]:
    return lambda: sink.subscribed


def arrived(sink: Subscriber) -> Callable[[], bool]:
    return lambda: bool(sink.arrivals)


def _answered_past(publisher: _Publisher, count: int) -> Callable[[], bool]:
    """Whether more than ``count`` publishes after the warm-up's have been answered."""
    return lambda: len(publisher.acked) + len(publisher.failed) - 1 > count


def payload_of(size: int, stamp: float | None = None) -> bytes:
    """``size`` bytes stamped with ``stamp`` (None: now)."""
    at = trio.current_time() if stamp is None else stamp
    return _STAMP.pack(at) + bytes(max(0, size - _STAMP.size))


def summarize(latencies: Sequence[float]) -> dict[str, float]:
    """Nearest-rank quantiles, mean and max, in milliseconds."""
    ordered = sorted(latencies)
    if not ordered:
        return {}
    result = {
        f"p{round(q * 100)}": ordered[max(0, math.ceil(q * len(ordered)) - 1)] for q in QUANTILES
    }
    result["max"] = ordered[-1]
    result["mean"] = sum(ordered) / len(ordered)
    return {name: value * 1000 for name, value in result.items()}


async def measure_network(
    *,
    nodes: int,
    subscribers: int,
    rate: float,
    duration: float,
    payload: int,
    seed: int,
    window: int | None = None,
    confirm_publishes: bool = True,
) -> dict[str, Any]:
    """Build the network, publish at ``rate`` (or, given ``window``, at saturation) for
    ``duration`` s, and return the deliveries' latencies and checks (module docstring)."""
    rng = random.Random(seed)
    topology = small_world(nodes, DEGREE, rng)
    chosen = sorted(rng.sample(range(1, nodes), subscribers))
    core = NodeConfig(confirm_publishes=confirm_publishes)
    async with LocalNetwork(topology, core=core, seed=seed) as net:
        with trio.fail_after(SETUP_TIMEOUT):
            await net.wait_linked()
            sinks = await attach_sinks(net, chosen)
            publisher_host = net.node(0).host
            publisher = _Publisher()
            client = publisher_host.add_client(publisher)
            # The warm-up packet: the publisher's node joins the tree, every route exists.
            publisher_host.publish(client, STREAM.key, 0, payload_of(payload))
            await publisher_host.wait_until(lambda: bool(publisher.acked or publisher.failed))
            await warmed_up(net, chosen, sinks)
        depths = _depths(net, chosen)
        root, edges = _tree(net)
        before = _counts(net)  # (what the warm-up made)
        start = trio.current_time()
        cpu_start = time.process_time()
        sent: dict[int, float] = {}
        if window is None:
            count = max(1, round(rate * duration))
            await _paced(publisher_host, client, rate, count, payload, start, sent)
        else:
            count = await _saturate(
                publisher_host, client, publisher, window, duration, payload, sent
            )
            count = max(1, count)
        with trio.move_on_after(DRAIN_TIMEOUT):
            await publisher_host.wait_until(
                lambda: len(publisher.acked) + len(publisher.failed) > count
            )
        numbers = {publisher.acked[uid] for uid in range(1, count + 1) if uid in publisher.acked}
        await until_delivered(sinks, numbers)
        elapsed = trio.current_time() - start
        cpu = time.process_time() - cpu_start
        counts = {name: total - before[name] for name, total in _counts(net).items()}
    latencies, delivered, duplicates, order_violations = deliveries(sinks, numbers)
    return {
        "published": count,
        "acked": len(numbers),
        "failed": len(publisher.failed),
        "unanswered": count + 1 - len(publisher.acked) - len(publisher.failed),
        "expected": len(numbers) * len(sinks),
        "delivered": delivered,
        "duplicates": duplicates,
        "order_violations": order_violations,
        "elapsed": elapsed,
        "achieved_rate": count / elapsed,
        "deliveries_per_s": delivered / elapsed,
        "cpu_s": cpu,
        "cpu_share": cpu / elapsed,
        "cpu_us_per_delivery": 1e6 * cpu / max(1, delivered),
        "packet_messages": counts["packets"],
        "control_messages": counts["control"],
        "control_per_packet_edge": counts["control"] / max(1, counts["packets"]),
        "subscribers": chosen,
        "depths": depths,
        "tree": {"root": root, "edges": edges},
        "latency_ms": summarize(latencies),
        "held_queries": counts["held_queries"],
        "commit_notices": counts["commit_notices"],
        "confirmed": counts["confirmed"],
        "ack_latency_ms": summarize(
            [at - sent[uid] for uid, at in publisher.acked_at.items() if uid in sent]
        ),
    }


def _counts(net: LocalNetwork) -> dict[str, int]:
    """The network's totals of what the report counts over the publishing: messages received
    that were packets and that were not, commit questions, standalone commit notices, and
    confirmations roots took."""
    hosts = [node.host for node in net.nodes]
    return {
        "packets": sum(host.packets_in for host in hosts),
        "control": sum(host.frames_in - host.data_in for host in hosts),
        "held_queries": sum(host.core.stats.held_queries for host in hosts),
        "commit_notices": sum(host.core.stats.commit_notices for host in hosts),
        "confirmed": sum(host.core.stats.confirmed for host in hosts),
    }


async def _paced(
    host: NodeHost,
    client: int,
    rate: float,
    count: int,
    payload: int,
    start: float,
    sent: dict[int, float],
) -> None:
    """Publish packets 1 .. ``count``, packet i due at ``start + (i - 1) / rate``. A
    publisher that wakes late publishes every packet due by then in one call, as a client
    port session hands its node the requests one read brought (``publish_batch``); so a
    busy process slows the packets, not the rate. Each packet is stamped with when it was
    due, so its latency counts any wait for its publisher to run."""
    uid = 0
    while uid < count:
        await trio.sleep_until(start + uid / rate)
        elapsed = trio.current_time() - start
        due = min(count, max(uid + 1, math.floor(elapsed * rate) + 1))
        items = []
        for number in range(uid + 1, due + 1):
            at = start + (number - 1) / rate
            sent[number] = at
            items.append((number, payload_of(payload, at)))
        uid = due
        if len(items) == 1:
            host.publish(client, STREAM.key, *items[0])
        else:
            host.publish_batch(client, STREAM.key, items)


async def _saturate(
    host: NodeHost,
    client: int,
    publisher: _Publisher,
    window: int,
    duration: float,
    payload: int,
    sent: dict[int, float],
) -> int:
    """Keep ``window`` publishes unanswered for ``duration`` s; returns how many were sent."""
    end = trio.current_time() + duration
    uid = 0
    with trio.move_on_at(end):
        while True:
            answered = len(publisher.acked) + len(publisher.failed) - 1  # (not the warm-up)
            # The publisher keeps within what the node sends up now (``publish_room``: its
            # credit and pace), so it measures the tree's queues, not the node's hold.
            while uid - answered < window and host.publish_room(STREAM.key) > 0:
                uid += 1
                sent[uid] = trio.current_time()
                host.publish(client, STREAM.key, uid, payload_of(payload))
            await host.wait_until(_answered_past(publisher, answered))
    return uid


async def attach_sinks(net: LocalNetwork, chosen: Sequence[int]) -> list[Subscriber]:
    """A subscribed local sink on each of nodes ``chosen``, in order."""
    sinks = []
    for i in chosen:
        sink = Subscriber()
        host = net.node(i).host
        host.subscribe(host.add_client(sink), STREAM.key)
        await host.wait_until(_subscribed(sink))
        sinks.append(sink)
    return sinks


async def warmed_up(net: LocalNetwork, chosen: Sequence[int], sinks: Sequence[Subscriber]) -> None:
    """Wait until the warm-up packet reached each sink (on nodes ``chosen``), then forget
    it: what they record from now on is measured."""
    for i, sink in zip(chosen, sinks, strict=True):
        await net.node(i).host.wait_until(arrived(sink))
    for sink in sinks:
        sink.arrivals.clear()


async def until_delivered(sinks: Sequence[Subscriber], numbers: set[int]) -> None:
    """Wait, at most ``DRAIN_TIMEOUT``, until every sink has every packet of ``numbers``.
    Each look reads only what arrived since the last (the process's CPU is measured over
    this wait, and rereading every arrival each time cost a loaded core tens of ms)."""
    seen: list[set[int]] = [set() for _ in sinks]
    read = [0] * len(sinks)
    with trio.move_on_after(DRAIN_TIMEOUT):
        while True:
            for i, sink in enumerate(sinks):
                arrivals = sink.arrivals
                seen[i].update(map(itemgetter(0), arrivals[read[i] :]))
                read[i] = len(arrivals)
            if all(numbers <= got for got in seen):
                return
            await trio.sleep(0.05)  # deliveries happen on many hosts: poll, boundedly


def deliveries(sinks: Sequence[Subscriber], numbers: set[int]) -> tuple[list[float], int, int, int]:
    """Over every sink's arrivals: each first delivery's latency, how many of ``numbers``
    were delivered (summed over sinks), duplicates and order violations."""
    latencies: list[float] = []
    duplicates = order_violations = delivered = 0
    for sink in sinks:
        seen: set[int] = set()
        highest = -1
        for number, stamp, arrival in sink.arrivals:
            if number in seen:
                duplicates += 1
                continue
            seen.add(number)
            if number < highest:
                order_violations += 1
            highest = max(highest, number)
            latencies.append(arrival - stamp)
        delivered += len(seen & numbers)
    return latencies, delivered, duplicates, order_violations


def _depths(net: LocalNetwork, chosen: Sequence[int]) -> list[int | None]:
    """Hops from each chosen node up its parents to the stream's root (None: not found)."""
    by_id = {node.identity.public: node.host for node in net.nodes}
    result: list[int | None] = []
    for i in chosen:
        host: NodeHost | None = net.node(i).host
        depth = 0
        while host is not None and depth <= len(by_id):
            stream = host.core.streams.get(STREAM.key)
            if stream is None:
                host = None
                break
            if stream.parent is None:
                break
            host = by_id.get(stream.parent)
            depth += 1
        result.append(depth if host is not None and depth <= len(by_id) else None)
    return result


def _tree(net: LocalNetwork) -> tuple[int, list[tuple[int, int]]]:
    """The stream's tree by node index: its root and its (parent, child) edges."""
    index = {node.identity.public: i for i, node in enumerate(net.nodes)}
    root = -1
    edges: list[tuple[int, int]] = []
    for i, node in enumerate(net.nodes):
        stream = node.host.core.streams.get(STREAM.key)
        if stream is None or not stream.carried:
            continue
        if stream.parent is None:
            root = i
        elif stream.parent in index:
            edges.append((index[stream.parent], i))
    return root, edges


async def measure_tcp_hop(*, rate: float | None, duration: float, payload: int) -> dict[str, Any]:
    """One plain loopback TCP hop in this process: stamped frames at ``rate`` (None: as fast
    as one ``send_all`` a frame goes, for ``duration``), latency at the reading task."""
    latencies: list[float] = []
    count = max(1, round((rate or 0) * duration))
    (listener,) = await trio.open_tcp_listeners(0, host=LOOPBACK)
    port = listener.socket.getsockname()[1]
    with trio.fail_after(duration + SETUP_TIMEOUT):
        async with trio.open_nursery() as nursery:

            async def receive() -> None:
                stream = await listener.accept()
                reader = FrameReader(payload + _STAMP.size)
                while rate is None or len(latencies) < count:
                    data = await stream.receive_some(65536)
                    if not data:
                        break
                    now = trio.current_time()
                    for body in reader.feed(data):
                        latencies.append(now - _STAMP.unpack_from(body)[0])
                await stream.aclose()

            nursery.start_soon(receive)
            sender = await trio.open_tcp_stream(LOOPBACK, port)
            start = trio.current_time()
            if rate is None:
                count = 0
                while trio.current_time() < start + duration:
                    await sender.send_all(frame(payload_of(payload)))
                    count += 1
            else:
                for i in range(count):
                    await trio.sleep_until(start + i / rate)
                    await sender.send_all(frame(payload_of(payload)))
            await sender.aclose()
    await listener.aclose()
    return {
        "packets": count,
        "received": len(latencies),
        "per_s": len(latencies) / max(duration, 1e-9),
        "latency_ms": summarize(latencies),
    }


async def run_benchmark(
    *,
    nodes: int = 20,
    subscribers: int = 5,
    rate: float = 200.0,
    duration: float = 20.0,
    payload: int = 1024,
    seed: int = 1,
    baseline_duration: float = BASELINE_DURATION,
    window: int | None = None,
    confirm_publishes: bool = True,
) -> dict[str, Any]:
    """The baseline hop, then the network; both in this trio run. ``window``: saturation."""
    if not 1 <= subscribers < nodes:
        raise ValueError(f"need 1 <= subscribers < nodes, got {subscribers} and {nodes}")
    baseline = await measure_tcp_hop(
        rate=None if window is not None else rate,
        duration=min(duration, baseline_duration),
        payload=payload,
    )
    network = await measure_network(
        nodes=nodes,
        subscribers=subscribers,
        rate=rate,
        duration=duration,
        payload=payload,
        seed=seed,
        window=window,
        confirm_publishes=confirm_publishes,
    )
    tree = network["tree"]
    members = {tree["root"], *(child for _, child in tree["edges"])}
    relays = await measure_relay_tree(
        edges=tree["edges"],
        root=tree["root"],
        sinks=[i for i in network["subscribers"] if i in members],
        rate=None if window is not None else rate,
        duration=duration,
        body=plain_body_size(payload),
        window=window if window is not None else 256,
    )
    relays["latency_ms"] = summarize(relays.pop("latencies"))
    return {
        "parameters": {
            "nodes": nodes,
            "subscribers": subscribers,
            "rate": rate,
            "window": window,
            "duration": duration,
            "payload": payload,
            "seed": seed,
            "confirm_publishes": confirm_publishes,
        },
        "network": network,
        "tcp_hop": baseline,
        "relay_tree": relays,
    }


def format_report(result: dict[str, Any]) -> str:
    p, net, hop = result["parameters"], result["network"], result["tcp_hop"]
    tree = result["relay_tree"]

    def row(name: str, stats: dict[str, float]) -> str:
        return f"{name:<28}" + "".join(f"{stats.get(k, math.nan):>9.2f}" for k in _COLUMNS)

    pace = (
        f"{p['rate']:g} packets/s"
        if p.get("window") is None
        else f"saturation ({p['window']} publishes unanswered)"
    )
    lines = [
        f"Publish-to-delivery latency: {p['nodes']} nodes (small world, seed {p['seed']}), "
        f"{p['subscribers']} subscribers, {pace} of {p['payload']} bytes "
        f"for {p['duration']:g} s, publish confirmation "
        f"{'on' if p['confirm_publishes'] else 'off'} "
        f"(achieved {net['achieved_rate']:.1f} packets/s, "
        f"{net['deliveries_per_s']:,.0f} deliveries/s)",
        "",
        f"{'ms':<28}" + "".join(f"{k:>9}" for k in _COLUMNS),
        row("overlay, publish->deliver", net["latency_ms"]),
        row("overlay, publish->ack", net["ack_latency_ms"]),
        row("plain TCP hop (baseline)", hop["latency_ms"]),
        row("plain relay tree (baseline)", tree["latency_ms"]),
        "",
        f"delivered {net['delivered']:,} of {net['expected']:,} expected "
        f"({net['acked']:,} of {net['published']:,} publishes acknowledged, "
        f"{net['failed']} failed, {net['unanswered']} unanswered); duplicates {net['duplicates']}, "
        f"order violations {net['order_violations']}",
        f"CPU: {net['cpu_s']:.1f} s of this process over the {net['elapsed']:.1f} s of publishing "
        f"and draining ({100 * net['cpu_share']:.0f}% of a core), "
        f"{net['cpu_us_per_delivery']:.0f} µs a delivery",
        f"control traffic: {net['control_messages']:,} messages that were not packets beside "
        f"{net['packet_messages']:,} packets over tree links: "
        f"{net['control_per_packet_edge']:.2f} per packet per tree edge",
        f"the root asked its children {net['held_queries']:,} times what they hold "
        "(HeldQuery, each answered by a Held: commits)",
        f"members told each other {net['commit_notices']:,} times how far the root committed "
        "in a standalone notice (Committed, over every tree link; the packets carry it "
        "otherwise: showing)",
        f"roots took {net['confirmed']:,} confirmations from publishers' nodes before sending "
        "packets down (PublishConfirmed: confirming)",
        f"subscribers on nodes {net['subscribers']}, depth below the root "
        f"{net['depths']} (publisher on node 0)",
        f"baseline: {hop['received']:,} of {hop['packets']:,} frames over one loopback TCP "
        f"connection in this process ({hop['per_s']:,.0f} a second)",
        f"baseline: a plain relay tree of this tree's shape ({tree['edges']} edges, frames "
        f"relayed as read, from its root: no protocol): {tree['delivered']:,} of "
        f"{tree['expected']:,} frames read by {tree['sinks']} sinks, "
        f"{tree['deliveries_per_s']:,.0f} deliveries/s, {100 * tree['cpu_share']:.0f}% of a "
        f"core, {tree['cpu_us_per_delivery']:.0f} µs a delivery; the overlay "
        f"{net['cpu_us_per_delivery'] / max(tree['cpu_us_per_delivery'], 1e-9):.1f}x that "
        "per delivery",
    ]
    return "\n".join(lines)


_COLUMNS = ("p50", "p90", "p99", "max", "mean")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testnet.bench.latency",
        description="Publish-to-delivery latency on a loopback network of real nodes at a "
        "steady rate, beside one plain TCP hop measured in the same run.",
    )
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--subscribers", type=int, default=5)
    parser.add_argument("--rate", type=float, default=200.0, help="packets a second")
    parser.add_argument(
        "--saturate", action="store_true", help="publish as fast as the network answers"
    )
    parser.add_argument(
        "--window", type=int, default=256, help="with --saturate: publishes unanswered"
    )
    parser.add_argument(
        "--confirm-publishes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="roots wait for the publisher's node to confirm a number before sending the "
        "packet down (the default; --no-confirm-publishes: the weaker, faster mode)",
    )
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of publishing")
    parser.add_argument("--payload", type=int, default=1024, help="bytes per packet (>= 8)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.duration <= 0 or args.payload < _STAMP.size:
        parser.error("--rate and --duration must be positive, --payload at least 8")
    if not 1 <= args.subscribers < args.nodes:
        parser.error("need 1 <= --subscribers < --nodes")
    if args.window < 1:
        parser.error("--window must be at least 1")
    result = trio.run(
        lambda: run_benchmark(
            nodes=args.nodes,
            subscribers=args.subscribers,
            rate=args.rate,
            duration=args.duration,
            payload=args.payload,
            seed=args.seed,
            window=args.window if args.saturate else None,
            confirm_publishes=args.confirm_publishes,
        )
    )
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    net = result["network"]
    ok = (
        net["delivered"] == net["expected"]
        and not net["duplicates"]
        and not net["order_violations"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    tune_for_nodes()  # (this process hosts the nodes: it collects garbage as a node's does)
    sys.exit(main())
