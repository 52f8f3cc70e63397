"""Chaos scenarios (``test_sim_chaos``) in which two publishes got one number, or a root
numbered below what its tree had already given, replayed exactly (the simulation is
deterministic); each says what goes wrong without the rule it guards. All run with
``confirm_publishes`` off and replay that way."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_new_root_looks_for_another_tree_before_it_numbers() -> None:
    # A first subscribe climbs toward the key, and the partition cuts its path while the search
    # waits beyond: the closest node it still sees ends the search as root, though a closer node
    # on its side carries the rest of the tree, and another subscribe ends at a second new root
    # on that side. A new tree looks once (a resubscribe with must-beat its root's location)
    # before it numbers anything; otherwise both roots number the same packets.
    outcome = run(NEW_ROOT_BESIDE_A_ROOT)
    assert outcome.log.acks and failures(outcome) == []


NEW_ROOT_BESIDE_A_ROOT = Scenario(
    seed=66231,
    nodes=55,
    streams=2,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=524287, until=None),
        Fault(at=4.385888847880864e-242, kind="crash", arg=380110, until=None),
        Fault(at=1.1351415866391943e-89, kind="loud-crash", arg=105, until=None),
        Fault(at=0.19803971803419979, kind="loud-crash", arg=3488, until=None),
        Fault(at=1.408518548309417, kind="crash", arg=363157, until=None),
        Fault(at=1.5419080675061596, kind="crash", arg=531, until=2.6419080675061597),
        Fault(at=2.2561941400342738, kind="crash", arg=707, until=None),
        Fault(at=2.4228459697756115, kind="loud-crash", arg=114884, until=None),
        Fault(at=10.071273702042536, kind="loud-crash", arg=46009, until=None),
        Fault(at=10.394461060762904, kind="loud-crash", arg=999999, until=None),
        Fault(at=11.46695142923431, kind="add", arg=2, until=None),
        Fault(at=15.877337827970525, kind="loud-crash", arg=19354, until=None),
        Fault(at=16.134292811165068, kind="crash", arg=81934, until=None),
        Fault(at=18.9775592574912, kind="crash", arg=868, until=None),
        Fault(at=22.408594183811093, kind="loud-crash", arg=58293, until=None),
        Fault(at=26.05782301479991, kind="crash", arg=81, until=52.70148083530159),
        Fault(at=30.0, kind="crash", arg=173, until=None),
    ),
    partition=(0.33234521947295154, 30.332345219472952, 0.3579722788439694),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.01, jitter=0.02
    ),
    confirm=False,
)


def test_two_roots_after_a_takeover_find_each_other_with_a_wider_look() -> None:
    # The root dies during a partition, and on one side two nodes each become the root of part
    # of its tree and look. Given only the ten hops past the best node found that a subscribe
    # gets, each look can miss the other root in the thinned network, and both number the same
    # packets; a root's look and probes get twice that budget (``NodeConfig.check_htl``).
    outcome = run(TWO_TAKEOVER_ROOTS)
    assert outcome.log.acks and failures(outcome) == []


TWO_TAKEOVER_ROOTS = Scenario(
    seed=0,
    nodes=59,
    streams=2,
    subscribers=5,
    faults=(
        Fault(at=0.0006090878679709005, kind="crash", arg=121852, until=27.604795857244252),
        Fault(at=0.9664683446758218, kind="crash", arg=191243, until=None),
        Fault(at=3.1037501827166456, kind="add", arg=3, until=None),
        Fault(at=3.840493388281728, kind="loud-crash", arg=290, until=None),
        Fault(at=4.508791872080831, kind="crash", arg=0, until=None),
        Fault(at=5.0, kind="add", arg=3, until=None),
        Fault(at=5.424002085795499, kind="crash", arg=483, until=32.970976376537664),
        Fault(at=18.303084961216413, kind="loud-crash", arg=1487, until=28.007766527241074),
        Fault(at=24.915055253002485, kind="loud-crash", arg=1197, until=26.892312559432686),
        Fault(at=25.581190598534388, kind="crash", arg=1, until=64.68858069285236),
        Fault(at=28.774301456831793, kind="add", arg=4, until=None),
        Fault(at=29.0, kind="loud-crash", arg=1000000, until=None),
        Fault(at=29.999999999999996, kind="crash", arg=8217, until=None),
        Fault(at=30.0, kind="crash", arg=10252, until=37.969753309954655),
    ),
    partition=(1.7454319181344329, 24.026960566584506, 0.3963766128588322),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.02
    ),
    confirm=False,
)


def test_a_lagging_origin_that_becomes_root_numbers_above_its_subtree() -> None:
    # A node lags behind, cut off from its parent, while members of the dead root's tree that
    # hold more reattach below it; then its parent dies, its search finds nobody and it becomes
    # root of that subtree. Each member's restart confirmation carries the newest packet its
    # subtree holds, and an origin that becomes root numbers above it (and asks its subtree
    # for what it lacks); knowing only its own head, it would give numbers its subtree holds
    # to new publishes.
    outcome = run(LAGGING_ORIGIN)
    assert outcome.log.acks and failures(outcome) == []


LAGGING_ORIGIN = Scenario(
    seed=1119,
    nodes=40,
    streams=2,
    subscribers=6,
    faults=(
        Fault(at=1.1754943508222875e-38, kind="loud-crash", arg=6100, until=None),
        Fault(at=2.2141837073909797e-18, kind="weather", arg=0, until=11.972541602127665),
        Fault(at=1.996631640285163, kind="crash", arg=5, until=None),
        Fault(at=6.051921823114916, kind="crash", arg=3932, until=24.590274046173974),
        Fault(at=10.314658746032048, kind="loud-crash", arg=1655, until=None),
        Fault(at=11.033242649767924, kind="crash", arg=51095, until=None),
        Fault(at=12.65404632867757, kind="loud-crash", arg=362881, until=44.87641872728351),
        Fault(at=15.739802535137667, kind="loud-crash", arg=1119, until=None),
        Fault(at=15.772786103943519, kind="add", arg=5, until=None),
        Fault(at=20.54567213597642, kind="add", arg=5, until=None),
        Fault(at=22.96061670000841, kind="crash", arg=146805, until=58.47416243107491),
        Fault(at=26.771326621606782, kind="loud-crash", arg=306195, until=53.23822677990857),
        Fault(at=27.24141762265225, kind="crash", arg=36, until=29.14141762265225),
    ),
    partition=(10.98910396211482, 40.27775397385793, 0.24665514308920902),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.02
    ),
    confirm=False,
)


def test_a_merging_roots_claim_does_not_take_a_root_back_below_where_it_joined() -> None:
    # A root dies and restarts empty, comes back as a relay that joins the tree past its start
    # holding nothing of it, and becomes root again there. A briefly second root that had the
    # first packets pushed up to it merges in with a claim below that place. A claim below a
    # root's own place in the numbering is ignored; taken for its head, the root would number
    # new publishes the tree already numbered a second time.
    outcome = run(CLAIM_BELOW_THE_HEAD)
    assert outcome.log.acks and failures(outcome) == []


CLAIM_BELOW_THE_HEAD = Scenario(
    seed=155618,
    nodes=20,
    streams=2,
    subscribers=5,
    faults=(
        Fault(at=0.0, kind="crash", arg=1192, until=None),
        Fault(at=0.095, kind="crash", arg=312232, until=24.461609623366105),
        Fault(at=10.226525400184787, kind="weather", arg=0, until=29.226525400184787),
        Fault(at=23.902582887411935, kind="crash", arg=4803, until=25.902592887411934),
    ),
    partition=(5.028770887319159, 7.028770887319159, 0.2),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.02
    ),
    confirm=False,
)


def test_a_detached_node_numbers_above_what_it_adopted_once_it_becomes_root() -> None:
    # A fresh subscriber holding nothing loses its parent; while its search is out it adopts a
    # resubscribe that claims packets seen, and the search then makes it root. A detached node
    # keeps what it adopted as its subtree's claim; dropped because it was not a root yet, the
    # claim would let it give numbers the old tree gave to new publishes.
    outcome = run(DETACHED_ADOPTER)
    assert outcome.log.acks and failures(outcome) == []


DETACHED_ADOPTER = Scenario(
    seed=2399,
    nodes=46,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=0.0, kind="add", arg=3, until=None),
        Fault(at=6.103515625e-05, kind="loud-crash", arg=128806, until=None),
        Fault(at=0.9762075042307641, kind="crash", arg=1243, until=25.159486900736926),
        Fault(at=2.00001, kind="loud-crash", arg=99627, until=32.7353004011755),
        Fault(at=3.841895731284116, kind="crash", arg=3645, until=None),
        Fault(at=5.428736292222667, kind="crash", arg=7587, until=28.500451121779577),
        Fault(at=5.653915936818669, kind="crash", arg=2936, until=None),
        Fault(at=6.54556104707747, kind="crash", arg=77294, until=32.70350701716178),
        Fault(at=8.020478292764725, kind="add", arg=5, until=None),
        Fault(at=9.492707542626224, kind="weather", arg=0, until=26.87508863443132),
        Fault(at=11.106547118439371, kind="add", arg=5, until=None),
        Fault(at=14.54385039295277, kind="loud-crash", arg=2602, until=None),
        Fault(at=18.752100140710095, kind="loud-crash", arg=1000000, until=46.67115813785307),
        Fault(at=19.906257145799277, kind="crash", arg=204, until=None),
        Fault(at=29.999999999999996, kind="loud-crash", arg=1000000, until=None),
    ),
    partition=(1.4212593145117407, 3.039387427967303, 0.3333333333333333),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.01, jitter=0.02
    ),
    confirm=False,
)


def test_a_detached_node_numbers_above_what_its_subtree_pushed_up() -> None:
    # A detached node gets a relay below it that holds more and pushes the rest up, one push
    # lost with a link; the node's search then makes it root. A detached node keeps the
    # numbers pushed up to it as its subtree's claim and gathers what was lost on the way;
    # knowing only its own head, it would leave the later pushes waiting for ever and number
    # new publishes again under their numbers.
    outcome = run(PUSHED_CLAIM)
    assert outcome.log.acks and failures(outcome) == []


PUSHED_CLAIM = Scenario(
    seed=4101,
    nodes=20,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=2.4866394386414437e-31, kind="add", arg=6, until=None),
        Fault(at=0.3333333333333333, kind="loud-crash", arg=1503, until=None),
        Fault(at=3.531529071628566, kind="loud-crash", arg=1624, until=41.293200079595614),
        Fault(at=15.0, kind="weather", arg=0, until=30.0),
        Fault(at=29.0, kind="add", arg=6, until=None),
    ),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.05, jitter=0.0
    ),
    confirm=False,
)


def test_a_root_made_while_cut_off_probes_when_the_partition_heals() -> None:
    # A node loses its parent to the partition and becomes root on the larger side, while a
    # closer root stays on the smaller one; after the heal both number for their publishers
    # until a probe round merges them. A root that has lost links probes as soon as a new link
    # comes up, so the trees merge before both have numbered the same packets.
    outcome = run(HEALED_SPLIT)
    assert outcome.log.acks and failures(outcome) == []


HEALED_SPLIT = Scenario(
    seed=868818,
    nodes=38,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=0.0, kind="loud-crash", arg=28, until=32.202447460930834),
        Fault(at=2.032340501499954e-308, kind="loud-crash", arg=491940, until=None),
        Fault(at=2.0993893188556627, kind="loud-crash", arg=25166, until=25.315282819913914),
        Fault(at=3.046156838764574, kind="weather", arg=0, until=19.64468714036889),
        Fault(at=15.1569153359443, kind="crash", arg=384865, until=None),
        Fault(at=18.25980645332124, kind="loud-crash", arg=98, until=None),
        Fault(at=25.246905577322572, kind="crash", arg=6640, until=61.73153227427384),
    ),
    partition=(6.221512789262807e-204, 25.102456854002394, 0.14628457937302297),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.05, jitter=0.02
    ),
    confirm=False,
)


def test_packets_pushed_up_to_a_new_root_set_where_it_numbers() -> None:
    # A node becomes the root of a new tree while the partition cuts off the old root, which
    # had numbered some packets. A resubscriber that has seen them joins under a relay, so no
    # claim reaches the new root, and pushes them up during its first look's grace. A root in
    # its grace takes a packet pushed from beyond its head as the claim it is; colliding it,
    # the root would acknowledge those numbers a second time for new publishes.
    outcome = run(PUSHED_PAST_AT_A_NEW_ROOT)
    assert outcome.log.acks and failures(outcome) == []


PUSHED_PAST_AT_A_NEW_ROOT = Scenario(
    seed=237476,
    nodes=49,
    streams=2,
    subscribers=3,
    faults=(
        Fault(at=2.1055582697271476e-128, kind="crash", arg=434547, until=None),
        Fault(at=1.9084208608824825e-25, kind="crash", arg=87022, until=14.482958841461269),
        Fault(at=0.24436155466051718, kind="crash", arg=1890, until=None),
        Fault(at=0.5180786370917946, kind="crash", arg=435894, until=40.50529249258282),
        Fault(at=9.505009419189442, kind="crash", arg=861147, until=None),
        Fault(at=10.057817631145415, kind="crash", arg=1000000, until=34.4540849679978),
        Fault(at=10.401244188484702, kind="crash", arg=569831, until=None),
        Fault(at=16.667045907121743, kind="loud-crash", arg=596, until=None),
        Fault(at=20.809193742155177, kind="loud-crash", arg=58892, until=None),
        Fault(at=26.784708052410796, kind="weather", arg=0, until=29.728227167390866),
        Fault(at=26.902358964681735, kind="loud-crash", arg=3026, until=39.39218044462781),
        Fault(at=27.474990596681394, kind="loud-crash", arg=287, until=66.74315225011102),
        Fault(at=27.59212411102483, kind="loud-crash", arg=133, until=61.45863637956955),
        Fault(at=28.40647773213788, kind="loud-crash", arg=3374, until=None),
    ),
    partition=(6.016139718806423, 34.803173273079366, 0.3325596002411415),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.01, jitter=0.2
    ),
    confirm=False,
)


def test_a_relay_that_reattaches_brings_up_what_its_subtree_claims() -> None:
    # A relay adopts a child that has seen more and pushes the rest up; the relay loses its
    # parent while passing them on, so none reaches a root, and the child's restart
    # confirmation claims its head. The relay reattaches with its own head under a fresh tree.
    # A relay that reattaches asks its subtree for what its claim holds beyond it, and the
    # pushes carry the claim to the root; otherwise that root numbers on from the relay's head
    # and the child is shown packets it had under other publishes.
    outcome = run(CLAIM_BELOW_A_RELAY)
    assert outcome.log.acks and failures(outcome) == []


CLAIM_BELOW_A_RELAY = Scenario(
    seed=811627,
    nodes=43,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=2.105804827559989e-124, kind="crash", arg=23, until=None),
        Fault(at=1.6630344139434188, kind="loud-crash", arg=861, until=22.064024355938173),
        Fault(at=9.002322969081401, kind="add", arg=2, until=None),
        Fault(at=18.04869567062827, kind="add", arg=2, until=None),
        Fault(at=19.95624516778782, kind="loud-crash", arg=72256, until=None),
        Fault(at=21.20456869997851, kind="crash", arg=1, until=51.20456869997851),
        Fault(at=22.556995325309593, kind="crash", arg=547, until=None),
        Fault(at=22.9084394980536, kind="add", arg=3, until=None),
        Fault(at=24.998237287525274, kind="weather", arg=0, until=41.60276438459762),
        Fault(at=26.27477401997384, kind="crash", arg=29694, until=None),
    ),
    partition=None,
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.02
    ),
    confirm=False,
)


def test_a_settled_root_takes_what_a_tree_that_joined_it_numbered_meanwhile() -> None:
    # With confirmation on (the default). A root numbers packets and holds them for their
    # publishers' confirmations; one never comes, a partition cuts the root off, and it drops
    # them unshown. On the publishers' side a node takes the tree over with the confirmed
    # claims; as the partition heals, that tree moves to the cut-off root, closer to the key,
    # and its pushes reach it settled past any grace. A root takes a push beyond its head as
    # it would in a grace (``PacketFlow._route``); answering with collisions, it would number
    # the same packets anew for other publishes.
    outcome = run(PUSHED_TO_A_SETTLED_ROOT)
    assert outcome.log.acks and failures(outcome) == []


PUSHED_TO_A_SETTLED_ROOT = Scenario(
    seed=53265,
    nodes=41,
    streams=3,
    subscribers=3,
    faults=(
        Fault(at=2.2250738585e-313, kind="crash", arg=5332, until=39.5618590753669),
        Fault(at=0.02, kind="loud-crash", arg=36910, until=None),
        Fault(at=0.36243693383659836, kind="crash", arg=583820, until=29.66779021468878),
        Fault(at=0.9726016455151478, kind="loud-crash", arg=296, until=34.02083100178132),
        Fault(at=1.0, kind="loud-crash", arg=1800, until=21.3669775174099),
        Fault(at=2.554370282076466, kind="loud-crash", arg=39, until=32.70947203123108),
        Fault(at=16.45947436773163, kind="loud-crash", arg=407, until=42.517801837287394),
        Fault(at=21.07615292520332, kind="crash", arg=934213, until=None),
    ),
    partition=(17.107464991665303, 34.214929983330606, 0.36243693383659836),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.05, jitter=0.02
    ),
    confirm=True,
)
