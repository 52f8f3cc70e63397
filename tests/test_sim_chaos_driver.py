"""Chaos scenarios (``test_sim_chaos``) whose failure lay in the simulator, the core's
driver, or in the chaos test's own checks, not in the core: replayed exactly (the
simulation is deterministic)."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_node_hears_of_a_link_a_lost_frame_broke_only_after_its_other_effects() -> None:
    # A relay takes a parent through a resubscribe it routed and passes the success on to the
    # resubscriber; a frame it sends the parent in that step is lost, breaking that link. Told
    # of the break in the middle of its effects, the relay would restart and send its label
    # ahead of the success that makes the resubscriber its child, which, not yet attached,
    # refuses it and may later adopt the relay: a cycle with no root, never quiet. The runtime
    # hears of a closed link after the effects (its task ends later), and so does the simulator
    # (``Simulator._tell_downs``).
    outcome = run(LOST_FRAME_MID_EFFECTS)
    assert outcome.log.acks and failures(outcome) == []


LOST_FRAME_MID_EFFECTS = Scenario(
    seed=8256,
    nodes=48,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=1.4440720491229324e-202, kind="add", arg=3, until=None),
        Fault(at=19.658376605001408, kind="weather", arg=0, until=35.34408499418659),
        Fault(at=30.0, kind="add", arg=3, until=None),
        Fault(at=30.0, kind="add", arg=3, until=None),
    ),
    partition=(5.900007012472607, 6.900007012472607, 0.1),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)


def test_a_node_whose_every_peer_died_is_a_network_of_its_own() -> None:
    # Every peer of node 9 crashes for good in the first seconds; 9 roots the stream alone,
    # its look waiting for a peer that never comes back. Nothing can reach it, so the checks
    # leave out nodes the crashes cut off from the publishers (``_isolated``), as a
    # partitioned side; counted, it would be a second root, a network never quiet and a
    # subscriber owed packets.
    outcome = run(EVERY_PEER_DIED)
    assert outcome.isolated == {9}
    assert outcome.log.acks and failures(outcome) == []


EVERY_PEER_DIED = Scenario(
    seed=0,
    nodes=35,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=0, until=None),
        Fault(at=0.0, kind="crash", arg=0, until=None),
        Fault(at=0.0, kind="crash", arg=0, until=None),
        Fault(at=0.0, kind="crash", arg=1, until=None),
        Fault(at=0.0, kind="loud-crash", arg=233, until=None),
        Fault(at=5e-324, kind="crash", arg=0, until=None),
        Fault(at=5e-324, kind="crash", arg=1433, until=1.0000000000000002),
        Fault(at=0.9, kind="loud-crash", arg=0, until=None),
        Fault(at=1.0, kind="crash", arg=0, until=None),
        Fault(at=4.403445119489323, kind="crash", arg=6418, until=None),
    ),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.0, jitter=0.0
    ),
)


def test_frames_held_back_by_a_short_partition_arrive_when_it_heals() -> None:
    # A partition that heals before liveness notices it must not lose the frames sent across
    # it while the links stayed up: that would be a TCP link that silently skips frames, which
    # no real link does and the protocol rightly does not expect. The simulator holds them
    # back and delivers them, in order, at the heal.
    scenario = Scenario(
        seed=0, nodes=20, streams=3, subscribers=2, partition=(0.0, 1.0, 0.3125), confirm=False
    )
    outcome = run(scenario)
    assert outcome.log.acks and failures(outcome) == []


def test_the_network_is_not_quiet_while_a_message_is_on_its_way() -> None:
    # The run's quiet check, not the protocol: a relay whose last child left stays its linger
    # and sends its parent an Unsubscribe at the last instant of a step, while no node has
    # work. Quiet also needs nothing in flight; otherwise the run ends with the Unsubscribe
    # still travelling and the parent listing a child that no longer carries the stream.
    faults = (
        Fault(at=1.0, kind="crash", arg=0, until=None),
        Fault(at=1.0, kind="crash", arg=0, until=None),
        Fault(at=11.42127579726515, kind="loud-crash", arg=102991, until=25.515630101188897),
        Fault(at=14.09435430392375, kind="crash", arg=83509, until=None),
    )
    outcome = run(
        Scenario(seed=0, nodes=22, streams=2, subscribers=2, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []
