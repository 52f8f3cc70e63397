"""Fixed chaos scenarios (``test_sim_chaos``) that exercise a restart's label
(``overlay.core.restarts``): subtrees detached while their ancestor searches for a way back.
Each says which guarantee it checks and what would break without the rule."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_labelled_member_moves_to_the_tree_a_closer_look_found_through_it() -> None:
    # Crashes only, no partition and no frame lost: the root dies and a node far from the key
    # takes its tree over and looks, its members carrying its label; then two more nodes become
    # roots, the closest one linked only through that labelled tree. Its look reaches the other
    # root, which takes it, but the labelled members refuse the success on its way back (it may
    # not hang below a detached subtree farther than itself). Such a member moves, with its
    # subtree, to the attached tree the search found, and answers from there; refusing, it
    # would leave the closest node finding "nothing" and two roots numbering the same packets.
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


def test_a_member_that_moved_below_a_found_tree_fetches_what_it_lacked() -> None:
    # Crashes and dropped frames, no partition (its timing depends on how commits are
    # batched): a member relays a resubscribe that has seen further than the member holds, and
    # moves below the tree it finds (the rule above); the success names the resubscriber's
    # resume point as the head. A member that moves asks its new parent for what it lacks below
    # the head (a child's FillRequest); otherwise it tells its subtree at the next packet that
    # the numbers between were missed.
    outcome = run(MOVED_WITH_A_GAP)
    assert outcome.log.acks and failures(outcome) == []


MOVED_WITH_A_GAP = Scenario(
    seed=6617,
    nodes=29,
    streams=2,
    subscribers=6,
    faults=(
        Fault(at=1.9, kind="loud-crash", arg=726768, until=None),
        Fault(at=2.00001, kind="crash", arg=65536, until=36.03577046019402),
        Fault(at=5.23666340987673, kind="loud-crash", arg=300, until=None),
        Fault(at=8.781575372939887, kind="crash", arg=34222, until=10.781585372939887),
        Fault(at=9.247207880054958, kind="add", arg=5, until=None),
        Fault(at=15.0, kind="loud-crash", arg=1960, until=52.71266099017716),
        Fault(at=17.871684538171113, kind="weather", arg=0, until=25.715976073642096),
        Fault(at=19.79554023396434, kind="crash", arg=591083, until=None),
        Fault(at=26.478816562144168, kind="add", arg=6, until=None),
        Fault(at=27.95740333983004, kind="loud-crash", arg=212, until=None),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.0
    ),
    confirm=True,
)


def test_two_roots_that_refused_each_others_look_for_a_label_look_again() -> None:
    # Crashes: a root dies, two of its children each restart, and each one's search spends its
    # budget in the farther one's labelled subtree, so both become roots and look at about the
    # same time; the closer one's look is refused by the other tree's members for their label.
    # A member that refuses a look only for its label marks the answer ``lost`` (that tree is
    # restarting or looking too), and the root looks again once the labels are off, joining the
    # other tree before numbering anything; otherwise both number the same packets.
    outcome = run(REFUSED_FOR_A_LABEL)
    assert outcome.log.acks and failures(outcome) == []


REFUSED_FOR_A_LABEL = Scenario(
    seed=13777496,
    nodes=54,
    streams=3,
    subscribers=5,
    faults=(
        Fault(at=0.0, kind="crash", arg=0, until=9.558930779618311),
        Fault(at=2.604973383807297, kind="crash", arg=179, until=3.6049733838072973),
        Fault(at=7.298167269756963, kind="add", arg=5, until=None),
        Fault(at=19.953072899682766, kind="loud-crash", arg=1, until=None),
        Fault(at=30.0, kind="loud-crash", arg=8214, until=None),
    ),
    partition=(13.836936476578941, 41.05066176888806, 0.3333333333333333),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.2
    ),
    confirm=True,
)


def test_a_looking_root_that_refuses_a_closer_roots_look_says_it_may_be_wrong() -> None:
    # Crashes only, no partition and no frame lost: a root dies with some of its neighbours, and
    # two of its children restart, each becoming root of a split (the closer one reachable only
    # through a single peer). Both look at about the same time; the closer one's look reaches the
    # farther root, which takes any look but is in a look of its own whose label refuses it. A
    # looking root that refuses a look for its label marks the "not found" ``lost``, so the
    # closer root looks again once the labels are off and joins the other tree having numbered
    # nothing; a plain "not found" leaves both numbering the same packets until a probe merges
    # them.
    outcome = run(TWO_ROOTS_FROM_THE_START)
    assert outcome.log.acks and failures(outcome) == []


TWO_ROOTS_FROM_THE_START = Scenario(
    seed=0,
    nodes=51,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=0, until=None),
        Fault(at=0.0, kind="crash", arg=0, until=None),
        Fault(at=0.0, kind="crash", arg=0, until=None),
        Fault(at=4.571963531521886, kind="crash", arg=0, until=None),
        Fault(at=8.376144993553428, kind="loud-crash", arg=223, until=37.86375991443704),
        Fault(at=10.42404047866406, kind="crash", arg=4418, until=None),
        Fault(at=14.570763353079684, kind="loud-crash", arg=3946, until=None),
        Fault(at=20.800317899172697, kind="loud-crash", arg=1279, until=None),
        Fault(at=27.759926462919296, kind="loud-crash", arg=939, until=None),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.0
    ),
    confirm=True,
)


def test_looking_roots_across_a_partition_refuse_no_closer_look_silently() -> None:
    # Crashes, an added node and a partition of a quarter of the nodes: the same rule on two
    # streams. On each, two roots that took over look at once and one's look is refused by the
    # other, mid-look, for its label alone. Such a refusal says ``lost``, so the look is
    # repeated; a plain one leaves both roots numbering the same packets.
    outcome = run(ACKED_TWICE_ACROSS_A_CUT)
    assert outcome.log.acks and failures(outcome) == []


ACKED_TWICE_ACROSS_A_CUT = Scenario(
    seed=31815,
    nodes=46,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=2.3627490911073803e-296, kind="loud-crash", arg=9462, until=None),
        Fault(at=5.083907508615502e-98, kind="crash", arg=183188, until=None),
        Fault(at=1.5521158317959648e-19, kind="crash", arg=600, until=None),
        Fault(at=2.012254497442925, kind="crash", arg=65536, until=None),
        Fault(at=5.1394202001343885, kind="loud-crash", arg=553, until=None),
        Fault(at=8.467533768220038, kind="loud-crash", arg=456, until=10.467533768220038),
        Fault(at=13.811968580057346, kind="loud-crash", arg=87265, until=27.736968307291665),
        Fault(at=16.882427051023473, kind="loud-crash", arg=1000000, until=None),
        Fault(at=20.570058873287508, kind="add", arg=2, until=None),
        Fault(at=20.762975191271277, kind="loud-crash", arg=16384, until=51.17858735145098),
        Fault(at=22.99512428297206, kind="loud-crash", arg=1721, until=None),
    ),
    partition=(22.196706925110526, 61.76603649254844, 0.2519449621568567),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.02
    ),
    confirm=True,
)


def test_a_member_holding_nothing_moved_for_anothers_search_keeps_its_clients_point() -> None:
    # A member cut off in a tree that numbered nothing, its client owed packet 0 on, relays
    # after the heal a resubscribe that has seen further and moves with it to the tree it
    # finds. A member resumes at its own point (``Restarts.hang_from``) and asks its new parent
    # for the rest; taking the search's point as its own, it would tell its client that
    # packets the tree holds were missed.
    outcome = run(MOVED_FOR_ANOTHERS_SEARCH)
    assert outcome.log.acks and failures(outcome) == []


MOVED_FOR_ANOTHERS_SEARCH = Scenario(
    seed=690,
    nodes=35,
    streams=3,
    subscribers=5,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=580, until=None),
        Fault(at=5e-324, kind="crash", arg=1433, until=1.0000000000000002),
        Fault(at=2.371720366452054e-162, kind="crash", arg=72, until=None),
        Fault(at=4.871620391736537e-64, kind="loud-crash", arg=233, until=14.82426043545963),
        Fault(at=0.6249283244898441, kind="add", arg=3, until=None),
        Fault(at=0.9, kind="loud-crash", arg=0, until=None),
        Fault(at=4.403445119489323, kind="crash", arg=6418, until=None),
        Fault(at=5.144394424083055, kind="loud-crash", arg=999999, until=45.14439442408305),
        Fault(at=7.54385583428208, kind="add", arg=3, until=None),
        Fault(at=10.640119111466518, kind="loud-crash", arg=240, until=34.33761866745296),
        Fault(at=18.023796337626862, kind="add", arg=6, until=None),
        Fault(at=19.23095058336125, kind="crash", arg=5051, until=20.23095058336125),
        Fault(at=26.014435199377356, kind="crash", arg=120, until=27.914435199377355),
        Fault(at=30.0, kind="weather", arg=0, until=37.97106413893307),
    ),
    partition=(0.0, 33.39721238727673, 0.3333333333333333),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.02
    ),
    confirm=True,
)
