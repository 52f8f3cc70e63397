"""A chaos scenario (``test_sim_chaos``) in which stale relay entries sent a publish's
number round a cycle for ever (``overlay.core.confirming``, ``on_numbered``). Replayed
exactly: the simulation is deterministic."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_number_is_passed_down_only_along_relays_still_in_the_tree() -> None:
    # Chaos, crashes only. Publisher 29's publish climbed 29 -> 26 -> 31 -> 9 -> 25 -> 4 -> 30
    # and waited at 30, which was restarting. 29 died, and the tree came apart and formed
    # again with 25 at its top and 9, then 30, below it. 30 sent the publish up with 4 as
    # its source, though 4 was no longer its child, and 25, now root, numbered it with a
    # dead publisher's 12 others. Every relay still had an entry from the old tree, and
    # PublishNumbered followed them: 25 -> 9 -> 30 -> 4 -> 25, and round again, about 4,400
    # messages per uid every 50 s; the network never got quiet. So a relay passes a number
    # down only to a child it still has, from the parent it has, as a confirmation comes
    # back up.
    outcome = run(NUMBER_GOES_ROUND)
    assert outcome.log.acks and failures(outcome) == []


NUMBER_GOES_ROUND = Scenario(
    seed=4641,
    nodes=32,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=0, until=None),
        Fault(at=0.0, kind="loud-crash", arg=1, until=None),
        Fault(at=2.225073858507e-311, kind="crash", arg=4641, until=35.257962487325045),
        Fault(at=0.5, kind="crash", arg=1, until=None),
        Fault(at=2.810766809980117, kind="loud-crash", arg=849897, until=42.381297786517706),
        Fault(at=9.809455654867113, kind="crash", arg=0, until=None),
        Fault(at=9.86631898060148, kind="loud-crash", arg=4638, until=12.020911248816358),
        Fault(at=25.16072962268902, kind="loud-crash", arg=3509, until=None),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.0
    ),
    confirm=True,
)
