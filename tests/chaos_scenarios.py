"""Chaos over the simulator: a scenario (``Scenario``, its ``Fault``s; ``draw_scenario`` and
``sample`` draw them from named seeds), ``run`` plays one out, and ``failures`` says what
went wrong with the outcome. What is drawn, what is checked and why, is told in
``test_sim_chaos``'s docstring."""

from __future__ import annotations

import dataclasses
import functools
import random
from dataclasses import dataclass, field

from overlay.core.config import NodeConfig
from overlay.core.streams import State
from testnet.sim.chaos import Publishers
from testnet.sim.deliveries import DeliveryLog
from testnet.sim.invariants import check_all, collect, violations
from testnet.sim.network import NetworkModel
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import PUBLISHER_CLIENTS, payload, stream_keys

BEAT = 2.0
NODE = NodeConfig(
    heartbeat_interval=BEAT, dead_after=3 * BEAT, takeover_grace=2 * BEAT, probe_interval=5 * BEAT
)
JOIN_BY = 5.0  # subscribers join in [0, JOIN_BY)
PUBLISH_AT = 10.0
PUBLISH_FOR = 30.0
RATE = 1.0  # packets a second per stream
CONVERGE = 600.0  # virtual seconds the network gets to be quiet after the last fault


@dataclass(frozen=True, slots=True)
class Fault:
    at: float  # seconds after PUBLISH_AT
    kind: str  # "crash", "loud-crash", "add", "weather"
    arg: int = 0  # crash: victim rank; add: links
    until: float | None = None  # crash: restart then (or stay dead); weather: ends then


@dataclass(frozen=True, slots=True)
class Scenario:
    seed: int
    nodes: int
    streams: int
    subscribers: int
    faults: tuple[Fault, ...] = ()
    partition: tuple[float, float, float] | None = None  # (at, healed at, share of nodes)
    weather: NetworkModel = field(default_factory=NetworkModel)
    # Roots send a peer's publish down only once its publisher's node confirmed its number
    # (``NodeConfig.confirm_publishes``, on by default).
    confirm: bool = True
    # The graph's long links (``SimConfig.proximity``): 1, the node closest to each drawn
    # point, as the scenarios the regression tests hold were drawn on; the simulator's
    # default, 16, the nearest of that many alike nodes.
    proximity: int = 1


def draw_scenario(rng: random.Random, max_nodes: int = 60) -> Scenario:
    """One scenario, every choice drawn from ``rng``."""
    nodes = rng.randint(20, max_nodes)
    faults: list[Fault] = []
    for _ in range(rng.randint(0, int(0.3 * nodes))):
        at = rng.uniform(0.0, PUBLISH_FOR)
        restart = rng.uniform(1.0, 40.0) if rng.random() < 0.5 else None
        kind = rng.choice(["crash", "loud-crash"])
        rank = rng.randint(0, 10**6)
        faults.append(Fault(at, kind, rank, None if restart is None else at + restart))
    for _ in range(rng.randint(0, 3)):
        faults.append(Fault(rng.uniform(0.0, PUBLISH_FOR), "add", rng.randint(2, 6)))
    if rng.random() < 0.5:
        at = rng.uniform(0.0, PUBLISH_FOR)
        faults.append(Fault(at, "weather", until=at + rng.uniform(1.0, 20.0)))
    partition = None
    if rng.random() < 0.5:
        at = rng.uniform(0.0, PUBLISH_FOR)
        partition = (at, at + rng.uniform(1.0, 40.0), rng.uniform(0.1, 0.4))
    weather = NetworkModel(
        drop=rng.choice([0.0, 0.002, 0.01]),
        duplicate=rng.choice([0.0, 0.01, 0.05]),
        jitter=rng.choice([0.0, 0.02, 0.2]),
    )
    return Scenario(
        seed=rng.randint(0, 2**32),
        nodes=nodes,
        streams=rng.randint(2, 3),
        subscribers=rng.randint(2, 6),
        faults=tuple(sorted(faults, key=lambda f: f.at)),
        partition=partition,
        weather=weather,
    )


def sample(name: str, count: int) -> list[Scenario]:
    """Scenarios ``name``-0 to ``name``-(count - 1), each drawn from a generator seeded with
    its own name: which scenarios a sample holds depends on this module's code alone, not on
    a test framework's version, nor on which modules a run happened to import."""
    return [draw_scenario(random.Random(f"{name}-{i}")) for i in range(count)]


@dataclass(slots=True)
class Outcome:
    sim: Simulator
    log: DeliveryLog
    keys: list[bytes]
    subscribers: list[tuple[int, int, bytes]]  # (node, client, key) of those still up
    quiet: bool
    # The partition, if one was drawn, and the packet numbers a root on its side gave
    # afresh while cut off (see the docstring): two packets may stand under each.
    cut: _Cut | None = None
    # Live nodes the crashes left with no live path to the publishers: a network of their
    # own, which nothing can join to the rest (see the docstring).
    isolated: frozenset[int] = frozenset()


def run(scenario: Scenario) -> Outcome:
    """Play ``scenario``: subscribe, publish with faults, then run until quiet (bounded)."""
    node = dataclasses.replace(NODE, confirm_publishes=scenario.confirm)
    config = SimConfig(
        nodes=scenario.nodes,
        degree=6,
        seed=scenario.seed,
        node=node,
        proximity=scenario.proximity,
        # Odd seeds send as the runtime does, runs and bundles: the properties hold either way.
        gather=scenario.seed % 2 == 1,
    )
    sim = Simulator(config)
    rng = random.Random(f"scenario-{scenario.seed}")
    calm = sim.network.model
    keys = stream_keys(scenario.streams)
    log = DeliveryLog(lambda: sim.now)
    publishers = Publishers(sim, log, delay=1.0, patience=10 * CONVERGE)
    sim.on_deliver = publishers.on_event
    everyone = list(range(scenario.nodes))
    subs: list[tuple[int, int, bytes]] = []
    pubs: list[int] = []
    client = 0
    for key in keys:
        for node in rng.sample(everyone, scenario.subscribers):
            client += 1
            log.expect(node, client, key, atomic=False, last_seen=None)
            sim.call_at(rng.random() * JOIN_BY, functools.partial(sim.subscribe, node, key, client))
            subs.append((node, client, key))
        pubs += rng.sample(everyone, 2)
    # The minority side of a partition is drawn among non-publishers, and so that the
    # rest stays in one piece (see the docstring).
    side: set[int] = set()
    cut = _Cut(sim, log)
    if scenario.partition is not None:
        _, _, share = scenario.partition
        others = [i for i in everyone if i not in pubs]
        for _ in range(20):
            side = set(rng.sample(others, max(1, int(share * scenario.nodes))))
            if _together(sim, pubs, side):
                break
        at, healed, _ = scenario.partition
        sim.call_at(PUBLISH_AT + at, functools.partial(cut.start, side, pubs))
        sim.call_at(PUBLISH_AT + healed, cut.heal)
    uid = 0
    for s, key in enumerate(keys):
        for index in range(int(PUBLISH_FOR * RATE)):
            uid += 1
            node = pubs[2 * s + index % 2]
            data = payload(s, index, 40)
            at = PUBLISH_AT + (index + rng.random()) / RATE

            def publish(
                node: int = node, key: bytes = key, uid: int = uid, d: bytes = data, s: int = s
            ) -> None:
                publishers.before_publish(node, uid, key, d)
                sim.publish(node, key, PUBLISHER_CLIENTS + 2 * s + uid % 2, uid, d)

            sim.call_at(at, publish)
    crashed: set[int] = set()
    candidates = [i for i in everyone if i not in side]  # a partitioned node may not die
    for fault in scenario.faults:
        sim.call_at(
            PUBLISH_AT + fault.at,
            functools.partial(
                _strike, sim, fault, candidates, keys, crashed, scenario, calm, rng, pubs
            ),
        )
    last = max([f.until or f.at for f in scenario.faults] + [0.0])
    if scenario.partition is not None:
        last = max(last, scenario.partition[1])
    # Past the last fault by more than liveness needs to notice it: heartbeats are not
    # protocol work, so a silent crash would otherwise look "quiet" until it is noticed.
    sim.run(until=PUBLISH_AT + max(last, PUBLISH_FOR) + NODE.dead_after + 2 * BEAT)
    isolated = _isolated(sim, pubs)
    quiet = _run_quiet(sim, CONVERGE, isolated)
    stayed = [(n, c, k) for n, c, k in subs if n not in crashed and n not in isolated]
    return Outcome(sim, log, keys, stayed, quiet, cut, isolated)


def _isolated(sim: Simulator, pubs: list[int]) -> frozenset[int]:
    """The live nodes cut off for good once every fault is over (all their peers died): a
    crash can cut a subscriber's node off as a partition can, and for ever (all
    five peers of one node may die). Everyone outside the largest group of nodes that
    reach one another and the live publishers' group: never most of the network, so the
    checks always cover most of it."""
    live = [i for i in range(len(sim.nodes)) if sim.alive[i]]
    groups: list[set[int]] = []
    for i in live:
        if not any(i in group for group in groups):
            groups.append(sim.reachable(i))
    main = set(max(groups, key=len, default=set()))
    for p in pubs:
        if sim.alive[p]:
            main |= sim.reachable(p)
    return frozenset(i for i in live if i not in main)


def _strike(
    sim: Simulator,
    fault: Fault,
    candidates: list[int],
    keys: list[bytes],
    crashed: set[int],
    scenario: Scenario,
    calm: NetworkModel,
    rng: random.Random,
    pubs: list[int],
) -> None:
    if fault.kind in ("crash", "loud-crash"):
        # Roots first, then anyone: rank picks among the live candidates.
        members = collect(sim.nodes, sim.alive)
        roots = sorted(
            i
            for key in keys
            for i, s in members.get(key, {}).items()
            if s.state is State.ROOT and i in candidates
        )
        live = [i for i in candidates if sim.alive[i] and i not in roots]
        pool = roots + live
        if not pool:
            return
        victim = pool[fault.arg % len(pool)] if fault.arg % 3 else pool[0]
        # A death that would cut a publisher off the others is a partition with publishers
        # on two sides (see the docstring): the next candidate dies instead.
        start = pool.index(victim)
        spared = [pool[(start + k) % len(pool)] for k in range(len(pool))]
        fine = [i for i in spared if _together(sim, pubs, {i})]
        if not fine:
            return
        victim = fine[0]
        crashed.add(victim)
        sim.crash(victim, silent=fault.kind == "crash")
        if fault.until is not None:
            sim.call_at(PUBLISH_AT + fault.until, functools.partial(sim.restart, victim))
    elif fault.kind == "add":
        sim.add_node(rng.random(), rng.sample(range(scenario.nodes), fault.arg))
    elif fault.kind == "weather":
        sim.network.model = scenario.weather
        assert fault.until is not None
        sim.call_at(
            PUBLISH_AT + fault.until, functools.partial(setattr, sim.network, "model", calm)
        )


def _together(sim: Simulator, pubs: list[int], without: set[int]) -> bool:
    """Whether the live publishers can all still reach one another without ``without``."""
    live = [p for p in pubs if sim.alive[p] and p not in without]
    return not live or set(live) <= sim.reachable(live[0], frozenset(without))


class _Cut:
    """The scenario's partition, and the packets two numberings may both have given: those
    a root on the side cut off numbered afresh while it was cut off."""

    def __init__(self, sim: Simulator, log: DeliveryLog) -> None:
        self.sim = sim
        self.log = log
        self.side: set[int] = set()
        self.contested: dict[bytes, frozenset[int]] = {}
        # Packets numbered before the cut that the side's roots showed while cut off: pushed up
        # and taken back, or set aside there and sent down on a claim or push of their own
        # (``confirming``)
        self.taken_back = 0
        self._numbered = self._published = self._given = 0
        self._held: set[tuple[bytes, int, int | None]] = set()

    def start(self, side: set[int], pubs: list[int]) -> None:
        """Partition ``side`` off, unless crashes since the draw mean the cut would now
        split the publishers (then the partition does not happen)."""
        if _together(self.sim, pubs, side):
            self.side = side
            self._numbered = self._fresh()
            self._given = sum(self.sim.nodes[i].stats.numbered for i in side)
            self._published = sum(self.sim.nodes[i].stats.published for i in side)
            self._held = self._packets()
            self.sim.partition(side)

    def heal(self) -> None:
        # No publisher is on the side, but a publish already on its way there when the cut
        # came (waiting at a restarting relay, say) may reach a root there, which numbers
        # it as the other side's root numbers its own: publishers on both sides after all.
        # Only a fresh number can stand for two packets: a packet pushed up and taken back
        # kept the number the tree gave it before the cut. The contested ones are what the
        # side holds or gave as a root now that it did not hold when the cut came.
        published = sum(self.sim.nodes[i].stats.published for i in self.side)
        stats = [self.sim.nodes[i].stats for i in self.side]
        numbered, back = sum(s.numbered for s in stats), sum(s.claimed_back for s in stats)
        self.taken_back = published + back - self._published - (numbered - self._given)
        if self.side and self._fresh() > self._numbered:
            contested: dict[bytes, set[int]] = {}
            for key, number, _ in self._packets() - self._held:
                contested.setdefault(key, set()).add(number)
            self.contested = {key: frozenset(numbers) for key, numbers in contested.items()}
        self.sim.heal()

    def _fresh(self) -> int:
        """Publishes the side's roots have given numbers of their own (not pushes taken),
        and numbers they had given up and set aside that a publish reaching them sent down
        (``confirming``, ``resolved``: only a publish does, one on its way across the cut,
        as above; not a claim or push, which sends down its own number alone)."""
        stats = [self.sim.nodes[i].stats for i in self.side]
        return sum(s.numbered for s in stats) + sum(s.resolved for s in stats)

    def _packets(self) -> set[tuple[bytes, int, int | None]]:
        """(stream, number, uid) of every packet a node on the side holds in its window or
        has given a number as a root (its uid table: pending ones too, not those it gave
        up and set aside, which go down only if a publish reaches it)."""
        found: set[tuple[bytes, int, int | None]] = set()
        for i in sorted(self.side):
            for key, stream in self.sim.nodes[i].streams.items():
                found.update((key, n, packet.uid) for n, packet in stream.window.packets.items())
                if stream.uids is None:
                    continue
                for uid, published in self.log.published.items():
                    number = stream.uids.get(uid) if published[0] == key else None
                    if number is not None and number not in stream.root.set_aside:
                        found.add((key, number, uid))
        return found


def _run_quiet(sim: Simulator, within: float, isolated: frozenset[int] = frozenset()) -> bool:
    """Run until no live node has work, no protocol message is in flight and none moved for
    a while (longer than a root's probe interval: a probe may still find a split); False if
    that does not happen within ``within`` virtual seconds. In flight counts: a timer that
    fires at the very end of a step (a relay's linger ending) sends a message that has not
    arrived yet, and the trees checked then are not the ones the network settles into."""
    limit = sim.now + within
    margin = max(sim.config.reconnect_delay + 1.0, NODE.probe_interval + BEAT)
    while sim.now < limit:
        sim.run(until=sim.now + margin)
        # (an isolated node's search waits for a peer that never comes back)
        idle = not any(
            node.busy() for i, node in enumerate(sim.nodes) if sim.alive[i] and i not in isolated
        )
        if idle and not sim.in_flight and sim.last_message_at <= sim.now - margin:
            return True
    return False


def failures(outcome: Outcome) -> list[str]:
    """Everything the issue's guarantees say must not be, as text."""
    sim, log = outcome.sim, outcome.log
    found: list[str] = []
    if not outcome.quiet:
        found.append("the network did not get quiet")
    alive = [up and i not in outcome.isolated for i, up in enumerate(sim.alive)]
    shapes = check_all(sim.nodes, alive, sim.index)
    found += violations(shapes.values())
    for i in outcome.isolated:
        # Cut off, a node may wait for a peer with a search for a stream it carries, but
        # not with one for a stream it left (``hops``: chaos).
        node = sim.nodes[i]
        found += [
            f"node {i} still routes search {route.uid:x} for a stream it left"
            for route in node.routes.values()
            if route.key not in node.streams
        ]
    for node, client, key in outcome.subscribers:
        stream = sim.nodes[node].streams.get(key)
        if stream is None or client not in stream.local:
            found.append(f"node {node} client {client}: no longer subscribed")
        shape = shapes.get(key)
        if shape is None or node not in shape.depth:
            found.append(f"node {node}: not in the tree of {key.hex()[:8]}")
    # Cut off and numbering, the side's root gave numbers the other side's root gave too:
    # its publishes' acknowledgements, arriving at the heal, name those numbers again, and
    # a subscriber may be shown either packet under one. Only those numbers are passed over.
    contested = outcome.cut.contested if outcome.cut is not None else {}
    found += list(log.problems(complete=False, contested=contested))
    for node, client, key in outcome.subscribers:
        sub = log.subs[(node, client)]
        ignored = contested.get(key, frozenset())
        got = set(sub.numbers)
        owed = (n for n in log.truth.get(key, {}) if n not in ignored)
        missing = sorted(n for n in owed if n not in got)
        if missing:
            found.append(f"node {node} client {client}: never got acked {missing[:10]}")
        counted = [n for n in sub.numbers if n not in ignored]
        if len(set(counted)) != len(counted):
            found.append(f"node {node} client {client}: duplicates")
    return found


# Every node holding a packet dies (test_sim_chaos_memory tells what must hold there);
# test_hunt_chaos replays it from a file.
EVERY_HOLDER_DIED = Scenario(
    seed=10778,
    nodes=54,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=5e-324, kind="weather", arg=0, until=13.124881016388738),
        Fault(at=2.225073858507203e-309, kind="loud-crash", arg=202, until=None),
        Fault(at=1.0630962573476024, kind="crash", arg=433, until=None),
        Fault(at=1.4037308198334555, kind="loud-crash", arg=839, until=None),
        Fault(at=2.0, kind="loud-crash", arg=77, until=None),
        Fault(at=4.507181889679595, kind="crash", arg=63, until=None),
        Fault(at=6.482367567045268, kind="loud-crash", arg=102, until=25.23388373956383),
        Fault(at=10.921714201194323, kind="loud-crash", arg=389, until=43.04490313777363),
        Fault(at=15.532040030625952, kind="crash", arg=656, until=None),
        Fault(at=17.145913616952964, kind="loud-crash", arg=3473, until=None),
        Fault(at=20.325064640965625, kind="crash", arg=256, until=None),
        Fault(at=21.80859092595955, kind="crash", arg=20, until=23.063335999659497),
        Fault(at=21.9154000822176, kind="crash", arg=198002, until=None),
        Fault(at=22.155892203443422, kind="add", arg=3, until=None),
        Fault(at=23.23957810178047, kind="loud-crash", arg=10763, until=None),
        Fault(at=29.29974316293578, kind="add", arg=3, until=None),
        Fault(at=29.999999999999996, kind="add", arg=4, until=None),
        Fault(at=30.0, kind="loud-crash", arg=169, until=56.75294114150037),
    ),
    partition=(29.061264075981757, 68.06126407598175, 0.21690418282762483),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.02
    ),
    confirm=True,
)
