"""A chaos scenario (``test_sim_chaos``) in which stale relay entries sent a publish's
number round a cycle for ever (``overlay.core.claims``, ``on_numbered``). Replayed
exactly: the simulation is deterministic."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_number_is_passed_down_only_along_relays_still_in_the_tree() -> None:
    # Crashes only: a publish climbs through a chain of relays and waits at one that is
    # restarting; the publisher dies, and the tree comes apart and forms again in another
    # order, with relay entries from the old tree still in place. A relay passes a number down
    # only to a child it still has, from the parent it has, as a confirmation comes back up:
    # following the stale entries, PublishNumbered would go round a cycle of relays for ever
    # and the network would never be quiet.
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
