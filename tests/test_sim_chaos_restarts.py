"""Chaos scenarios (``test_sim_chaos``) that broke a guarantee through a restart's label
(``overlay.core.restarts``), kept as regression tests with their causes."""

from __future__ import annotations

from test_sim_chaos import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_labelled_member_moves_to_the_tree_a_closer_look_found_through_it() -> None:
    # Drawn by tests/hunt_chaos.py --seed 2468 in stop 31. No partition and no frame lost:
    # crashes only. The root (31) died; 16, far from the key, took its tree over and
    # looked, its members carrying its label. Then 32 died: 6 (the closest node, a
    # publisher's, linked only to 16's member 22) and 4 each became a root. 6's look went
    # through 22 and 21 to 4, which took it; but 21 and 22, labelled by a farther origin,
    # refused the success on its way back (6 may not hang below a detached subtree that is
    # farther than 6), so 6 found "nothing", and both 6 and 4 numbered 20..22. Now such a
    # member moves, with its subtree, to the attached tree the search found, and answers
    # from there: 6 joins 4's tree, and 16 (which lost a child) looks again.
    outcome = run(THREE_ROOTS)
    assert outcome.log.acks and failures(outcome) == []


THREE_ROOTS = Scenario(
    seed=2,
    nodes=53,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="crash", arg=0, until=None),
        Fault(at=0.0, kind="loud-crash", arg=0, until=None),
        Fault(at=5e-324, kind="crash", arg=1, until=None),
        Fault(at=2.3095571543086514e-225, kind="loud-crash", arg=1543, until=None),
        Fault(at=6.352361987306684e-106, kind="loud-crash", arg=3, until=None),
        Fault(at=1.281863739435111e-08, kind="crash", arg=26521, until=None),
        Fault(at=2.0, kind="crash", arg=97138, until=None),
        Fault(at=4.412509518564541, kind="loud-crash", arg=408, until=None),
        Fault(at=20.440375108100167, kind="loud-crash", arg=7500, until=None),
        Fault(at=26.856485023431457, kind="loud-crash", arg=60553, until=36.57801972169233),
        Fault(at=29.18263255442898, kind="crash", arg=53333, until=None),
        Fault(at=29.476793407286895, kind="crash", arg=21325, until=55.777511691907435),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)
