"""Chaos scenarios (``test_sim_chaos``) in which a root that took a tree over gave a number
again that the root before it had sent down: the publisher's node kept its claim on the
number, but its parent never changed, so the claim never reached the new root
(``overlay.core.gathering``, ``claims.Claims.push_claims``, ``takeover.Takeover.on_claim``).
Replayed exactly: the simulation is deterministic."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_partition_with_crashes_numbers_no_packet_twice() -> None:
    # A partition with crashes: a root sends a publisher's confirmed numbers down just before the
    # cut, and on the publisher's side an ancestor takes the tree over while the publisher's
    # parent stays the same. The new root's grace asks its subtree for what lies beyond its head,
    # the publisher pushes its claims (marked as claims, not packets it holds), and the root takes
    # them as its next numbers, before what waited; otherwise it numbers the retries and new
    # publishes afresh and, after the heal, one number is acknowledged for two publishes. A push
    # also takes the place of a plain retry of the same publish already waiting at the root:
    # dropped as a resend, the claim would leave a later claim beyond a hole, refused.
    outcome = run(PARTITION_TWICE)
    assert outcome.log.acks and failures(outcome) == []


PARTITION_TWICE = Scenario(
    seed=255,
    nodes=47,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=1.401298464324817e-45, kind="add", arg=6, until=None),
        Fault(at=0.6572576235016593, kind="add", arg=4, until=None),
        Fault(at=1.1785353597502681, kind="loud-crash", arg=28680, until=None),
        Fault(at=5.20491991304805, kind="add", arg=5, until=None),
        Fault(at=13.558923199684488, kind="loud-crash", arg=128202, until=None),
        Fault(at=25.738794305466318, kind="crash", arg=2248, until=None),
    ),
    partition=(21.999557701467833, 36.37304697212244, 0.30124308122237375),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.05, jitter=0.2
    ),
    confirm=True,
)


def test_a_packet_sent_down_as_the_cut_came_is_not_numbered_again_on_the_other_side() -> None:
    # The class of PARTITION_TWICE: a root sends a confirmed publish down just before a
    # partition cuts it off with a third of the tree, whose subscribers get it. On the
    # publisher's side its parent takes the tree over and joins another root's tree while the
    # publisher's parent stays the same. The new root's grace asks for the claim; otherwise
    # it never goes up and the other root gives the number to another publish.
    outcome = run(SENT_DOWN_AS_THE_CUT_CAME)
    assert outcome.log.acks and failures(outcome) == []


SENT_DOWN_AS_THE_CUT_CAME = Scenario(
    seed=503686122,
    nodes=44,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=1.9779338638581946e-76, kind="crash", arg=27845, until=None),
        Fault(at=10.959418888863523, kind="crash", arg=35567, until=25.759609344287423),
        Fault(at=15.010594391827407, kind="crash", arg=11522, until=16.010594391827407),
        Fault(at=15.40336866252223, kind="weather", arg=0, until=30.300599780036407),
        Fault(at=18.3070018207045, kind="crash", arg=759141, until=None),
        Fault(at=21.5634130437754, kind="loud-crash", arg=333, until=None),
        Fault(at=24.316038755458436, kind="loud-crash", arg=21463, until=None),
    ),
    partition=(19.761104045474447, 44.62348402606744, 0.3589841164423544),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)


def test_a_publisher_node_that_becomes_root_takes_its_own_claims() -> None:
    # A partition and a restart: two publishers' numbers interleave at a root, which sends the
    # first down just as a cut leaves both publishers on the other side; one of them restarts and
    # becomes root itself, holding its claims. A new root weighs its own claims as pushed ones
    # (``own_claims``): otherwise it refuses the other publisher's claims at its grace's end and
    # gives a number already shown across the cut to another of its publishes.
    outcome = run(OWN_CLAIMS_AT_A_NEW_ROOT)
    assert outcome.log.acks and failures(outcome) == []


OWN_CLAIMS_AT_A_NEW_ROOT = Scenario(
    seed=4294967296,
    nodes=23,
    streams=2,
    subscribers=5,
    faults=(
        Fault(at=2.065837775396819e-233, kind="loud-crash", arg=5106, until=7.478840111644452),
        Fault(at=1.0103247586882113e-114, kind="add", arg=3, until=None),
        Fault(at=0.2, kind="loud-crash", arg=120575, until=None),
        Fault(at=0.5, kind="crash", arg=1006, until=35.24738206323758),
        Fault(at=2.0572767663990725, kind="add", arg=4, until=None),
        Fault(at=6.704681232771563, kind="crash", arg=46799, until=8.761957999170635),
        Fault(at=7.865680351678003, kind="loud-crash", arg=4909, until=None),
    ),
    partition=(17.220837735804984, 51.968219799042565, 0.2664288535160615),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
)
