"""The benchmarks run end to end with tiny parameters: their results have the documented
shape, and packets were really delivered (to every child, every subscriber), so a benchmark
that silently measures nothing fails here. The numbers themselves are not checked: the
machine is shared and they mean something only as the ratios the commands print."""

from __future__ import annotations

import json

import pytest

from testnet.bench import forwarding, latency, port_publisher, relay_tree, state_file


def test_forwarding_benchmark_delivers_to_every_child(capsys: pytest.CaptureFixture[str]) -> None:
    code = forwarding.main(
        ["--children", "2", "--duration", "0.2", "--repeats", "1", "--window", "256", "--json"]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["parameters"]["children"] == [2]
    assert result["parameters"]["frame_bytes"] > 1024
    (row,) = result["summary"]
    assert row["children"] == 2
    assert row["ratio"] == pytest.approx(row["protocol"]["rate"] / row["plain"]["rate"])
    assert [run["variant"] for run in result["runs"]] == ["plain", "protocol"]
    for run in result["runs"]:
        assert run["packets"] >= 100, run
        assert len(run["delivered"]) == 2
        assert min(run["delivered"]) >= run["packets"]
        assert run["rate"] > 0 and run["forwarder_cpu"] > 0
    assert "ratio" in forwarding.format_report(result)


async def test_latency_benchmark_delivers_everything_once_in_order() -> None:
    result = await latency.run_benchmark(
        nodes=8, subscribers=3, rate=300, duration=1.0, baseline_duration=0.5, seed=2
    )
    net, hop = result["network"], result["tcp_hop"]
    assert net["published"] == 300
    assert net["acked"] == 300 and net["failed"] == 0 and net["unanswered"] == 0
    assert net["delivered"] == net["expected"] == 300 * 3
    assert net["duplicates"] == 0 and net["order_violations"] == 0
    assert net["held_queries"] > 0  # every acknowledgement waited for a second branch
    # The root (node 7 here, not the publisher's node) took confirmations; one that came past
    # ``confirm_deadline`` on a loaded machine goes down unconfirmed and is not counted.
    assert 0 < net["confirmed"] <= 300
    assert net["commit_notices"] > 0  # the last marks, once the stream went quiet
    assert len(net["depths"]) == 3 and all(d is not None and d >= 0 for d in net["depths"])
    for stats in (net["latency_ms"], net["ack_latency_ms"], hop["latency_ms"]):
        assert 0 < stats["p50"] <= stats["p99"] <= stats["max"]
    assert hop["received"] == hop["packets"] == 150
    # Every packet crossed a tree edge per subscriber's node at least; the rest is control.
    assert net["packet_messages"] >= net["delivered"]
    assert net["control_messages"] > 0
    assert net["control_per_packet_edge"] == net["control_messages"] / net["packet_messages"]
    assert net["cpu_s"] > 0 and 0 < net["cpu_share"] <= 1.5  # (one thread; a tick's rounding)
    # The relay tree baseline has the network's tree: its root and one edge per other member.
    tree, relays = net["tree"], result["relay_tree"]
    members = {tree["root"], *(child for _, child in tree["edges"])}
    assert len(members) == len(tree["edges"]) + 1 and set(net["subscribers"]) <= members
    assert relays["edges"] == len(tree["edges"]) and relays["sinks"] == 3
    assert relays["frames"] == 300 and relays["delivered"] == relays["expected"] == 300 * 3
    assert 0 < relays["latency_ms"]["p50"] <= relays["latency_ms"]["p99"]
    report = latency.format_report(result)
    assert "µs a delivery" in report and "plain relay tree" in report
    assert "p99" in report and "publish->ack" in report


async def test_latency_benchmark_without_confirmation_sends_packets_down_unconfirmed() -> None:
    """With ``confirm_publishes`` off on every node, the root (not the publisher's node)
    sends each numbered publish down at once: it takes no confirmation, and every packet
    still reaches every subscriber once, in order."""
    result = await latency.run_benchmark(
        nodes=8,
        subscribers=3,
        rate=300,
        duration=1.0,
        baseline_duration=0.5,
        seed=2,
        confirm_publishes=False,
    )
    net = result["network"]
    assert result["parameters"]["confirm_publishes"] is False
    assert net["acked"] == net["published"] == 300 and net["failed"] == 0
    assert net["delivered"] == net["expected"] == 300 * 3
    assert net["duplicates"] == 0 and net["order_violations"] == 0
    assert net["confirmed"] == 0
    assert "publish confirmation off" in latency.format_report(result)


async def test_latency_benchmark_at_saturation_keeps_its_window_and_loses_nothing() -> None:
    result = await latency.run_benchmark(
        nodes=8, subscribers=3, duration=1.0, baseline_duration=0.5, seed=2, window=16
    )
    net, hop = result["network"], result["tcp_hop"]
    assert net["published"] > 16  # published again as answers came
    assert net["acked"] == net["published"] and net["failed"] == net["unanswered"] == 0
    assert net["delivered"] == net["expected"] == net["published"] * 3
    assert net["duplicates"] == 0 and net["order_violations"] == 0
    assert net["deliveries_per_s"] > 0 and hop["received"] == hop["packets"] > 0
    relays = result["relay_tree"]
    assert relays["frames"] > 16 and relays["delivered"] == relays["expected"]
    assert "saturation (16 publishes unanswered)" in latency.format_report(result)


async def test_relay_tree_reaches_every_sink_at_any_depth() -> None:
    """A root with a sink of its own, a child that only relays, and sinks one and two hops
    below it: every frame reaches every sink once, paced and at saturation."""
    edges = [(5, 1), (5, 2), (2, 3), (3, 4)]
    paced = await relay_tree.measure_relay_tree(
        edges=edges, root=5, sinks=[5, 1, 4], rate=200, duration=0.5, body=1100
    )
    assert paced["frames"] == 100 and paced["edges"] == 4
    assert paced["delivered"] == paced["expected"] == 300
    assert len(paced["latencies"]) == 300 and min(paced["latencies"]) >= 0
    saturated = await relay_tree.measure_relay_tree(
        edges=edges, root=5, sinks=[1, 4], rate=None, duration=0.3, body=1100, window=8
    )
    assert saturated["frames"] > 8 and saturated["delivered"] == saturated["expected"]
    assert saturated["cpu_s"] > 0 and saturated["deliveries_per_s"] > 0


def test_port_publisher_benchmark_runs_both_variants_and_loses_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = port_publisher.main(
        ["--nodes", "8", "--subscribers", "3", "--duration", "0.5", "--repeats", "1", "--json"]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert [run["variant"] for run in result["runs"]] == list(port_publisher.VARIANTS)
    for run in result["runs"]:
        assert run["published"] > 0 and run["delivered"] == run["expected"]
        assert run["expected"] == run["published"] * 3
        assert run["duplicates"] == run["order_violations"] == 0
        assert 0 < run["latency_ms"]["p50"] <= run["latency_ms"]["p99"]
        assert run["window"] >= 1
    assert len(result["parameters"]["load_average"]) == 3
    assert "own bound" in port_publisher.format_report(result)


def test_state_file_benchmark_relays_every_packet_and_keeps_the_last(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (``measure`` raises if the child missed a packet or the file kept another number)
    argv = ["--packets", "200", "--repeats", "1", "--per-read", "1,7", "--json"]
    assert state_file.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["parameters"] == {"packets": 200, "repeats": 1, "per_read": [1, 7]}
    per = result["us_per_packet"]
    assert per["without"] > 0
    for n in (1, 7):
        with_ = per[f"with, {n} per read"]
        assert result["ratio"][str(n)] == pytest.approx(with_ / per["without"], rel=0.01)
