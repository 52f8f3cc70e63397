"""The chaos search's race scenarios (``test_sim_chaos``) with ``confirm_publishes`` on: a
packet numbered just as a partition begins. Without confirmation both still fail (see the
README's Known limits); with it, a root sends a packet down only once its publisher's node
knows its number (``overlay.core.confirming``). Replayed exactly: the simulation is
deterministic."""

from __future__ import annotations

from test_sim_chaos import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_packet_numbered_as_a_partition_begins_is_shown_to_nobody_on_the_cut_off_side() -> None:
    # Root 10 numbered node 21's publish as packet 17, 14 ms before a partition cut 10 off
    # from 21; the acknowledgement was lost on its way. 10 had sent 17 down at once, so
    # subscriber 24, cut off with it, was shown 17. The publishers' side never heard of 17:
    # its new root gave 17 to the next publish, and that was acknowledged. A root configured
    # to (``confirm_publishes``, on in this scenario) sends a packet down only once the
    # publisher's node confirms its number (``confirming``): 21's node never did, and 10
    # dropped the packet unshown. Without it, this scenario still fails (README, Known
    # limits).
    outcome = run(NUMBERED_AS_THE_CUT_CAME)
    assert outcome.log.acks and failures(outcome) == []


NUMBERED_AS_THE_CUT_CAME = Scenario(
    seed=527174295,
    nodes=29,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=4.101450914430803, kind="add", arg=2, until=None),
        Fault(at=9.506292427538378, kind="add", arg=6, until=None),
        Fault(at=19.727099624700816, kind="add", arg=4, until=None),
        Fault(at=27.624642993187024, kind="loud-crash", arg=1810, until=None),
    ),
    partition=(17.938133810942073, 37.57999794339386, 0.34580154727625406),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.01, jitter=0.02
    ),
    confirm=True,
)


def test_a_packet_numbered_as_a_small_side_is_cut_off_is_not_given_twice() -> None:
    # The same race with one subscriber in a side of a tenth of the network, and the same
    # remedy (``confirm_publishes`` on).
    outcome = run(NUMBERED_AS_A_SMALL_SIDE_WAS_CUT)
    assert outcome.log.acks and failures(outcome) == []


NUMBERED_AS_A_SMALL_SIDE_WAS_CUT = Scenario(
    seed=112010,
    nodes=23,
    streams=3,
    subscribers=4,
    faults=(
        Fault(at=1.0, kind="crash", arg=434, until=2.3876111266361857),
        Fault(at=4.341985083308247, kind="weather", arg=0, until=12.589401257734833),
        Fault(at=15.747282622224304, kind="loud-crash", arg=65536, until=None),
        Fault(at=16.988406371152767, kind="crash", arg=1080, until=None),
        Fault(at=26.60649947270505, kind="loud-crash", arg=3385, until=38.96125721543424),
        Fault(at=29.999999999999996, kind="add", arg=3, until=None),
    ),
    partition=(14.782677768218361, 37.46522179695457, 0.10000000000000002),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
)
