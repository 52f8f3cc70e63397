"""The simulator's fault primitives: crash (silent or not), restart, add_node, partition and
heal, a lost frame breaking its link, and ``run()`` returning once the network is quiet.

Small networks (30 nodes) on the default latencies; every time is virtual. A run that should
get quiet is driven through ``run_quiet``, which gives up after a bounded virtual time instead
of hanging the suite when it does not (a tree that never settles keeps messages flowing).
"""

from __future__ import annotations

import pytest

from overlay.core.config import NodeConfig
from overlay.core.events import PublishAcked, Subscribed
from overlay.core.streams import State
from testnet.sim.invariants import check_all, violations
from testnet.sim.network import NetworkModel
from testnet.sim.simulator import UPKEEP, SimConfig, Simulator
from testnet.sim.workload import stream_keys

NODE = NodeConfig()
BEAT = NODE.heartbeat_interval
DEAD = NODE.dead_after
SILENCE = DEAD + BEAT  # a silent peer is dropped within this of its last message
KEY = stream_keys(1)[0]
SUBSCRIBERS = (3, 8, 11, 17, 25)


def small(seed: int = 1) -> Simulator:
    return Simulator(SimConfig(nodes=30, degree=6, seed=seed))


def quiet(sim: Simulator) -> bool:
    """No live node has work pending, no protocol message (heartbeats aside) is in flight,
    and none arrived for longer than a redial takes."""
    margin = sim.config.reconnect_delay + 1.0
    idle = not any(node.busy() for i, node in enumerate(sim.nodes) if sim.alive[i])
    return idle and not sim.in_flight and sim.last_message_at <= sim.now - margin


def run_quiet(sim: Simulator, within: float = 120.0) -> None:
    """``sim.run()``, but failing instead of hanging the suite if the network is not quiet
    within ``within`` virtual seconds (a tree that never settles keeps messages flowing)."""
    limit = sim.now + within
    while True:
        sim.run(until=sim.now + sim.config.reconnect_delay + 1.0)
        if quiet(sim):
            break
        if sim.now >= limit:
            shapes = check_all(sim.nodes, sim.alive, sim.index)
            pytest.fail(
                f"not quiet after {within} s (t={sim.now:.1f}); last protocol message at "
                f"{sim.last_message_at:.2f}; tree violations: {violations(shapes.values())}"
            )
    at = sim.now
    sim.run()
    assert sim.now == at  # quiet: run() has nothing left to wait for


def subscribed(sim: Simulator, subscribers: tuple[int, ...] = SUBSCRIBERS) -> Simulator:
    for i in subscribers:
        sim.subscribe(i, KEY, 1)
    run_quiet(sim)
    for i in subscribers:
        assert [type(e) for _, e in sim.events_for(i, 1)] == [Subscribed], i
    return sim


def roots(sim: Simulator, key: bytes = KEY) -> list[int]:
    return [
        i
        for i, node in enumerate(sim.nodes)
        if sim.alive[i] and (s := node.streams.get(key)) is not None and s.state is State.ROOT
    ]


def members(sim: Simulator, key: bytes = KEY) -> list[int]:
    return [i for i, node in enumerate(sim.nodes) if sim.alive[i] and key in node.streams]


def knows(sim: Simulator, a: int, b: int) -> bool:
    """Whether node ``a`` has ``b`` among its connected peers."""
    return sim.ids[b] in sim.nodes[a].peers


def sound(sim: Simulator, subscribers: tuple[int, ...]) -> None:
    """Every tree passes the checker, and every live subscriber is in the single tree."""
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    assert violations(shapes.values()) == []
    [root] = roots(sim)
    shape = shapes[KEY]
    assert shape.root == root
    for i in subscribers:
        if sim.alive[i]:
            stream = sim.nodes[i].streams.get(KEY)
            assert stream is not None and 1 in stream.local, i
            assert stream.state in (State.JOINED, State.ROOT) and i in shape.depth, i


# --- run() to quiet ------------------------------------------------------------------------------


def test_run_returns_once_quiet_although_heartbeats_never_stop() -> None:
    sim = small()
    sim.run()
    assert sim.now == 0.0  # nothing to do at all: returns at once
    for i in SUBSCRIBERS:
        sim.subscribe(i, KEY, 1)
    sim.run()
    settled = sim.now
    for i in SUBSCRIBERS:
        assert [type(e) for _, e in sim.events_for(i, 1)] == [Subscribed], i
    # The subscribes took a few latencies and the searches, not a heartbeat-driven eternity.
    assert 0.0 < settled < 10.0
    assert all(node.next_deadline() is not None for node in sim.nodes)  # rounds still armed
    sim.run()
    assert sim.now == settled
    # Left alone for a minute the network only beats, and its one root probes now and then
    # (finding no other root); run() is then quiet at once again.
    beats, probes = sim.sent["Heartbeat"], sim.sent["RootProbe"]
    other = sum(sim.sent.values()) - sum(sim.sent[cls.__name__] for cls in UPKEEP)
    sim.run(until=settled + 60.0)
    assert sim.now == settled + 60.0
    assert sim.sent["Heartbeat"] > beats + 30 * 60 / BEAT  # every node beat every round
    assert sim.sent["RootProbe"] >= probes + 60 // NODE.probe_interval
    assert sum(sim.sent.values()) - sum(sim.sent[cls.__name__] for cls in UPKEEP) == other
    sim.run()
    assert sim.now == settled + 60.0
    sound(sim, SUBSCRIBERS)


def test_run_does_not_return_while_a_search_is_on_its_way() -> None:
    sim = small(seed=2)
    sim.subscribe(4, KEY, 1)
    assert sim.events_for(4, 1) == []  # the search has only just left
    sim.run()
    assert [type(e) for _, e in sim.events_for(4, 1)] == [Subscribed]
    assert not any(node.routes for node in sim.nodes)


# --- crash ---------------------------------------------------------------------------------------


def best_linked(sim: Simulator) -> int:
    return max(range(len(sim.nodes)), key=lambda i: (len(sim.links[i]), -i))


def test_silent_crash_is_noticed_by_liveness_within_dead_after_plus_an_interval() -> None:
    sim = subscribed(small())
    sim.run(until=sim.now + 7.3)  # mid-round: the crash time owes nothing to the beat
    victim = best_linked(sim)
    around = sorted(sim.links[victim])
    crashed_at = sim.now
    heard = {}
    for j in around:
        record = sim.nodes[j].peers.get(sim.ids[victim])
        assert record is not None
        heard[j] = record.heard
    dead_before = {j: sim.nodes[j].stats.dead_peers for j in around}
    sim.crash(victim, silent=True)
    assert all(knows(sim, j, victim) for j in around)  # nobody was told
    step = 0.25
    gone_by: dict[int, float] = {}
    for k in range(1, int(SILENCE / step) + 1):
        until = crashed_at + k * step
        sim.run(until=until)
        for j in around:
            if j not in gone_by and not knows(sim, j, victim):
                gone_by[j] = until
    assert sorted(gone_by) == around  # every neighbour dropped it, by crash + SILENCE
    for j in around:
        # Not before dead_after of silence after the last message it did hear.
        assert gone_by[j] > heard[j] + DEAD, (j, heard[j], gone_by[j])
        assert sim.nodes[j].stats.dead_peers == dead_before[j] + 1
    assert all(not sim.linked(victim, j) for j in around)


def test_crash_that_is_not_silent_is_noticed_at_once() -> None:
    sim = subscribed(small())
    victim = best_linked(sim)
    around = sorted(sim.links[victim])
    dead_before = sum(node.stats.dead_peers for node in sim.nodes)
    sim.crash(victim, silent=False)
    assert not any(knows(sim, j, victim) for j in around)
    assert not any(sim.linked(victim, j) for j in around)
    sim.run(until=sim.now + 2 * SILENCE)  # nobody dials a dead node back
    assert not any(knows(sim, j, victim) or sim.linked(victim, j) for j in around)
    assert sum(node.stats.dead_peers for node in sim.nodes) == dead_before  # not by liveness


@pytest.mark.parametrize("silent", [True, False])
def test_crashed_node_does_nothing_more(silent: bool) -> None:
    sim = subscribed(small())
    victim = best_linked(sim)
    node = sim.nodes[victim]
    peers, received, sent = len(node.peers), node.stats.received, node.stats.sent
    sim.crash(victim, silent=silent)
    # Not even its links closing: a killed process handles nothing (a dying root must not
    # number a publish as its links go down, nor its subscriber receive it).
    assert len(node.peers) == peers
    sim.run(until=sim.now + 2 * SILENCE)
    assert (node.stats.received, node.stats.sent) == (received, sent)
    assert not sim.alive[victim]


def test_client_calls_on_a_crashed_node_do_nothing_and_run_still_ends() -> None:
    # A publish scheduled before its node was killed must not run the dead core, which
    # would then count as busy for ever, so run() would never return.
    sim = subscribed(small())
    victim = SUBSCRIBERS[0]
    node = sim.nodes[victim]
    sim.crash(victim, silent=True)
    sent = node.stats.sent
    sim.publish(victim, KEY, 2, 1, b"after death")
    sim.subscribe(victim, stream_keys(2)[1], 3)
    sim.unsubscribe(victim, KEY, 1)
    assert node.stats.sent == sent and not node.busy()
    sim.run(until=sim.now + 2 * SILENCE)
    run_quiet(sim)


@pytest.mark.parametrize("silent", [True, False], ids=["silent", "sockets-closed"])
@pytest.mark.parametrize("seed", [1, 2, 6])
def test_crashed_root_is_replaced_and_survivors_form_one_tree(seed: int, silent: bool) -> None:
    sim = subscribed(small(seed))
    [root] = roots(sim)
    sim.run(until=sim.now + 3.0)
    crashed_at = sim.now
    sim.crash(root, silent=silent)
    sim.run(until=crashed_at + SILENCE + NODE.takeover_grace + 10.0)
    run_quiet(sim)
    [new_root] = roots(sim)
    assert new_root != root
    sound(sim, SUBSCRIBERS)
    survivors = [i for i in SUBSCRIBERS if i != root]
    shape = check_all(sim.nodes, sim.alive, sim.index)[KEY]
    assert set(survivors) <= set(shape.depth)


# --- restart -------------------------------------------------------------------------------------


def relay_member(sim: Simulator) -> int:
    """A member of KEY's tree that is neither its root nor a subscriber: it relays."""
    relays = [
        i
        for i in members(sim)
        if i not in SUBSCRIBERS and sim.nodes[i].streams[KEY].state is State.JOINED
    ]
    assert relays, "the tree has no relay node to restart"
    return relays[0]


@pytest.mark.parametrize("crash_first", [False, True], ids=["running", "after-silent-crash"])
def test_restart_comes_back_with_a_new_boot_id_and_no_streams(crash_first: bool) -> None:
    sim = subscribed(small())
    relay = relay_member(sim)
    old = sim.nodes[relay]
    around = sorted(sim.links[relay])
    if crash_first:
        sim.crash(relay, silent=True)
        sim.run(until=sim.now + 2.0)  # less than liveness needs: peers still hold it
        assert all(knows(sim, j, relay) for j in around)
    sim.restart(relay)
    node = sim.nodes[relay]
    assert node is not old and sim.alive[relay]
    assert node.boot_id != old.boot_id
    assert node.streams == {} and (node.id, node.location) == (old.id, old.location)
    assert all(sim.linked(relay, j) for j in around)  # dialled again at once
    run_quiet(sim)
    assert {p.id for p in node.peers} == {sim.ids[j] for j in around}
    for j in around:
        record = sim.nodes[j].peers.get(node.id)
        assert record is not None and record.boot_id == node.boot_id, j
    # Its old place in the tree is forgotten on both sides: the tree healed around it (or
    # through it, had a repair search taken it in afresh), and every link agrees.
    sound(sim, SUBSCRIBERS)


def test_restarted_subscriber_has_lost_its_subscription_and_can_subscribe_again() -> None:
    sim = subscribed(small())
    sim.restart(SUBSCRIBERS[0])
    run_quiet(sim)
    assert KEY not in sim.nodes[SUBSCRIBERS[0]].streams
    sound(sim, SUBSCRIBERS[1:])
    sim.subscribe(SUBSCRIBERS[0], KEY, 1)
    run_quiet(sim)
    assert [type(e) for _, e in sim.events_for(SUBSCRIBERS[0], 1)] == [Subscribed, Subscribed]
    sound(sim, SUBSCRIBERS)


def acked(sim: Simulator, i: int, client: int) -> list[int]:
    return [e.number for _, e in sim.events_for(i, client) if isinstance(e, PublishAcked)]


def test_restarted_root_publishing_before_its_links_are_up_joins_the_tree_it_left() -> None:
    # The old root, closest to the key, comes back and its client publishes at once. With
    # no peer up yet, a search ending there would number the publish 0 as root of a tree
    # of one, and the tree that numbered on meanwhile would merge into it: two publishes
    # acknowledged as packet 0. The search waits for its first peer.
    sim = subscribed(small())
    [root] = roots(sim)
    publisher = next(i for i in SUBSCRIBERS if i != root)
    for uid in range(1, 4):
        sim.publish(publisher, KEY, 2, uid, b"before")
    run_quiet(sim)
    sim.crash(root, silent=True)
    sim.run(until=sim.now + SILENCE + NODE.takeover_grace + 10.0)
    for uid in range(4, 6):
        sim.publish(publisher, KEY, 2, uid, b"during")
    run_quiet(sim)
    assert acked(sim, publisher, 2) == [0, 1, 2, 3, 4] and root not in roots(sim)
    sim.restart(root)
    sim.subscribe(root, KEY, 1)
    sim.publish(root, KEY, 1, 6, b"back")
    run_quiet(sim)
    assert acked(sim, root, 1) == [5]
    sound(sim, (*SUBSCRIBERS, root))


# --- add_node ------------------------------------------------------------------------------------


def nearest(sim: Simulator, location: float, count: int) -> list[int]:
    def gap(i: int) -> float:
        d = abs(sim.locations[i] - location)
        return min(d, 1.0 - d)

    return sorted(range(len(sim.nodes)), key=gap)[:count]


def test_added_node_links_to_its_peers_and_its_subscribe_succeeds() -> None:
    sim = subscribed(small())
    peers = nearest(sim, 0.61, 3)
    new = sim.add_node(0.61, peers)
    assert new == 30 and len(sim.nodes) == len(sim.alive) == len(sim.ids) == 31
    assert sim.links[new] == set(peers) and all(new in sim.links[j] for j in peers)
    run_quiet(sim)
    node = sim.nodes[new]
    assert (node.id, node.location) == (sim.ids[new], 0.61) and sim.index[node.id] == new
    assert {p.id for p in node.peers} == {sim.ids[j] for j in peers}
    assert all(knows(sim, j, new) for j in peers)
    sim.subscribe(new, KEY, 1)
    run_quiet(sim)
    assert [type(e) for _, e in sim.events_for(new, 1)] == [Subscribed]
    sound(sim, (*SUBSCRIBERS, new))


def test_added_node_closest_to_a_key_becomes_its_root_for_searches_from_afar() -> None:
    """A key right at the new node's location: a search from the far side of the circle is
    routed to the new node, which the rest of the network met only through three links."""
    sim = small(seed=3)
    here = 0.61
    key = int(here * 2**64).to_bytes(8, "big") + bytes(24)
    new = sim.add_node(here, nearest(sim, here, 3))
    run_quiet(sim)
    far = nearest(sim, (here + 0.5) % 1.0, 1)[0]
    sim.subscribe(far, key, 1)
    run_quiet(sim)
    assert [type(e) for _, e in sim.events_for(far, 1)] == [Subscribed]
    assert roots(sim, key) == [new]
    assert violations(check_all(sim.nodes, sim.alive, sim.index).values()) == []


# --- partition and heal --------------------------------------------------------------------------


def halves(sim: Simulator) -> tuple[set[int], set[int]]:
    """The nodes on each half of the circle; each half is connected by its ring links."""
    side = {i for i, loc in enumerate(sim.locations) if loc < 0.5}
    return side, set(range(len(sim.nodes))) - side


def crossing(sim: Simulator, side: set[int]) -> list[tuple[int, int]]:
    return sorted((a, b) for a in side for b in sim.links[a] if b not in side)


def test_partition_stops_messages_across_and_heal_reopens_the_links() -> None:
    sim = subscribed(small())
    side, other = halves(sim)
    cut = crossing(sim, side)
    assert cut and side and other
    sim.run(until=sim.now + 2.3)
    cut_at = sim.now
    lost = sim.lost
    sim.partition(side)
    assert not any(sim.linked(a, b) for a, b in cut)
    assert all(sim.linked(a, b) for a in side for b in sim.links[a] if b in side)
    sim.run(until=cut_at + DEAD - 1.0)
    # Nothing crossed since the cut, not even what was on its way; the tries are held back
    # (the links are up at both ends: TCP would retransmit them after a heal).
    for a, b in cut:
        for x, y in ((a, b), (b, a)):
            record = sim.nodes[x].peers.get(sim.ids[y])
            assert record is not None and record.heard <= cut_at, (x, y)
    assert sim.lost == lost and sim.held_back() > 0
    sim.run(until=cut_at + SILENCE)
    for a, b in cut:  # liveness gave up on every link across...
        assert not knows(sim, a, b) and not knows(sim, b, a)
    assert sim.held_back() == 0  # ...and what they held back was lost with them
    for a in side:  # ...and on no other
        assert all(knows(sim, a, b) for b in sim.links[a] if b in side)
    sim.run(until=cut_at + SILENCE + 10.0)  # nor does anybody redial across the cut
    assert not any(knows(sim, a, b) or knows(sim, b, a) for a, b in cut)
    sim.heal()
    assert all(sim.linked(a, b) for a, b in cut)
    run_quiet(sim)
    for i in range(len(sim.nodes)):
        assert {p.id for p in sim.nodes[i].peers} == {sim.ids[j] for j in sim.links[i]}, i


def test_node_added_during_a_partition_is_on_the_rest_and_does_not_bridge_the_cut() -> None:
    sim = small()
    side, other = halves(sim)
    sim.partition(side)
    peers = [min(side), min(other)]
    new = sim.add_node(0.9, peers)
    assert sim.links[new] == set(peers)
    assert sim.reachable(new) & side == set()
    assert sim.linked(new, min(other)) and not sim.linked(new, min(side))
    run_quiet(sim)
    assert not knows(sim, new, min(side)) and not knows(sim, min(side), new)
    sim.heal()
    run_quiet(sim)
    assert knows(sim, new, min(side)) and knows(sim, min(side), new)


def test_search_during_a_partition_stays_on_its_side() -> None:
    sim = small()
    side, _ = halves(sim)
    sim.partition(side)
    sim.run(until=SILENCE)
    start = min(side)
    key = int(0.25 * 2**64).to_bytes(8, "big") + bytes(24)  # in the middle of the side's arc
    sent = sum(sim.sent.values())
    sim.subscribe(start, key, 1)
    run_quiet(sim)
    assert sum(sim.sent.values()) > sent
    assert [type(e) for _, e in sim.events_for(start, 1)] == [Subscribed]
    assert set(members(sim, key)) <= side
    [root] = roots(sim, key)
    assert root == nearest(sim, 0.25, 1)[0]  # the closest node overall is on this side


def test_heal_before_liveness_noticed_loses_no_link() -> None:
    sim = subscribed(small())
    side, _ = halves(sim)
    cut = crossing(sim, side)
    sim.partition(side)
    sim.run(until=sim.now + BEAT)  # shorter than dead_after: nobody gives up
    sim.heal()
    assert all(sim.linked(a, b) for a, b in cut)
    healed_at = sim.now
    sim.run(until=healed_at + 2 * SILENCE)
    assert sum(node.stats.dead_peers for node in sim.nodes) == 0
    for a, b in cut:
        record = sim.nodes[a].peers.get(sim.ids[b])
        assert record is not None and record.heard > healed_at  # heartbeats cross again
    sound(sim, SUBSCRIBERS)


# --- a lost frame breaks its link, which is dialled again ---------------------------------------


class Recording(Simulator):
    """The simulator, noting every link that breaks or is dialled, and what each end knew
    right after a break."""

    def __init__(self, config: SimConfig) -> None:
        self.breaks: list[tuple[float, int, int, bool, bool]] = []
        self.dials: list[tuple[float, int, int]] = []
        self._broken: list[tuple[int, int]] = []  # broken, ends not yet checked
        super().__init__(config)

    def disconnect(self, a: int, b: int) -> None:
        # (A break inside a node's effects is told to its ends after them: ``_tell_downs``.)
        pair = (a, b) if a < b else (b, a)
        if pair in self._open:
            self._broken.append((a, b))
        super().disconnect(a, b)

    def _tell_downs(self) -> None:
        super()._tell_downs()
        if self._depth == 0:  # every end has been told: what does each know now?
            for a, b in self._broken:
                self.breaks.append((self.now, a, b, knows(self, a, b), knows(self, b, a)))
            self._broken.clear()

    def connect(self, a: int, b: int) -> None:
        was_open = self.linked(a, b)
        super().connect(a, b)
        if not was_open and self.linked(a, b):
            self.dials.append((self.now, a, b))


def test_lost_frame_breaks_its_link_at_both_ends_and_it_is_dialled_again() -> None:
    delay = 2.5
    config = SimConfig(
        nodes=30,
        degree=6,
        seed=4,
        network=NetworkModel(drop=0.003),
        reconnect_delay=delay,
    )
    sim = Recording(config)
    for i in SUBSCRIBERS:
        sim.subscribe(i, KEY, 1)
    end = 40.0
    sim.run(until=end)
    assert sim.lost >= len(sim.breaks) >= 3  # some frames were lost, each broke its link
    # Both ends forgot each other at once, not a liveness period later.
    assert all(not a_knows and not b_knows for _, _, _, a_knows, b_knows in sim.breaks)
    timeline: dict[tuple[int, int], list[tuple[float, str]]] = {}
    for at, a, b, _, _ in sim.breaks:
        timeline.setdefault((min(a, b), max(a, b)), []).append((at, "break"))
    for at, a, b in sim.dials:
        timeline.setdefault((min(a, b), max(a, b)), []).append((at, "dial"))
    reopened = 0
    for (a, b), events in timeline.items():
        events.sort()
        for (at, what), following in zip(events, [*events[1:], None], strict=True):
            if what == "break" and at + delay <= end:
                # The next thing to happen to the link: dialled again reconnect_delay later.
                assert following == (at + delay, "dial"), ((a, b), events)
        last_at, last = events[-1]
        if last == "dial" and last_at <= end - 0.5:
            # A link dialled again is open, and its Hellos made both ends peers again.
            assert sim.linked(a, b) and knows(sim, a, b) and knows(sim, b, a), (a, b)
            reopened += 1
    assert reopened >= 3
