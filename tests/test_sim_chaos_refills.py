"""Fixed chaos scenarios (``test_sim_chaos``) that exercise a node's waiters
(``overlay.core.refills``): children whose catch-up waits for packets their relay lacks.
Each says which guarantee it checks and what would break without the rule."""

from __future__ import annotations

from dataclasses import replace

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_root_holds_its_waiters_while_it_looks_for_a_tree_that_holds_their_packets() -> None:
    # A partition of a third of the nodes, and crashes. After the heal the main side's root
    # resubscribes to the cut side's root (closer to the key, holding nothing), whose subtree
    # waits at it for the packets; the pushes that would bring them die with a broken link,
    # the main side's root becomes a root again, and the cut side's grace ends in a look that
    # would join its tree. A root's waiters wait through its grace or look (at most MAX_HOLDS
    # timeouts), as they do under a restarting ancestor, and are served once it joins the
    # tree that holds their packets; otherwise they are told acknowledged packets were missed.
    outcome = run(LONG_PARTITION_MISSED)
    assert outcome.log.acks and failures(outcome) == []


LONG_PARTITION_MISSED = Scenario(
    seed=690,
    nodes=35,
    streams=3,
    subscribers=5,
    faults=(
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
        Fault(at=20.61362385196406, kind="loud-crash", arg=580, until=None),
        Fault(at=26.014435199377356, kind="crash", arg=120, until=27.914435199377355),
        Fault(at=30.0, kind="weather", arg=0, until=37.97106413893307),
    ),
    partition=(0.0, 33.39721238727673, 0.3333333333333333),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.02
    ),
    confirm=True,
)


def test_a_relay_serves_a_waiter_only_once_it_holds_every_number_the_waiter_asked_for() -> None:
    # After a partition's heal, a relay that lacks the oldest packets takes two resubscribes and
    # asks its parent first for a narrower range, then for a wider one; the answer to the
    # narrower ask comes first. A waiter is served only once none of the numbers it asked for is
    # lacking, as at a root: "the last number asked is in" would tell the second resubscriber
    # that acknowledged packets the tree holds were missed, just before they arrive.
    outcome = run(NARROWER_ASK_ANSWERED_FIRST)
    assert outcome.log.acks and failures(outcome) == []


NARROWER_ASK_ANSWERED_FIRST = Scenario(
    seed=811,
    nodes=50,
    streams=3,
    subscribers=5,
    faults=(
        Fault(at=1.401298464324817e-45, kind="add", arg=5, until=None),
        Fault(at=1.722133802349524, kind="add", arg=3, until=None),
        Fault(at=3.025673282085751, kind="crash", arg=100000, until=None),
        Fault(at=7.903097212298562, kind="loud-crash", arg=51878, until=None),
        Fault(at=15.027673763564621, kind="add", arg=4, until=None),
        Fault(at=17.099945256391074, kind="crash", arg=124, until=None),
        Fault(at=22.090657525651835, kind="loud-crash", arg=1981, until=None),
        Fault(at=29.999999999999996, kind="crash", arg=0, until=None),
    ),
    partition=(19.548685000714848, 55.18507392200482, 0.31602570315537426),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)


def test_a_search_at_a_root_cut_off_past_its_grace_waits_for_the_heal() -> None:
    # A partition after crashes: an acknowledged packet misses two subscribers whose parents
    # just died, and the cut leaves them, with the old root, on a side where nobody holds a copy.
    # The side's new root takes the later packets pushed up to it, and a subscriber's search
    # waits there for the missing one past the root's grace and look. A search waiting at a root
    # is held while it would still wait, grace or not: told the packet was missed, the
    # subscribers would lose it although the other side, which the cut rejoins, holds it.
    outcome = run(SEARCH_ANSWERED_BEFORE_THE_HEAL)
    assert outcome.log.acks and failures(outcome) == []


SEARCH_ANSWERED_BEFORE_THE_HEAL = Scenario(
    seed=0,
    nodes=55,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=2.225073858507203e-309, kind="crash", arg=257024, until=None),
        Fault(at=1.772581726261227e-159, kind="crash", arg=963, until=2.9080294311448585),
        Fault(at=2.0103560413873428e-80, kind="crash", arg=2911, until=None),
        Fault(at=6.103515625e-05, kind="add", arg=5, until=None),
        Fault(at=0.095, kind="crash", arg=3364, until=34.65735225106852),
        Fault(at=0.4594956557858444, kind="crash", arg=17453, until=13.077005487384536),
        Fault(at=2.237769191046444, kind="crash", arg=2220, until=4.137769191046444),
        Fault(at=7.198571825748886, kind="add", arg=2, until=None),
        Fault(at=9.789558183478482, kind="crash", arg=5222, until=None),
        Fault(at=10.588196701824124, kind="crash", arg=360, until=None),
        Fault(at=10.694190942104244, kind="crash", arg=59, until=15.233397283615274),
        Fault(at=12.052254341321513, kind="loud-crash", arg=639, until=None),
        Fault(at=13.127156764207985, kind="crash", arg=0, until=25.301091045444508),
        Fault(at=14.785901631326274, kind="crash", arg=316, until=21.281532214419528),
        Fault(at=15.162456478841452, kind="loud-crash", arg=172, until=48.0295949533005),
        Fault(at=17.714857241008822, kind="loud-crash", arg=108780, until=51.67153801959818),
        Fault(at=19.067297936143746, kind="loud-crash", arg=999999, until=None),
        Fault(at=27.850089408272243, kind="weather", arg=0, until=37.52781090354735),
        Fault(at=29.167847923608527, kind="crash", arg=256, until=None),
    ),
    partition=(6.535443625910082, 28.805715069447487, 0.3004736093440032),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
)


def test_a_member_asks_its_parent_for_what_lies_below_the_parents_mark() -> None:
    # A partition: packets numbered during the cut reach only part of the tree, the root dies,
    # and after the heal a new root holding none of them is made by a resubscribe that has seen
    # them. In its grace it tells a relay its head is where its gap starts, and the pushes that
    # bring the packets in are kept only for the root's waiters (``Ordering._backfill``); a relay
    # that entered holding nothing after a search's claim resumes past a child that holds less.
    # A member whose parent's mark is past what it processed asks that parent for the numbers
    # between (``showing``); the parent serves them, asking up the tree for what it never had,
    # and the root, which kept them, replays them. Otherwise the subscribers meet the next packet
    # as a gap and are told acknowledged packets were missed.
    outcome = run(MARK_PAST_WHAT_A_MEMBER_HOLDS)
    assert outcome.log.acks and failures(outcome) == []


def test_a_relay_told_a_head_below_its_claim_is_owed_what_is_pushed_up_after_it() -> None:
    # The same scenario with node 2 added at +26.09, not +29.84, which the member-side ask
    # (above) alone does not pass: a member asks the new root early for packets it has none
    # of, and once its wait runs out the whole subtree is told they were missed. The root owes
    # a relay it told its gap's start what is pushed up after it (``joining.owed_after``):
    # the relay's catch-up and its mark wait for the pushes, so no mark past the gap reaches
    # the member before the packets do, and nobody asks before the tree settles.
    faults = list(MARK_PAST_WHAT_A_MEMBER_HOLDS.faults)
    added = faults.pop()
    assert added.kind == "add" and added.arg == 2
    faults.append(replace(added, at=26.09419259657799))
    faults.sort(key=lambda fault: fault.at)
    outcome = run(replace(MARK_PAST_WHAT_A_MEMBER_HOLDS, faults=tuple(faults)))
    assert outcome.log.acks and failures(outcome) == []


MARK_PAST_WHAT_A_MEMBER_HOLDS = Scenario(
    seed=4,
    nodes=46,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=1.480836526623234e-262, kind="loud-crash", arg=38099, until=None),
        Fault(at=1.175494351e-38, kind="crash", arg=30943, until=25.576587847077874),
        Fault(at=10.564686405841623, kind="add", arg=4, until=None),
        Fault(at=16.266524987341956, kind="crash", arg=1024, until=None),
        Fault(at=17.13071922367919, kind="add", arg=5, until=None),
        Fault(at=23.260501990745034, kind="loud-crash", arg=503, until=None),
        Fault(at=25.44976373151711, kind="loud-crash", arg=165, until=59.00721726739547),
        Fault(at=28.673726133263585, kind="crash", arg=970547, until=59.28302219987819),
        Fault(at=29.571666030233, kind="weather", arg=0, until=43.60094205183772),
        Fault(at=29.674518316788983, kind="loud-crash", arg=3390, until=55.25110616386686),
        Fault(at=29.83652978179394, kind="crash", arg=177808, until=59.91309242493749),
        Fault(at=29.83652978179394, kind="add", arg=2, until=None),
    ),
    partition=(1.9, 36.15827947564052, 0.38905323161969263),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.0
    ),
    confirm=True,
)


def test_a_root_asks_its_subtree_for_what_a_late_resubscriber_lacks() -> None:
    # A node cut off after the first packet resubscribes late to a root that forgot the stream
    # when its last child left and, made root again, holds none of it, while a branch below
    # holds it all. A root asks its subtree for what a waiter lacks before saying it was
    # missed.
    outcome = run(PAST_IN_A_BRANCH)
    assert outcome.log.acks and failures(outcome) == []


PAST_IN_A_BRANCH = Scenario(
    seed=487168,
    nodes=60,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=3.48516201483149e-26, kind="crash", arg=626, until=None),
        Fault(at=0.9154254455564306, kind="add", arg=4, until=None),
        Fault(at=0.99999, kind="loud-crash", arg=141496, until=None),
        Fault(at=7.459512171294215, kind="crash", arg=76468, until=None),
        Fault(at=15.894272092320293, kind="weather", arg=0, until=29.93165012181117),
        Fault(at=29.6795150011775, kind="crash", arg=9492, until=30.6795150011775),
        Fault(at=30.0, kind="crash", arg=360210, until=None),
    ),
    partition=(2.0508761143890513, 38.088530068278395, 0.1497499671647161),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.0
    ),
    confirm=False,
)


def test_a_relay_that_reattaches_gives_its_waiter_the_new_parents_answer() -> None:
    # A relay holds a resubscribe waiting for packets and restarts partway through the wait;
    # attached again it asks the new root, which gathers some from the relay's own child and
    # answers only when its own wait ends. A waiter's clock starts again with each ask;
    # running on from the first, it would run out just before the answer and tell the
    # resubscriber the packets were missed.
    outcome = run(WAITER_OUTLIVED)
    assert outcome.log.acks and failures(outcome) == []


WAITER_OUTLIVED = Scenario(
    seed=11209,
    nodes=27,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.06123345699752038, kind="add", arg=4, until=None),
        Fault(at=0.5815779359682117, kind="crash", arg=5518, until=21.567827423034736),
        Fault(at=9.591717303128013, kind="add", arg=5, until=None),
        Fault(at=11.118137599502015, kind="crash", arg=963, until=46.50221002578354),
        Fault(at=22.626933806636774, kind="crash", arg=999999, until=None),
        Fault(at=23.07321501275535, kind="crash", arg=239, until=None),
        Fault(at=23.227739317184678, kind="loud-crash", arg=1833, until=None),
        Fault(at=23.910098979366616, kind="loud-crash", arg=171, until=None),
        Fault(at=25.55835345648527, kind="loud-crash", arg=13181, until=40.55835345648527),
    ),
    partition=(0.8876588496627493, 25.84103493260043, 0.2587657310170949),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.02
    ),
    confirm=False,
)


def test_a_detached_relay_keeps_its_waiter_until_it_can_ask_again() -> None:
    # A relay holding only later packets holds a resubscribe that has seen nothing and asks its
    # parent, which has died silently; noticing that, the relay restarts and stays detached
    # past the waiter's timeout. A waiter's clock stands still while its node has nobody to
    # ask; otherwise the resubscriber is told that packets the relay's own subtree holds were
    # missed.
    outcome = run(DETACHED_WAITER)
    assert outcome.log.acks and failures(outcome) == []


DETACHED_WAITER = Scenario(
    seed=1895,
    nodes=48,
    streams=3,
    subscribers=5,
    faults=(
        Fault(at=1.192092896e-07, kind="add", arg=3, until=None),
        Fault(at=4.928651983193145, kind="add", arg=4, until=None),
        Fault(at=10.0, kind="loud-crash", arg=3666, until=None),
        Fault(at=13.073706279789702, kind="add", arg=3, until=None),
        Fault(at=15.094193070109572, kind="loud-crash", arg=53804, until=None),
        Fault(at=16.021762346370377, kind="loud-crash", arg=4267, until=21.140420866218797),
        Fault(at=16.57653708228193, kind="crash", arg=2530, until=32.05031008016685),
        Fault(at=17.684218060428716, kind="crash", arg=0, until=50.238173916547424),
        Fault(at=21.303763420219315, kind="weather", arg=0, until=22.303763420219315),
        Fault(at=21.43873077417771, kind="crash", arg=6072, until=43.98012005659028),
        Fault(at=25.310141197901135, kind="loud-crash", arg=6075, until=48.31504478543418),
        Fault(at=25.64138542852277, kind="crash", arg=4003, until=None),
        Fault(at=26.575470491282978, kind="crash", arg=262144, until=None),
        Fault(at=26.59176332234078, kind="crash", arg=262144, until=35.880321144327056),
    ),
    partition=(1.0671050184320865, 19.619415512964718, 0.31047506145698434),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.05, jitter=0.0
    ),
    confirm=False,
)
