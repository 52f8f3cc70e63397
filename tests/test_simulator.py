"""The simulator as a driver: deterministic, faithful to the effects, and its command line."""

from __future__ import annotations

import json
import random

import pytest

from keyspace.topology import small_world
from overlay.core.effects import Effect, Send
from overlay.core.events import PublishAcked
from overlay.core.node import Node
from overlay.messages import Neighbours
from testnet.sim.__main__ import main
from testnet.sim.experiment import SubscribeExperiment, run_subscribe
from testnet.sim.network import Network, NetworkModel
from testnet.sim.report import route_probes
from testnet.sim.simulator import SimConfig, Simulator
from testnet.sim.workload import PublishLoad, schedule_publishes, schedule_subscribes, stream_keys


def traced_run(seed: int, jitter: float = 0.0) -> str:
    config = SimConfig(
        nodes=300, degree=8, seed=seed, trace=True, network=NetworkModel(jitter=jitter)
    )
    sim = Simulator(config)
    schedule_subscribes(sim, stream_keys(5), 20, 2.0, random.Random(seed))
    sim.run()
    return sim.digest()


def test_same_seed_same_run_event_for_event() -> None:
    assert traced_run(4) == traced_run(4)
    assert traced_run(4, jitter=0.05) == traced_run(4, jitter=0.05)


def test_different_seeds_differ() -> None:
    assert traced_run(4) != traced_run(5)


def test_links_stay_fifo_under_jitter() -> None:
    net = Network(2, NetworkModel(jitter=0.5), random.Random(1))
    arrivals = [net.arrivals(t * 0.001, 0, 1)[0] for t in range(200)]
    assert arrivals == sorted(arrivals)


def test_links_stay_fifo_when_the_weather_calms() -> None:
    # Frames sent in a jittery spell may still be in flight when it ends; one sent after
    # must not overtake them, or a packet would be delivered after those that follow it.
    net = Network(2, NetworkModel(jitter=0.5), random.Random(1))
    stormy = [net.arrivals(t * 0.001, 0, 1)[0] for t in range(50)]
    net.model = NetworkModel()
    calm = [net.arrivals(0.05 + t * 0.001, 0, 1)[0] for t in range(50)]
    assert max(stormy) > calm[0] - 0.001 * 50  # the spell left frames in flight
    assert stormy + calm == sorted(stormy + calm)


def test_in_flight_counts_protocol_messages_until_they_arrive() -> None:
    # A quiet check must not pass while a message is on its way: a relay's linger ending at
    # the last instant of a run would leave its Unsubscribe undelivered, and its parent
    # listing a child that no longer carries the stream.
    sim = Simulator(SimConfig(nodes=30, degree=6, seed=1))
    sim.run()
    assert sim.in_flight == 0
    key = stream_keys(1)[0]
    sim.subscribe(3, key, 1)
    assert sim.in_flight > 0  # the search is queued, not delivered
    sim.run(until=sim.now)  # nothing has had time to arrive
    assert sim.in_flight > 0
    sim.run()
    assert sim.in_flight == 0 and key in sim.nodes[3].streams


_HEARTBEAT = Node.heartbeat


def _beats_run(short_path: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """A traced run with heartbeats doing their work: joins, publishes, and a silent crash
    its peers find only by liveness. Returns the digest and how many heartbeats took the
    short path (``Node.heartbeat``)."""
    taken = 0
    hear = _HEARTBEAT

    def counted(node: Node, now: float, peer: bytes) -> bool:
        nonlocal taken
        heard = short_path and hear(node, now, peer)
        taken += heard
        return heard

    monkeypatch.setattr(Node, "heartbeat", counted)
    sim = Simulator(SimConfig(nodes=200, degree=8, seed=3, trace=True))
    keys = stream_keys(3)
    schedule_subscribes(sim, keys, 15, 2.0, random.Random(3))
    schedule_publishes(sim, keys, PublishLoad(30, 2, 5.0, 100, start=4.0), random.Random(4))
    sim.call_at(6.0, lambda: sim.crash(17))
    sim.run(until=40.0)
    assert sim.nodes[0].stats.dead_peers + sum(n.stats.dead_peers for n in sim.nodes) > 0
    return sim.digest(), taken


def test_heartbeats_on_the_short_path_make_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator hears most heartbeats through ``Node.heartbeat`` instead of delivering
    them as messages; event for event, the run is the one full delivery makes."""
    full, none_short = _beats_run(False, monkeypatch)
    short, taken = _beats_run(True, monkeypatch)
    assert none_short == 0 and taken > 1000
    assert short == full


def test_heartbeats_in_waves_make_the_same_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """In calm weather the heartbeats sent at one moment wait in the event heap as one
    wave; event for event, the run is the one it makes with every heartbeat queued on its
    own (as in weather with jitter or loss)."""
    waves, _ = _beats_run(True, monkeypatch)
    monkeypatch.setattr(Network, "calm", property(lambda self: False))
    one_by_one, _ = _beats_run(True, monkeypatch)
    assert waves == one_by_one


def test_a_run_stops_between_two_heartbeats_of_a_wave() -> None:
    """``run(until)`` ends at ``until`` even inside a wave, and the rest of the wave comes
    later, in order: the two halves make the same run as one call."""

    def traced(stops: list[float]) -> tuple[str, int]:
        sim = Simulator(SimConfig(nodes=50, degree=6, seed=5, trace=True))
        for stop in stops:
            sim.run(until=stop)
            assert sim.now == stop
        return sim.digest(), sim.events

    # The first round is sent at 5 s and arrives from 5.005 s to about 5.1 s.
    whole = traced([12.0])
    assert traced([5.03, 5.06, 12.0]) == whole
    assert whole[1] > 2 * 50 * 6


def test_halt_ends_a_run_after_the_current_event_and_keeps_the_queue() -> None:
    sim = Simulator(SimConfig(nodes=30, degree=6, seed=1))
    key = stream_keys(1)[0]
    sim.call_at(1.0, lambda: sim.subscribe(3, key, 1))
    sim.call_at(1.0, sim.halt)
    sim.run()
    assert sim.now == 1.0 and sim.in_flight > 0  # the search is still on its way
    sim.run()  # a later run goes on, to quiet
    assert sim.in_flight == 0 and key in sim.nodes[3].streams


def test_route_probes_measure_each_search_once_it_is_answered() -> None:
    """Probes need their searches' answers, not a quiet network: the new roots' own looks
    (and the probes' leaving) are still running when the measurement returns."""
    sim = Simulator(SimConfig(nodes=300, degree=8, seed=2))
    result = route_probes(sim, 40, random.Random(2), concurrent=10)
    assert result["route_samples"] == 40
    assert result["route_exact_pct"] == 100.0 and result["route_hops_mean"] > 1.0
    assert sim.in_flight > 0
    answered_at = sim.now
    sim.run()
    assert sim.now > answered_at


def test_a_network_without_jitter_keeps_no_per_link_bookkeeping() -> None:
    net = Network(3, NetworkModel(), random.Random(1))
    assert net.arrivals(1.0, 0, 1) == [1.0 + net.latency(0, 1)]
    assert net.resend_at(2.0, 1, 2) == 2.0 + net.latency(1, 2)
    assert net._last == {}


def test_drop_and_duplicate_knobs_act() -> None:
    net = Network(2, NetworkModel(drop=0.5, duplicate=0.5), random.Random(2))
    counts = [len(net.arrivals(0.0, 0, 1)) for _ in range(2000)]
    assert 800 < counts.count(0) < 1200
    assert counts.count(2) > 300


@pytest.mark.parametrize("knob", ["drop", "duplicate"])
def test_network_model_rejects_a_probability_of_one(knob: str) -> None:
    with pytest.raises(ValueError, match=knob):
        NetworkModel(**{knob: 1.0})


def test_wire_mode_round_trips_every_message_through_the_codec() -> None:
    config = SimConfig(nodes=100, degree=6, seed=3, wire=True)
    sim = Simulator(config, small_world(100, 6, random.Random(3)))
    schedule_subscribes(sim, stream_keys(2), 10, 1.0, random.Random(3))
    sim.run()
    assert sim.sent["SubscribeRequest"] > 0
    assert sim.lost == 0


def test_cli_prints_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--nodes", "300", "--streams", "4", "--subscribers", "10", "--json"]
    assert main([*argv, "--route-samples", "30", "--greedy-samples", "30"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["violation_count"] == 0
    assert report["in_single_tree"] == report["subscriptions"] == 40
    assert report["route_exact_pct"] == 100.0


def test_the_report_counts_what_the_joins_cost_apart_from_what_publishing_costs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Joins end before the first publish: messages sent until then are the joins' cost,
    those after it publishing's; heartbeats and the route probes are neither's."""
    argv = ["--nodes", "300", "--streams", "4", "--subscribers", "10", "--packets", "10"]
    assert main([*argv, "--route-samples", "30", "--greedy-samples", "30", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    joins, publishing = report["join_messages_by_kind"], report["publish_messages_by_kind"]
    assert "SubscribeRequest" in joins and "Heartbeat" not in joins
    assert "SubscribeData" not in joins and "PublishData" not in joins
    assert publishing["PublishData"] >= 40 and "Heartbeat" not in publishing
    assert report["messages"] == sum(joins.values())
    assert report["messages_per_join"] == report["messages"] / 40
    assert report["messages_per_packet"] == report["publish_messages"] / 40
    # Each packet reaches every tree member once; a delivery costs at least its own hop.
    assert publishing["SubscribeData"] >= report["deliveries"] == 400
    assert report["messages_per_delivery"] > 1.0


def test_cli_summary_is_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--nodes", "200", "--streams", "2", "--subscribers", "5"]) == 0
    out = capsys.readouterr().out
    assert "one tree per stream   2/2" in out
    assert "invariant violations  0" in out


def test_cli_publishes_without_confirmed_publishes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--nodes", "200", "--streams", "2", "--subscribers", "5", "--packets", "20"]
    assert main([*argv, "--no-confirm-publishes", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["delivery_problem_count"] == 0 and report["violation_count"] == 0
    assert report["publish_acks"] == report["packets_ordered"] == 40
    assert report["deliveries"] == report["deliveries_expected"] == 200


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--nodes", "0"], "must be at least 1"),
        (["--nodes", "ten"], "is not a whole number"),
        (["--nodes", "10", "--subscribers", "20"], "exceeds --nodes"),
        (["--drop", "1.5"], "must be in [0, 1)"),
        (["--max-htl", "99"], "max_htl must be in"),
    ],
)
def test_cli_rejects_bad_arguments_clearly(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code  # type: ignore[assignment]
    assert code == 2
    assert says in capsys.readouterr().err


@pytest.mark.slow
def test_readme_claim_at_ten_thousand_nodes() -> None:
    """The README's 10,000-node figures: every subscriber in its stream's single tree and the
    root the globally closest node for at least 99% of streams (measured: 100%)."""
    exp = SubscribeExperiment(SimConfig(nodes=10_000, degree=16, seed=1), 100, 100, 10.0, 200, 200)
    _, report = run_subscribe(exp)
    assert report["violation_count"] == 0
    assert report["in_single_tree"] == report["subscriptions"] == 10_000
    assert report["root_globally_closest_pct"] >= 99.0  # type: ignore[operator]
    assert report["route_exact_pct"] >= 99.0  # type: ignore[operator]


def _acked_after_every_holder_restarts(wiped: bool) -> list[int]:
    """A stream gets packets 0..2; every node that holds it crashes and restarts
    (``wiped``: on new machines); then the publisher's node publishes once more."""
    sim = Simulator(SimConfig(nodes=30, degree=4, seed=3))
    (key,) = stream_keys(1)
    for uid in (1, 2, 3):
        sim.publish(5, key, 1, uid, b"before")
        sim.run()
    holders = [i for i, node in enumerate(sim.nodes) if key in node.streams]
    assert 5 in holders and len(holders) >= 2
    for i in holders:
        sim.crash(i)
    for i in holders:
        sim.restart(i, wiped=wiped)
    sim.run()
    sim.publish(5, key, 2, 4, b"after")
    sim.run()
    return [event.number for _, event in sim.events_for(5, 2) if isinstance(event, PublishAcked)]


def test_a_restarted_node_keeps_its_disk_and_numbering_goes_on() -> None:
    assert _acked_after_every_holder_restarts(wiped=False) == [3]
    assert _acked_after_every_holder_restarts(wiped=True) == [0]  # what the disk is for


def test_a_link_a_lost_frame_breaks_is_told_after_the_effects_that_lost_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The runtime carries a node's effects out in order and hears of a closed link later
    # (its task ends), so the simulator does too: told in the middle of the effects, the
    # node would react (a restart, its label sent on) before its later sends left.
    sim = Simulator(SimConfig(nodes=3, degree=2, seed=1))
    a, b, c = 0, 1, 2
    assert sim.linked(a, b) and sim.linked(a, c)
    happened: list[str] = []
    real_arrivals, real_down = sim.network.arrivals, Node.link_down

    def arrivals(now: float, x: int, y: int) -> list[float]:
        out = [] if (x, y) == (a, b) else real_arrivals(now, x, y)
        happened.append(f"send {x}->{y}" + (" lost" if not out else ""))
        return out

    def link_down(node: Node, now: float, peer: bytes) -> list[Effect]:
        if node is sim.nodes[a]:
            happened.append(f"{a} told {sim.index[peer]} is gone")
        return real_down(node, now, peer)

    sim.network.arrivals = arrivals  # type: ignore[method-assign]
    # (on the class: a node's attributes are slots, not a dict a method could be put in)
    monkeypatch.setattr(Node, "link_down", link_down)
    # (Announcements: a calm network's heartbeats arrive after their latency without a
    # draw in ``arrivals``, so they could not be lost here.)
    sim._apply(a, [Send(sim.ids[b], Neighbours((0.3,))), Send(sim.ids[c], Neighbours((0.6,)))])
    assert happened[:3] == ["send 0->1 lost", "send 0->2", "0 told 1 is gone"]
    assert not sim.linked(a, b)
