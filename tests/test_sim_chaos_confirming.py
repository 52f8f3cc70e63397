"""The chaos search's race scenarios (``test_sim_chaos``) with ``confirm_publishes`` on: a
packet numbered just as a partition begins. Without confirmation each still fails (see the
README's Known limits); with it, a root sends a packet down only once its publisher's node
knows its number (``overlay.core.confirming``). Replayed exactly: the simulation is
deterministic."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_packet_numbered_as_a_partition_begins_is_shown_to_nobody_on_the_cut_off_side() -> None:
    # A root numbers a publish just before a partition cuts it off from the publisher, and the
    # acknowledgement is lost on its way; the publishers' side's new root gives that number to
    # the next publish. A root configured to (``confirm_publishes``, on in this scenario) sends
    # a packet down only once the publisher's node confirms its number (``confirming``), so no
    # subscriber cut off with the old root is shown it. Without it, this scenario still fails
    # (README, Known limits).
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


def test_a_packet_numbered_before_a_cut_is_not_shown_after_the_heal() -> None:
    # A scenario drawn with confirmation off, run with it on: a root numbers a publish and
    # sends it down just before a cut takes its only children away, and the publishers' side's
    # new root gives that number to another publish. A node cut off with no peer resubscribes
    # after the heal to the stale root, the closest node. With confirmation on, the stale root
    # never sends the packet down (the publisher's node never confirms), so that node is not
    # shown a packet that disagrees with the stream.
    outcome = run(NUMBERED_BEFORE_A_CUT_SHOWN_AFTER_THE_HEAL)
    assert outcome.log.acks and failures(outcome) == []


NUMBERED_BEFORE_A_CUT_SHOWN_AFTER_THE_HEAL = Scenario(
    seed=59699405,
    nodes=60,
    streams=3,
    subscribers=2,
    faults=(
        Fault(at=5e-324, kind="crash", arg=2177, until=40.0),
        Fault(at=6.4452370261234e-139, kind="crash", arg=39438, until=33.61852774236424),
        Fault(at=0.005, kind="crash", arg=817353, until=None),
        Fault(at=1.0, kind="crash", arg=1417, until=8.411552482421836),
        Fault(at=2.5028901101182437, kind="loud-crash", arg=3245, until=None),
        Fault(at=3.6417699362624854, kind="weather", arg=0, until=4.96593378690219),
        Fault(at=5.0, kind="loud-crash", arg=221, until=None),
        Fault(at=9.773463577232691, kind="crash", arg=386228, until=22.860564325856426),
        Fault(at=16.739390352370638, kind="add", arg=3, until=None),
        Fault(at=16.772923588476072, kind="crash", arg=999999, until=None),
        Fault(at=17.124037796495237, kind="crash", arg=4780, until=None),
        Fault(at=17.29871759268327, kind="loud-crash", arg=105, until=19.19871759268327),
        Fault(at=17.680888467824804, kind="crash", arg=180, until=34.596476417821975),
        Fault(at=21.733637806618987, kind="loud-crash", arg=136, until=37.10733099261409),
        Fault(at=26.218010472708045, kind="crash", arg=2365, until=57.9768009311304),
        Fault(at=27.42678548293665, kind="crash", arg=453307, until=59.439347072784344),
        Fault(at=30.0, kind="loud-crash", arg=576983, until=32.56601245202587),
    ),
    partition=(2.9339440298747164, 38.8839642949801, 0.1299800051957706),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.05, jitter=0.02
    ),
    confirm=True,
)


def test_a_number_whose_confirmation_a_cut_stopped_is_given_to_no_other_publish() -> None:
    # Root 29 numbers publisher 21's publish 8 through relay 25 and tells 21 (+18.95); 21
    # confirms to 25 (+19.05), and a cut (+19.08) takes 25 off with the confirmation still on
    # its link up. Having passed it up, 25 holds it as a witness (``witnesses``), roots its
    # side of the cut, and takes it as its next number: its subscriber 27 is shown 21's
    # packet as 8. The root hears nothing from 25 while the other publisher's packet waits
    # behind 8, and gives 8 up. Given to that packet, 8 would name another packet there
    # than at 27; set aside (``confirming``, giving up), it goes down as 21's once the next
    # publish shows the root's side has a publisher.
    outcome = run(CONFIRMATION_CUT_ON_ITS_WAY_UP)
    assert outcome.log.acks and failures(outcome) == []
    assert sum(node.stats.resolved for node in outcome.sim.nodes) >= 1


CONFIRMATION_CUT_ON_ITS_WAY_UP = Scenario(
    seed=142372316,
    nodes=34,
    streams=2,
    subscribers=6,
    faults=(
        Fault(at=8.91441612468126, kind="crash", arg=705937, until=None),
        Fault(at=14.49259610233502, kind="weather", arg=0, until=25.34589397786406),
    ),
    partition=(9.079374568943692, 37.433804195247006, 0.2828352780616449),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.2
    ),
    confirm=True,
    proximity=1,
)


def test_a_root_cut_off_from_every_publisher_shows_nothing_under_numbers_it_gave_up() -> None:
    # Root 35 numbers a burst of publishes that two children, 20 and 25, carried up, and 25's
    # confirmations arrive just before a cut (+33.74) leaves 35 and 25 on the side with no
    # publisher, and 20 on the other. 35 hears nothing more from 20 and gives its numbers
    # up, with 25's behind them. On the other side a new root takes the publishers' claims
    # under those same numbers. Shown as anything at 35's side (a placeholder, say), they
    # would differ from what the publishers were acknowledged; set aside, with no publish
    # ever reaching 35 to send them down, nothing is shown there under them until the heal.
    outcome = run(ROOT_CUT_OFF_FROM_ITS_PUBLISHERS)
    assert outcome.log.acks and failures(outcome) == []
    assert sum(node.stats.set_aside for node in outcome.sim.nodes) >= 1


ROOT_CUT_OFF_FROM_ITS_PUBLISHERS = Scenario(
    seed=2887094486,
    nodes=38,
    streams=3,
    subscribers=6,
    faults=(
        Fault(at=2.944932698274636, kind="crash", arg=797240, until=None),
        Fault(at=3.586499012395027, kind="add", arg=4, until=None),
        Fault(at=5.8887910455320025, kind="crash", arg=254918, until=43.130692074679445),
        Fault(at=7.194637897777784, kind="crash", arg=810436, until=41.44688083906615),
        Fault(at=11.853020288617806, kind="weather", arg=0, until=20.243813597717637),
        Fault(at=26.225195245858355, kind="loud-crash", arg=800296, until=30.831699210167045),
    ),
    partition=(23.736609224235266, 61.73021048281391, 0.39142162420559345),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.002, duplicate=0.05, jitter=0.02
    ),
    confirm=True,
    proximity=1,
)
