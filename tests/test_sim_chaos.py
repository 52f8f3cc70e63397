"""Hypothesis-driven chaos over the simulator: random small networks, several streams
published throughout, and a random schedule of faults; afterwards, one sound tree per
stream and every acknowledged packet delivered exactly once, in order, to every subscriber
that stayed subscribed.

A scenario (``Scenario``, drawn by ``scenarios``) is 20-60 nodes, 2-3 streams with a few
subscribers each and two publishers each, publishing for ``PUBLISH_FOR`` virtual seconds
from ``PUBLISH_AT``; while they publish, faults strike at random times:

* crashes, silent (noticed by liveness) or not, of up to 30% of the nodes, every stream's
  root among the candidates; some of the crashed nodes restart later (new boot id, no
  state: their clients died with them and are not owed anything);
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
If a root on the side numbers anything while cut off (``_Cut``), that side had a publisher
after all: its subscribers are owed nothing, two acknowledgements of one number are
expected, and every other check still applies.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

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


@st.composite
def scenarios(draw: st.DrawFn, max_nodes: int = 60) -> Scenario:
    nodes = draw(st.integers(20, max_nodes))
    when = st.floats(0.0, PUBLISH_FOR, allow_nan=False)
    faults: list[Fault] = []
    for _ in range(draw(st.integers(0, int(0.3 * nodes)))):
        at = draw(when)
        restart = draw(st.one_of(st.none(), st.floats(1.0, 40.0)))
        kind = draw(st.sampled_from(["crash", "loud-crash"]))
        rank = draw(st.integers(0, 10**6))
        faults.append(Fault(at, kind, rank, None if restart is None else at + restart))
    for _ in range(draw(st.integers(0, 3))):
        faults.append(Fault(draw(when), "add", draw(st.integers(2, 6))))
    if draw(st.booleans()):
        at = draw(when)
        faults.append(Fault(at, "weather", until=at + draw(st.floats(1.0, 20.0))))
    partition = None
    if draw(st.booleans()):
        at = draw(when)
        partition = (at, at + draw(st.floats(1.0, 40.0)), draw(st.floats(0.1, 0.4)))
    weather = NetworkModel(
        drop=draw(st.sampled_from([0.0, 0.002, 0.01])),
        duplicate=draw(st.sampled_from([0.0, 0.01, 0.05])),
        jitter=draw(st.sampled_from([0.0, 0.02, 0.2])),
    )
    return Scenario(
        seed=draw(st.integers(0, 2**32)),
        nodes=nodes,
        streams=draw(st.integers(2, 3)),
        subscribers=draw(st.integers(2, 6)),
        faults=tuple(sorted(faults, key=lambda f: f.at)),
        partition=partition,
        weather=weather,
    )


@dataclass(slots=True)
class Outcome:
    sim: Simulator
    log: DeliveryLog
    keys: list[bytes]
    subscribers: list[tuple[int, int, bytes]]  # (node, client, key) of those still up
    quiet: bool
    # The partitioned side, if a root there numbered packets while it was cut off (see the
    # docstring): its subscribers are owed nothing; everything else is checked.
    apart: frozenset[int] = frozenset()


def run(scenario: Scenario) -> Outcome:
    """Play ``scenario``: subscribe, publish with faults, then run until quiet (bounded)."""
    sim = Simulator(SimConfig(nodes=scenario.nodes, degree=6, seed=scenario.seed, node=NODE))
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
    cut = _Cut(sim)
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
    quiet = _run_quiet(sim, CONVERGE)
    stayed = [(n, c, k) for n, c, k in subs if n not in crashed]
    return Outcome(sim, log, keys, stayed, quiet, frozenset(cut.numbered))


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
    """The scenario's partition, and whether the side cut off numbered packets meanwhile."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.side: set[int] = set()
        self.numbered: set[int] = set()
        self._before = 0

    def start(self, side: set[int], pubs: list[int]) -> None:
        """Partition ``side`` off, unless crashes since the draw mean the cut would now
        split the publishers (then the partition does not happen)."""
        if _together(self.sim, pubs, side):
            self.side = side
            self._before = self._ordered()
            self.sim.partition(side)

    def heal(self) -> None:
        # No publisher is on the side, but a publish already on its way there when the cut
        # came (waiting at a restarting relay, say) may reach a root there, which numbers
        # it as the other side's root numbers its own: publishers on both sides after all.
        if self.side and self._ordered() > self._before:
            self.numbered = self.side
        self.sim.heal()

    def _ordered(self) -> int:
        return sum(self.sim.nodes[i].stats.published for i in self.side)


def _run_quiet(sim: Simulator, within: float) -> bool:
    """Run until no live node has work and no protocol message moved for a while (longer
    than a root's probe interval: a probe may still find a split); False if that does not
    happen within ``within`` virtual seconds."""
    limit = sim.now + within
    margin = max(sim.config.reconnect_delay + 1.0, NODE.probe_interval + BEAT)
    while sim.now < limit:
        sim.run(until=sim.now + margin)
        idle = not any(node.busy() for i, node in enumerate(sim.nodes) if sim.alive[i])
        if idle and sim.last_message_at <= sim.now - margin:
            return True
    return False


def failures(outcome: Outcome) -> list[str]:
    """Everything the issue's guarantees say must not be, as text."""
    sim, log = outcome.sim, outcome.log
    found: list[str] = []
    if not outcome.quiet:
        found.append("the network did not get quiet")
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    found += violations(shapes.values())
    for node, client, key in outcome.subscribers:
        stream = sim.nodes[node].streams.get(key)
        if stream is None or client not in stream.local:
            found.append(f"node {node} client {client}: no longer subscribed")
        shape = shapes.get(key)
        if shape is None or node not in shape.depth:
            found.append(f"node {node}: not in the tree of {key.hex()[:8]}")
    # Cut off and numbering, the side's root gave the numbers the other side's root gave
    # too: its publishes' acknowledgements, arriving at the heal, name those numbers again.
    apart = tuple(f"node {node} client " for node in outcome.apart)
    conflicts = set(log.conflicts) if outcome.apart else set()
    found += [
        p for p in log.problems(complete=False) if not p.startswith(apart) and p not in conflicts
    ]
    for node, client, key in outcome.subscribers:
        if node in outcome.apart:
            continue
        sub = log.subs[(node, client)]
        got = set(sub.numbers)
        missing = sorted(n for n in log.truth.get(key, {}) if n not in got)
        if missing:
            found.append(f"node {node} client {client}: never got acked {missing[:10]}")
        if len(got) != len(sub.numbers):
            found.append(f"node {node} client {client}: duplicates")
    return found


CHAOS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    database=None,  # the same examples every run: none replayed from an earlier failure
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.log.acks, "nothing was acknowledged: the scenario tested nothing"
    assert failures(outcome) == []


# Open (issue 4): the search still finds scenarios that break a guarantee (10 of one fixed
# set of 300 at the last count): two roots numbering in one connected part of the network
# when greedy routing from each found no closer node, and surviving subscribers missing
# acknowledged packets held only by a leaf of a sibling branch (see the README). The simulation is
# deterministic (checked across hash seeds and replays), so which scenarios a run draws is
# hypothesis's affair. The property runs, in CI too, as an expected failure: not strict,
# since a given run may draw no failing scenario. Failing examples whose cause was found and
# fixed are strict regression tests below. Shrinking is off: it takes minutes.
@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason="open: chaos still breaks a guarantee (issue 4)")
@settings(CHAOS, max_examples=100, phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(scenarios())
def test_chaos_keeps_one_tree_and_loses_no_acknowledged_packet(scenario: Scenario) -> None:
    _check(scenario)


# --- regressions: examples the search found, fixed in the core ----------------------------------


def test_relay_that_loses_its_parent_before_the_first_packet_resumes_at_the_start() -> None:
    # Node 21 relayed node 8's path to the root, and 8 relayed node 9's; 21 died silently as
    # publishing began. 8 had no packet yet and resubscribed with last_seen None ("start
    # anywhere"), so its new parent, at packet 5 by then, sent it packets from 6 on and 9 was
    # told 0..5 were missed, although the tree held them all. A relay now resumes where its
    # fresh join placed it (``Stream.start``).
    scenario = Scenario(seed=369, nodes=25, streams=2, subscribers=2, faults=(CRASH_21,))
    outcome = run(scenario)
    assert outcome.log.acks and failures(outcome) == []


CRASH_21 = Fault(at=0.0, kind="crash", arg=11371)


def test_restarting_node_that_relayed_a_success_gets_what_its_parent_sent_before() -> None:
    # Root 10 died; nodes 5 and 18, both its children, restarted. 18's resubscribe went
    # through 5 (detached, so routing it on) to 16, which had just joined at packet 16:
    # 16 adopted 5 for 18's search, forwarded packet 17 to it, and 5 (not yet attached,
    # so not 16's child in its own eyes) dropped it. 5's own resubscribe then succeeded at
    # 16, which skipped its catch-up because 5 was listed already, and 18 was told 17 was
    # missed. A resubscribe is now caught up even from a parent that lists its sender.
    faults = (
        Fault(at=0.0, kind="crash", arg=794),
        Fault(at=18.0625, kind="crash", arg=0),
        Fault(at=19.0, kind="crash", arg=0),
    )
    outcome = run(Scenario(seed=369, nodes=25, streams=2, subscribers=2, faults=faults))
    assert outcome.log.acks and failures(outcome) == []


def test_detached_relay_does_not_answer_a_search_it_could_not_accept() -> None:
    # Root 9 died; 15 and 12 restarted its two subtrees. 12's resubscribe (must-beat 12,
    # closer than 15) passed node 0, in 15's detached subtree, which rightly routed it on
    # (race 3), to a node just added, which became a new root. On the success coming back
    # 0 answered 12's search itself, hanging 12's subtree below 15's; 15's own search then
    # found 12's subtree: a cycle with no root, publishes bouncing round it for ever.
    faults = (
        Fault(at=0.0, kind="crash", arg=194),
        Fault(at=0.0, kind="crash", arg=11371),
        Fault(at=0.0, kind="add", arg=2),
        Fault(at=1.0, kind="crash", arg=0),
    )
    outcome = run(Scenario(seed=0, nodes=25, streams=2, subscribers=6, faults=faults))
    assert outcome.log.acks and failures(outcome) == []


def test_root_whose_child_left_during_its_look_looks_again() -> None:
    # Both roots died; node 3 became root, with 13 (closer to the key) below it through
    # node 1. 3's look labelled 13's subtree, then 1 died: 13's subtree, refusing 3's look
    # (its label), restarted and made 13 a root; 13's own look, routing toward the key,
    # never came near 3. Two roots numbered from 0 (packets 0..12 ordered twice).
    faults = (
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=13.0, kind="crash", arg=97),
    )
    outcome = run(Scenario(seed=0, nodes=20, streams=2, subscribers=2, faults=faults))
    assert outcome.log.acks and failures(outcome) == []


def test_root_that_loses_a_child_looks_for_the_tree_its_subtree_makes() -> None:
    # As above, but node 1 died after 3's look had ended: 3 had no look to repeat, 13
    # became a root of its own and never found 3, and both numbered the same numbers.
    faults = (
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=15.0, kind="crash", arg=97),
    )
    outcome = run(Scenario(seed=0, nodes=20, streams=2, subscribers=2, faults=faults))
    assert outcome.log.acks and failures(outcome) == []


def test_frames_held_back_by_a_short_partition_arrive_when_it_heals() -> None:
    # A partition healed before liveness noticed it used to lose the frames sent across it
    # while the links stayed up: a TCP link that silently skips frames, which no real link
    # does and the protocol rightly does not expect (packet 0 never reached node 0). The
    # simulator now holds them back and delivers them, in order, at the heal.
    scenario = Scenario(seed=0, nodes=20, streams=3, subscribers=2, partition=(0.0, 1.0, 0.3125))
    outcome = run(scenario)
    assert outcome.log.acks and failures(outcome) == []


def test_relay_that_joined_an_empty_tree_through_a_resubscribe_resumes_at_its_start() -> None:
    # Node 4 joined as the relay of a resubscribe that asked for everything (last_seen -1)
    # while the tree had no packet yet, so it kept no start point; when its parent 16 died
    # it resubscribed with last_seen None and its subtree was told 0..21 were missed.
    faults = (Fault(at=0.0, kind="crash", arg=0), Fault(at=13.0, kind="crash", arg=1))
    outcome = run(Scenario(seed=1, nodes=20, streams=2, subscribers=2, faults=faults))
    assert outcome.log.acks and failures(outcome) == []


def test_a_split_that_outlived_its_looks_is_found_by_a_probe_and_merged() -> None:
    # Node 32, added with few links, was root of one tree; node 13, farther from the key,
    # of another, after the partition healed. Nothing looked again: without probes both
    # stayed roots. With probes 13 found 32, but its look's search never did (greedy
    # routing spent its budget inside 32's tree, whose members may not accept it). A
    # member that routes a resubscribe on now sends it up its own tree first, to its root,
    # which takes any. (``overlay.core.probes``; ``Node._up_the_tree``)
    outcome = run(SPLIT_AFTER_HEAL)
    assert outcome.log.acks and failures(outcome) == []


SPLIT_AFTER_HEAL = Scenario(
    seed=111284240,
    nodes=32,
    streams=2,
    subscribers=5,
    faults=(
        Fault(at=2.2250738585e-313, kind="add", arg=2, until=None),
        Fault(at=0.095, kind="crash", arg=40619, until=None),
        Fault(at=2.0, kind="loud-crash", arg=800, until=None),
        Fault(at=7.597450582341289, kind="loud-crash", arg=256, until=43.930462061712774),
        Fault(at=18.060798622270163, kind="loud-crash", arg=10932, until=None),
        Fault(at=24.18609976339652, kind="add", arg=6, until=None),
        Fault(at=26.63523104629626, kind="add", arg=4, until=None),
        Fault(at=30.0, kind="loud-crash", arg=443, until=59.5320110947961),
    ),
    partition=(0.0, 35.879006942049664, 0.36145714518146455),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.02
    ),
)


def test_a_look_whose_search_vanished_ends_and_numbering_resumes() -> None:
    # Node 14, root, looked again; its search ended without reporting back, and the root
    # held numbering for ever (its publishers' packets bounced, the network never quiet).
    # A look with neither confirmations nor a search outstanding now counts as found
    # nothing (``Merges._look_first``).
    outcome = run(LOST_LOOK)
    assert outcome.log.acks and failures(outcome) == []


LOST_LOOK = Scenario(
    seed=2147483647,
    nodes=21,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=5e-324, kind="loud-crash", arg=367, until=14.86172566539781),
        Fault(at=2.3309691339405844e-105, kind="crash", arg=2215, until=17.134395136989387),
        Fault(at=2.220446049250313e-16, kind="weather", arg=0, until=3.766611785767645),
        Fault(at=3.529216559733988e-10, kind="loud-crash", arg=291, until=15.000000000352921),
        Fault(at=1.1133341697940138, kind="crash", arg=3473, until=3.1058751890138696),
        Fault(at=2.7586150150764226, kind="crash", arg=35106, until=6.810468965714282),
        Fault(at=3.947430966906594, kind="loud-crash", arg=8192, until=37.254075427677215),
    ),
    partition=(0.4808250002688742, 1.5808250002688742, 0.33920652572765353),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.01, jitter=0.0
    ),
)


def test_a_root_that_dies_before_a_child_holds_its_packet_showed_it_to_nobody() -> None:
    # Root 1 numbered a child's publish as packet 20, showed it to its own subscriber and
    # died 21 ms later, before any child had it; root 23 then gave 20 to another publish.
    # A root now shows its own clients only what a child holds (``overlay.core.commits``).
    outcome = run(ROOT_DIES_FIRST)
    assert outcome.log.acks and failures(outcome) == []


ROOT_DIES_FIRST = Scenario(
    seed=3127,
    nodes=39,
    streams=2,
    subscribers=6,
    faults=(
        Fault(at=4.708190458798927, kind="loud-crash", arg=2388, until=None),
        Fault(at=7.733383893698173, kind="loud-crash", arg=230, until=32.372228926819766),
        Fault(at=8.947211190022445, kind="add", arg=3, until=None),
        Fault(at=20.54453593604149, kind="loud-crash", arg=462, until=None),
    ),
    weather=NetworkModel(jitter=0.2),
)


def test_a_root_made_by_a_resubscribe_gets_the_past_it_never_had() -> None:
    # The root was cut off; node 12, holding nothing of the stream, became root through a
    # resubscribe that had seen up to 22, and told a later one (seen up to 13) that 14..22
    # were missed, though the first held them. It now takes them from below first
    # (``PacketFlow._backfill``).
    outcome = run(ROOT_WITHOUT_PAST)
    assert outcome.log.acks and failures(outcome) == []


ROOT_WITHOUT_PAST = Scenario(
    seed=326,
    nodes=28,
    streams=3,
    subscribers=4,
    faults=(
        Fault(at=0.9101860294883137, kind="add", arg=4, until=None),
        Fault(at=3.080852869213407, kind="crash", arg=12472, until=None),
        Fault(at=4.368390904947311, kind="loud-crash", arg=1490, until=6.368390904947311),
        Fault(at=16.427269475945963, kind="crash", arg=23622, until=None),
    ),
    partition=(22.678792376583328, 51.76490010038171, 0.21525761169751237),
    weather=NetworkModel(drop=0.01, duplicate=0.05),
)


def test_a_side_that_was_cut_off_gets_what_the_other_side_numbered_at_the_merge() -> None:
    # The stream's closest nodes were cut off: node 16 became root there and numbered
    # nothing, while node 6 became root of the other side and numbered 0..14. At the heal a
    # probe moved 6's tree under 16, which took 0..14 as the past it never had and kept
    # them to itself: node 18, subscribed on the cut side throughout, never got them. A
    # root whose tree had nothing now takes a merging tree's past as holes to fill and
    # sends it down every branch (``Takeover.reported``).
    outcome = run(CUT_SIDE_NEVER_CAUGHT_UP)
    assert outcome.log.acks and failures(outcome) == []


CUT_SIDE_NEVER_CAUGHT_UP = Scenario(
    seed=1768,
    nodes=30,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=1000000, until=None),
        Fault(at=3.491604383848087e-143, kind="crash", arg=471, until=None),
        Fault(at=4.998891883292696, kind="loud-crash", arg=905, until=35.37603337825068),
        Fault(at=10.0, kind="crash", arg=8192, until=None),
        Fault(at=11.428289587572545, kind="loud-crash", arg=34762, until=24.114442221191382),
        Fault(at=26.880855204887617, kind="crash", arg=317321, until=44.131111669423),
    ),
    partition=(10.515874356466039, 45.54990429953432, 0.3215219666541925),
    weather=NetworkModel(drop=0.002, jitter=0.02),
)


def test_a_child_that_routed_a_restart_through_its_parent_is_not_orphaned() -> None:
    # Node 14 routed its restarting ancestor's resubscribe to its own parent 23, which
    # routed it out of the subtree and reparented; 14 took the success as "found the tree
    # through 23" and left its old parent, 23 itself. 23 dropped it, and 14 named 23 its
    # parent for ever, every publish refused there: the network never got quiet.
    outcome = run(ORPHANED_BY_ITS_PARENT)
    assert outcome.log.acks and failures(outcome) == []


ORPHANED_BY_ITS_PARENT = Scenario(
    seed=2526,
    nodes=23,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=0.005, kind="loud-crash", arg=1000000, until=34.89542460049296),
        Fault(at=2.0935060768417695, kind="weather", arg=0, until=19.51763829029288),
        Fault(at=5.013408422936599, kind="add", arg=5, until=None),
        Fault(at=11.332229148979838, kind="loud-crash", arg=265, until=46.64621857907673),
        Fault(at=13.39988563474871, kind="loud-crash", arg=93, until=None),
        Fault(at=21.613563169848163, kind="crash", arg=3219, until=None),
        Fault(at=29.79224219205983, kind="crash", arg=40631, until=None),
    ),
    partition=(3.252799484799971e-63, 2.0, 0.15760647851846576),
    weather=NetworkModel(drop=0.002, duplicate=0.05, jitter=0.02),
)


def test_a_restarted_root_whose_client_publishes_at_once_joins_the_tree_it_left() -> None:
    # Node 1, closest to the key, came back with no link up yet and its client published:
    # its search ended at once, it numbered the publish 0 as root of a tree of one, and
    # the tree that had numbered 0..14 meanwhile merged into it. Its search now waits.
    outcome = run(RESTARTED_ROOT_ALONE)
    assert outcome.log.acks and failures(outcome) == []


RESTARTED_ROOT_ALONE = Scenario(
    seed=128060,
    nodes=25,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=7.697174719289453e-205, kind="crash", arg=2088, until=29.587760012232227),
        Fault(at=1.5820970989372628e-204, kind="crash", arg=14654, until=9.385579175623988),
        Fault(at=6.103515625e-05, kind="loud-crash", arg=51, until=None),
        Fault(at=0.7658261407262648, kind="crash", arg=244, until=2.6658261407262644),
        Fault(at=0.99999, kind="crash", arg=62, until=None),
        Fault(at=3.514441266449407, kind="add", arg=5, until=None),
        Fault(at=5.0, kind="add", arg=6, until=None),
        Fault(at=17.291285900088415, kind="crash", arg=4522, until=None),
        Fault(at=26.264253388731895, kind="crash", arg=173, until=None),
        Fault(at=28.34564024487689, kind="add", arg=6, until=None),
    ),
    partition=None,
    weather=NetworkModel(drop=0.01, duplicate=0.05),
)


def test_a_new_root_made_by_a_restarts_search_gets_the_past_from_its_origin() -> None:
    # The old root 7 came back and became a new root through root 25's look, relayed by
    # node 32, which had joined after packet 24 and reparented to 7. 32 told the look's
    # origin "24", its own head, so 25 pushed nothing up, and packet 24, held only in 25's
    # old tree, was reported missed to the subscribers that joined 7's. 32 now says "new
    # root" on, and 25 pushes all it holds.
    outcome = run(NEW_ROOT_WITHOUT_PAST)
    assert outcome.log.acks and failures(outcome) == []


NEW_ROOT_WITHOUT_PAST = Scenario(
    seed=177,
    nodes=35,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=8.606935755357261, kind="crash", arg=692, until=None),
        Fault(at=23.629200593527603, kind="crash", arg=2647, until=46.51500838415587),
        Fault(at=23.74144032936996, kind="loud-crash", arg=1202, until=62.741440329369965),
        Fault(at=25.63557414921047, kind="loud-crash", arg=0, until=36.63600567550261),
        Fault(at=27.07444585101603, kind="crash", arg=4395, until=50.321710873562964),
    ),
    partition=(25.86959383087589, 56.54050221203377, 0.20721713840803685),
    weather=NetworkModel(drop=0.01),
)
