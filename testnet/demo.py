"""``overlay testnet demo``: the system at work in one command, checking itself as it goes.

The story, each step printed as it happens:

1. start a testnet of real nodes in this process (TCP on loopback, encrypted links, a seeded
   small-world topology);
2. subscribe clients on several nodes to one stream, through the nodes' client ports; their
   requests are routed towards the stream key's location and coalesce into a tree whose root
   is the node closest to the key;
3. publish packets from another node; the root numbers them and broadcasts them down;
4. kill the root mid-stream; the children notice the dead links at once, resubscribe, the
   next-closest node becomes root and takes the numbering over, and publishes in flight are
   retried under the same uid. The tree is surveyed every fraction of a second to show the
   repair;
5. check that every subscriber got every acknowledged packet exactly once and in order,
   and show the repaired tree.

Exit status 0 if every check passed, 1 if any failed. The publisher's and subscribers'
nodes are never the root, so killing it disconnects no client: what is tested is the tree.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import trio

from keyspace.location import distance
from keyspace.stream_key import StreamKey
from testnet.handle import TestnetHandle, local_testnet
from testnet.launcher import DEFAULT_DEGREE
from testnet.survey import survey
from testnet.traffic import DeliveryReport, Publisher, Recorder, report
from testnet.tree import Tree, assemble
from testnet.tree_view import render_text

Say = Callable[[str], None]

# How long the root's failure may take to repair before the demo calls it failed: with the
# loopback timers a repair takes well under a second; 20 s means it is stuck.
REPAIR_LIMIT = 20.0
# After the last publish, how long the last packets may take to reach everyone.
DRAIN_LIMIT = 15.0
# Surveying 40 nodes takes a few milliseconds; four times a second shows the repair's steps.
SURVEY_INTERVAL = 0.25


@dataclass(frozen=True, slots=True)
class DemoOptions:
    nodes: int = 40
    subscribers: int = 6
    packets: int = 300
    rate: float = 60.0  # packets per second
    kill_at: int = 100  # kill the root once this many packets are acknowledged
    seed: int = 1
    degree: int = DEFAULT_DEGREE
    stream: str = "ovl:open/demo"


async def tree_of(net: TestnetHandle, stream: StreamKey) -> Tree:
    """Survey every node of ``net`` (dead ones do not answer) and assemble the tree."""
    indices = list(range(len(net)))
    answers = await survey([net.client(i) for i in indices], stream.address, indices=indices)
    return assemble(stream, answers)


def index_of(tree: Tree, node: bytes) -> int:
    return int(tree.label(node).removeprefix("node "))


async def run_demo(options: DemoOptions = DemoOptions(), say: Say = print) -> bool:
    """Run the demo, printing as it goes; True if every check passed."""
    stream = StreamKey.parse(options.stream)
    began = time.monotonic()
    say(
        f"overlay demo: {options.nodes} nodes, {options.subscribers} subscribers, "
        f"{options.packets} packets at {options.rate:.0f}/s; the root is killed after "
        f"packet {options.kill_at}"
    )
    say(f"[1/5] starting {options.nodes} nodes on 127.0.0.1 (seed {options.seed}) ...")
    async with local_testnet(options.nodes, seed=options.seed, degree=options.degree) as net:
        say(f"      every node linked to its neighbours after {time.monotonic() - began:.1f} s")
        return await _story(net, stream, options, say)


async def _story(net: TestnetHandle, stream: StreamKey, options: DemoOptions, say: Say) -> bool:
    n = len(net)
    by_distance = sorted(range(n), key=lambda i: distance(net.location(i), stream.location))
    # Clients never sit on the two nodes closest to the key (the root and its likely heir):
    # killing the root must not disconnect a client, only break the tree.
    rng = random.Random(options.seed)
    picks = rng.sample(by_distance[2:], options.subscribers + 1)
    publisher = Publisher(picks[0], net.client(picks[0]))
    recorders = [Recorder(i, net.client(i)) for i in picks[1:]]
    failures: list[str] = []
    say(
        f"[2/5] subscribing clients on nodes {', '.join(str(r.node) for r in recorders)} to "
        f"{stream.address} (key location {stream.location:.4f})"
    )
    async with trio.open_nursery() as nursery:
        for r in recorders:
            await nursery.start(r.run, stream.address)
        tree = await tree_of(net, stream)
        if len(tree.check.roots) != 1:
            failures.append(f"the tree did not form: {tree.check.problems}")
            nursery.cancel_scope.cancel()
            return _verdict(failures, say)
        root_id = tree.check.roots[0]
        root = index_of(tree, root_id)
        say(
            f"      tree formed: root node {root} (location {net.location(root):.4f}, "
            f"distance {tree.members[root_id].distance:.4f}), {len(tree.members)} members, "
            f"depth {tree.check.height}"
        )
        say(
            f"[3/5] publishing from node {publisher.node} at {options.rate:.0f} packets/s "
            "(each packet carries its send time)"
        )
        nursery.start_soon(publisher.run, stream.address, options.packets, options.rate)
        await publisher.wait_acked(min(options.kill_at, options.packets))
        kill_time = trio.current_time()
        await net.kill(root)
        say(f"[4/5] killed the root, node {root}, after {len(publisher.acked)} packets")
        repaired = await _watch_repair(net, stream, root, kill_time, recorders, say)
        if not repaired:
            failures.append(f"the tree was not repaired within {REPAIR_LIMIT:.0f} s")
        await publisher.wait_acked(options.packets)
        say(f"      publisher done: {len(publisher.acked)} packets acknowledged")
        numbers = set(publisher.acked.values())
        with trio.move_on_after(DRAIN_LIMIT):
            for r in recorders:
                await r.wait_for({x for x in numbers if r.frontier is None or x > r.frontier})
        final = await tree_of(net, stream)  # while the subscribers still hold it up
        nursery.cancel_scope.cancel()
    result = report(publisher, recorders, [kill_time])
    say("[5/5] results")
    for line in result.lines():
        say(f"      {line}")
    failures.extend(_checks(result, final, root, recorders, publisher.failed))
    say("")
    say(render_text(final))
    return _verdict(failures, say)


async def _watch_repair(
    net: TestnetHandle,
    stream: StreamKey,
    dead: int,
    kill_time: float,
    recorders: list[Recorder],
    say: Say,
) -> bool:
    """Survey the tree until it is whole again (one live root, every subscriber's node in
    it), printing each change; False if that takes longer than REPAIR_LIMIT."""
    last = ""
    subscribers = {r.node for r in recorders}
    while trio.current_time() - kill_time < REPAIR_LIMIT:
        tree = await tree_of(net, stream)
        elapsed = trio.current_time() - kill_time
        states = Counter(m.state for m in tree.members.values())
        reached = {index_of(tree, n) for n in tree.check.depth}
        whole = tree.check.ok and subscribers <= reached
        line = ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
        problems = tree.check.problems
        if problems:
            line += "; " + "; ".join(p.text for p in problems[:2])
            line += f" (+{len(problems) - 2} more)" if len(problems) > 2 else ""
        if whole:
            root = index_of(tree, tree.check.roots[0])
            say(
                f"      +{elapsed:.2f} s: repaired: new root node {root} (location "
                f"{net.location(root):.4f}), {len(tree.members)} members, depth "
                f"{tree.check.height}, every subscriber in the tree"
            )
            return root != dead
        if line != last:
            say(f"      +{elapsed:.2f} s: {line}")
            last = line
        await trio.sleep(SURVEY_INTERVAL)
    return False


def _checks(
    result: DeliveryReport, final: Tree, dead: int, recorders: list[Recorder], failed: list[str]
) -> list[str]:
    failures = [f"publish refused: {f}" for f in failed[:3]]
    for s in result.subscribers:
        if not s.ok:
            failures.append(
                f"subscriber on node {s.node}: lost {s.lost}, duplicates {s.duplicates}, "
                f"out of order {s.reordered}, missed ranges {s.missed_events}"
            )
    if not final.check.ok:
        failures.extend(f"final tree: {p}" for p in final.check.problems)
    elif index_of(final, final.check.roots[0]) == dead:
        failures.append("the dead root is still the root")
    in_tree = {index_of(final, n) for n in final.check.depth}
    missing = [r.node for r in recorders if r.node not in in_tree]
    if missing:
        failures.append(f"subscribers' nodes not in the final tree: {missing}")
    return failures


def _verdict(failures: list[str], say: Say) -> bool:
    if failures:
        say(f"DEMO FAILED ({len(failures)} checks):")
        for failure in failures:
            say(f"  - {failure}")
        return False
    say(
        "DEMO PASSED: the root was killed mid-stream, the tree repaired itself, and every "
        "subscriber got every packet once, in order (lost 0, duplicates 0)."
    )
    say("Next: `overlay testnet up` for a testnet that stays up, then `overlay tree`.")
    return True
