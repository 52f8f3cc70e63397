"""The hostile-peer bench runs end to end in a quick mode, and every attack it lists is built
and really reaches the node: a bench whose attacker silently did nothing would show a
healthy node and prove nothing. The numbers themselves are not checked (the machine is
shared; today's stalls are what the bench is for), only that they are measured."""

from __future__ import annotations

import json

import pytest
import trio

from overlay.runtime.cooldown import Cooldowns
from testnet.bench import hostile, hostile_peer
from testnet.bench.hostile_attacks import ATTACKS, perform
from testnet.bench.hostile_peer import Tally

# What each attack must have done in a fraction of a second: the connections it opened,
# and, for those that break the protocol, how many the node cut (at least one).
CUT = {
    "garbage",
    "oversized_frame",
    "before_hello",
    "false_location",
    "false_neighbours",
    "claim_without_number",
}
DID = {
    "forged_data": "forged_sent",
    "uid_reuse": "reused",
    "join_drop": "joined",
    "unconfirmed_publish": "published",
    "silent_publish": "published",
    "catch_up_flood": "requests",
    "false_neighbours": "forged_words",
}


def test_quick_run_measures_the_honest_stream_and_the_attack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--seconds", "0.5", "--tail", "0.2", "--attacks", "garbage,unconfirmed_publish"]
    assert hostile.main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["parameters"]["seconds"] == 0.5
    baseline, garbage, unconfirmed = report["rows"]
    names = [row["attack"] for row in report["rows"]]
    assert names == ["baseline", "garbage", "unconfirmed_publish"]
    for row in report["rows"]:
        assert row["alive"] and row["faults"] == 0, row
        assert row["root"] == 0 and row["root_is_closest"]
        assert row["published"] >= 20 and row["unanswered"] == 0, row
        for check in row["subscribers"]:  # the honest stream was really measured
            assert check["delivered"] >= row["acked"] > 0, row
        assert row["stall_ms"] > 0
        assert row["attack_s"] >= 0.5
    assert baseline["lost"] == baseline["duplicated"] == baseline["bad"] == 0
    assert baseline["attacker"] is None and baseline["first_warning"] is None
    # Every connection cut by the node, but the one the attacker's time ended in, maybe.
    attacker = garbage["attacker"]
    assert attacker["connections"] - 1 <= attacker["cut"] and attacker["cut"] > 0
    assert "overlay.refusals" in garbage["first_warning"]
    assert garbage["refusals"]["handshake"] >= 1
    assert unconfirmed["attacker"]["notes"]["published"] >= 1
    assert "stall ms" in hostile.HEADER
    assert "garbage" in hostile.format_row(garbage)


async def test_every_attack_reaches_a_node() -> None:
    """Each attack, a moment each, against a real network's root (this process)."""
    hostile_peer.prepare(hostile.KEY, len(ATTACKS))  # (ids with work, made untimed)
    with trio.fail_after(60):
        async with hostile._TaggedNetwork(hostile._ring()) as net:
            await net.wait_linked()
            node = net.node(0)
            node.host.subscribe(node.host.add_client(hostile._Subscriber()), hostile.KEY)
            target = (node.peer_address.host, node.peer_address.port)
            for attack in ATTACKS:
                # Three faults from one address and the node refuses that address at
                # accept for a while (``cooldown``): each attack starts with none, so that
                # it reaches the node rather than being refused for the one before.
                node.host.cooldowns = Cooldowns(trio.current_time)
                tally = Tally()
                await perform(attack, target, hostile.KEY, 0.4, 20, tally)
                assert tally.connections > 0, attack
                if attack in CUT:
                    assert tally.cut > 0, (attack, tally.report())
                if attack in DID:
                    assert tally.notes[DID[attack]] > 0, (attack, tally.report())
                if attack == "false_neighbours":
                    assert node.host.describe()["refusals"].get("vouch", 0) > 0
            assert all(net.alive(i) for i in range(len(net)))
