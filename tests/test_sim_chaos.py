"""Hypothesis-driven chaos over the simulator: random small networks, several streams
published throughout, and a random schedule of faults; afterwards, one sound tree per
stream and every acknowledged packet delivered exactly once, in order, to every subscriber
that stayed subscribed.

A scenario (``Scenario``, drawn by ``draw_scenario`` from a named seed) is 20-60 nodes,
2-3 streams with a few subscribers each and two publishers each, publishing for
``PUBLISH_FOR`` virtual seconds from ``PUBLISH_AT``; while they publish, faults strike at
random times:

* crashes, silent (noticed by liveness) or not, of up to 30% of the nodes, every stream's
  root among the candidates; some of the crashed nodes restart later (new boot id, no
  stream state but what their disk remembers of each stream's numbering: their clients
  died with them and are not owed anything);
* nodes added, each linked to a few random peers (a closer one takes a tree over);
* a partition of a random minority, healed later (before or after liveness notices);
* a spell of bad weather: frames dropped (which breaks the link; it redials, as TCP does),
  duplicated and jittered.

Then the network is given a bounded time to get quiet, and the checks are the issue's:
every tree invariant (``testnet.sim.invariants``), exactly one root per stream, every
surviving subscriber a member, and ``testnet.sim.deliveries`` finds nothing wrong with
what any subscriber got and no acknowledged packet missing at one that stayed up. The
catch-up window (1024 packets) holds every packet of a run, so no repair may fall outside
it.

Restriction, and why: the minority side of a partition has no publisher, the rest stays in
one piece, and no crash cuts a publisher off the others (``_together``). A partition that
outlives liveness gives each side a root, and two roots that both number packets give one
number to two packets; nothing reconciles that when they meet again (the protocol numbers
at one root, a total order; see ``overlay.core.merges``). With no publishing on the
minority side the old numbering stays the only one, and the sides must merge into one tree
once healed. One thing the draw cannot rule out: a publish already on its way into the
side when the cut comes (held at a relay that was restarting) can still reach a root there.
If a root on the side gives such a publish a number of its own while cut off (``_Cut``),
the side had a publisher after all, and the numbers it gave may stand for two packets: the
checks pass over those numbers of that stream (two acknowledgements of one, a subscriber
shown the other packet under it), and hold everyone to everything else. A side root that
only took back packets its subtree pushed up numbered nothing twice: they were numbered
before the cut, so nothing is passed over. Crashes can cut nodes off too, for good:
a node whose every peer died has no way back (the simulator's links are fixed). Such nodes
(``_isolated``, counted once the faults are over) are a network of their own: their trees
are not checked, their subscribers are owed nothing, and a search they hold, waiting for a
peer, does not count against quiet (unless it is for a stream the node left).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
from dataclasses import dataclass, field

import pytest

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


def fingerprint(scenarios: list[Scenario]) -> str:
    """A digest of what ``scenarios`` are, to tell whether a sample changed."""
    return hashlib.sha256("\n".join(map(repr, scenarios)).encode()).hexdigest()[:16]


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
    sim = Simulator(SimConfig(nodes=scenario.nodes, degree=6, seed=scenario.seed, node=node))
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
    crash can cut a subscriber's node off as a partition can, and for ever (chaos seed 0:
    all five peers of one node died). Everyone outside the largest group of nodes that
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
        self.taken_back = 0  # packets pushed up that the side's roots took back while cut off
        self._numbered = self._published = 0
        self._held: set[tuple[bytes, int, int | None]] = set()

    def start(self, side: set[int], pubs: list[int]) -> None:
        """Partition ``side`` off, unless crashes since the draw mean the cut would now
        split the publishers (then the partition does not happen)."""
        if _together(self.sim, pubs, side):
            self.side = side
            self._numbered = self._fresh()
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
        self.taken_back = published - self._published - (self._fresh() - self._numbered)
        if self.side and self._fresh() > self._numbered:
            contested: dict[bytes, set[int]] = {}
            for key, number, _ in self._packets() - self._held:
                contested.setdefault(key, set()).add(number)
            self.contested = {key: frozenset(numbers) for key, numbers in contested.items()}
        self.sim.heal()

    def _fresh(self) -> int:
        """Publishes the side's roots have given numbers of their own (not pushes taken)."""
        return sum(self.sim.nodes[i].stats.numbered for i in self.side)

    def _packets(self) -> set[tuple[bytes, int, int | None]]:
        """(stream, number, uid) of every packet a node on the side holds in its window or
        has given a number as a root (its uid table: pending ones too)."""
        found: set[tuple[bytes, int, int | None]] = set()
        for i in sorted(self.side):
            for key, stream in self.sim.nodes[i].streams.items():
                found.update((key, n, packet.uid) for n, packet in stream.window.packets.items())
                if stream.uids is None:
                    continue
                for uid, published in self.log.published.items():
                    number = stream.uids.get(uid) if published[0] == key else None
                    if number is not None:
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


def test_a_side_root_that_only_took_back_pushed_packets_is_held_to_every_packet() -> None:
    """A partition cuts 12 of 30 nodes off 5 s into publishing, for 20 s. Liveness makes a
    root on the side; a member there pushes up a packet numbered before the cut, which the
    root takes back. No publish reaches the side, so it numbers none of its own: no number
    there can stand for two packets, and every subscriber on the side is held to every
    acknowledged packet like the rest."""
    scenario = Scenario(seed=2, nodes=30, streams=2, subscribers=4, partition=(5.0, 25.0, 0.4))
    outcome = run(scenario)
    cut = outcome.cut
    assert cut is not None and cut.taken_back > 0
    assert cut.contested == {}
    assert any(node in cut.side for node, _, _ in outcome.subscribers)
    assert outcome.log.acks and failures(outcome) == []


def _check(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.log.acks, "nothing was acknowledged: the scenario tested nothing"
    assert failures(outcome) == []


# The property over a fixed sample: the same 200 scenarios every run, each of which must
# keep every guarantee. They are drawn from named seeds, not by hypothesis, whose draws
# took literals from every module a run had imported (its local constants): importing one
# more module changed which scenarios a derandomized sample held. A change to
# ``draw_scenario`` draws another sample (``SAMPLE_FINGERPRINTS`` says so). The property is
# not proven by it: wider hunts may still draw scenarios that break it
# (``tests/hunt_chaos.py`` draws thousands more). Failing examples
# whose cause was found and fixed are strict regression tests in test_sim_chaos_found.py
# and its siblings.
SAMPLE = sample("chaos", 200)
# Its own sample with ``confirm_publishes`` off. Besides the causes above, that mode meets
# a race that confirmation closes: a packet numbered just as a partition begins, whose
# number the other side's new root gives to another publish (README, Known limits).
SAMPLE_OFF = [dataclasses.replace(s, confirm=False) for s in sample("chaos-off", 200)]
SAMPLE_FINGERPRINTS = {"chaos": "b3ca7ca66f1fccc7", "chaos-off": "14acfee46a925242"}


def test_the_fixed_samples_are_the_same_whatever_a_run_imported() -> None:
    # The simulator's command line holds literals (10_000 among them) that changed
    # hypothesis's draws once imported; the samples must not move with it.
    import testnet.sim.__main__  # noqa: F401

    assert fingerprint(sample("chaos", 200)) == fingerprint(SAMPLE)
    assert fingerprint(SAMPLE) == SAMPLE_FINGERPRINTS["chaos"]
    assert fingerprint(sample("chaos-off", 200)) == SAMPLE_FINGERPRINTS["chaos-off"]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SAMPLE, ids=[f"chaos-{i}" for i in range(len(SAMPLE))])
def test_chaos_keeps_one_tree_and_loses_no_acknowledged_packet(scenario: Scenario) -> None:
    _check(scenario)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SAMPLE_OFF, ids=[f"chaos-off-{i}" for i in range(200)])
def test_chaos_without_confirmed_publishes_keeps_the_same_guarantees(scenario: Scenario) -> None:
    _check(scenario)
