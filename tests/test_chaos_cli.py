"""``python -m testnet.sim.chaos_cli``: its report, in text and JSON, and its usage errors."""

from __future__ import annotations

import json

import pytest

from testnet.sim import chaos_cli

SMALL = ["--nodes", "200", "--streams", "3", "--subscribers", "5", "--packets", "10"]


def test_the_report_counts_the_messages_the_repair_cost(capsys: pytest.CaptureFixture[str]) -> None:
    assert chaos_cli.main([*SMALL, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["lost"] == 0 and report["streams_one_tree"] == 3
    # Every root was killed: each new root asked its subtree (PastQuery) beyond its head.
    assert report["messages"] > report["past_queries"] > 0
    assert report["claims_refused"] >= 0
    assert chaos_cli.main(SMALL) == 0
    text = capsys.readouterr().out
    assert f"{report['messages']} sent ({report['past_queries']} PastQuery)" in text


def test_more_subscribers_than_nodes_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        chaos_cli.main(["--nodes", "10", "--subscribers", "20"])
    assert exit_.value.code == 2
    assert "--subscribers 20 exceeds --nodes 10" in capsys.readouterr().err
