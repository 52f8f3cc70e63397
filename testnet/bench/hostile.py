"""Real nodes carrying an honest stream while one hostile peer attacks, one attack at a time.

    python -m testnet.bench.hostile [--seconds 5] [--rate 50] [--attacks a,b,c]
        [--half-handshakes 500] [--idle 2000] [--tail 1] [--json]

Method. Each row gets a fresh network of four real nodes on loopback (``LocalNetwork``, one
process, the node defaults of ``overlay node``): a ring whose node 0 sits at the stream key's
location, so it roots the stream (the bench checks which node reports itself root, and
attacks that one). Honest clients of the nodes, in this process: a publisher on node 2
publishing ``--rate`` packets a second, each with its own content, and a subscriber on each
of nodes 1 and 3. Once both subscribers receive, the attacker starts: a separate process
(``testnet.bench.hostile_attacks``), so its sockets and CPU are not the nodes', built from
the project's own handshake, framing and codec. It attacks for ``--seconds``; the publisher
goes on for ``--tail`` seconds (1) after, then stops, and the row waits (up to ``SETTLE``) for
every acknowledged publish to reach every subscriber. Ctrl-C stops the row and the attacker.

Attacks (``--attacks``, all by default, each described in ``hostile_attacks``), on the root
unless said: ``garbage`` bytes on the peer port; ``half_handshake`` (slowloris, 500
connections); an ``oversized_frame`` announced in the handshake; a message ``before_hello``;
a Hello at a ``false_location`` (the key's); ``false_neighbours``, announced without their
own signed word or with a forged one; ``forged_data``, SubscribeData from a child of
node 1 (a member with a parent, whose subscriber the forgery would reach); ``uid_reuse`` of
a search in flight for another key; a ``claim_without_number``; ``join_drop``, a child that
joins and drops its link in a loop; ``unconfirmed_publish``, a child whose publishes are
never confirmed; ``silent_publish``, a child that falls silent after each publish;
``catch_up_flood``, subscribes from packet 0, a hundred a second; and an
``idle_flood`` of 2,000 silent connections. An attacker that joins the stream otherwise acts
as an honest child (it answers HeldQuery and SubscribeRestarted, heartbeats; all but
``silent_publish``, whose attack is to stop) and leaves with
an Unsubscribe when its time is up, so each row shows the cost of its own attack: an abrupt
drop is ``join_drop``'s.

Columns:

* ``alive``: every node still runs (a node whose task raised ends the row: "no");
* ``rss+MiB``: peak resident memory of this process during the attack (sampled every
  0.1 s) minus its RSS when the attack began. All four nodes and the honest clients share
  the process; the attacker does not. Memory freed by an earlier row may be reused, so a
  growth is a floor;
* ``lost``, ``dup``: acknowledged publishes that never reached a subscriber / arrived more
  than once, matched by content, summed over both subscribers; ``bad``: deliveries out of
  number order, under another number than the one acknowledged, or with content nobody
  published (a forgery that got through). What the attacker published in its own name
  on the open stream is no forgery: the JSON counts it as ``own``;
* ``stall ms``: the longest gap between consecutive deliveries at a subscriber that
  overlaps the attack (a gap still open at the end counts up to the end of the row); at
  ``--rate 50`` an undisturbed stream shows about 20 ms. ``at s``: when that gap began,
  in seconds after the attack did (``--seconds``: as the attacker left);
* ``cut``: connections the node closed or refused before the attacker closed them, of
  those the attacker opened ("-": the attacker opened none);
* ``faults``: internal errors the nodes contained (``overlay stats`` faults): a bug;
* ``first warning``: the first WARNING (or worse) line the attacked node logged from the
  attack's start to the row's end, with its logger. The JSON also has the attacked node's
  refusals by reason, its counters that moved (``stats``), how many warnings the other
  nodes logged, and what the attacker sent and received.

Bounded: each attack runs ``--seconds``; the floods hold ``--half-handshakes`` and ``--idle``
connections at most (the open-file limit, 20,000 a process here, is the attacker's); a row
lasts at most about ``--seconds + --tail + SETTLE`` plus its start; loopback only.
"""

from __future__ import annotations

import argparse
import contextvars
import gc
import itertools
import json
import logging
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import trio

from keyspace.location import distance, key_location
from keyspace.stream_key import StreamKey
from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from overlay.core.events import (
    ClientEvent,
    Missed,
    Packet,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    Subscribed,
)
from overlay.runtime.host import NodeHost
from testnet.bench.hostile_attacks import ATTACKS, OWN_PUBLISH, interrupted
from testnet.local import LocalNetwork
from testnet.process_memory import memory_now

KEY = StreamKey.open("hostile-bench").key
PUBLISHER, SUBSCRIBERS = 2, (1, 3)
# The one attack aimed at a stream member below the root, not the root: forged packets are
# dangerous where they could be passed down to a subscriber, and the root has no parent
# whose packets they could pose as.
AT_MEMBER = frozenset({"forged_data"})
MEMBER = 1
# Publishing goes on this long after the attack (``--tail``): the stream must recover.
TAIL = 1.0
SETTLE = 20.0  # then the row waits at most this long for the last deliveries
START = 30.0  # bound on a row's network coming up and its subscribers receiving
# The attacker process must report its start within this, and end within this of --seconds.
ATTACKER_GRACE = 30.0
PAYLOAD = 100  # bytes per honest packet
FAULTS = ("receive_faults", "timer_faults", "encode_faults")

# Which node a log record came from: each node's tasks inherit the context the node was
# started in (trio copies it into every task spawned), and the network sets this there.
_NODE: contextvars.ContextVar[int | None] = contextvars.ContextVar("hostile_node", default=None)


class AttackerError(RuntimeError):
    """The attacker process failed: a fault of the bench, not of the node attacked."""


class _TaggedNetwork(LocalNetwork):
    async def _start_new(self, i: int) -> None:
        token = _NODE.set(i)
        try:
            await super()._start_new(i)
        finally:
            _NODE.reset(token)


class _Warnings(logging.Handler):
    """Every WARNING-or-worse record of the ``overlay`` loggers, with the node it came from.
    Attached to ``overlay`` itself, so a flood's lines are kept here and not printed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[tuple[int | None, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = f"{record.levelname} {record.name}: {record.getMessage()}"
        self.records.append((_NODE.get(), line))


@dataclass
class _Publisher:
    sent: dict[int, bytes] = field(default_factory=dict)
    acked: dict[int, int] = field(default_factory=dict)  # uid -> packet number
    failed: dict[int, str] = field(default_factory=dict)

    def deliver(self, event: ClientEvent) -> None:
        if isinstance(event, PublishAcked):
            self.acked[event.uid] = event.number
        elif isinstance(event, PublishFailed | PublishCollided):
            self.failed[event.uid] = type(event).__name__

    def unanswered(self) -> int:
        return len(self.sent) - len(self.acked) - len(self.failed)


@dataclass
class _Subscriber:
    joined: bool = False
    times: list[float] = field(default_factory=list)
    packets: list[tuple[int, bytes]] = field(default_factory=list)
    missed: int = 0

    def deliver(self, event: ClientEvent) -> None:
        if isinstance(event, Subscribed):
            self.joined = True
        elif isinstance(event, Packet):
            self.times.append(trio.current_time())
            self.packets.append((event.number, event.data))
        elif isinstance(event, Missed):
            self.missed += event.last - event.first + 1


def _rss_mib() -> float:
    return memory_now() / 2**20


def _ring() -> Topology:
    """Four nodes a quarter circle apart, node 0 at the key: the closest, so the root."""
    at = key_location(KEY)
    return Topology(tuple((at + i / 4) % 1.0 for i in range(4)), ((1, 3), (0, 2), (1, 3), (0, 2)))


def _root(net: LocalNetwork) -> int:
    for i in range(len(net)):
        for stream in net.node(i).host.describe(KEY)["streams"]:
            if stream["state"] == "root":
                return i
    raise RuntimeError("no node roots the stream")


def _check(subscriber: _Subscriber, publisher: _Publisher) -> dict[str, int]:
    """Every acknowledged publish exactly once, under its number, in order (module notes)."""
    uid_of = {data: uid for uid, data in publisher.sent.items()}
    seen = Counter(data for _, data in subscriber.packets)
    numbers = [number for number, _ in subscriber.packets]
    own = sum(1 for _, data in subscriber.packets if data.startswith(OWN_PUBLISH))
    return {
        "delivered": len(subscriber.packets),
        "lost": sum(1 for uid in publisher.acked if not seen[publisher.sent[uid]]),
        "duplicated": sum(n - 1 for n in seen.values() if n > 1),
        "own": own,
        "foreign": sum(1 for _, data in subscriber.packets if data not in uid_of) - own,
        "misnumbered": sum(
            1
            for number, data in subscriber.packets
            if data in uid_of and publisher.acked.get(uid_of[data], number) != number
        ),
        "out_of_order": sum(1 for a, b in itertools.pairwise(numbers) if b <= a),
        "missed": subscriber.missed,
    }


def _stall(times: list[float], start: float, end: float, last: float) -> tuple[float, float]:
    """The longest gap between consecutive deliveries that overlaps [start, end], and when
    it began (seconds after ``start``); a gap with no delivery after it lasts until
    ``last`` (the end of the row)."""
    before = [t for t in times if t < start][-1:]
    marks = before + [t for t in times if t >= start] + [last]
    worst = (0.0, 0.0)
    for a, b in itertools.pairwise(marks):
        if b >= start and a <= end and b - a > worst[0]:
            worst = (b - a, a - start)
    return worst


def _faults(net: LocalNetwork) -> int:
    total = 0
    for i in range(len(net)):
        if net.alive(i):
            stats = net.node(i).host.describe()["stats"]
            total += sum(stats[name] for name in FAULTS)
    return total


async def _publish(host: NodeHost, publisher: _Publisher, rate: float) -> None:
    client = host.add_client(publisher)
    period = 1.0 / rate
    next_at = trio.current_time()
    uid = 0
    while True:
        uid += 1
        data = (b"honest %d " % uid).ljust(PAYLOAD, b".")
        publisher.sent[uid] = data
        host.publish(client, KEY, uid, data)
        # A publisher that fell behind (a busy loop) catches up by at most a second's worth.
        next_at = max(next_at + period, trio.current_time() - 1.0)
        await trio.sleep_until(next_at)


async def _sample_rss(peak: list[float]) -> None:
    while True:
        peak[0] = max(peak[0], _rss_mib())
        await trio.sleep(0.1)


async def _attack(
    name: str, target: str, args: argparse.Namespace, times: list[float]
) -> dict[str, Any]:
    """Run the attacker process; ``times`` gets the moments its attack started and ended.
    Cancelling this kills the process (trio's ``open_process`` contract)."""
    count = {"half_handshake": args.half_handshakes, "idle_flood": args.idle}.get(name, 0)
    command = [
        sys.executable,
        "-m",
        "testnet.bench.hostile_attacks",
        name,
        "--target",
        target,
        "--key",
        KEY.hex(),
        "--seconds",
        str(args.seconds),
        "--count",
        str(count),
    ]
    process = await trio.lowlevel.open_process(command, stdout=-1)  # a pipe
    try:
        assert process.stdout is not None
        output = b""
        with trio.fail_after(args.seconds + ATTACKER_GRACE * 2):
            async for chunk in process.stdout:
                output += chunk
                if not times and b"started\n" in output:
                    times.append(trio.current_time())
            await process.wait()
        times.append(trio.current_time())
    finally:
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
    lines = output.decode().splitlines()
    if process.returncode != 0 or len(lines) < 2:
        raise AttackerError(f"attacker {name} exited {process.returncode}: {output!r}")
    report: dict[str, Any] = json.loads(lines[-1])
    return report


async def _row(name: str, args: argparse.Namespace, warnings: _Warnings) -> dict[str, Any]:
    """One row: a fresh network, the honest stream, the attack (or none: ``baseline``)."""
    row: dict[str, Any] = {"attack": name}
    async with _TaggedNetwork(_ring(), core=NodeConfig()) as net:
        with trio.fail_after(START):
            await net.wait_linked()
            subscribers = [_Subscriber() for _ in SUBSCRIBERS]
            for sub, i in zip(subscribers, SUBSCRIBERS, strict=True):
                host = net.node(i).host
                host.subscribe(host.add_client(sub), KEY)
                await host.wait_until(lambda sub=sub: sub.joined)  # type: ignore[misc]
        root = _root(net)
        attacked = MEMBER if name in AT_MEMBER else root
        row["root"] = root
        at = key_location(KEY)
        closest = min(range(len(net)), key=lambda i: distance(net.topology.locations[i], at))
        row["root_is_closest"] = root == closest
        row["attacked"] = attacked
        node = net.node(attacked)
        publisher = _Publisher()
        times: list[float] = []
        async with trio.open_nursery() as background:  # the publisher, the RSS sampler
            background.start_soon(_publish, net.node(PUBLISHER).host, publisher, args.rate)
            with trio.fail_after(START):
                for sub, i in zip(subscribers, SUBSCRIBERS, strict=True):
                    await net.node(i).host.wait_until(lambda sub=sub: len(sub.packets) >= 5)  # type: ignore[misc]
            refusals_before = dict(node.host.describe()["refusals"])
            stats_before = dict(node.host.describe()["stats"])
            faults_before = _faults(net)
            first_record = len(warnings.records)
            gc.collect()
            rss = _rss_mib()
            peak = [rss]
            background.start_soon(_sample_rss, peak)
            if name == "baseline":
                times.append(trio.current_time())
                await trio.sleep(args.seconds)
                times.append(trio.current_time())
                row["attacker"] = None
            else:
                target = f"{node.peer_address.host}:{node.peer_address.port}"
                row["attacker"] = await _attack(name, target, args, times)
            row["rss_growth_mib"] = round(peak[0] - rss, 1)
            await trio.sleep(args.tail)
            background.cancel_scope.cancel()
        with trio.move_on_after(SETTLE):
            await net.node(PUBLISHER).host.wait_until(lambda: publisher.unanswered() == 0)
            wanted = {publisher.sent[uid] for uid in publisher.acked}
            for sub, i in zip(subscribers, SUBSCRIBERS, strict=True):
                await net.node(i).host.wait_until(
                    lambda sub=sub: wanted <= {d for _, d in sub.packets}  # type: ignore[misc]
                )
        last = trio.current_time()
        row["alive"] = all(net.alive(i) for i in range(len(net)))
        row["faults"] = _faults(net) - faults_before
        stats = node.host.describe()["stats"]
        # The attacked node's counters that moved (``overlay stats``): what it did about it.
        row["stats"] = {
            name: value - stats_before.get(name, 0)
            for name, value in stats.items()
            if isinstance(value, int) and value != stats_before.get(name, 0)
        }
        refusals = node.host.describe()["refusals"]
        row["refusals"] = {
            reason: count - refusals_before.get(reason, 0)
            for reason, count in refusals.items()
            if count != refusals_before.get(reason, 0)
        }
    records = warnings.records[first_record:]
    mine = [line for node_index, line in records if node_index == attacked]
    row["first_warning"] = mine[0] if mine else None
    row["warnings"] = len(mine)
    row["warnings_elsewhere"] = len(records) - len(mine)
    row["published"] = len(publisher.sent)
    row["acked"] = len(publisher.acked)
    row["failed"] = len(publisher.failed)
    row["unanswered"] = publisher.unanswered()
    row["subscribers"] = [_check(sub, publisher) for sub in subscribers]
    for column in ("lost", "duplicated"):
        row[column] = sum(check[column] for check in row["subscribers"])
    row["bad"] = sum(
        check[c] for check in row["subscribers"] for c in ("foreign", "misnumbered", "out_of_order")
    )
    start, end = times
    row["attack_s"] = round(end - start, 2)
    stall, at = max(_stall(sub.times, start, end, last) for sub in subscribers)
    row["stall_ms"] = round(stall * 1000, 1)
    row["stall_began_s"] = round(at, 2)  # after the attack began
    return row


async def _bench(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    warnings = _Warnings()
    overlay_log = logging.getLogger("overlay")
    overlay_log.addHandler(warnings)
    try:
        rows = []
        for name in ["baseline", *names]:
            try:
                rows.append(await _row(name, args, warnings))
            except AttackerError as error:
                rows.append({"attack": name, "alive": None, "error": str(error)[-2000:]})
            except Exception as error:  # a node that raised ends its network: a row of "no"
                rows.append({"attack": name, "alive": False, "error": repr(error)})
            if not args.json:
                print(format_row(rows[-1]), flush=True)
    finally:
        overlay_log.removeHandler(warnings)
    return {
        "parameters": {
            "seconds": args.seconds,
            "rate": args.rate,
            "half_handshakes": args.half_handshakes,
            "idle": args.idle,
            "tail": args.tail,
        },
        "rows": rows,
    }


HEADER = (
    f"{'attack':22} {'alive':5} {'rss+MiB':>7} {'lost':>5} {'dup':>4} {'bad':>4} "
    f"{'stall ms':>9} {'at s':>5} {'cut':>11} {'faults':>6}  first warning"
)


def format_row(row: dict[str, Any]) -> str:
    if "error" in row:
        alive = "?" if row["alive"] is None else "no"
        return f"{row['attack']:22} {alive:5} {row['error'][-300:]}"
    attacker = row["attacker"]
    if attacker is None or not attacker["connections"]:
        cut = "-"
    else:
        cut = f"{attacker['cut']}/{attacker['connections']}"
    warning = row["first_warning"] or "-"
    return (
        f"{row['attack']:22} {'yes' if row['alive'] else 'no':5} {row['rss_growth_mib']:7.1f} "
        f"{row['lost']:5d} {row['duplicated']:4d} {row['bad']:4d} "
        f"{row['stall_ms']:9.1f} {row['stall_began_s']:5.1f} "
        f"{cut:>11} {row['faults']:6d}  {warning[:110]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="of each attack")
    parser.add_argument("--rate", type=float, default=50.0, help="honest publishes a second")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated")
    parser.add_argument("--half-handshakes", type=int, default=500)
    parser.add_argument("--idle", type=int, default=2000, help="connections of idle_flood")
    parser.add_argument("--tail", type=float, default=TAIL, help="publishing after an attack")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    names = [name for name in args.attacks.split(",") if name]
    unknown = [name for name in names if name not in ATTACKS]
    if unknown:
        parser.error(f"unknown attacks {unknown}; known: {', '.join(ATTACKS)}")
    if not 0 < args.seconds <= 600 or not 0 < args.rate <= 1000 or not 0 <= args.tail <= 60:
        parser.error("--seconds must be in (0, 600], --rate in (0, 1000], --tail in [0, 60]")
    if not 1 <= args.half_handshakes <= 8000 or not 1 <= args.idle <= 8000:
        parser.error("--half-handshakes and --idle must be in 1..8000")
    if not args.json:
        print(f"load average {os.getloadavg()[0]:.2f}; {args.seconds:g} s per attack")
        print(HEADER, flush=True)
    try:
        report = trio.run(_bench, args, names)
    except BaseException as error:
        if not interrupted(error):
            raise
        print("interrupted", file=sys.stderr)
        return 130
    report["load_average"] = os.getloadavg()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"load average {report['load_average'][0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
