"""Chaos scenarios (``test_sim_chaos``) in which a publish was acknowledged, or a packet
shown, under a number that the tree then lost or gave again: a claim dropped with a
timed-out attempt (``overlay.core.publishing``, ``_fail_local``), and an acknowledgement
sent, or a packet shown, while only one branch of the tree held the packet
(``overlay.core.commits``, ``overlay.core.showing``). Replayed exactly: the simulation is
deterministic."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_number_acknowledged_to_a_retry_was_not_announced_missed() -> None:
    # Chaos: a partition. Root 8 numbered publisher 17's uids 3 and 5 as 2 and 4; 17 confirmed and
    # kept the claims, and 8 held them pending. A partition cut 8 off from 17, whose attempts timed
    # out, and the claims went with them. 17 attached on its own side and pushed the claims it still
    # had, not 2 and 4, so that side's root announced 1..7 missed; after the heal, 8 acknowledged
    # the retries of uids 3 and 5 as 2 and 4, which subscribers 16 and 6 never got. So a claim
    # outlives a timed-out attempt, and a retry of the uid takes it back. The root's wait for a
    # second branch (commits) changes this run's path so much that it passes with either fix alone.
    outcome = run(CLAIM_LAPSED)
    assert outcome.log.acks and failures(outcome) == []


CLAIM_LAPSED = Scenario(
    seed=4294967296,
    nodes=20,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=0.5, kind="loud-crash", arg=6, until=None),
        Fault(at=3.862471736493983, kind="crash", arg=956, until=28.748039969148156),
        Fault(at=8.155118799452138, kind="weather", arg=0, until=22.34851049867962),
        Fault(at=13.263648341146618, kind="loud-crash", arg=8530, until=None),
        Fault(at=18.827102153929232, kind="add", arg=5, until=None),
        Fault(at=22.32013703523846, kind="loud-crash", arg=8530, until=None),
        Fault(at=23.54805197329404, kind="add", arg=4, until=None),
        Fault(at=28.23721208115163, kind="add", arg=6, until=None),
    ),
    partition=(28.23721208115163, 50.04882545770128, 0.3333333333333333),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.02
    ),
    confirm=True,
)


def test_a_relayed_publish_is_not_acknowledged_while_only_its_branch_holds_it() -> None:
    # Chaos: crashes and a partition. Root 1 numbered publisher 7's publish as 12; it came up
    # through relay 0, and the root's other child, 10, had died unnoticed. 1 acknowledged at once:
    # the root, 0 and 7 held 12. Then 1 died, a partition cut 0 off, and 7 died: the rest of the
    # tree had never heard of 12, and its new root gave 12 to another publish, acknowledged too. A
    # root now answers a relayed publish, as a publishing child's own, once another child holds the
    # packet; 10 never answered, 1 died first, and nobody was told 12.
    outcome = run(ONE_BRANCH_HELD_IT)
    assert outcome.log.acks and outcome.log.conflicts == []
    assert not [f for f in failures(outcome) if "never got acked" in f]


def test_a_subscriber_is_not_shown_a_packet_that_only_one_branch_held() -> None:
    # The same scenario: publisher 7 subscribes too, and its node showed packets as they
    # came down, committed or not. It was shown its own 12 before root 1, relay 0's cut and
    # its own death took 12 with them, and the rest of the tree then gave 12 to another
    # publish. Its client died with it, but what it was shown disagrees with the stream
    # (a member cut off with it that stayed up would have kept it). A member now shows
    # only what the root says it committed (``overlay.core.showing``), and 1 died before
    # it committed 12.
    outcome = run(ONE_BRANCH_HELD_IT)
    assert failures(outcome) == []


ONE_BRANCH_HELD_IT = Scenario(
    seed=50013,
    nodes=20,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=0.6164034273502185, kind="loud-crash", arg=3259, until=None),
        Fault(at=9.702173991438908, kind="crash", arg=5896, until=None),
        Fault(at=12.417495601799107, kind="crash", arg=5656, until=17.056423971904962),
        Fault(at=14.190371484060586, kind="crash", arg=50013, until=41.90512388719025),
        Fault(at=17.320925098040412, kind="crash", arg=1426, until=None),
        Fault(at=17.920017245744287, kind="crash", arg=401, until=None),
    ),
    partition=(14.585179580221801, 47.13983022640987, 0.4),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.2
    ),
    confirm=True,
)
