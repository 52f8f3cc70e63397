"""Chaos scenarios of a split tree: two roots left side by side, or
both numbering one packet number, replayed exactly (the simulation is deterministic). Root
probes' trails (``overlay.core.probes``) mend the first three; a relay that held a look's
success for packets it lacked (``overlay.core.refills``) the fourth. All four ran with
``confirm_publishes`` on, whose slower numbering gives them their timing. The fifth is a
crossing probe held back by a look's backoff; the sixth, a probe whose budget runs out past
the closest node; the seventh, on a proximity graph, a root that took over just after a
heal and probes once its look ends. Then two roots that took over from one dead root look
in step, and the farther one follows the closer one's look back; and the same two roots
under a partition, merged by probes on the healed links. The last, with confirmation off,
a root's probe on a healed partition's new links sent to a peer that had died
unnoticed."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_farther_root_follows_the_closer_roots_probe_across_the_wrap() -> None:
    # Two roots keep an idle stream on either side of the 0/1 wrap, and the farther one's tree
    # holds nodes closer than either. Its looks go greedily into its own tree, whose labelled
    # members refuse them and spend their budget, while the closer root's probes cross it each
    # round (only a closer root answers a probe). The farther root looks back along the
    # probe, trying the closer root first, so the trees merge.
    outcome = run(ACROSS_THE_WRAP)
    assert outcome.log.acks and failures(outcome) == []


def test_a_farther_root_whose_closer_peer_is_its_grandchild_follows_the_probe_back() -> None:
    # A farther root with a closer peer deep in its own tree, and a closer root reachable from
    # it only through members of the two trees: the farther root's looks (toward a closer peer
    # not its child) are all refused inside its own tree, while the closer root's probes cross
    # it. The farther root looks back along those probes, so the trees merge.
    outcome = run(GRANDCHILD_CLOSER)
    assert outcome.log.acks and failures(outcome) == []


def test_a_closer_root_in_its_look_answers_the_probe_of_a_healed_partition() -> None:
    # A root is made on each side of a partition, and the partition heals while the closer
    # one looks; the farther root's probe reaches it mid-look on the new link. A closer root
    # in a repair answers a probe too, so the farther root joins it; passed on, the probe
    # leaves both numbering packet 0 if the look misses the other tree.
    outcome = run(HEALED_MID_LOOK)
    assert outcome.log.acks and failures(outcome) == []


def test_a_relay_that_fetched_what_a_look_lacked_passes_on_the_success_its_root_gave() -> None:
    # A partition takes the root away and two subtrees on the publishers' side take over. One's
    # look reaches the other's tree, which takes it, through a relay that lacks packets the
    # look has seen and fetches them first. When they come, the relay passes on the success
    # its root gave, though it could not accept the look itself; refusing it, the look would
    # fail and its root number packets beside a tree that already holds them.
    outcome = run(RELAYED_SUCCESS_HELD)
    assert outcome.log.acks and failures(outcome) == []


ACROSS_THE_WRAP = Scenario(
    seed=7852,
    nodes=40,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=2.2250738585072014e-308, kind="crash", arg=5581, until=None),
        Fault(at=0.35214831178965744, kind="loud-crash", arg=217, until=17.186274383381132),
        Fault(at=1.0, kind="loud-crash", arg=23244, until=None),
        Fault(at=3.4303046726216544, kind="loud-crash", arg=0, until=7.074273944629869),
        Fault(at=14.83725645433341, kind="crash", arg=1938, until=None),
        Fault(at=15.121792330732108, kind="weather", arg=0, until=35.121792330732106),
        Fault(at=15.154970143504157, kind="crash", arg=801, until=30.15497014350416),
        Fault(at=15.309097837454654, kind="loud-crash", arg=2048, until=25.832195821492533),
        Fault(at=19.888821761663674, kind="loud-crash", arg=30, until=None),
        Fault(at=21.430317315769454, kind="loud-crash", arg=216, until=26.398611251471113),
        Fault(at=26.427704173127317, kind="crash", arg=8875, until=51.21130812153538),
    ),
    partition=(16.242557781417002, 39.52370549939288, 0.12912425272243275),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.02
    ),
    confirm=True,
)

GRANDCHILD_CLOSER = Scenario(
    seed=10456,
    nodes=52,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=0.0, kind="crash", arg=344379, until=None),
        Fault(at=1.1234412950227428e-158, kind="crash", arg=892, until=None),
        Fault(at=1.1234412950227428e-158, kind="loud-crash", arg=100000, until=23.865263916186134),
        Fault(at=1.0, kind="crash", arg=627496, until=None),
        Fault(at=5.0, kind="add", arg=5, until=None),
        Fault(at=6.194655932833201, kind="loud-crash", arg=81537, until=None),
        Fault(at=8.70335967052097, kind="crash", arg=65535, until=9.803359670520969),
        Fault(at=11.62517725477771, kind="loud-crash", arg=162233, until=25.403079686639245),
        Fault(at=11.938085973009287, kind="crash", arg=162, until=None),
        Fault(at=15.0, kind="loud-crash", arg=604, until=None),
        Fault(at=15.0, kind="loud-crash", arg=1077, until=None),
        Fault(at=16.87575171497888, kind="loud-crash", arg=1390, until=None),
        Fault(at=28.192985184743243, kind="weather", arg=0, until=34.473067506362234),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.02
    ),
    confirm=True,
)

HEALED_MID_LOOK = Scenario(
    seed=6,
    nodes=56,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=0.0, kind="crash", arg=1002, until=None),
        Fault(at=8.883818051586207, kind="loud-crash", arg=1312, until=10.883818051586207),
        Fault(at=13.687469801608664, kind="weather", arg=0, until=15.56067557988515),
        Fault(at=14.062247769546474, kind="loud-crash", arg=773, until=None),
        Fault(at=14.881106877018851, kind="loud-crash", arg=2737, until=None),
        Fault(at=26.38631310283013, kind="crash", arg=23353, until=None),
        Fault(at=30.0, kind="crash", arg=0, until=31.0),
    ),
    partition=(5.674354199166144e-148, 13.687469801608664, 0.2385820961983092),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.0, jitter=0.02
    ),
    confirm=True,
)

RELAYED_SUCCESS_HELD = Scenario(
    seed=373,
    nodes=47,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="crash", arg=197538, until=6.327567426867757),
        Fault(at=2.2250738585e-313, kind="crash", arg=595, until=None),
        Fault(at=2.70127529428154e-100, kind="crash", arg=964, until=None),
        Fault(at=1.192092896e-07, kind="add", arg=2, until=None),
        Fault(at=0.023359669165514692, kind="crash", arg=263, until=None),
        Fault(at=0.7647052649396782, kind="add", arg=6, until=None),
        Fault(at=4.969203207709259, kind="weather", arg=0, until=6.739373405252284),
        Fault(at=7.938393372703858, kind="add", arg=6, until=None),
        Fault(at=8.793965173585173, kind="loud-crash", arg=1000000, until=None),
        Fault(at=13.119980473963697, kind="crash", arg=200949, until=None),
        Fault(at=15.0, kind="crash", arg=1597, until=52.07538466319687),
        Fault(at=15.26876029897322, kind="loud-crash", arg=2196, until=None),
        Fault(at=19.336586269218778, kind="crash", arg=100, until=None),
    ),
    partition=(15.0, 52.51276179436612, 0.38982841505140875),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)


def test_a_crossing_probe_is_followed_though_the_root_just_looked_past_a_closer_peer() -> None:
    # After a partition and crashes, a root's tree has members closer to the key than a second
    # root beside it. The first root, with closer peers outside its children, looks past them at
    # each probe round, and its own members refuse; the second root's probes cross it just after
    # each such round begins. A look past a closer peer must not hold a crossing probe back under
    # its backoff, or the two roots never merge.
    outcome = run(CROSSED_AFTER_A_GUESS)
    assert outcome.log.acks and failures(outcome) == []


CROSSED_AFTER_A_GUESS = Scenario(
    seed=0,
    nodes=57,
    streams=3,
    subscribers=5,
    faults=(
        Fault(at=2.2250738585072014e-308, kind="crash", arg=19065, until=None),
        Fault(at=0.095, kind="loud-crash", arg=50725, until=37.173634144374205),
        Fault(at=3.069644414215179, kind="loud-crash", arg=1000000, until=None),
        Fault(at=7.855529256970739, kind="crash", arg=926946, until=18.339446808870058),
        Fault(at=9.249926810608068, kind="crash", arg=144080, until=13.326546010036997),
        Fault(at=18.930355210239153, kind="weather", arg=0, until=30.976908754541682),
        Fault(at=21.635530219159396, kind="add", arg=2, until=None),
        Fault(at=29.999999999999996, kind="crash", arg=457, until=50.632861979504284),
    ),
    partition=(6.708584277145428, 25.63893948738458, 0.25104121552271985),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)


def test_a_probe_reset_at_the_closest_node_has_its_whole_budget_past_it() -> None:
    # Crashes and a partition: a root whose ring neighbours died and whose links are all farther
    # from the key ends up beside another root after the heal; greedy routing toward it ends at
    # the closest live node, a member of the other tree, one or two hops short. A probe resets
    # there to the budget it started with (``probes``), not to max_htl, so it reaches the closer
    # root and the trees merge; otherwise it runs out short every round and two roots stay.
    outcome = run(TWO_HOPS_SHORT)
    assert outcome.log.acks and failures(outcome) == []


TWO_HOPS_SHORT = Scenario(
    seed=619263,
    nodes=43,
    streams=3,
    subscribers=4,
    faults=(
        Fault(at=2.220446049250313e-16, kind="crash", arg=308, until=None),
        Fault(at=8.64213119991578, kind="loud-crash", arg=63, until=None),
        Fault(at=13.751975350699833, kind="loud-crash", arg=5775, until=24.653200937711276),
        Fault(at=22.53355726717632, kind="crash", arg=8141, until=None),
        Fault(at=22.877390953392137, kind="crash", arg=768, until=None),
        Fault(at=28.701529621039633, kind="loud-crash", arg=7260, until=50.04967565969309),
        Fault(at=29.452682458800073, kind="crash", arg=39803, until=64.54053783964865),
    ),
    partition=(22.962809405995824, 57.33246363520803, 0.17405482596118288),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
)


def test_a_root_that_took_over_just_after_a_heal_probes_and_the_farther_root_joins_it() -> None:
    # A partition holds a root on the side cut off; while it heals, the other side's root
    # dies, and the side's root probes on the new links before a closer member there has
    # taken over. That member's look finds no closer tree, and the side's root, farther,
    # would not probe again for a probe interval, both numbering the two publishers'
    # packets from 7 on. The new root probes once its look ends, its probe crosses the
    # farther root, and that root's look joins it before either numbers twice.
    outcome = run(TOOK_OVER_AFTER_THE_HEAL)
    assert outcome.cut is not None and outcome.cut.side
    assert outcome.log.acks and failures(outcome) == []


TOOK_OVER_AFTER_THE_HEAL = Scenario(
    seed=1876533108,
    nodes=58,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=6.512474127959395, kind="loud-crash", arg=537137, until=None),
        Fault(at=7.243292537357756, kind="crash", arg=495060, until=None),
        Fault(at=13.241984137680936, kind="weather", arg=0, until=31.086216320187944),
        Fault(at=15.161776297498859, kind="loud-crash", arg=491248, until=None),
        Fault(at=18.453131819509746, kind="crash", arg=218280, until=None),
        Fault(at=20.898789397997202, kind="crash", arg=395438, until=None),
        Fault(at=21.04573049189583, kind="loud-crash", arg=327917, until=58.35494370486457),
        Fault(at=28.074172869371697, kind="crash", arg=923354, until=None),
        Fault(at=28.433565700543845, kind="loud-crash", arg=177109, until=None),
        Fault(at=29.173514790572607, kind="crash", arg=473664, until=68.47132850627011),
        Fault(at=29.56320312508144, kind="loud-crash", arg=718956, until=None),
    ),
    partition=(12.994390313078672, 29.331706547010914, 0.1412152820784117),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
    proximity=16,
)


def test_two_roots_looking_in_step_merge_along_the_closer_ones_look() -> None:
    # The root of a stream dies loudly, and two of its children take over its tree's two
    # halves at the same moment. Their looks then run in step, each repeat after its
    # random pause: the closer root's look (0.070 from a key at 0.163) passes through the
    # farther root's tree (its root at 0.393, its members the nodes closest to the key),
    # refused for that tree's label every time, and the farther root's own looks, routed
    # toward the key, are refused inside its own tree. After their repeats both would
    # number the same packets. The farther root is crossed by the closer origin's look and
    # follows it back, as it would a probe, and its tree joins the closer one.
    outcome = run(LOOKS_IN_STEP)
    assert outcome.log.acks and failures(outcome) == []
    assert sum(node.stats.looks_crossed for node in outcome.sim.nodes) >= 1


def test_two_roots_looking_in_step_under_a_partition_end_as_one_tree() -> None:
    # The same race during a long partition with many crashes on a lossy network: two
    # subtrees of one dead root take over side by side under the partition. Probes on the
    # healed links, going on past peers that died unnoticed once their links go, merge the
    # trees before the looks cross.
    outcome = run(LOOKS_IN_STEP_UNDER_A_PARTITION)
    assert outcome.log.acks and failures(outcome) == []
    assert sum(node.stats.probes_rerouted for node in outcome.sim.nodes) >= 1


def test_a_probe_sent_to_a_peer_that_died_unnoticed_goes_on_when_its_link_goes() -> None:
    # With confirmation off, a partition cuts the root off from both publishers, and two
    # members on its side whose parent was across the cut make a second tree on an island.
    # Neither root numbers while cut off; at the heal the publishes come to both at once.
    # The farther root probes on its new links, and the probe's next hop is a peer that
    # had died unnoticed. Lost there, both roots would number the same packets until the
    # next probe round; when liveness drops that peer, the probe goes on past it, finds
    # the closer root, and the farther root's tree joins it.
    outcome = run(PROBE_PAST_A_DEAD_PEER)
    assert outcome.log.acks and failures(outcome) == []
    assert sum(node.stats.probes_rerouted for node in outcome.sim.nodes) >= 1


LOOKS_IN_STEP = Scenario(
    seed=2298862318,
    nodes=49,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=11.633266575081183, kind="crash", arg=504885, until=None),
        Fault(at=12.327748360903485, kind="crash", arg=102236, until=16.608978657492905),
        Fault(at=12.874246572397674, kind="add", arg=5, until=None),
        Fault(at=19.686566293502796, kind="add", arg=5, until=None),
        Fault(at=28.27441081374696, kind="loud-crash", arg=367507, until=None),
    ),
    partition=(10.72063222185433, 15.787430579462939, 0.29321182538650714),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.2
    ),
    confirm=True,
    proximity=1,
)


LOOKS_IN_STEP_UNDER_A_PARTITION = Scenario(
    seed=2092906073,
    nodes=57,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=1.9844227388944147, kind="loud-crash", arg=444416, until=7.963160644996162),
        Fault(at=2.4615820955170764, kind="crash", arg=159297, until=None),
        Fault(at=4.4444048545952155, kind="crash", arg=586835, until=None),
        Fault(at=7.9783837225579655, kind="loud-crash", arg=952950, until=12.701336878280967),
        Fault(at=9.181980486966312, kind="crash", arg=753416, until=None),
        Fault(at=10.772322768227305, kind="crash", arg=346465, until=32.4798821881173),
        Fault(at=10.84278966405222, kind="loud-crash", arg=466356, until=None),
        Fault(at=12.198891088587953, kind="loud-crash", arg=458853, until=51.233873355948674),
        Fault(at=12.43192909524381, kind="loud-crash", arg=22641, until=49.23628406665645),
        Fault(at=12.859269585400861, kind="crash", arg=677808, until=46.930549995077534),
        Fault(at=15.446670132858795, kind="crash", arg=753181, until=43.175318982897565),
        Fault(at=15.782982865716765, kind="loud-crash", arg=226702, until=None),
        Fault(at=21.829811558595907, kind="weather", arg=0, until=33.372711037850486),
        Fault(at=24.14148619033951, kind="loud-crash", arg=311917, until=None),
        Fault(at=25.714101086221934, kind="loud-crash", arg=663452, until=None),
        Fault(at=29.597772757435738, kind="crash", arg=622289, until=None),
    ),
    partition=(13.735760289344311, 50.88438071113371, 0.34763277431717965),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
    proximity=1,
)


PROBE_PAST_A_DEAD_PEER = Scenario(
    seed=4026181090,
    nodes=50,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=7.895882082264247, kind="crash", arg=556520, until=None),
        Fault(at=19.227285970860372, kind="crash", arg=584927, until=None),
        Fault(at=27.00469351707702, kind="crash", arg=216733, until=45.226328267153875),
    ),
    partition=(5.84471058599634, 24.92057209592118, 0.35458605381961883),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.0, jitter=0.0
    ),
    confirm=False,
    proximity=1,
)
