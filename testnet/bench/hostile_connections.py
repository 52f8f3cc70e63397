"""An honest peer and an honest publisher beside thousands of connections that never finish
their handshake.

    python -m testnet.bench.hostile_connections [--attackers 5000] [--addresses 100]
        [--duration 20] [--samples 200] [--shared-cpus] [--json]

Method. This process runs a two-node network on loopback (``LocalNetwork``, default
``[limits]``). A second process (this module with ``--attack``) keeps ``--attackers``
connections open to node 0's peer port, spread over ``--addresses`` source addresses
(127.0.1.1 and up; Linux routes all of 127/8 to loopback), each sending the first half of a
hello and then nothing; a connection the node closes is opened again at once. Measured
before the attack (idle) and once it has run a few seconds (under attack):

* ``link_ms``: how long a fresh identity takes to connect to node 0 and finish the
  handshake, from 127.0.0.1 (the median and the worst of ``--samples // 10`` dials);
* ``publish_ms``: how long node 1's publish takes to be acknowledged (node 0 roots the
  stream), one at a time, ``--samples`` of them (median and 99th percentile);
* this process's resident memory, and the node's refusals by reason.

Where the attack runs: an attacker is another machine, so by default the attacker process
runs on CPUs of its own and this process (both nodes) on the rest (``os.sched_setaffinity``,
half and half; on one CPU both share it). ``--shared-cpus`` lets the two share every CPU,
as on a machine a busy neighbour shares: then the node's tail also measures the scheduler
taking its CPU away for the attacker's.

Bounded: at most ``--attackers`` connections (the process's open-file limit is shared by
the attacker's sockets) for ``--duration`` seconds; loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from overlay.core.events import ClientEvent, PublishAcked
from overlay.runtime.identity import Identity
from overlay.runtime.peering import LinkParams, authenticate
from testnet.bench.hostile_attacks import HALF_HELLO
from testnet.local import LocalNetwork
from testnet.process_memory import memory_now

KEY = StreamKey.open("hostile-bench").key


class _Acks:
    def __init__(self) -> None:
        self.acked: set[int] = set()

    def deliver(self, event: ClientEvent) -> None:
        if isinstance(event, PublishAcked):
            self.acked.add(event.uid)


def _rss_mib() -> float:
    return memory_now() / 2**20


async def _measure(net: LocalNetwork, samples: int, first_uid: int) -> dict[str, Any]:
    node = net.node(0)
    links = []
    for _ in range(max(1, samples // 10)):
        started = time.perf_counter()
        stream = await trio.open_tcp_stream(node.peer_address.host, node.peer_address.port)
        params = LinkParams(Identity.generate(), b"testnet", None, 10.0, 1 << 20)
        await authenticate(stream, params, initiator=True)
        links.append((time.perf_counter() - started) * 1000)
        await stream.aclose()
    host = net.node(1).host
    acks = _Acks()
    client = host.add_client(acks)
    latencies = []
    for uid in range(first_uid, first_uid + samples):
        started = time.perf_counter()
        host.publish(client, KEY, uid, b"x" * 100)
        with trio.fail_after(30):
            await host.wait_until(lambda uid=uid: uid in acks.acked)  # type: ignore[misc]
        latencies.append((time.perf_counter() - started) * 1000)
    host.remove_client(client)
    latencies.sort()
    return {
        "link_ms_median": round(statistics.median(links), 2),
        "link_ms_max": round(max(links), 2),
        "publish_ms_median": round(statistics.median(latencies), 3),
        "publish_ms_p99": round(latencies[int(len(latencies) * 0.99) - 1], 3),
        "rss_mib": round(_rss_mib(), 1),
    }


async def _bench(args: argparse.Namespace) -> dict[str, Any]:
    core = NodeConfig(heartbeat_interval=1.0, dead_after=10.0)
    async with LocalNetwork(_chain(), core=core) as net:
        await net.wait_linked()
        node = net.node(0)
        await _measure(net, 20, 1)  # warm up: the stream's tree, the code paths
        idle = await _measure(net, args.samples, 1_000)
        ours, theirs = _placement(args.shared_cpus)
        os.sched_setaffinity(0, ours)
        attack = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "testnet.bench.hostile_connections",
                "--attack",
                f"127.0.0.1:{node.peer_address.port}",
                "--attackers",
                str(args.attackers),
                "--addresses",
                str(args.addresses),
                "--duration",
                str(args.duration),
                "--attack-cpus",
                ",".join(map(str, sorted(theirs))),
            ],
            env={**os.environ},
        )
        try:
            await trio.sleep(min(5.0, args.duration / 3))  # let the attack fill the slots
            under = await _measure(net, args.samples, 100_000)
            refusals = node.host.describe()["refusals"]
        finally:
            attack.terminate()
            attack.wait()
    return {
        "attackers": args.attackers,
        "addresses": args.addresses,
        "cpus": {"nodes": sorted(ours), "attacker": sorted(theirs)},
        "idle": idle,
        "under_attack": under,
        "refusals": refusals,
    }


def _placement(shared: bool) -> tuple[set[int], set[int]]:
    """The CPUs for this process (the nodes) and for the attacker's."""
    cpus = sorted(os.sched_getaffinity(0))
    if shared or len(cpus) < 2:
        return set(cpus), set(cpus)
    half = len(cpus) // 2
    return set(cpus[:half]), set(cpus[half:])


def _chain() -> Topology:
    # Node 0 is closest to the stream's key, so it roots it and node 1 publishes through it.
    near = StreamKey.open("hostile-bench").location
    return Topology((near, (near + 0.5) % 1.0), ((1,), (0,)))


async def _attack(target: str, attackers: int, addresses: int, duration: float) -> None:
    host, port = target.rsplit(":", 1)

    async def one(n: int) -> None:
        source = f"127.0.1.{1 + n % addresses}"
        while True:
            sock = trio.socket.socket()
            try:
                await sock.bind((source, 0))
                await sock.connect((host, int(port)))
                await sock.send(HALF_HELLO)
                while await sock.recv(4096):
                    pass
            except ConnectionError:
                pass  # refused or reset: connect again at once, as an attacker would
            except OSError:
                await trio.sleep(0.01)  # out of ports or memory: let the kernel catch up
            finally:
                sock.close()

    with trio.move_on_after(duration):
        async with trio.open_nursery() as nursery:
            for n in range(attackers):
                nursery.start_soon(one, n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attackers", type=int, default=5000)
    parser.add_argument("--addresses", type=int, default=100, help="source addresses (<=250)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of attack")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument(
        "--shared-cpus", action="store_true", help="let the attacker share the nodes' CPUs"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--attack", metavar="HOST:PORT", help=argparse.SUPPRESS)
    parser.add_argument("--attack-cpus", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 1 <= args.addresses <= 250 or not 1 <= args.attackers <= 8000:
        parser.error("--addresses must be in 1..250 and --attackers in 1..8000")
    if args.attack:
        if args.attack_cpus:
            os.sched_setaffinity(0, {int(cpu) for cpu in args.attack_cpus.split(",")})
        trio.run(_attack, args.attack, args.attackers, args.addresses, args.duration)
        return 0
    report = trio.run(_bench, args)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print("cpus", report["cpus"], "load average", os.getloadavg())
        for phase in ("idle", "under_attack"):
            print(phase, report[phase])
        print("refusals", report["refusals"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
