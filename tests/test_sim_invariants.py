"""Random subscribe/unsubscribe sequences on random small topologies, driven through the
simulator (the same core as the real node), keep every tree invariant after every step."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from keyspace.topology import small_world
from overlay.core.config import NodeConfig
from overlay.core.streams import State
from testnet.sim.invariants import check_all, violations
from testnet.sim.network import NetworkModel
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import stream_keys

KEYS = stream_keys(3)

# One step: (subscribe?, node choice, stream, client choice, delay before the next step).
steps = st.lists(
    st.tuples(
        st.booleans(),
        st.integers(0, 10**6),
        st.integers(0, len(KEYS) - 1),
        st.integers(0, 3),
        st.sampled_from([0.0, 0.001, 0.02, 0.5]),
    ),
    min_size=1,
    max_size=40,
)


def build(n: int, degree: int, seed: int, max_streams: int = 32) -> Simulator:
    config = SimConfig(
        nodes=n,
        degree=degree,
        seed=seed,
        node=NodeConfig(max_streams=max_streams),
        network=NetworkModel(jitter=0.01),
        wire=True,
    )
    return Simulator(config, small_world(n, degree, random.Random(seed)))


def assert_quiet_and_sound(sim: Simulator, subscribed: dict[tuple[int, int, int], None]) -> None:
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    assert violations(shapes.values()) == []
    for node, stream, client in subscribed:
        s = sim.nodes[node].streams.get(KEYS[stream])
        assert s is not None and client in s.local, (node, stream, client)
        assert s.state in (State.JOINED, State.ROOT)
    # Nodes carry nothing nobody asked for: every member leads to some subscriber.
    for key, shape in shapes.items():
        wanted = {n for n, s, _ in subscribed if KEYS[s] == key}
        assert set(shape.members) >= wanted
        leaves = [i for i, s in shape.members.items() if not s.children]
        assert all(shape.members[i].local for i in leaves), "a childless member with no client"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 40),
    degree=st.sampled_from([2, 4, 6, 16]),
    seed=st.integers(0, 2**32),
    ops=steps,
)
def test_random_joins_and_leaves_keep_every_invariant(
    n: int, degree: int, seed: int, ops: list[tuple[bool, int, int, int, float]]
) -> None:
    sim = build(n, degree, seed)
    subscribed: dict[tuple[int, int, int], None] = {}
    for join, node_pick, stream, client, delay in ops:
        node = node_pick % n
        entry = (node, stream, client)
        if join:
            sim.subscribe(node, KEYS[stream], client)
            subscribed[entry] = None
        elif entry in subscribed:
            sim.unsubscribe(node, KEYS[stream], client)
            del subscribed[entry]
        if delay:
            sim.run(until=sim.now + delay)  # let some steps overlap in flight
        else:
            sim.run()
            assert_quiet_and_sound(sim, subscribed)
    sim.run()
    assert_quiet_and_sound(sim, subscribed)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(8, 60), seed=st.integers(0, 2**32))
def test_everyone_leaving_dissolves_every_tree(n: int, seed: int) -> None:
    sim = build(n, 6, seed)
    rng = random.Random(seed)
    members = [(rng.randrange(n), rng.randrange(len(KEYS))) for _ in range(2 * n)]
    for node, stream in members:
        sim.subscribe(node, KEYS[stream], 1)
    sim.run()
    assert violations(check_all(sim.nodes, sim.alive, sim.index).values()) == []
    for node, stream in members:
        sim.unsubscribe(node, KEYS[stream], 1)
    sim.run()
    assert all(not node.streams for node in sim.nodes)
    assert all(not node.routes for node in sim.nodes)


def test_one_root_even_when_every_node_joins_at_once() -> None:
    sim = build(200, 8, 7)
    for i in range(200):
        sim.subscribe(i, KEYS[0], 1)
    sim.run()
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    assert violations(shapes.values()) == []
    assert len(shapes[KEYS[0]].members) == 200
    assert sum(s.state is State.ROOT for s in shapes[KEYS[0]].members.values()) == 1


def test_checker_reports_a_broken_tree() -> None:
    """The checker must be able to fail: break a healthy tree by hand and see it reported."""
    sim = build(30, 6, 3)
    for i in range(0, 30, 3):
        sim.subscribe(i, KEYS[0], 1)
    sim.run()
    shapes = check_all(sim.nodes, sim.alive, sim.index)
    assert violations(shapes.values()) == []
    shape = shapes[KEYS[0]]
    child = next(i for i, s in shape.members.items() if s.parent is not None)
    sim.nodes[child].streams[KEYS[0]].parent = None
    sim.nodes[child].streams[KEYS[0]].state = State.ROOT
    broken = violations(check_all(sim.nodes, sim.alive, sim.index).values())
    assert any("2 roots" in v for v in broken)
    assert any("lists child" in v for v in broken)
