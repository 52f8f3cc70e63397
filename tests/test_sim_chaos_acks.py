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
    # A partition cuts a root off from a publisher whose confirmed claims it holds pending, and
    # the publisher's attempts time out. A claim outlives a timed-out attempt and a retry of the
    # uid takes it back: dropped, the publisher's side would announce the claimed numbers missed
    # while the cut-off root, after the heal, acknowledges the retries with them. The root's wait
    # for a second branch (commits) changes this scenario's timing so much that either rule alone
    # passes it.
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
    # Crashes and a partition: a publish climbs to the root through a relay while the root's
    # other child is dead unnoticed; then the root dies, the partition cuts the relay off and the
    # publisher's node dies. A root answers a relayed publish, as a publishing child's own, only
    # once another child holds the packet: acknowledged while only that branch held it, the
    # number could be given by the rest of the tree's new root to another publish.
    outcome = run(ONE_BRANCH_HELD_IT)
    assert outcome.log.acks and outcome.log.conflicts == []
    assert not [f for f in failures(outcome) if "never got acked" in f]


def test_a_subscriber_is_not_shown_a_packet_that_only_one_branch_held() -> None:
    # The same scenario: the publisher subscribes too. A member shows only what the root says
    # it committed (``overlay.core.showing``); shown its own packet as it came down, the
    # publisher would have seen a number that the root's death, the relay's cut and its own
    # death took away and the rest of the tree gave to another publish (a member cut off with
    # it that stayed up would keep that disagreement).
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


def test_a_root_that_dies_before_a_child_holds_its_packet_showed_it_to_nobody() -> None:
    # A root numbers a child's publish and dies just after, before any child holds it; the next
    # root gives that number to another publish. A root shows its own clients only what a
    # child holds (``overlay.core.commits``), so its subscriber is not shown the lost packet.
    outcome = run(ROOT_DIES_FIRST)
    assert outcome.log.acks and failures(outcome) == []


ROOT_DIES_FIRST = Scenario(
    seed=3127,
    nodes=39,
    streams=2,
    subscribers=6,
    faults=(
        Fault(at=4.708190458798927, kind="loud-crash", arg=2388, until=None),
        Fault(at=7.733383893698173, kind="loud-crash", arg=230, until=32.372228926819766),
        Fault(at=8.947211190022445, kind="add", arg=3, until=None),
        Fault(at=20.54453593604149, kind="loud-crash", arg=462, until=None),
    ),
    weather=NetworkModel(jitter=0.2),
    confirm=False,
)


def test_a_packet_is_acknowledged_only_once_a_third_node_holds_it() -> None:
    # A partition cuts a root off from all its tree but one child; the root numbers its own
    # client's packet, and then the root and that child die before anyone else has it. A root
    # waits for two children to hold a packet before acknowledging it; one would leave a
    # subscriber behind the cut without an acknowledged packet.
    outcome = run(THIRD_COPY_AT_THE_ROOT)
    assert outcome.log.acks and failures(outcome) == []


def test_a_childs_own_publish_is_acknowledged_only_once_a_third_node_holds_it() -> None:
    # The same, for a publisher one hop below the root: a partition cuts the root off from all
    # but the publishing child, and both die soon after. The root answers a child that
    # published a packet itself only once another child holds it too.
    outcome = run(THIRD_COPY_BELOW_THE_ROOT)
    assert outcome.log.acks and failures(outcome) == []


THIRD_COPY_AT_THE_ROOT = Scenario(
    seed=682,
    nodes=37,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.5, kind="loud-crash", arg=431, until=None),
        Fault(at=5.974595960900652, kind="crash", arg=58418, until=6.974595960900652),
        Fault(at=7.317839782098956, kind="crash", arg=38324, until=15.37775559389013),
        Fault(at=7.821534500820657, kind="crash", arg=316, until=None),
        Fault(at=8.527473487269827, kind="crash", arg=120623, until=41.541852909418765),
        Fault(at=9.88670140728138, kind="loud-crash", arg=4920, until=None),
        Fault(at=10.503917197451946, kind="weather", arg=0, until=29.98052459096938),
        Fault(at=12.301773751930169, kind="loud-crash", arg=2990, until=14.301783751930168),
        Fault(at=14.275446392112558, kind="crash", arg=27, until=24.275446392112556),
        Fault(at=15.0, kind="loud-crash", arg=22039, until=None),
        Fault(at=18.093305453445627, kind="crash", arg=0, until=None),
        Fault(at=27.08307868299877, kind="add", arg=3, until=None),
        Fault(at=30.0, kind="loud-crash", arg=19153, until=34.27565146741864),
    ),
    partition=(6.1644718242544485, 23.003097696064383, 0.313407941250439),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.0
    ),
    confirm=False,
)


THIRD_COPY_BELOW_THE_ROOT = Scenario(
    seed=1443,
    nodes=29,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=1.0, kind="crash", arg=33, until=14.40187157448146),
        Fault(at=6.424455138878799, kind="crash", arg=250, until=10.07951727993812),
        Fault(at=14.055641062107032, kind="add", arg=5, until=None),
        Fault(at=15.0, kind="crash", arg=697, until=None),
        Fault(at=15.748995068673594, kind="crash", arg=1606, until=None),
        Fault(at=15.910431501859053, kind="crash", arg=15177, until=None),
        Fault(at=19.48100221601177, kind="crash", arg=5614, until=43.11559271210939),
        Fault(at=19.65131395480046, kind="crash", arg=140, until=30.569799868905633),
        Fault(at=20.770972868851086, kind="crash", arg=20, until=None),
    ),
    partition=(12.499384235855066, 39.93008788514676, 0.2519651708326218),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.2
    ),
    confirm=False,
)
