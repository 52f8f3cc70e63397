"""Random interleavings of subscribes, unsubscribes, publishes from several publishers, retries,
collisions and epochs, driven through the simulator: after every run each subscriber got its
packets in order, exactly once, never with a silent gap, and never a torn or aborted epoch."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keyspace.topology import small_world
from overlay.core.config import NodeConfig
from overlay.core.events import EpochSkipped, Packet, PublishAcked, PublishCollided
from overlay.messages import PacketKind
from testnet.sim.deliveries import DeliveryLog
from testnet.sim.invariants import check_all, violations
from testnet.sim.network import NetworkModel
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import stream_keys

KEYS = stream_keys(2)
PUBLISHER = 1000  # publisher clients are PUBLISHER + k, apart from subscriber clients 0..3

# (op, node pick, stream, client or epoch pick, flag, delay before the next op)
OPS = ("subscribe", "unsubscribe", "publish", "retry", "explicit", "close", "abort")
steps = st.lists(
    st.tuples(
        st.sampled_from(OPS),
        st.integers(0, 10**6),
        st.integers(0, len(KEYS) - 1),
        st.integers(0, 3),
        st.booleans(),
        st.sampled_from([0.0, 0.001, 0.03, 0.4]),
    ),
    min_size=1,
    max_size=50,
)


@dataclass(slots=True)
class Run:
    sim: Simulator
    log: DeliveryLog
    uid: int = 0
    first_publish: float | None = None

    def publish(
        self,
        node: int,
        stream: int,
        client: int,
        data: bytes,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
        packet: int | None = None,
        uid: int | None = None,
    ) -> int:
        if uid is None:
            self.uid += 1
            uid = self.uid
        if self.first_publish is None:
            self.first_publish = self.sim.now
        self.log.published_as(node, uid, KEYS[stream], epoch, kind, data)
        self.sim.publish(node, KEYS[stream], PUBLISHER + client, uid, data, epoch, kind, packet)
        return uid


def build(n: int, degree: int, seed: int, confirm: bool = False) -> Run:
    config = SimConfig(
        nodes=n,
        degree=degree,
        seed=seed,
        node=NodeConfig(confirm_publishes=confirm),
        network=NetworkModel(jitter=0.01),
        wire=True,
    )
    sim = Simulator(config, small_world(n, degree, random.Random(seed)))
    log = DeliveryLog(lambda: sim.now)
    sim.on_deliver = log.on_event
    return Run(sim, log)


def play(
    run: Run, ops: list[tuple[str, int, int, int, bool, float]], n: int
) -> set[tuple[int, int]]:
    """Carry out ``ops``; return the subscribers that joined before any publish and stayed."""
    sim, log = run.sim, run.log
    subscribed: dict[tuple[int, int, int], float] = {}
    published: list[tuple[int, int, int, bytes, int | None]] = []  # node, stream, client, ...
    for op, pick, stream, choice, flag, delay in ops:
        node = pick % n
        key = KEYS[stream]
        if op == "subscribe" and (node, stream, choice) not in subscribed:
            # A client's key: one stream per (node, client), so the log can tell them apart.
            client = stream * 4 + choice
            log.expect(node, client, key, atomic=flag, last_seen=None)
            sim.subscribe_from(node, key, client, None, flag)
            subscribed[(node, stream, choice)] = sim.now
        elif op == "unsubscribe" and (node, stream, choice) in subscribed:
            sim.unsubscribe(node, key, stream * 4 + choice)
            del subscribed[(node, stream, choice)]
        elif op == "publish":
            epoch = None if flag else 1 + choice % 3
            data = f"{op}-{len(published)}".encode()
            run.publish(node, stream, choice, data, epoch)
            published.append((node, stream, choice, data, epoch))
        elif op == "retry" and published:
            # The same uid again, as a reconnecting client or a retried Spark task sends it.
            index = pick % len(published)
            p_node, p_stream, p_client, data, epoch = published[index]
            run.publish(p_node, p_stream, p_client, data, epoch, uid=index + 1)
        elif op == "explicit":
            # Name a number: a collision, a duplicate of a held packet, or the next one.
            number = pick % (len(published) + 2)
            run.publish(node, stream, choice, b"explicit", packet=number)
            published.append((node, stream, choice, b"explicit", None))
        elif op in ("close", "abort"):
            kind = PacketKind.EPOCH_CLOSED if op == "close" else PacketKind.EPOCH_ABORTED
            run.publish(node, stream, choice, b"", 1 + choice % 3, kind)
            published.append((node, stream, choice, b"", 1 + choice % 3))
        sim.run(until=sim.now + delay)
    sim.run()
    first = run.first_publish
    return {
        (node, stream * 4 + choice)
        for (node, stream, choice), at in subscribed.items()
        if first is None or at < first
    }


def check(run: Run, stayed: set[tuple[int, int]]) -> None:
    sim, log = run.sim, run.log
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    assert violations(shapes.values()) == []
    assert list(log.problems(complete=False)) == []
    assert sum(node.stats.duplicates for node in sim.nodes) == 0
    # Every publish was answered.
    assert all(log.answered[uid] >= 1 for uid in range(1, run.uid + 1)), log.answered
    # Numbers are dense and each names one packet.
    for truth in log.truth.values():
        assert sorted(truth) == list(range(len(truth)))
    for node, client in stayed:
        sub = log.subs[(node, client)]
        truth = log.truth.get(sub.key, {})
        if not sub.atomic:
            assert sub.missed == 0
            assert sub.cursor == len(truth), (node, client, sub.cursor, len(truth))
        else:
            assert not sub.skipped, f"a subscriber there from the start skipped {sub.skipped}"
            closed = {e for _, (_, e, kind, _) in truth.items() if kind is PacketKind.EPOCH_CLOSED}
            assert set(sub.epochs) == closed


# The same examples every run (derandomized, no example database): a property that drew a
# new example in each CI run would turn CI red at random whenever it found a bug, on a
# change that did not cause it. Hunting for new examples is a separate act: set
# ``derandomize=False`` locally and run with ``--hypothesis-seed=<n>``.
@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    n=st.integers(1, 30),
    degree=st.sampled_from([2, 4, 8]),
    seed=st.integers(0, 2**32),
    ops=steps,
    confirm=st.booleans(),
)
def test_random_publishing_keeps_every_delivery_guarantee(
    n: int,
    degree: int,
    seed: int,
    ops: list[tuple[str, int, int, int, bool, float]],
    confirm: bool,
) -> None:
    run = build(n, degree, seed, confirm)
    stayed = play(run, ops, n)
    check(run, stayed)


def test_a_retry_is_acknowledged_with_its_original_number_and_stored_once() -> None:
    run = build(20, 4, 7)
    run.sim.subscribe_from(3, KEYS[0], 0, None, False)
    run.log.expect(3, 0, KEYS[0], atomic=False, last_seen=None)
    run.sim.run()
    first = run.publish(5, 0, 1, b"once")
    run.sim.run()
    run.publish(9, 0, 2, b"other")
    run.sim.run()
    run.publish(5, 0, 1, b"once", uid=first)  # the retry
    run.sim.run()
    acks = [e for _, e in run.sim.events_for(5, PUBLISHER + 1) if isinstance(e, PublishAcked)]
    assert [a.number for a in acks] == [0, 0]
    assert run.log.subs[(3, 0)].numbers.tolist() == [0, 1]
    check(run, {(3, 0)})


def test_two_publishers_naming_the_same_number_collide_and_one_wins() -> None:
    run = build(20, 4, 11)
    run.log.expect(2, 0, KEYS[0], atomic=False, last_seen=None)
    run.sim.subscribe_from(2, KEYS[0], 0, None, False)
    run.sim.run()
    run.publish(4, 0, 1, b"from four", packet=0)
    run.publish(8, 0, 2, b"from eight", packet=0)
    run.sim.run()
    answers = [
        e
        for client, node in ((PUBLISHER + 1, 4), (PUBLISHER + 2, 8))
        for _, e in run.sim.events_for(node, client)
        if isinstance(e, PublishAcked | PublishCollided)
    ]
    assert sorted(type(a).__name__ for a in answers) == ["PublishAcked", "PublishCollided"]
    collided = next(a for a in answers if isinstance(a, PublishCollided))
    assert collided.number == 0 and collided.suggested_next == 1
    assert run.log.subs[(2, 0)].numbers.tolist() == [0]
    check(run, {(2, 0)})


def test_a_late_atomic_joiner_gets_an_open_epoch_whole_or_skips_it() -> None:
    run = build(25, 4, 3)
    run.log.expect(1, 0, KEYS[0], atomic=True, last_seen=None)
    run.sim.subscribe_from(1, KEYS[0], 0, None, True)
    run.sim.run()
    run.publish(6, 0, 1, b"a", epoch=1)
    run.publish(6, 0, 1, b"b", epoch=1)
    run.sim.run()
    # Joins while epoch 1 is open: on a node that holds it from its start it gets it whole,
    # anywhere else it is told the epoch was skipped. Never a part of it.
    for node in range(25):
        run.log.expect(node, 1, KEYS[0], atomic=True, last_seen=None)
        run.sim.subscribe_from(node, KEYS[0], 1, None, True)
    run.sim.run()
    run.publish(6, 0, 1, b"c", epoch=1)
    run.publish(6, 0, 1, b"", epoch=1, kind=PacketKind.EPOCH_CLOSED)
    run.sim.run()
    check(run, {(1, 0)})
    outcomes = {
        node: (1 in run.log.subs[(node, 1)].epochs, 1 in run.log.subs[(node, 1)].skipped)
        for node in range(25)
    }
    assert all(got != skipped for got, skipped in outcomes.values()), outcomes
    # The node that was in the tree from the start holds the epoch whole.
    assert outcomes[1] == (True, False)
    skipped_events = [e for _, e in run.sim.events_for(0, 1) if isinstance(e, EpochSkipped)]
    assert all(e.epoch == 1 for e in skipped_events)


def test_a_new_roots_first_child_gets_the_publishes_that_waited_for_the_root() -> None:
    # Node 0 joins and holds a local publish while its search is out; node 1's search
    # reaches it and makes it root. Numbering the held publish before adopting node 1 would
    # leave node 1 without packet 0 (a new root's child gets no catch-up).
    run = build(2, 2, 0)
    run.log.expect(0, 0, KEYS[0], atomic=False, last_seen=None)
    run.sim.subscribe_from(0, KEYS[0], 0, None, False)
    run.log.expect(1, 0, KEYS[0], atomic=False, last_seen=None)
    run.sim.subscribe_from(1, KEYS[0], 0, None, False)
    run.sim.run(until=run.sim.now + 0.001)
    run.publish(0, 0, 0, b"held")
    run.sim.run()
    assert run.log.subs[(1, 0)].numbers.tolist() == [0]
    check(run, {(0, 0), (1, 0)})


def test_the_checker_passes_over_contested_numbers_only() -> None:
    # Two roots gave number 3 to two publishes (one cut off by a partition): the second
    # acknowledgement conflicts and a subscriber was shown the other packet under it. With
    # 3 contested, neither is reported; a wrong packet under 4 still is.
    key = stream_keys(1)[0]
    log = DeliveryLog(lambda: 0.0)
    for uid, number, data in ((1, 3, b"a"), (2, 3, b"b"), (3, 4, b"c")):
        log.published_as(0, uid, key, None, PacketKind.DATA, data)
        log.on_event(0, 100, PublishAcked(key, uid, number))
    log.expect(1, 1, key, atomic=False, last_seen=2)
    log.on_event(1, 1, Packet(key, 3, b"b", None, PacketKind.DATA))
    log.on_event(1, 1, Packet(key, 4, b"d", None, PacketKind.DATA))
    everything = list(log.problems(complete=False))
    assert len(everything) == 3
    assert list(log.problems(complete=False, contested={key: frozenset({3})})) == [
        "node 1 client 1: packet 4 is not the one the root ordered"
    ]
