"""Fixed chaos scenarios (``test_sim_chaos``) about what a node remembers of a stream's
numbering across a restart (``overlay.core.memory``), with ``confirm_publishes`` on (the
default), replayed exactly: the simulation is deterministic. Each says which guarantee it
checks and what would break without the rule."""

from __future__ import annotations

from chaos_scenarios import EVERY_HOLDER_DIED, Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_stream_whose_every_holder_died_numbers_on_when_one_comes_back() -> None:
    # The root, the node that takes the tree over from it, the publisher's node and the tree's
    # other members all crash within a short time. A node remembers on its disk how far the
    # numbering got, and the tree the restarted publisher's node makes numbers on from there:
    # numbering from 0 again would acknowledge packet 0 for two different publishes.
    outcome = run(EVERY_HOLDER_DIED)
    assert outcome.log.acks and failures(outcome) == []


def test_a_restarted_root_gathers_what_it_numbered_before_it_died() -> None:
    # A restarted root must not number on after its remembered number as if the tree had it all.
    # The root numbers publishes that wait, their publishers' nodes confirm (so the publishers are
    # acknowledged), and the root crashes before it sends any of them down. A remembered number is
    # a claim, as a resubscriber's is: holes filled by pushes in a grace, in order, and sent down;
    # taken as a past the members hold, the confirmed numbers pushed up would go to nobody.
    outcome = run(RESTARTED_ROOT_WITH_PENDING)
    assert outcome.log.acks and failures(outcome) == []


RESTARTED_ROOT_WITH_PENDING = Scenario(
    seed=0,
    nodes=36,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=0.0, kind="crash", arg=4072, until=None),
        Fault(at=0.0, kind="weather", arg=0, until=1.0),
        Fault(at=1.1125369292536007e-308, kind="crash", arg=0, until=27.99780289022521),
        Fault(at=7.755898006551288e-115, kind="add", arg=6, until=None),
        Fault(at=0.5, kind="loud-crash", arg=130227, until=7.679450132372989),
        Fault(at=1.0, kind="loud-crash", arg=5028, until=None),
        Fault(at=7.179450132372989, kind="crash", arg=0, until=8.179450132372988),
        Fault(at=10.69959112411326, kind="loud-crash", arg=8830, until=11.79959112411326),
        Fault(at=14.135320337181833, kind="add", arg=2, until=None),
        Fault(at=20.370540744748183, kind="loud-crash", arg=1, until=21.370540744748183),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.05, jitter=0.02
    ),
    confirm=True,
)


def test_a_restarted_root_gathers_what_it_numbered_before_it_died_again() -> None:
    # The same rule (remembered numbers are taken as a claim, not as packets the tree holds) in
    # another scenario; numbering on after them would leave subscribers without acked packets.
    outcome = run(RESTARTED_ROOT_WITH_PENDING_TOO)
    assert outcome.log.acks and failures(outcome) == []


RESTARTED_ROOT_WITH_PENDING_TOO = Scenario(
    seed=26146,
    nodes=33,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=2.850501160676445, kind="loud-crash", arg=447, until=11.64453000377884),
        Fault(at=14.780584168928657, kind="loud-crash", arg=491, until=34.55385713199537),
        Fault(at=17.28206400210658, kind="weather", arg=0, until=34.189346008682435),
        Fault(at=19.51282740263845, kind="add", arg=3, until=None),
        Fault(at=22.955348190962333, kind="loud-crash", arg=8072, until=None),
        Fault(at=28.111274270897734, kind="crash", arg=28088, until=None),
        Fault(at=30.0, kind="add", arg=4, until=None),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.02
    ),
    confirm=True,
)


def test_a_look_reports_only_a_remembered_claim_as_seen() -> None:
    # A root holding no packet reports in its look only a remembered claim as seen, not any
    # claimed head. A root dies with numbered publishes pending whose publishers' nodes hold the
    # confirmed claims; the node that takes the tree over holds only those claims and looks.
    # Reported as seen, the claimed head would make the root that look creates number on after it
    # and keep the claims pushed up as a past its members had, which subscribers never get. Only a
    # number a root founded on from its memory is reported so.
    outcome = run(LOOK_AFTER_A_TAKEOVER_WITH_CLAIMS)
    assert outcome.log.acks and failures(outcome) == []


LOOK_AFTER_A_TAKEOVER_WITH_CLAIMS = Scenario(
    seed=4294967296,
    nodes=31,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=2.225073858507e-311, kind="crash", arg=2193, until=None),
        Fault(at=1.175494351e-38, kind="loud-crash", arg=2229, until=None),
        Fault(at=0.828785275538704, kind="add", arg=3, until=None),
        Fault(at=1.0, kind="loud-crash", arg=898, until=None),
        Fault(at=1.6007266878911657, kind="loud-crash", arg=871, until=20.90282610863553),
        Fault(at=2.0, kind="loud-crash", arg=5101, until=39.790864150472615),
        Fault(at=2.007948828477773, kind="loud-crash", arg=22283, until=36.597903280929934),
        Fault(at=9.948343790258267, kind="loud-crash", arg=116518, until=None),
        Fault(at=22.068147474495813, kind="loud-crash", arg=5451, until=None),
        Fault(at=24.084120366589175, kind="add", arg=4, until=None),
        Fault(at=26.013903233103225, kind="add", arg=5, until=None),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.2
    ),
    confirm=True,
)
