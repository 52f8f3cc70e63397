"""Location swapping and the streams' trees (``overlay.core.swaps``, ``links``): a root
never moves, a member moves only away from its streams' keys and keeps its place, and a
root hands its tree on only to a peer that came closer to the key from outside it."""

from __future__ import annotations

import dataclasses

from corenet import CoreNet, key_at
from swapping_nets import SWAPPING, chain

from overlay.core.config import NodeConfig
from overlay.core.swaps import MAX_AWAY, away_cell


def test_a_root_whose_peer_moves_closer_to_the_key_hands_the_tree_on() -> None:
    """R (0.6) roots a stream at 0.7; its peer A moves from 0.3 to 0.69, as a swap moves a
    node. To R, A is now a closer node, as a new one would be, so the tree moves on to A
    (spec: "when a new node is added ... we restart the subscription")."""
    net = CoreNet(config=SWAPPING)
    net.add(b"A", 0.3)
    net.add(b"R", 0.6)
    net.connect(b"A", b"R")
    key = key_at(0.7)
    net.subscribe(b"R", key)
    assert net.roots(key) == [b"R"]
    net.relocate(b"A", 0.69)
    assert net.nodes[b"R"].peers.get(b"A").location == 0.69  # type: ignore[union-attr]
    net.advance(net.now + 30.0)
    assert net.roots(key) == [b"A"]
    assert net.tree_problems(key) == []


def member_swap(key_location: float) -> CoreNet:
    """The chain with B (0.8) a member below the root R (0.5) of a stream keyed at
    ``key_location``, after A (0.2) started a swap whose walk ends at B."""
    net = chain()
    key = key_at(key_location)
    net.subscribe(b"R", key, client=2)
    net.subscribe(b"B", key)
    assert net.stream(b"B", key).parent == b"R"  # type: ignore[union-attr]
    net.start_swap(b"A")
    return net


def test_a_member_never_swaps_toward_its_streams_key() -> None:
    """With the key at 0.45, A's place (0.2) lies nearer the key than B's: B could come
    closer than its root. Both ends decide no, and nobody moves."""
    net = member_swap(0.45)
    assert (net.nodes[b"A"].location, net.nodes[b"B"].location) == (0.2, 0.8)
    assert net.nodes[b"A"].stats.swaps == net.nodes[b"B"].stats.swaps == 0
    # B took part (answered and revealed): the decision said no, at both ends.
    assert net.nodes[b"B"].stats.swaps_refused == 0
    assert net.nodes[b"A"].stats.swaps_rejected == 0


def test_a_member_swaps_away_from_its_streams_key_and_keeps_its_place() -> None:
    """With the key at 0.55, A's place lies farther from it than B's: they trade places,
    and B stays in the tree under R, which stays the root."""
    net = member_swap(0.55)
    assert (net.nodes[b"A"].location, net.nodes[b"B"].location) == (0.8, 0.2)
    key = key_at(0.55)
    assert net.stream(b"B", key).parent == b"R"  # type: ignore[union-attr]
    net.advance(net.now + 30.0)
    assert net.roots(key) == [b"R"] and net.tree_problems(key) == []


def test_a_member_closer_than_its_root_moves_away_without_moving_the_tree() -> None:
    """R (0.5) roots a stream keyed at 0.45; M (0.44) joined below C (0.6), where its
    search first met the tree, so it stands closer to the key than its root, and is linked
    to R too. M trades places with X (0.47), farther from the key: R hears M moved, but
    not toward the key, so it does not restart for M, which is inside its own subtree."""
    net = CoreNet(config=NodeConfig(swap_interval=1e6, swap_htl=1, swap_timeout=10.0))
    net.add(b"R", 0.5)
    net.add(b"C", 0.6)
    net.connect(b"R", b"C")
    key = key_at(0.45)
    net.subscribe(b"R", key, client=2)
    net.subscribe(b"C", key)
    net.add(b"M", 0.44)
    net.connect(b"C", b"M")
    net.subscribe(b"M", key)
    net.connect(b"M", b"R")
    net.add(b"X", 0.47)
    net.connect(b"X", b"M")
    net.advance(net.now + 60.0)
    assert net.roots(key) == [b"R"] and net.stream(b"M", key).parent == b"C"  # type: ignore[union-attr]
    restarts = net.nodes[b"R"].stats.restarts
    net.start_swap(b"X")
    assert (net.nodes[b"M"].location, net.nodes[b"X"].location) == (0.47, 0.44)
    assert net.nodes[b"R"].stats.restarts == restarts
    # X, in M's old place, is now the closest node: the root's probes find it, and the tree
    # moves on to it whole, as to any closer node outside it.
    net.advance(net.now + 600.0)
    assert net.roots(key) == [b"X"] and net.tree_problems(key) == []


def test_a_root_neither_starts_nor_joins_a_swap() -> None:
    """B roots a stream keyed at 0.75, R is a member below it: a walk from A through R
    ends at B, which refuses to be its partner, and B starts none (its tree would stay
    where its key no longer leads). R relays walks all the same."""
    net = chain()
    key = key_at(0.75)
    net.subscribe(b"B", key, client=2)
    net.subscribe(b"R", key)
    assert net.roots(key) == [b"B"]
    net.start_swap(b"A")
    assert (net.nodes[b"A"].location, net.nodes[b"B"].location) == (0.2, 0.8)
    assert net.nodes[b"B"].stats.swaps_refused == 1
    assert net.nodes[b"A"].stats.swaps_rejected == 1
    net.start_swap(b"B")
    assert net.nodes[b"B"].stats.swap_attempts == 0


def test_a_member_of_more_streams_than_a_reveal_names_does_not_swap() -> None:
    """B is a member of ``MAX_AWAY`` streams rooted at R, all keyed at 0.55: it may swap,
    naming their one arc. One stream more and its reveal could not name them all: A's walk
    ends at B, which refuses, and nobody moves. (Its nodes keep that many streams.)"""
    net = chain(dataclasses.replace(SWAPPING, max_streams=MAX_AWAY + 1))
    keys = [key_at(0.55, tag) for tag in range(MAX_AWAY + 1)]
    for key in keys[:MAX_AWAY]:
        net.subscribe(b"R", key, client=2)
        net.subscribe(b"B", key)
    assert net.nodes[b"B"]._swap_bounds() == (away_cell(0.55),)
    net.subscribe(b"R", keys[-1], client=2)
    net.subscribe(b"B", keys[-1])
    assert net.nodes[b"B"]._swap_bounds() is None
    net.start_swap(b"A")
    assert (net.nodes[b"A"].location, net.nodes[b"B"].location) == (0.2, 0.8)
    assert net.nodes[b"B"].stats.swaps_refused == 1


def test_a_member_may_start_a_swap_away_from_its_key() -> None:
    """B, a member below the root R of a stream keyed at 0.55, starts a swap whose walk
    ends at A: it names its key in its own reveal, and goes to 0.2, farther from it."""
    net = chain()
    key = key_at(0.55)
    net.subscribe(b"R", key, client=2)
    net.subscribe(b"B", key)
    net.start_swap(b"B")
    assert net.nodes[b"B"].stats.swap_attempts == 1
    assert (net.nodes[b"A"].location, net.nodes[b"B"].location) == (0.8, 0.2)
    net.advance(net.now + 30.0)
    assert net.roots(key) == [b"R"] and net.tree_problems(key) == []


def test_a_root_whose_child_moves_closer_keeps_its_tree() -> None:
    """R roots a stream at 0.7 with A as its child; A moves to 0.69. A is inside the tree,
    so R does not hand the tree on to it (it would refuse the resubscribe)."""
    net = CoreNet(config=SWAPPING)
    net.add(b"A", 0.3)
    net.add(b"R", 0.6)
    net.connect(b"A", b"R")
    key = key_at(0.7)
    net.subscribe(b"R", key, client=2)
    net.subscribe(b"A", key)
    assert net.stream(b"A", key).parent == b"R"  # type: ignore[union-attr]
    net.relocate(b"A", 0.69)
    assert net.nodes[b"R"].stats.restarts == 0
    net.advance(net.now + 30.0)
    assert net.roots(key) == [b"R"] and net.tree_problems(key) == []
