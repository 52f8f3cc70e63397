"""Chaos scenarios (``test_sim_chaos``) whose failure lay in the simulator, the core's
driver, not in the core: replayed exactly (the simulation is deterministic)."""

from __future__ import annotations

from test_sim_chaos import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_node_hears_of_a_link_a_lost_frame_broke_only_after_its_other_effects() -> None:
    # Drawn by the chaos property in stop 30's CI run (it fails at stop 29's core too):
    # nodes 21, 22 and 40 ended as a cycle with no root, and the network never got quiet.
    # Relay 22 took 12 as its parent (the success of 21's resubscribe, which 22 routed)
    # and passed the success on to 21; a frame it sent 12 in that step was lost, which
    # broke that link, and the simulator told 22 at once, in the middle of its effects: 22 restarted
    # and sent its restart label to 21 ahead of the success that made 21 its child: 21,
    # not yet attached, refused the label, and later accepted 22's resubscribe from its
    # own subtree. The runtime hears of a closed link after the effects (its task ends
    # later); the simulator now does the same (``Simulator._tell_downs``).
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
