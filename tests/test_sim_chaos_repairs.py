"""Chaos scenarios (``test_sim_chaos``) in which a tree that lost a parent or its root, or
was cut in two, must mend into one tree that lost nothing: a relay resuming where it
joined, a restart's resubscribe, a root's look and takeover, a new root getting the past it
never had, and two trees merging. Replayed exactly (the simulation is deterministic); each
says what goes wrong without the rule it guards. All run with ``confirm_publishes`` off
(``confirm=False``)."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_relay_that_loses_its_parent_before_the_first_packet_resumes_at_the_start() -> None:
    # A chain of relays toward the root, and the upper relay dies silently as publishing
    # begins; the lower one has no packet yet. A relay resumes where its fresh join placed it
    # (``Stream.start``); resubscribing with last_seen None ("start anywhere"), it would be
    # sent only what its new parent numbers next, and its child told that packets the tree
    # holds were missed.
    scenario = Scenario(
        seed=369, nodes=25, streams=2, subscribers=2, faults=(CRASH_21,), confirm=False
    )
    outcome = run(scenario)
    assert outcome.log.acks and failures(outcome) == []


CRASH_21 = Fault(at=0.0, kind="crash", arg=11371)


def test_restarting_node_that_relayed_a_success_gets_what_its_parent_sent_before() -> None:
    # The root dies and two of its children restart; one's resubscribe goes through the other
    # (detached, so routing it on) to a node that adopts the router and forwards it a packet,
    # which the router, not yet attached, drops. The router's own resubscribe then succeeds
    # at that parent, which lists it already. A resubscribe is caught up even from a parent
    # that lists its sender; skipping the catch-up, the other child is told the packet was
    # missed.
    faults = (
        Fault(at=0.0, kind="crash", arg=794),
        Fault(at=18.0625, kind="crash", arg=0),
        Fault(at=19.0, kind="crash", arg=0),
    )
    outcome = run(
        Scenario(seed=369, nodes=25, streams=2, subscribers=2, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []


def test_detached_relay_does_not_answer_a_search_it_could_not_accept() -> None:
    # The root dies and two nodes restart its two subtrees. The closer one's resubscribe
    # passes a member of the other's detached subtree, which rightly routes it on (race 3), to
    # a node just added, which becomes a new root. A detached relay does not answer, on the
    # success coming back, a search it could not accept: hanging one subtree below the other
    # while the other's own search finds it makes a cycle with no root, publishes bouncing
    # round it for ever.
    faults = (
        Fault(at=0.0, kind="crash", arg=194),
        Fault(at=0.0, kind="crash", arg=11371),
        Fault(at=0.0, kind="add", arg=2),
        Fault(at=1.0, kind="crash", arg=0),
    )
    outcome = run(
        Scenario(seed=0, nodes=25, streams=2, subscribers=6, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []


def test_root_whose_child_left_during_its_look_looks_again() -> None:
    # A new root has a closer node below it through one relay. Its look labels that subtree,
    # then the relay dies: the subtree, refusing the look (its label), restarts and makes the
    # closer node a root, whose own look, routing toward the key, never comes near the first.
    # A root whose child left during its look looks again; otherwise two roots number the
    # same packets.
    faults = (
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=13.0, kind="crash", arg=97),
    )
    outcome = run(
        Scenario(seed=0, nodes=20, streams=2, subscribers=2, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []


def test_root_that_loses_a_child_looks_for_the_tree_its_subtree_makes() -> None:
    # As above, but the relay dies after the look has ended: the root looks for the tree its
    # subtree makes, or the closer node, a root of its own, never finds it and both number
    # the same packets.
    faults = (
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=0.0, kind="crash", arg=0),
        Fault(at=15.0, kind="crash", arg=97),
    )
    outcome = run(
        Scenario(seed=0, nodes=20, streams=2, subscribers=2, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []


def test_relay_that_joined_an_empty_tree_through_a_resubscribe_resumes_at_its_start() -> None:
    # A node joins as the relay of a resubscribe that asks for everything (last_seen -1)
    # while the tree has no packet yet. It keeps that start point: resubscribing with
    # last_seen None when its parent dies, its subtree would be told what came meanwhile
    # was missed.
    faults = (Fault(at=0.0, kind="crash", arg=0), Fault(at=13.0, kind="crash", arg=1))
    outcome = run(
        Scenario(seed=1, nodes=20, streams=2, subscribers=2, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []


def test_a_split_that_outlived_its_looks_is_found_by_a_probe_and_merged() -> None:
    # After the partition heals, a node added with few links roots one tree and a farther node
    # another, and nothing looks again. Probes let the farther root find the closer one, but
    # greedy routing of its look spends its budget inside the closer tree, whose members may
    # not accept it. A member that routes a resubscribe on sends it up its own tree first, to
    # its root, which takes any. (``overlay.core.probes``; ``Node._up_the_tree``)
    outcome = run(SPLIT_AFTER_HEAL)
    assert outcome.log.acks and failures(outcome) == []


SPLIT_AFTER_HEAL = Scenario(
    seed=111284240,
    nodes=32,
    streams=2,
    subscribers=5,
    faults=(
        Fault(at=2.2250738585e-313, kind="add", arg=2, until=None),
        Fault(at=0.095, kind="crash", arg=40619, until=None),
        Fault(at=2.0, kind="loud-crash", arg=800, until=None),
        Fault(at=7.597450582341289, kind="loud-crash", arg=256, until=43.930462061712774),
        Fault(at=18.060798622270163, kind="loud-crash", arg=10932, until=None),
        Fault(at=24.18609976339652, kind="add", arg=6, until=None),
        Fault(at=26.63523104629626, kind="add", arg=4, until=None),
        Fault(at=30.0, kind="loud-crash", arg=443, until=59.5320110947961),
    ),
    partition=(0.0, 35.879006942049664, 0.36145714518146455),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.02
    ),
    confirm=False,
)


def test_a_look_whose_search_vanished_ends_and_numbering_resumes() -> None:
    # A root looks again and its search ends without reporting back. A look with neither
    # confirmations nor a search outstanding counts as found nothing (``Merges._look_first``);
    # otherwise the root holds numbering for ever, its publishers' packets bouncing and the
    # network never quiet.
    outcome = run(LOST_LOOK)
    assert outcome.log.acks and failures(outcome) == []


LOST_LOOK = Scenario(
    seed=2147483647,
    nodes=21,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=5e-324, kind="loud-crash", arg=367, until=14.86172566539781),
        Fault(at=2.3309691339405844e-105, kind="crash", arg=2215, until=17.134395136989387),
        Fault(at=2.220446049250313e-16, kind="weather", arg=0, until=3.766611785767645),
        Fault(at=3.529216559733988e-10, kind="loud-crash", arg=291, until=15.000000000352921),
        Fault(at=1.1133341697940138, kind="crash", arg=3473, until=3.1058751890138696),
        Fault(at=2.7586150150764226, kind="crash", arg=35106, until=6.810468965714282),
        Fault(at=3.947430966906594, kind="loud-crash", arg=8192, until=37.254075427677215),
    ),
    partition=(0.4808250002688742, 1.5808250002688742, 0.33920652572765353),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.01, jitter=0.0
    ),
    confirm=False,
)


def test_a_root_made_by_a_resubscribe_gets_the_past_it_never_had() -> None:
    # The root is cut off; a node holding nothing of the stream becomes root through a
    # resubscribe that has seen far, and a later resubscribe has seen less. The root takes
    # what lies between from below first (``Ordering._backfill``), rather than telling the
    # later one that packets the first resubscriber holds were missed.
    outcome = run(ROOT_WITHOUT_PAST)
    assert outcome.log.acks and failures(outcome) == []


ROOT_WITHOUT_PAST = Scenario(
    seed=326,
    nodes=28,
    streams=3,
    subscribers=4,
    faults=(
        Fault(at=0.9101860294883137, kind="add", arg=4, until=None),
        Fault(at=3.080852869213407, kind="crash", arg=12472, until=None),
        Fault(at=4.368390904947311, kind="loud-crash", arg=1490, until=6.368390904947311),
        Fault(at=16.427269475945963, kind="crash", arg=23622, until=None),
    ),
    partition=(22.678792376583328, 51.76490010038171, 0.21525761169751237),
    weather=NetworkModel(drop=0.01, duplicate=0.05),
    confirm=False,
)


def test_a_side_that_was_cut_off_gets_what_the_other_side_numbered_at_the_merge() -> None:
    # The stream's closest nodes are cut off: a root there numbers nothing while the other
    # side's root numbers packets, and at the heal a probe moves the other tree under the
    # cut-off root. A root whose tree had nothing takes a merging tree's past as holes to fill
    # and sends it down every branch (``Takeover.reported``); kept to itself, that past never
    # reaches the subscribers on the cut side.
    outcome = run(CUT_SIDE_NEVER_CAUGHT_UP)
    assert outcome.log.acks and failures(outcome) == []


CUT_SIDE_NEVER_CAUGHT_UP = Scenario(
    seed=1768,
    nodes=30,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=1000000, until=None),
        Fault(at=3.491604383848087e-143, kind="crash", arg=471, until=None),
        Fault(at=4.998891883292696, kind="loud-crash", arg=905, until=35.37603337825068),
        Fault(at=10.0, kind="crash", arg=8192, until=None),
        Fault(at=11.428289587572545, kind="loud-crash", arg=34762, until=24.114442221191382),
        Fault(at=26.880855204887617, kind="crash", arg=317321, until=44.131111669423),
    ),
    partition=(10.515874356466039, 45.54990429953432, 0.3215219666541925),
    weather=NetworkModel(drop=0.002, jitter=0.02),
    confirm=False,
)


def test_a_child_that_routed_a_restart_through_its_parent_is_not_orphaned() -> None:
    # A child routes its restarting ancestor's resubscribe to its own parent, which routes it
    # out of the subtree and reparents. The child stays the parent's child: taking the
    # success as "found the tree through the parent" and leaving its old parent, the parent
    # itself, it would be dropped there yet name it as parent for ever, every publish
    # refused, and the network never quiet.
    outcome = run(ORPHANED_BY_ITS_PARENT)
    assert outcome.log.acks and failures(outcome) == []


ORPHANED_BY_ITS_PARENT = Scenario(
    seed=2526,
    nodes=23,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=0.005, kind="loud-crash", arg=1000000, until=34.89542460049296),
        Fault(at=2.0935060768417695, kind="weather", arg=0, until=19.51763829029288),
        Fault(at=5.013408422936599, kind="add", arg=5, until=None),
        Fault(at=11.332229148979838, kind="loud-crash", arg=265, until=46.64621857907673),
        Fault(at=13.39988563474871, kind="loud-crash", arg=93, until=None),
        Fault(at=21.613563169848163, kind="crash", arg=3219, until=None),
        Fault(at=29.79224219205983, kind="crash", arg=40631, until=None),
    ),
    partition=(3.252799484799971e-63, 2.0, 0.15760647851846576),
    weather=NetworkModel(drop=0.002, duplicate=0.05, jitter=0.02),
    confirm=False,
)


def test_a_restarted_root_whose_client_publishes_at_once_joins_the_tree_it_left() -> None:
    # The node closest to the key comes back with no link up yet and its client publishes.
    # Its search waits for a link: ending at once, it would number the publish 0 as root of
    # a tree of one, and the tree that numbered on meanwhile would merge into it.
    outcome = run(RESTARTED_ROOT_ALONE)
    assert outcome.log.acks and failures(outcome) == []


RESTARTED_ROOT_ALONE = Scenario(
    seed=128060,
    nodes=25,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=7.697174719289453e-205, kind="crash", arg=2088, until=29.587760012232227),
        Fault(at=1.5820970989372628e-204, kind="crash", arg=14654, until=9.385579175623988),
        Fault(at=6.103515625e-05, kind="loud-crash", arg=51, until=None),
        Fault(at=0.7658261407262648, kind="crash", arg=244, until=2.6658261407262644),
        Fault(at=0.99999, kind="crash", arg=62, until=None),
        Fault(at=3.514441266449407, kind="add", arg=5, until=None),
        Fault(at=5.0, kind="add", arg=6, until=None),
        Fault(at=17.291285900088415, kind="crash", arg=4522, until=None),
        Fault(at=26.264253388731895, kind="crash", arg=173, until=None),
        Fault(at=28.34564024487689, kind="add", arg=6, until=None),
    ),
    partition=None,
    weather=NetworkModel(drop=0.01, duplicate=0.05),
    confirm=False,
)


def test_a_new_root_made_by_a_restarts_search_gets_the_past_from_its_origin() -> None:
    # The old root comes back and becomes a new root through another root's look, relayed by
    # a node that joined late and reparents to it. The relay says "new root" on rather than
    # its own head, so the look's origin pushes all it holds; told that head, it would push
    # nothing and a packet held only in its old tree would be reported missed. The scenario
    # also has a root cut off by the partition whose grace ends while a resubscriber that
    # claimed a packet has left with it: a root reports what it lacks only when it numbers a
    # packet after it (``close_tail``), since the other side acknowledged it.
    outcome = run(NEW_ROOT_WITHOUT_PAST)
    assert outcome.log.acks and failures(outcome) == []


NEW_ROOT_WITHOUT_PAST = Scenario(
    seed=177,
    nodes=35,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=8.606935755357261, kind="crash", arg=692, until=None),
        Fault(at=23.629200593527603, kind="crash", arg=2647, until=46.51500838415587),
        Fault(at=23.74144032936996, kind="loud-crash", arg=1202, until=62.741440329369965),
        Fault(at=25.63557414921047, kind="loud-crash", arg=0, until=36.63600567550261),
        Fault(at=27.07444585101603, kind="crash", arg=4395, until=50.321710873562964),
    ),
    partition=(25.86959383087589, 56.54050221203377, 0.20721713840803685),
    weather=NetworkModel(drop=0.01),
    confirm=False,
)


def test_a_merged_side_gets_packets_held_only_deep_in_the_other_tree() -> None:
    # A node cut off becomes root of its side; the other side's root dies and its tree merges
    # in, and the resubscriber pushes up only the later packets, the first ones being held
    # deeper in that tree. The root asks its subtree (PastQuery) rather than announcing them
    # missed, and the grace's end takes a push that waited past a hole that has filled since.
    outcome = run(PAST_HELD_DEEP)
    assert outcome.log.acks and failures(outcome) == []


PAST_HELD_DEEP = Scenario(
    seed=3600,
    nodes=60,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=2.6752902230751868e-194, kind="crash", arg=469, until=None),
        Fault(at=3.084432366682227e-71, kind="loud-crash", arg=3713, until=None),
        Fault(at=5.640190351985994, kind="add", arg=4, until=None),
        Fault(at=6.822207631928746, kind="loud-crash", arg=387, until=None),
        Fault(at=7.05821456318066, kind="crash", arg=885, until=9.2938245890701),
        Fault(at=7.3923002379863, kind="crash", arg=550791, until=45.89264070913832),
        Fault(at=9.3417907063836, kind="loud-crash", arg=139, until=36.94529835941624),
        Fault(at=10.096118426492675, kind="add", arg=6, until=None),
        Fault(at=10.18970237866973, kind="add", arg=2, until=None),
        Fault(at=11.56526732939096, kind="loud-crash", arg=40877, until=36.4391541520562),
        Fault(at=11.857990659720173, kind="crash", arg=423663, until=12.857990659720173),
        Fault(at=16.24880672248245, kind="crash", arg=254, until=18.148806722482448),
        Fault(at=18.467111468369716, kind="loud-crash", arg=150479, until=44.81706151593688),
        Fault(at=24.62451911347743, kind="loud-crash", arg=2153, until=32.71320801180332),
        Fault(at=28.08847831309511, kind="crash", arg=6968, until=None),
        Fault(at=29.0, kind="loud-crash", arg=406, until=None),
        Fault(at=29.171672001197393, kind="crash", arg=84646, until=None),
        Fault(at=29.999999999999996, kind="loud-crash", arg=3645, until=None),
    ),
    partition=(2.340014526873419e-201, 23.106033660638147, 0.26230443363267164),
    weather=NetworkModel(drop=0.002, duplicate=0.05, jitter=0.02),
    confirm=False,
)


def test_two_roots_that_took_over_together_become_one_tree() -> None:
    # Two children lose the root together and both become root; their looks run at the same
    # moment, one's refused by the other tree's look label, the other's never meeting its
    # tree, and the farther root's probes never meet the closer one. A look refused beside a
    # closer peer outside the tree is repeated after a random pause, and a root with such a
    # peer looks at its probe rounds instead of probing; otherwise the split stays for good.
    outcome = run(TWO_LOOKS_AT_ONCE)
    assert outcome.log.acks and failures(outcome) == []


TWO_LOOKS_AT_ONCE = Scenario(
    seed=3730,
    nodes=33,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=4.0405891472526283e-271, kind="add", arg=6, until=None),
        Fault(at=4.731975064097823e-88, kind="loud-crash", arg=38, until=19.302945016859784),
        Fault(at=1.1754943508222875e-38, kind="loud-crash", arg=494, until=14.099946397095556),
        Fault(at=5.960464477539063e-08, kind="loud-crash", arg=69, until=None),
        Fault(at=4.008414435128348, kind="add", arg=6, until=None),
        Fault(at=4.559608135822858, kind="loud-crash", arg=198376, until=None),
        Fault(at=5.595421422276859, kind="crash", arg=128542, until=None),
        Fault(at=17.154278528395526, kind="crash", arg=59955, until=19.154288528395526),
        Fault(at=18.25749367055408, kind="add", arg=6, until=None),
        Fault(at=18.409065908931474, kind="loud-crash", arg=29840, until=33.60275987260806),
        Fault(at=22.51637413743136, kind="weather", arg=0, until=23.51637413743136),
        Fault(at=24.582295014182925, kind="loud-crash", arg=14, until=26.082295014182925),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.02
    ),
    confirm=False,
)


def test_a_relay_holding_nothing_of_its_head_gets_its_subtree_to_tell_the_new_root() -> None:
    # Partitioned from the start of publishing, the minority side makes a root that numbers
    # nothing. After the heal a relay that joined the tree on a resubscriber's word, counting
    # packets processed that it never held, reattaches under that root. A relay asks its
    # subtree for what it counts as processed but never held (``Gathering.ask_claimed``);
    # otherwise nothing goes up and the root numbers the next publishes from 0 again.
    outcome = run(RELAY_HOLDING_NOTHING)
    assert outcome.log.acks and failures(outcome) == []


RELAY_HOLDING_NOTHING = Scenario(
    seed=690,
    nodes=35,
    streams=3,
    subscribers=5,
    faults=(
        Fault(at=5e-324, kind="crash", arg=1433, until=1.0000000000000002),
        Fault(at=2.371720366452054e-162, kind="crash", arg=72, until=None),
        Fault(at=4.871620391736537e-64, kind="loud-crash", arg=233, until=14.82426043545963),
        Fault(at=0.6249283244898441, kind="add", arg=3, until=None),
        Fault(at=4.403445119489323, kind="crash", arg=6418, until=None),
        Fault(at=5.0, kind="loud-crash", arg=0, until=None),
        Fault(at=5.144394424083055, kind="loud-crash", arg=999999, until=45.14439442408305),
        Fault(at=7.54385583428208, kind="add", arg=3, until=None),
        Fault(at=10.640119111466518, kind="loud-crash", arg=240, until=34.33761866745296),
        Fault(at=18.023796337626862, kind="add", arg=6, until=None),
        Fault(at=19.23095058336125, kind="crash", arg=5051, until=20.23095058336125),
        Fault(at=20.61362385196406, kind="loud-crash", arg=580, until=None),
        Fault(at=26.014435199377356, kind="crash", arg=120, until=27.914435199377355),
        Fault(at=30.0, kind="weather", arg=0, until=37.97106413893307),
    ),
    partition=(0.0, 33.39721238727673, 0.3333333333333333),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.02
    ),
    confirm=False,
)


def test_a_node_cut_off_by_crashes_keeps_no_search_for_a_stream_it_left() -> None:
    # A node, root of a stream for a moment, prunes it while its look is on its way; then all
    # its neighbours die. A search for a stream the node left is dropped instead of held for a
    # peer (``hops``); held, it would wait for a peer that never comes, still running when the
    # network is quiet.
    outcome = run(CUT_OFF_BY_CRASHES)
    assert outcome.log.acks and failures(outcome) == []


CUT_OFF_BY_CRASHES = Scenario(
    seed=0,
    nodes=41,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="crash", arg=1, until=None),
        Fault(at=0.0, kind="loud-crash", arg=0, until=None),
        Fault(at=0.0, kind="crash", arg=1, until=None),
        Fault(at=0.0, kind="crash", arg=5332, until=None),
        Fault(at=16.45947436773163, kind="crash", arg=1, until=None),
        Fault(at=21.07615292520332, kind="crash", arg=934213, until=None),
        Fault(at=29.30535328085218, kind="crash", arg=0, until=None),
        Fault(at=29.30535328085218, kind="loud-crash", arg=39, until=None),
    ),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.0, jitter=0.0
    ),
    confirm=False,
)
