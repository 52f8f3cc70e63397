"""The churn experiment (``testnet.sim.chaos``) at a small scale: 300 nodes, 5 streams of 10
subscribers, 20% of the nodes killed silently (every root first) while publishing.

The seeds pin what works: the run reaches quiet (it did not while a dead node's scheduled
publishes kept it busy), nothing acknowledged is lost or delivered twice, and each stream is
one tree again. Three of them reproduced bugs, now fixed:

* seeds 1 and 12: a relay that joined a tree through a resubscribe continued after that
  search's last_seen; a second resubscribe that coalesced there having seen one packet less
  was told that packet was missed, although the tree still held it (``refills``).
* seed 4 (and 12 once the first was fixed): two restarting subtree tops both failed to find
  the other and both became root: a split tree, which nothing merged (``merges``). Since
  relays whose last child died linger (``leaving``), seed 4 no longer splits; seed 6 is
  one that does, and is merged.
* seed 12 also acked one number for two publishes (a relay answered from its window).
"""

from __future__ import annotations

import pytest

from overlay.core.config import NodeConfig
from testnet.sim.chaos import ChaosExperiment, ChaosPlan, run_chaos
from testnet.sim.simulator import SimConfig
from testnet.sim.workload import PublishLoad

BEAT = 5.0


def experiment(seed: int, confirm: bool = True) -> dict[str, object]:
    """As ``python -m testnet.sim.chaos_cli --nodes 300 --streams 5 --subscribers 10
    --packets 40 --seed SEED`` (and ``--no-confirm-publishes`` unless ``confirm``)."""
    node = NodeConfig(
        heartbeat_interval=BEAT,
        dead_after=3 * BEAT,
        takeover_grace=2 * BEAT,
        confirm_publishes=confirm,
    )
    exp = ChaosExperiment(
        SimConfig(nodes=300, seed=seed, node=node),
        streams=5,
        subscribers=10,
        publish=PublishLoad(packets=40, rate=2.0, start=15.0),
        plan=ChaosPlan(kill_fraction=0.2),
    )
    return run_chaos(exp)[1]


def healthy(report: dict[str, object]) -> None:
    assert report["killed"] == 60
    assert report["packets_acked"] and report["subscribers_alive"]
    assert report["lost"] == 0, report["delivery_problems"]
    assert report["duplicates_delivered"] == 0
    assert report["delivery_problem_count"] == 0, report["delivery_problems"]
    assert report["violations"] == []
    assert report["streams_one_tree"] == 5 and report["max_roots"] == 1
    assert report["repaired"] == 5
    # Found by liveness (dead_after plus up to one interval), then a search, a grace and
    # the look that ends it.
    assert float(report["repair_max"]) <= 6 * BEAT  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_killing_a_fifth_of_the_nodes_and_every_root_loses_nothing(seed: int) -> None:
    healthy(experiment(seed))


@pytest.mark.parametrize("seed", [2, 3])
def test_without_confirmed_publishes_killing_every_root_loses_nothing(seed: int) -> None:
    healthy(experiment(seed, confirm=False))


def test_no_packet_number_is_acked_for_two_publishes() -> None:
    # Seed 12 acked packet 19 for two publishes before a relay stopped answering numbered
    # publishes from its own window (a pushed-up packet never reached the new root), and
    # again, differently, while its split trees were merged after one had numbered 19.
    report = experiment(12)
    assert report["delivery_problem_count"] == 0, report["delivery_problems"]
    assert report["duplicates_delivered"] == 0 and report["violations"] == []


@pytest.mark.parametrize("seed", [1, 12])
def test_a_coalescing_resubscribe_gets_what_the_tree_holds(seed: int) -> None:
    # (The relay now starts no later than its parent's head, so these seeds no longer need
    # a refill; tests/test_node_refills.py pins the refill itself.)
    healthy(experiment(seed))


def test_two_restarting_tops_that_both_became_root_merge() -> None:
    report = experiment(6)
    healthy(report)
    assert report["merges"]  # it is a merge that mends it
