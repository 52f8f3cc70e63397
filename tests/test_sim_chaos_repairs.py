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
    # Node 21 relayed node 8's path to the root, and 8 relayed node 9's; 21 died silently as
    # publishing began. 8 had no packet yet and resubscribed with last_seen None ("start
    # anywhere"), so its new parent, at packet 5 by then, sent it packets from 6 on and 9 was
    # told 0..5 were missed, although the tree held them all. A relay now resumes where its
    # fresh join placed it (``Stream.start``).
    scenario = Scenario(
        seed=369, nodes=25, streams=2, subscribers=2, faults=(CRASH_21,), confirm=False
    )
    outcome = run(scenario)
    assert outcome.log.acks and failures(outcome) == []


CRASH_21 = Fault(at=0.0, kind="crash", arg=11371)


def test_restarting_node_that_relayed_a_success_gets_what_its_parent_sent_before() -> None:
    # Root 10 died; nodes 5 and 18, both its children, restarted. 18's resubscribe went
    # through 5 (detached, so routing it on) to 16, which had just joined at packet 16:
    # 16 adopted 5 for 18's search, forwarded packet 17 to it, and 5 (not yet attached,
    # so not 16's child in its own eyes) dropped it. 5's own resubscribe then succeeded at
    # 16, which skipped its catch-up because 5 was listed already, and 18 was told 17 was
    # missed. A resubscribe is now caught up even from a parent that lists its sender.
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
    # Root 9 died; 15 and 12 restarted its two subtrees. 12's resubscribe (must-beat 12,
    # closer than 15) passed node 0, in 15's detached subtree, which rightly routed it on
    # (race 3), to a node just added, which became a new root. On the success coming back
    # 0 answered 12's search itself, hanging 12's subtree below 15's; 15's own search then
    # found 12's subtree: a cycle with no root, publishes bouncing round it for ever.
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
    # Both roots died; node 3 became root, with 13 (closer to the key) below it through
    # node 1. 3's look labelled 13's subtree, then 1 died: 13's subtree, refusing 3's look
    # (its label), restarted and made 13 a root; 13's own look, routing toward the key,
    # never came near 3. Two roots numbered from 0 (packets 0..12 ordered twice).
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
    # As above, but node 1 died after 3's look had ended: 3 had no look to repeat, 13
    # became a root of its own and never found 3, and both numbered the same numbers.
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
    # Node 4 joined as the relay of a resubscribe that asked for everything (last_seen -1)
    # while the tree had no packet yet, so it kept no start point; when its parent 16 died
    # it resubscribed with last_seen None and its subtree was told 0..21 were missed.
    faults = (Fault(at=0.0, kind="crash", arg=0), Fault(at=13.0, kind="crash", arg=1))
    outcome = run(
        Scenario(seed=1, nodes=20, streams=2, subscribers=2, faults=faults, confirm=False)
    )
    assert outcome.log.acks and failures(outcome) == []


def test_a_split_that_outlived_its_looks_is_found_by_a_probe_and_merged() -> None:
    # Node 32, added with few links, was root of one tree; node 13, farther from the key,
    # of another, after the partition healed. Nothing looked again: without probes both
    # stayed roots. With probes 13 found 32, but its look's search never did (greedy
    # routing spent its budget inside 32's tree, whose members may not accept it). A
    # member that routes a resubscribe on now sends it up its own tree first, to its root,
    # which takes any. (``overlay.core.probes``; ``Node._up_the_tree``)
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
    # Node 14, root, looked again; its search ended without reporting back, and the root
    # held numbering for ever (its publishers' packets bounced, the network never quiet).
    # A look with neither confirmations nor a search outstanding now counts as found
    # nothing (``Merges._look_first``).
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
    # The root was cut off; node 12, holding nothing of the stream, became root through a
    # resubscribe that had seen up to 22, and told a later one (seen up to 13) that 14..22
    # were missed, though the first held them. It now takes them from below first
    # (``Ordering._backfill``).
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
    # The stream's closest nodes were cut off: node 16 became root there and numbered
    # nothing, while node 6 became root of the other side and numbered 0..14. At the heal a
    # probe moved 6's tree under 16, which took 0..14 as the past it never had and kept
    # them to itself: node 18, subscribed on the cut side throughout, never got them. A
    # root whose tree had nothing now takes a merging tree's past as holes to fill and
    # sends it down every branch (``Takeover.reported``).
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
    # Node 14 routed its restarting ancestor's resubscribe to its own parent 23, which
    # routed it out of the subtree and reparented; 14 took the success as "found the tree
    # through 23" and left its old parent, 23 itself. 23 dropped it, and 14 named 23 its
    # parent for ever, every publish refused there: the network never got quiet.
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
    # Node 1, closest to the key, came back with no link up yet and its client published:
    # its search ended at once, it numbered the publish 0 as root of a tree of one, and
    # the tree that had numbered 0..14 meanwhile merged into it. Its search now waits.
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
    # The old root 7 came back and became a new root through root 25's look, relayed by
    # node 32, which had joined after packet 24 and reparented to 7. 32 told the look's
    # origin "24", its own head, so 25 pushed nothing up, and packet 24, held only in 25's
    # old tree, was reported missed to the subscribers that joined 7's. 32 now says "new
    # root" on, and 25 pushes all it holds. The same run also catches a root cut off by
    # the partition (node 2) that reports a packet missed at the end of its grace, which
    # a resubscriber claimed and left with: the other side acknowledged it. A root now
    # reports what it lacks only when it numbers a packet after it (``close_tail``).
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
    # Node 5, cut off, became root of its side. The other side numbered 0..29, its root
    # died, and its tree merged into 5's. The resubscriber pushed up 3..29; 0..2 were held
    # only by nodes deeper in that tree, which nobody asked, so 5 announced them missed.
    # The root now asks its subtree (PastQuery), and the grace's end takes a push that
    # waited past a hole that has filled since (3 was announced missed once 0..2 came).
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
    # Nodes 13 and 29 lost their parent, the root, together, and both became root at
    # packet 16. Their looks ran at the same moment: 29's went to its peer 15, closer to
    # the key and in 13's tree, which carried 13's look label and refused it; 13's never
    # met 29's tree. Both numbered 17 on, and the split stayed for good: 13's probes never
    # met 29, and 29 (the closer root) was never answered. A look refused beside a closer
    # peer outside the tree is now repeated after a random pause, and a root with such a
    # peer looks at its probe rounds instead of probing.
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
    # Partitioned from the start of publishing, the minority side made root 22, which
    # numbered nothing. After the heal relay 12, which had joined the tree on a
    # resubscriber's word that it reached packet 12 and held none of 0..12, reattached
    # under 22's tree. Nothing it held went up, and nothing asked its subtree: 22 numbered
    # the next publishes 0 and 1 again. A relay now asks its subtree for what it counts
    # as processed but never held (``Gathering.ask_claimed``).
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
    # Node 25, root of a stream for a moment, pruned it while its look was on its way;
    # then all five of its neighbours died, and the look, with no peer to go to, was held
    # for a peer that never came: a search still running when the network was quiet. Such
    # a search is dropped instead of held (``hops``). Drawn by the chaos property.
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
