"""Chaos scenarios (``test_sim_chaos``) that still break a guarantee (issue 4 is open),
kept so the next fix can start from them: each is a strict expected failure, so a change
that fixes it turns this test red until it moves to a regression file with its cause."""

from __future__ import annotations

import pytest
from test_sim_chaos import Fault, Scenario, failures, run
from test_sim_chaos_acks import ONE_BRANCH_HELD_IT

from testnet.sim.network import NetworkModel


@pytest.mark.xfail(strict=True, reason="open (issue 4): a claim never reaches the new root")
def test_a_partition_with_crashes_numbers_two_packets_twice() -> None:
    # Drawn by tests/hunt_chaos.py --seed 2468 in stop 31 (it fails at stop 30's core too),
    # traced in stop 32. Root 7 numbered node 43's publishes 14..16; 43 confirmed them and
    # kept its claims, and 7 sent them down 24 ms before a partition cut it off, so the
    # acknowledgements were lost. On 43's side, 23 (43's ancestor) took the tree over,
    # its subtree's restart confirmations saying the tree had got to 13, and numbered
    # 43's retries and new publishes from 14 in another order; after the heal, packets 15
    # and 19 were each acknowledged for two publishes. 43's parent never changed, so its
    # claims never went up (they do on attaching only). Pushing them up when a restart
    # above ends, or when the new root asks for the numbers, fixes this scenario, but a
    # root that had dropped those numbers unconfirmed takes the claims back and announces
    # the numbers before them missed: tests/test_churn.py then fails every run. Voiding,
    # at the root, claims on numbers it dropped lost acknowledged packets in the hunts (a
    # root cannot tell its own dropped number from the same one another root gave); with
    # a term naming each root's numbering, and a notice to the publisher when a root
    # drops a number, the churn test still failed most runs (the README, Known limits).
    outcome = run(PARTITION_TWICE)
    assert outcome.log.acks and failures(outcome) == []


@pytest.mark.xfail(strict=True, reason="open (issue 4): shown before the tree had it")
def test_a_subscriber_is_not_shown_a_packet_that_only_one_branch_held() -> None:
    # The scenario of test_sim_chaos_acks.py, whose acknowledgement is fixed. Publisher 7
    # subscribes too, and its node is shown packets as they come down, committed or not:
    # it was shown its own 12 before root 1, relay 0's cut and its own death took 12 with
    # them, and the rest of the tree then gave 12 to another publish. Its client died
    # with it, but what it was shown disagrees with the stream. Closing it needs members
    # to show a packet only once the root says it is committed (a notice down the tree,
    # and a round trip more of delivery latency), or numbers no two roots can both give.
    outcome = run(ONE_BRANCH_HELD_IT)
    assert failures(outcome) == []


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
