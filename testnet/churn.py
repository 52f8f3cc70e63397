"""``overlay testnet chaos``: kill and restart random nodes while a stream is published, and
report what the subscribers saw.

Kills come as a Poisson process of ``rate`` per second (seeded), each on a random live node
that carries no client of the experiment (a killed node's clients would be cut off, which
tests the client, not the tree); each victim is restarted ``downtime`` seconds later with
its identity and ports and a new boot id, so its peers drop it from every stream and the
subtrees below it resubscribe. The root is as likely a victim as any relay. Meanwhile one
publisher sends at ``publish_rate`` and every subscriber records what arrives
(``testnet.traffic``).

When the time is up, every victim is back, the last packets are given time to arrive, and
the tree is surveyed until it is whole again. The run passes if no subscriber lost,
duplicated or reordered a packet, no publish was refused for good, and the final tree has
one root, no cycles and no orphans. ``--rate 0`` is the plain delivery benchmark
(latency percentiles with no churn).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from keyspace.stream_key import StreamKey
from testnet.demo import index_of, tree_of
from testnet.handle import TestnetHandle
from testnet.traffic import DeliveryReport, Publisher, Recorder, report
from testnet.tree import Tree
from testnet.tree_view import render_text

Say = Callable[[str], None]

# After the churn stops: time for the last packets to reach everyone, and for the tree to
# settle (restarted nodes relinked, subtrees resubscribed) before it is judged. Past its
# nominal end a run goes on while publishes keep being answered, and is cut short once
# none has been for DRAIN_LIMIT (``cut_when_stalled``): a loaded testnet that falls behind
# its rate is slow, not wedged, and is judged on all it delivered. RUN_LIMIT nominal
# lengths bound the whole run all the same.
DRAIN_LIMIT = 30.0
RUN_LIMIT = 4
SETTLE_LIMIT = 30.0
STATUS_EVERY = 5.0  # seconds between progress lines
# A victim's restart when the run is stopped early: a node restarts in milliseconds (its
# worker rebinds two ports), so one that takes this long is stuck and the stop goes on.
RESTART_LIMIT = 10.0


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    rate: float = 1.0  # kills per second
    duration: float = 20.0  # seconds of publishing and churn
    downtime: float = 1.0  # seconds a killed node stays down
    subscribers: int = 10
    publish_rate: float = 50.0  # packets per second
    seed: int = 0
    stream: str = ""  # default: ovl:open/chaos-<seed>
    in_tree: bool = False  # draw victims from the stream's tree (root included) only


@dataclass(frozen=True, slots=True)
class ChaosResult:
    delivery: DeliveryReport
    kills: int
    final: Tree
    unfinished: int  # publishes neither acknowledged nor refused when time ran out

    @property
    def ok(self) -> bool:
        return self.delivery.ok and self.final.check.ok and not self.unfinished


async def run_chaos(net: TestnetHandle, options: ChaosOptions, say: Say = print) -> ChaosResult:
    """Run the experiment on ``net`` (every node alive at the start) and report."""
    stream = StreamKey.parse(options.stream or f"ovl:open/chaos-{options.seed}")
    rng = random.Random(options.seed)
    alive = [i for i in range(len(net)) if net.alive(i)]
    if len(alive) < options.subscribers + 3:
        raise ValueError(
            f"{len(alive)} live nodes cannot hold {options.subscribers} subscribers, a "
            "publisher and nodes to kill"
        )
    picks = rng.sample(alive, options.subscribers + 1)
    publisher = Publisher(picks[0], net.client(picks[0]))
    recorders = [Recorder(i, net.client(i)) for i in picks[1:]]
    protected = set(picks)
    packets = max(1, round(options.duration * options.publish_rate))
    kills: list[float] = []
    say(
        f"chaos: {len(net)} nodes; {options.subscribers} subscribers on {stream.address}; "
        f"publishing {packets} packets at {options.publish_rate:.0f}/s from node "
        f"{publisher.node}; killing {options.rate:g} nodes/s for {options.duration:g} s, "
        f"each down {options.downtime:g} s (seed {options.seed})"
    )
    async with trio.open_nursery() as nursery:
        for r in recorders:
            await nursery.start(r.run, stream.address)
        say(f"  {len(recorders)} subscribers joined")
        began = trio.current_time()
        async with trio.open_nursery() as work:
            work.start_soon(_status, publisher, recorders, kills, say, began)
            # Publishing ends once every packet is answered; the churn once every victim is
            # back. The bounds only cut a wedged run short (then judged by what arrived).
            nominal = options.duration + options.downtime
            with trio.move_on_after(RUN_LIMIT * nominal + DRAIN_LIMIT) as bound:
                work.start_soon(cut_when_stalled, publisher.answered, began + nominal, bound)
                async with trio.open_nursery() as inner:
                    inner.start_soon(publisher.run, stream.address, packets, options.publish_rate)
                    inner.start_soon(
                        _churn, net, stream, options, rng, protected, kills, say, began
                    )
            work.cancel_scope.cancel()
        numbers = set(publisher.acked.values())
        with trio.move_on_after(DRAIN_LIMIT):
            for r in recorders:
                await r.wait_for({x for x in numbers if r.frontier is None or x > r.frontier})
        final = await _settled_tree(net, stream)
        nursery.cancel_scope.cancel()
    delivery = report(publisher, recorders, kills)
    say(f"results after {len(kills)} kills:")
    for line in delivery.lines():
        say(f"  {line}")
    say("  final tree:")
    for line in render_text(final, max_nodes=0).splitlines()[1:]:
        if not line.startswith("..."):
            say(f"    {line}")
    unfinished = packets - publisher.answered()
    if unfinished:
        say(f"  PUBLISHING DID NOT FINISH: {unfinished} of {packets} publishes unanswered")
    result = ChaosResult(delivery, len(kills), final, unfinished)
    say("CHAOS PASSED: lost 0, duplicates 0" if result.ok else "CHAOS FAILED")
    return result


async def cut_when_stalled(
    answered: Callable[[], int],
    end: float,
    scope: trio.CancelScope,
    quiet: float = DRAIN_LIMIT,
) -> None:
    """From ``end`` (trio time) on, cancel ``scope`` once ``quiet`` seconds pass in which
    ``answered()``, how many publishes are answered so far, did not grow."""
    await trio.sleep_until(end)
    seen = answered()
    while True:
        await trio.sleep(quiet)
        now = answered()
        if now == seen:
            scope.cancel()
            return
        seen = now


async def _churn(
    net: TestnetHandle,
    stream: StreamKey,
    options: ChaosOptions,
    rng: random.Random,
    protected: set[int],
    kills: list[float],
    say: Say,
    began: float,
) -> None:
    """Kill a random unprotected live node at Poisson times; restart each after downtime.
    Returns once the duration is over and every victim is back."""
    if options.rate <= 0:
        return
    down: set[int] = set()

    async def bring_back(victim: int) -> None:
        try:
            await trio.sleep(options.downtime)
        finally:
            # Even when the run is stopped (Ctrl-C): a launched testnet outlives the chaos
            # run and is left whole, not with the victims of its last seconds dead.
            with trio.CancelScope(shield=True), trio.move_on_after(RESTART_LIMIT):
                await net.restart(victim)
                down.discard(victim)
                say(f"  +{trio.current_time() - began:5.1f} s  restarted node {victim}")

    async with trio.open_nursery() as restarts:
        at = began
        while True:
            # Poisson times, but never behind the clock: surveying a big tree for the next
            # victim takes a while, and the churn must end with the duration all the same.
            at = max(at, trio.current_time()) + rng.expovariate(options.rate)
            if at > began + options.duration:
                break
            await trio.sleep_until(at)
            candidates: list[int] = list(range(len(net)))
            roots: set[int] = set()
            if options.in_tree:
                tree = await tree_of(net, stream)
                roots = {index_of(tree, n) for n in tree.check.roots}
                candidates = [index_of(tree, n) for n in tree.members]
            victims = [i for i in candidates if net.alive(i) and i not in protected | down]
            if not victims:
                continue
            victim = rng.choice(victims)
            down.add(victim)
            try:
                await net.kill(victim)
            except trio.Cancelled:
                restarts.start_soon(bring_back, victim)  # (it may have died: bring it back)
                raise
            kills.append(trio.current_time())
            role = " (the root)" if victim in roots else ""
            say(f"  +{trio.current_time() - began:5.1f} s  killed node {victim}{role}")
            restarts.start_soon(bring_back, victim)


async def _status(
    publisher: Publisher, recorders: list[Recorder], kills: list[float], say: Say, began: float
) -> None:
    while True:
        await trio.sleep(STATUS_EVERY)
        fewest = min((len(r.numbers) for r in recorders), default=0)
        say(
            f"  +{trio.current_time() - began:5.1f} s  {len(publisher.acked)} packets "
            f"acknowledged, {len(kills)} kills; the slowest subscriber has {fewest}"
        )


async def _settled_tree(net: TestnetHandle, stream: StreamKey) -> Tree:
    """The tree once it is whole, or as it is after SETTLE_LIMIT (then judged broken)."""
    with trio.move_on_after(SETTLE_LIMIT):
        while True:
            tree = await tree_of(net, stream)
            if tree.check.ok:
                return tree
            await trio.sleep(0.5)
    return await tree_of(net, stream)
