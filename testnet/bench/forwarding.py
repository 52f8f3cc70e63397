"""How fast one real node forwards 1 KB packets to its children, beside a plain trio forwarder.

    python -m testnet.bench.forwarding [--children 1,8] [--duration 4] [--repeats 2]
                                       [--profile] [--json]

Method. Every run uses two fresh OS processes (multiprocessing, spawn), so the forwarder has
a core of its own and the receivers' work is not charged to it:

* the *forwarder* process holds the node under test, or the plain program;
* the *receiver* process holds its N children (and, for the plain program, the source).

Protocol variant: the forwarder is a full ``run_node`` (TCP listener, X25519/Ed25519
handshake, AES-256-GCM-sealed frames, one coalescing writer per link) placed exactly at
the stream's location, so it is the root. The N children are full ``run_node`` nodes too; each
dials it and subscribes a local sink that counts packets (and checks their numbers run on
without a gap or repeat). The publisher is a local client *at the root* that publishes in
batches of up to ``PUBLISH_BATCH`` (``host.publish_batch``: the root numbers each batch in
one pass and sends it to each child as runs), so what is measured is numbering plus
forwarding: no client-port protocol and no extra hop sits in front of the node.

Plain variant: a trio program in the forwarder process reads length-prefixed frames from a
TCP source (in the receiver process), frames each once and appends it to the queue of each
of N TCP sinks, written by one coalescing writer task per sink (join everything queued, one
``send_all``; the node joins the same way, and writes at the end of the step that queued the
frames, without a task, when the socket takes them). The sinks parse frames and count. Each
of its frames is the size of one packet as the node sends it alone (1 KB payload, the
message header and a 16-byte tag); the node sends a child runs of packets
(``SubscribeRun``, one record of up to 64 KiB each) in sealed frames of up to 64 KiB, one
tag per frame, so it puts a few bytes fewer per packet on the wire. Both batch their writes
alike: what is queued goes in one ``send_all``. The plain program does strictly more input work
than the node (it reads its packets from a socket; the node's publisher is a function call),
so the ratio errs against the node, if at all. Each runs with its own garbage collection:
the node's processes as a node's process collects (``overlay.runtime.collector``), the
plain program's with Python's defaults, which serve it better (with the node's, it
forwarded to 8 sinks about a seventh fewer packets per CPU-second).

Flow control is the same for both: the receiver process reports, on a separate loopback
control connection, how many packets *every* child has received (the minimum), and the
forwarder keeps at most ``--window`` packets sent but not yet delivered to all. That bounds
every queue (the node's per-link send queue, which disconnects a child beyond 16 MiB, never
fills) and means "packets a second" is packets published *and* delivered to all children:
the clock runs from the first packet to the report that every child has the last one.

Reported per N and variant: packets a second (best of ``--repeats`` runs, the runs of both
variants interleaved so that load from elsewhere hits both alike), the forwarder process's CPU
seconds (``getrusage``) and packets per forwarder CPU second, the receiver process's CPU
use, and the ratio protocol/plain of both rates. ``--profile`` adds one shorter protocol run
per N under cProfile in the forwarder process and prints its top 10 functions by own time.

Caveats. The machine is shared and has two cores: when the receiver process is saturated
(its nodes open and decode every frame and run the core for each, N times the forwarder's
per-child work) the wall-clock rate measures the receivers, not the forwarder; the report
then shows the receivers near 100% CPU and the forwarder below, and packets per forwarder
CPU second is the better estimate of the node's own capacity. Wall times across the two
processes are compared only as differences taken in the forwarder.

This module holds the two variants and the runs; ``testnet.bench.measuring`` the meter,
profile and credit reports, ``testnet.bench.processes`` the spawned processes and their pipes.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from overlay.codec import encode
from overlay.core.config import NodeConfig
from overlay.core.events import (
    BatchAcked,
    ClientEvent,
    Packet,
    PublishAcked,
    PublishFailed,
    Subscribed,
)
from overlay.messages import PacketKind, SubscribeData
from overlay.runtime.collector import tune_for_nodes
from overlay.runtime.config import Address, PeerAddress, RuntimeConfig
from overlay.runtime.framing import AEAD_TAG_SIZE, SEALED_MAX, FrameReader, frame
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity
from overlay.runtime.link import READ_SIZE
from overlay.runtime.service import run_node
from testnet.bench.measuring import PROFILE_TOP, Credit, Meter, Progress, report_progress
from testnet.bench.processes import BenchError, Processes, Report, serve_role
from testnet.launcher import identities

LOOPBACK = "127.0.0.1"
NETWORK = "bench-forwarding"
STREAM = StreamKey.open("bench/forwarding")
PAYLOAD_SIZE = 1024
# Packets sent but not yet at every child. 2048 x ~1.1 KB is ~2.3 MiB per child link: far
# below the node's 16 MiB send-queue bound, and about 100 ms of traffic at 20,000 packets a
# second, so a credit report (one loopback round trip) always comes back before it runs dry.
DEFAULT_WINDOW = 2048
# Publishes in one batch, and between two yields of the publisher: lets the writers start on
# a batch while the window still has room, instead of one burst of the whole window.
PUBLISH_BATCH = 256
# Bounds on real time, so a broken run fails instead of hanging.
SETUP_TIMEOUT = 30.0
DRAIN_TIMEOUT = 30.0
PROFILE_DURATION = 3.0


@dataclass(frozen=True, slots=True)
class Case:
    """One run: ``variant`` is "protocol" or "plain"."""

    variant: str
    children: int
    duration: float
    window: int = DEFAULT_WINDOW
    payload: int = PAYLOAD_SIZE
    profile: bool = False


# --- the protocol variant -------------------------------------------------------------------


def _identities(case: Case) -> list[Identity]:
    """The forwarder's identity, then each child's: seeded, so that both processes know
    every id, and every node vouches for the others' chosen locations (``[peers] trusted``)."""
    return identities(case.children + 1, seed=0)


def _node_config(
    location: float,
    trusted: frozenset[bytes],
    connect: tuple[PeerAddress, ...] = (),
    window: int = DEFAULT_WINDOW,
) -> RuntimeConfig:
    # A root numbers at most one window past its commit point and holds the rest of its
    # publishes back (``overlay.core.backlog``), up to ``max_queued_publishes``: room for the
    # bench's whole window, so a large ``--window`` measures forwarding, not refusals.
    core = NodeConfig()
    core = dataclasses.replace(core, max_queued_publishes=max(core.max_queued_publishes, window))
    return RuntimeConfig(
        location=location,
        trusted=trusted,
        network=NETWORK,
        listen=Address(LOOPBACK, 0),
        client=Address(LOOPBACK, 0),
        connect=connect,
        core=core,
    )


class _Publisher:
    """The root's local publishing client: counts acknowledgements, keeps any failure."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed: list[PublishFailed] = []

    def deliver(self, event: ClientEvent) -> None:
        if type(event) is BatchAcked:
            self.acked += len(event.numbers)
        elif type(event) is PublishAcked:
            self.acked += 1
        elif type(event) is PublishFailed:
            self.failed.append(event)


class _Child:
    """A child node's local subscriber: counts packets and checks their numbers."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.count = 0
        self.irregular = 0  # a number that is not the previous one plus one
        self.last: int | None = None
        self.subscribed: Subscribed | None = None

    def deliver(self, event: ClientEvent) -> None:
        if type(event) is Packet:
            if self.last is not None and event.number != self.last + 1:
                self.irregular += 1
            self.last = event.number
            self.count += 1
            self.progress.note()
        elif type(event) is Subscribed:
            self.subscribed = event


def _stream_children(host: NodeHost) -> int:
    stream = host.core.streams.get(STREAM.key)
    return 0 if stream is None else len(stream.children)


async def _protocol_forwarder(case: Case, report: Report) -> dict[str, Any]:
    tune_for_nodes()  # (as a node's process collects garbage; the plain program's is Python's)
    ids = _identities(case)
    identity = ids[0]
    config = _node_config(STREAM.location, frozenset(i.public for i in ids), window=case.window)
    (control_listener,) = await trio.open_tcp_listeners(0, host=LOOPBACK)
    async with trio.open_nursery() as nursery:
        node = await nursery.start(
            functools.partial(run_node, config, identity=identity, rng=random.Random(1))
        )
        host = node.host
        report(
            "ready",
            {
                "peer_port": node.peer_address.port,
                "node_id": identity.public,
                "control_port": _port(control_listener),
            },
        )
        with trio.fail_after(SETUP_TIMEOUT):
            control = await control_listener.accept()
            await host.wait_until(lambda: _stream_children(host) >= case.children)
        state = host.core.streams[STREAM.key].state.value
        if state != "root":
            raise BenchError(f"the forwarder should be the stream's root, it is {state}")
        credit = Credit()
        nursery.start_soon(credit.follow, control)
        publisher = _Publisher()
        client = host.add_client(publisher)
        payload = random.Random(0).randbytes(case.payload)
        frames_before = host.frames_out
        meter = Meter(case.profile)
        meter.start()
        deadline = trio.current_time() + case.duration
        published = 0
        while trio.current_time() < deadline:
            room = min(credit.delivered + case.window - published, PUBLISH_BATCH)
            if room <= 0:
                await credit.changed()
                continue
            batch = [(uid, payload) for uid in range(published + 1, published + room + 1)]
            host.publish_batch(client, STREAM.key, batch)
            published += room
            if publisher.failed:
                raise BenchError(f"a publish failed: {publisher.failed[0]}")
            await trio.sleep(0)
        with trio.fail_after(DRAIN_TIMEOUT):
            await credit.reach(published)
        measured = meter.stop()
        nursery.cancel_scope.cancel()
    await trio.aclose_forcefully(control)
    return {
        **measured,
        "packets": published,
        "acked": publisher.acked,
        "frames_out": host.frames_out - frames_before,
    }


async def _protocol_receivers(case: Case, info: dict[str, Any], report: Report) -> dict[str, Any]:
    tune_for_nodes()
    forwarder = PeerAddress(Address(LOOPBACK, info["peer_port"]), info["node_id"])
    ids = _identities(case)
    trusted = frozenset(i.public for i in ids)
    progress = Progress()
    children = [_Child(progress) for _ in range(case.children)]
    async with trio.open_nursery() as nursery:
        with trio.fail_after(SETUP_TIMEOUT):
            for i, child in enumerate(children):
                # Half the circle away from the key: the forwarder is closer than any child.
                location = (STREAM.location + 0.4 + 0.2 * i / case.children) % 1.0
                node = await nursery.start(
                    functools.partial(
                        run_node,
                        _node_config(location, trusted, (forwarder,)),
                        identity=ids[1 + i],
                        rng=random.Random(100 + i),
                    )
                )
                host = node.host
                await host.wait_until(lambda host=host: bool(host.core.peers))
                host.subscribe(host.add_client(child), STREAM.key)
                await host.wait_until(lambda child=child: child.subscribed is not None)
                if child.subscribed is None or child.subscribed.root:
                    raise BenchError(f"child {i} did not join below the forwarder")
            control = await trio.open_tcp_stream(LOOPBACK, info["control_port"])
        measured = await report_progress(control, lambda: min(c.count for c in children), progress)
        nursery.cancel_scope.cancel()
    return {
        **measured,
        "counts": [c.count for c in children],
        "irregular": sum(c.irregular for c in children),
    }


# --- the plain variant ----------------------------------------------------------------------


def plain_body_size(payload: int) -> int:
    """The size of a sealed frame carrying one ``payload``-byte packet to a child alone
    (with the root's commit mark on it: ``overlay.core.showing``), its record length aside."""
    message = SubscribeData(
        STREAM.key, 10**6, bytes(payload), None, PacketKind.DATA, None, None, 10**6, 10**6
    )
    return len(encode(message)) + AEAD_TAG_SIZE


class _Writer:
    """One sink's coalescing writer task: everything queued, in one ``send_all``."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._queue: list[bytes] = []
        self._ready = trio.Event()

    def push(self, data: bytes) -> None:
        self._queue.append(data)
        self._ready.set()

    async def run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            if not self._queue:
                continue
            data = b"".join(self._queue)
            self._queue.clear()
            await self._stream.send_all(data)


async def _plain_forwarder(case: Case, report: Report) -> dict[str, Any]:
    listeners = [(await trio.open_tcp_listeners(0, host=LOOPBACK))[0] for _ in range(3)]
    sink_listener, source_listener, control_listener = listeners
    report(
        "ready",
        {
            "peer_port": _port(sink_listener),
            "source_port": _port(source_listener),
            "control_port": _port(control_listener),
        },
    )
    with trio.fail_after(SETUP_TIMEOUT):
        sinks = [await sink_listener.accept() for _ in range(case.children)]
        source = await source_listener.accept()
        control = await control_listener.accept()
    async with trio.open_nursery() as nursery:
        writers = [_Writer(sink) for sink in sinks]
        for writer in writers:
            nursery.start_soon(writer.run)
        credit = Credit()
        nursery.start_soon(credit.follow, control)
        reader = FrameReader(SEALED_MAX)
        meter = Meter(case.profile)
        meter.start()
        deadline = trio.current_time() + case.duration
        forwarded = 0
        while trio.current_time() < deadline:
            if forwarded - credit.delivered >= case.window:
                await credit.changed()
                continue
            data = await source.receive_some(READ_SIZE)
            if not data:
                raise BenchError("the source closed its connection")
            for body in reader.feed(data):
                framed = frame(body)
                for writer in writers:
                    writer.push(framed)
                forwarded += 1
        with trio.fail_after(DRAIN_TIMEOUT):
            await credit.reach(forwarded)
        measured = meter.stop()
        nursery.cancel_scope.cancel()
    for stream in (source, control, *sinks):
        await trio.aclose_forcefully(stream)
    return {**measured, "packets": forwarded}


async def _plain_receivers(case: Case, info: dict[str, Any], report: Report) -> dict[str, Any]:
    progress = Progress()
    counts = [0] * case.children

    async def sink(i: int, stream: trio.SocketStream) -> None:
        reader = FrameReader(SEALED_MAX)
        while data := await stream.receive_some(READ_SIZE):
            counts[i] += len(reader.feed(data))
            progress.note()

    async def source(stream: trio.SocketStream) -> None:
        size = plain_body_size(case.payload)
        body = random.Random(0).randbytes(size)
        chunk = b"".join(frame(body) for _ in range(64))
        try:
            while True:
                await stream.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async with trio.open_nursery() as nursery:
        with trio.fail_after(SETUP_TIMEOUT):
            for i in range(case.children):
                stream = await trio.open_tcp_stream(LOOPBACK, info["peer_port"])
                nursery.start_soon(sink, i, stream)
            nursery.start_soon(source, await trio.open_tcp_stream(LOOPBACK, info["source_port"]))
            control = await trio.open_tcp_stream(LOOPBACK, info["control_port"])
        measured = await report_progress(control, lambda: min(counts), progress)
        nursery.cancel_scope.cancel()
    return {**measured, "counts": counts, "irregular": 0}


def _port(listener: trio.SocketListener) -> int:
    return int(listener.socket.getsockname()[1])


# --- runs -----------------------------------------------------------------------------------


def _forwarder_process(case: Case, conn: Connection) -> None:
    variant = _protocol_forwarder if case.variant == "protocol" else _plain_forwarder
    serve_role(conn, functools.partial(variant, case))


def _receiver_process(case: Case, info: dict[str, Any], conn: Connection) -> None:
    variant = _protocol_receivers if case.variant == "protocol" else _plain_receivers
    serve_role(conn, functools.partial(variant, case, info))


def run_case(case: Case) -> dict[str, Any]:
    """One run in two fresh processes: the forwarder's measurements and the receivers'."""
    processes = Processes()
    try:
        processes.start("forwarder", _forwarder_process, case)
        info = processes.expect("forwarder", "ready", SETUP_TIMEOUT)
        processes.start("receiver", _receiver_process, case, info)
        budget = 2 * SETUP_TIMEOUT + case.duration + DRAIN_TIMEOUT
        forwarder = processes.expect("forwarder", "result", budget)
        receivers = processes.expect("receiver", "result", SETUP_TIMEOUT)
    finally:
        processes.close()
    packets = forwarder["packets"]
    if min(receivers["counts"]) < packets or receivers["irregular"]:
        raise BenchError(
            f"{case.variant} x{case.children}: {packets} packets sent, children got "
            f"{receivers['counts']} with {receivers['irregular']} out of sequence"
        )
    return {
        "variant": case.variant,
        "children": case.children,
        "packets": packets,
        "elapsed": forwarder["elapsed"],
        "rate": packets / forwarder["elapsed"],
        "forwarder_cpu": forwarder["cpu"],
        "rate_per_cpu": packets / max(forwarder["cpu"], 1e-9),
        "forwarder_load": forwarder["cpu"] / forwarder["elapsed"],
        "receiver_load": receivers["cpu"] / max(receivers["elapsed"], 1e-9),
        "delivered": receivers["counts"],
        "profile": forwarder.get("profile"),
    }


def run_benchmark(
    children: Sequence[int] = (1, 8),
    *,
    duration: float = 4.0,
    repeats: int = 2,
    window: int = DEFAULT_WINDOW,
    payload: int = PAYLOAD_SIZE,
    profile: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Every run of the benchmark and its summary per number of children: best rate of each
    variant over ``repeats`` interleaved runs, and the ratios protocol/plain."""
    runs: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    for n in children:
        best: dict[str, dict[str, Any]] = {}
        for _ in range(repeats):
            for variant in ("plain", "protocol"):
                run = run_case(Case(variant, n, duration, window, payload))
                runs.append(run)
                if progress is not None:
                    progress(_run_line(run))
                if variant not in best or run["rate"] > best[variant]["rate"]:
                    best[variant] = run
        plain, protocol = best["plain"], best["protocol"]
        summary.append(
            {
                "children": n,
                "plain": {k: plain[k] for k in _SUMMARY_FIELDS},
                "protocol": {k: protocol[k] for k in _SUMMARY_FIELDS},
                "ratio": protocol["rate"] / plain["rate"],
                "ratio_per_cpu": protocol["rate_per_cpu"] / plain["rate_per_cpu"],
            }
        )
    profiles = []
    if profile:
        for n in children:
            run = run_case(
                Case("protocol", n, min(duration, PROFILE_DURATION), window, payload, True)
            )
            profiles.append({"children": n, "rate": run["rate"], "top": run["profile"]})
    return {
        "parameters": {
            "children": list(children),
            "duration": duration,
            "repeats": repeats,
            "window": window,
            "payload": payload,
            "frame_bytes": plain_body_size(payload),
        },
        "summary": summary,
        "runs": runs,
        "profiles": profiles,
    }


_SUMMARY_FIELDS = ("rate", "rate_per_cpu", "forwarder_load", "receiver_load", "packets")


def _run_line(run: dict[str, Any]) -> str:
    return (
        f"  {run['variant']:>8} x{run['children']}: {run['rate']:9,.0f} packets/s "
        f"({run['packets']:,} in {run['elapsed']:.2f} s; forwarder CPU "
        f"{run['forwarder_load']:.0%}, receivers {run['receiver_load']:.0%})"
    )


def format_report(result: dict[str, Any]) -> str:
    p = result["parameters"]
    lines = [
        f"Forwarding {p['payload']}-byte packets ({p['frame_bytes']}-byte frames), "
        f"window {p['window']}, best of {p['repeats']} x {p['duration']:g} s per variant",
        "",
        f"{'children':>8} {'variant':>9} {'packets/s':>10} {'pkts/CPU-s':>11} "
        f"{'fwd CPU':>8} {'rcv CPU':>8}",
    ]
    for row in result["summary"]:
        for variant in ("plain", "protocol"):
            r = row[variant]
            lines.append(
                f"{row['children']:>8} {variant:>9} {r['rate']:>10,.0f} "
                f"{r['rate_per_cpu']:>11,.0f} {r['forwarder_load']:>8.0%} "
                f"{r['receiver_load']:>8.0%}"
            )
        # The goal is per forwarder CPU-second: the wall-clock rate is the receivers' when
        # their process is the one saturated.
        verdict = "meets" if row["ratio_per_cpu"] >= 0.5 else "below"
        lines.append(
            f"{'':>8} {'ratio':>9} {row['ratio']:>10.0%} {row['ratio_per_cpu']:>11.0%}"
            f"   ({verdict} the 50% goal per CPU-second)"
        )
    for prof in result["profiles"]:
        top = prof["top"]
        lines += [
            "",
            f"Profile of the forwarder, protocol x{prof['children']} (under cProfile: "
            f"{prof['rate']:,.0f} packets/s; {top['busy']:.2f} s busy, {top['idle']:.2f} s "
            f"idle in epoll), top {PROFILE_TOP} by own time:",
            f"{'own s':>7} {'share':>6} {'cum s':>7} {'calls':>9}  function",
        ]
        for f in top["own"]:
            lines.append(
                f"{f['tottime']:>7.2f} {f['share']:>6.1%} {f['cumtime']:>7.2f} "
                f"{f['calls']:>9,}  {f['function']}"
            )
        lines += ["  ... and the project's functions by cumulative time (share of busy time):"]
        for f in top["cumulative"]:
            lines.append(
                f"{f['cumtime']:>7.2f} {f['cumshare']:>6.1%} {'':>7} {f['calls']:>9,}  "
                f"{f['function']}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testnet.bench.forwarding",
        description="One node forwarding 1 KB packets to N children over TCP, against a plain "
        "trio forwarder of the same frames; both measured in this invocation.",
    )
    parser.add_argument(
        "--children",
        default="1,8",
        type=lambda s: [int(x) for x in s.split(",")],
        help="comma-separated numbers of children (default 1,8)",
    )
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    parser.add_argument("--repeats", type=int, default=2, help="runs per variant; best counts")
    parser.add_argument("--window", type=int, default=DEFAULT_WINDOW, help="packets in flight")
    parser.add_argument("--payload", type=int, default=PAYLOAD_SIZE, help="bytes per packet")
    parser.add_argument("--profile", action="store_true", help="add a cProfile of the node")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.duration <= 0 or args.window < 1 or min(args.children) < 1:
        parser.error("--repeats, --duration, --window and --children must be positive")
    progress = None if args.json else functools.partial(print, flush=True)
    try:
        result = run_benchmark(
            args.children,
            duration=args.duration,
            repeats=args.repeats,
            window=args.window,
            payload=args.payload,
            profile=args.profile,
            progress=progress,
        )
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else "\n" + format_report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
