"""Hypothesis-driven chaos over the simulator: random small networks, several streams
published throughout, and a random schedule of faults; afterwards, one sound tree per
stream and every acknowledged packet delivered exactly once, in order, to every subscriber
that stayed subscribed.

A scenario (``Scenario``, drawn by ``draw_scenario`` from a named seed) is 20-60 nodes,
2-3 streams with a few subscribers each and two publishers each, publishing for
``PUBLISH_FOR`` virtual seconds from ``PUBLISH_AT``; while they publish, faults strike at
random times:

* crashes, silent (noticed by liveness) or not, of up to 30% of the nodes, every stream's
  root among the candidates; some of the crashed nodes restart later (new boot id, no
  stream state but what their disk remembers of each stream's numbering: their clients
  died with them and are not owed anything);
* nodes added, each linked to a few random peers (a closer one takes a tree over);
* a partition of a random minority, healed later (before or after liveness notices);
* a spell of bad weather: frames dropped (which breaks the link; it redials, as TCP does),
  duplicated and jittered.

Then the network is given a bounded time to get quiet, and the checks are the issue's:
every tree invariant (``testnet.sim.invariants``), exactly one root per stream, every
surviving subscriber a member, and ``testnet.sim.deliveries`` finds nothing wrong with
what any subscriber got and no acknowledged packet missing at one that stayed up. The
catch-up window (1024 packets) holds every packet of a run, so no repair may fall outside
it.

Restriction, and why: the minority side of a partition has no publisher, the rest stays in
one piece, and no crash cuts a publisher off the others (``_together``). A partition that
outlives liveness gives each side a root, and two roots that both number packets give one
number to two packets; nothing reconciles that when they meet again (the protocol numbers
at one root, a total order; see ``overlay.core.merges``). With no publishing on the
minority side the old numbering stays the only one, and the sides must merge into one tree
once healed. One thing the draw cannot rule out: a publish already on its way into the
side when the cut comes (held at a relay that was restarting) can still reach a root there.
If a root on the side gives such a publish a number of its own while cut off (``_Cut``),
the side had a publisher after all, and the numbers it gave may stand for two packets: the
checks pass over those numbers of that stream (two acknowledgements of one, a subscriber
shown the other packet under it), and hold everyone to everything else. A side root that
only took back packets its subtree pushed up numbered nothing twice: they were numbered
before the cut, so nothing is passed over. Crashes can cut nodes off too, for good:
a node whose every peer died has no way back (the simulator's links are fixed). Such nodes
(``_isolated``, counted once the faults are over) are a network of their own: their trees
are not checked, their subscribers are owed nothing, and a search they hold, waiting for a
peer, does not count against quiet (unless it is for a stream the node left).
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from chaos_scenarios import Scenario, failures, run, sample


def fingerprint(scenarios: list[Scenario]) -> str:
    """A digest of what ``scenarios`` are, to tell whether a sample changed."""
    return hashlib.sha256("\n".join(map(repr, scenarios)).encode()).hexdigest()[:16]


def test_a_side_root_that_only_took_back_pushed_packets_is_held_to_every_packet() -> None:
    """A partition cuts 12 of 30 nodes off 5 s into publishing, for 20 s. Liveness makes a
    root on the side; a packet numbered before the cut is shown there (a member pushes it
    up and the root takes it back, or the root had set it aside and a claim of it sends it
    down). No publish reaches the side, so it numbers none of its own: no number there can
    stand for two packets, and every subscriber on the side is held to every acknowledged
    packet like the rest."""
    scenario = Scenario(seed=2, nodes=30, streams=2, subscribers=4, partition=(5.0, 25.0, 0.4))
    outcome = run(scenario)
    cut = outcome.cut
    assert cut is not None and cut.taken_back > 0
    assert cut.contested == {}
    assert any(node in cut.side for node, _, _ in outcome.subscribers)
    assert outcome.log.acks and failures(outcome) == []


def _check(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.log.acks, "nothing was acknowledged: the scenario tested nothing"
    assert failures(outcome) == []


# The property over a fixed sample: the same 200 scenarios every run, each of which must
# keep every guarantee. They are drawn from named seeds, not by hypothesis, whose draws
# took literals from every module a run had imported (its local constants): importing one
# more module changed which scenarios a derandomized sample held. A change to
# ``draw_scenario`` draws another sample (``SAMPLE_FINGERPRINTS`` says so). The property is
# not proven by it: wider hunts may still draw scenarios that break it
# (``tests/hunt_chaos.py`` draws thousands more). Failing examples are strict regression
# tests in test_sim_chaos_*.py, one file per concept (test_sim_chaos_repairs.py,
# test_sim_chaos_refills.py, ...).
SAMPLE = sample("chaos", 200)
# Its own sample with ``confirm_publishes`` off. Besides the causes above, that mode meets
# a race that confirmation closes: a packet numbered just as a partition begins, whose
# number the other side's new root gives to another publish (README, Known limits).
SAMPLE_OFF = [dataclasses.replace(s, confirm=False) for s in sample("chaos-off", 200)]
# The same scenarios on the simulator's default graphs, whose long links go to the nearest of
# 16 alike nodes (``SimConfig.proximity``): other links, so other trees and other races.
SAMPLE_NEAR = [dataclasses.replace(s, proximity=16) for s in SAMPLE + SAMPLE_OFF]
SAMPLE_FINGERPRINTS = {"chaos": "7a983bef096522df", "chaos-off": "9aa64b5abf2f3c5f"}


def test_the_fixed_samples_are_the_same_whatever_a_run_imported() -> None:
    # The simulator's command line holds literals (10_000 among them) that changed
    # hypothesis's draws once imported; the samples must not move with it.
    import testnet.sim.__main__  # noqa: F401

    assert fingerprint(sample("chaos", 200)) == fingerprint(SAMPLE)
    assert fingerprint(SAMPLE) == SAMPLE_FINGERPRINTS["chaos"]
    assert fingerprint(sample("chaos-off", 200)) == SAMPLE_FINGERPRINTS["chaos-off"]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SAMPLE, ids=[f"chaos-{i}" for i in range(len(SAMPLE))])
def test_chaos_keeps_one_tree_and_loses_no_acknowledged_packet(scenario: Scenario) -> None:
    _check(scenario)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SAMPLE_OFF, ids=[f"chaos-off-{i}" for i in range(200)])
def test_chaos_without_confirmed_publishes_keeps_the_same_guarantees(scenario: Scenario) -> None:
    _check(scenario)


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario", SAMPLE_NEAR, ids=[f"chaos-near-{i}" for i in range(len(SAMPLE_NEAR))]
)
def test_chaos_on_proximity_graphs_keeps_the_same_guarantees(scenario: Scenario) -> None:
    _check(scenario)
