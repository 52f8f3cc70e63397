"""Chaos scenarios (``test_sim_chaos``) in which two publishes got one number, or a root
numbered below what its tree had already given, replayed exactly (the simulation is
deterministic); each says what goes wrong without the rule it guards. All run with
``confirm_publishes`` off and replay that way."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_new_root_looks_for_another_tree_before_it_numbers() -> None:
    # Node 36's first subscribe went through 17 to 51 and on to 9, all closer to the key.
    # The partition then cut 17 from 51 while the search waited beyond: 17, the closest
    # node it still saw, ended the search as root, though 9, on 17's side and closer,
    # carried the rest of it. Node 5's subscribe ended at 20, another new root on that
    # side. Both numbered 0..14 for their publishers. A new tree now looks once (a
    # resubscribe with must-beat its root's location) before it numbers anything.
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
    # The root died during a partition; on one side, nodes 9 and 3 each became the root
    # of part of its tree. Each looked, and each look, given the ten hops past the best
    # node found that a subscribe gets, missed the other root in the thinned network:
    # both numbered 3..14. A root's look and probes now get twice that budget
    # (``NodeConfig.check_htl``).
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
    # Node 16 lagged at packet 18, cut off from its parent, while nodes of the dead root's
    # tree, holding up to 25, reattached below it. Then 16's parent died, its own search
    # found nobody, and it became root of that subtree knowing only its own 18: it gave 19
    # to a new publish while its subtree held the old 19..22. Each member's restart
    # confirmation now carries the newest packet its subtree holds, and an origin that
    # becomes root numbers above it (and asks its subtree for what it lacks).
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
    # Root 14 died and restarted empty; it came back as a relay that joined the tree at 12
    # and held nothing of it, then became root again with numbering at 12. Node 6, briefly
    # a second root that had 0..1 pushed up to it, merged in and claimed 1, and 14 took
    # that for its head: it numbered new publishes 2..7 a second time. A claim below a
    # root's own place in the numbering is now ignored.
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
    # Node 4, a fresh subscriber holding nothing, lost its parent. While its search was
    # out it adopted node 3's resubscribe, relayed by two new members, claiming 19 seen.
    # The claim was dropped, since 4 was not a root yet; the search then made 4 root, and
    # it numbered a new publish 10, which root 14 had given to another. A detached node
    # now keeps what it adopted as its subtree's claim.
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
    # Node 8, detached at packet 4, got a relay of 0..14 below it; the relay pushed 5..14
    # up, one push lost with a link. 8's search made it root, knowing only 4: it took
    # 5..11 in order, left 13 and 14 waiting for ever, and numbered new publishes 12 and
    # 13 again. A detached node now keeps the numbers pushed up to it as its subtree's
    # claim, and gathers what was lost on the way.
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
    # Node 11 lost its parent to the partition and became root of 29b48932 on the larger
    # side, while 17, closer to the key, stayed root of the smaller one. The partition
    # healed at 25 s, 11 numbered a publisher's packets 0..10 from 29.9 s, and 17 numbered
    # 0.. from 35.9 s for another; 11's next round's probe merged the trees only at
    # 40.4 s. A root that has lost links now probes as soon as a new link comes up.
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
    # Node 36 became the root of a new tree of 29b48932 while the partition cut off the
    # stream's old root, which had numbered 0..5. A resubscriber that had seen 1..5 joined
    # under 36's relay 15, so no claim reached 36; it pushed 1..5 up, and 36, in its first
    # look's grace, collided them and numbered new publishes 0..20, acknowledging 0..5 a
    # second time. A root in its grace now takes a packet pushed from beyond its head as
    # the claim it is.
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
    # Relay 36, at packet 2, adopted 41, which had seen 0..20 (numbered by root 42) and
    # pushed 3..20 up; 36 lost its parent while passing them on, and none of the pushes
    # reached a root. 41's confirmation of 36's restart claimed 20, but 36 reattached with its
    # own 2 under 42, which had left the stream and rejoined a fresh tree rooted at 3;
    # that root numbered 3 on, and 41 was shown packets 3..5 it had had as others. A
    # relay that reattaches now asks its subtree for what its claim holds beyond it, and
    # the pushes carry the claim to the root.
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
    # With confirmation on (the default). Root 12 numbered 1..9 and held them for their
    # publishers' confirmations; 1 never came, a partition cut 12 off, and it dropped all
    # nine unshown. On the publishers' side 8 took the tree over and took 2..9 as the
    # claims of the publisher's node, which had confirmed them. As the partition healed,
    # the tree 8 had merged into moved to 12, closer to the key, and its pushes of 2..12
    # reached 12, settled past any grace: it answered them with collisions and numbered
    # 1..3 anew, two publishes each. A root now takes a push beyond its head as it would
    # in a grace (``PacketFlow._route``).
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
