"""The peer table and its greedy choice."""

from __future__ import annotations

import random

import pytest

from keyspace.location import distance
from overlay.core.peers import Peer, PeerTable


def table(*peers: tuple[bytes, float]) -> PeerTable:
    t = PeerTable()
    for i, (peer_id, location) in enumerate(peers):
        t.add(peer_id, location, i, 0.0)
    return t


def test_closest_is_the_nearest_location() -> None:
    t = table((b"a", 0.1), (b"b", 0.45), (b"c", 0.7))
    peer = t.closest(0.5, ())
    assert peer is not None and peer.id == b"b"


def test_closest_uses_circular_distance() -> None:
    t = table((b"a", 0.9), (b"b", 0.15))
    peer = t.closest(0.02, ())
    assert peer is not None and peer.id == b"a"  # 0.12 away across the wrap, not 0.13


def test_tie_goes_to_the_lower_id_whatever_the_order() -> None:
    # 0.25 and 0.75 are exactly as far from 0.5 (exact binary fractions).
    for order in [((b"y", 0.25), (b"x", 0.75)), ((b"x", 0.75), (b"y", 0.25))]:
        peer = table(*order).closest(0.5, ())
        assert peer is not None and peer.id == b"x"


def test_closest_skips_excluded_peers() -> None:
    t = table((b"a", 0.1), (b"b", 0.45), (b"c", 0.7))
    peer = t.closest(0.5, {b"b"})
    assert peer is not None and peer.id == b"c"
    assert t.closest(0.5, {b"a", b"b", b"c"}) is None


def test_closest_of_no_peers_is_none() -> None:
    assert PeerTable().closest(0.5, ()) is None


def test_add_returns_the_previous_record_and_replaces_it() -> None:
    t = PeerTable()
    assert t.add(b"a", 0.1, 1, 0.0) is None
    assert t.add(b"a", 0.2, 2, 3.0) == Peer(b"a", 0.1, 1, 0.0)
    assert t.get(b"a") == Peer(b"a", 0.2, 2, 3.0)
    assert len(t) == 1


def test_remove_contains_and_iteration_order() -> None:
    t = table((b"c", 0.1), (b"a", 0.2), (b"b", 0.3))
    assert [p.id for p in t] == [b"c", b"a", b"b"]  # connection order, not id order
    assert b"a" in t
    assert t.remove(b"a") == Peer(b"a", 0.2, 1)
    assert b"a" not in t and t.get(b"a") is None
    assert t.remove(b"a") is None
    assert len(t) == 2


def test_friend_of_a_friend_prefers_the_peer_that_reaches_closest() -> None:
    t = table((b"a", 0.25), (b"b", 0.4375))
    t.get(b"a").neighbours = (0.5,)  # type: ignore[union-attr]
    peer = t.closest(0.5, ())
    assert peer is not None and peer.id == b"a"  # a is next to the key's own location


def test_equal_reach_goes_to_the_closer_peer_then_the_lower_id() -> None:
    t = table((b"b", 0.25), (b"c", 0.375), (b"a", 0.125))
    for p in t:
        p.neighbours = (0.5,)
    peer = t.closest(0.5, ())
    assert peer is not None and peer.id == b"c"
    t.add(b"d", 0.625, 9, 0.0)  # as close as c, and a higher id
    t.get(b"d").neighbours = (0.5,)  # type: ignore[union-attr]
    peer = t.closest(0.5, ())
    assert peer is not None and peer.id == b"c"


def test_reach_wraps_around_the_circle() -> None:
    peer = Peer(b"p", 0.5, 1, neighbours=(0.125, 0.875))
    assert peer.reach(0.96875) == 0.09375  # 0.875 is the nearer, below
    assert peer.reach(0.03125) == 0.09375  # 0.125 is the nearer, above
    assert peer.reach(0.5) == 0.0
    assert Peer(b"q", 0.5, 1).reach(0.25) == 0.25  # no neighbours: its own location


def test_our_own_location_in_a_peer_s_neighbours_never_counts() -> None:
    """Announced around us, a peer reaches a target next to us only through its other
    neighbours, whichever side and however many times we are listed."""
    peer = Peer(b"p", 0.25, 1, neighbours=(0.125, 0.5, 0.5, 0.75))
    assert peer.reach(0.5) == 0.0
    assert peer.reach(0.5, own=0.5) == 0.25  # 0.25 itself, or 0.75
    assert peer.reach(0.55, own=0.5) == pytest.approx(0.2)  # 0.75 above, not 0.5 below
    assert peer.reach(0.45, own=0.5) == pytest.approx(0.2)  # 0.25 itself, below
    only_us = Peer(b"q", 0.25, 1, neighbours=(0.5,))
    assert only_us.reach(0.5, own=0.5) == 0.25  # no other neighbour: its own location


def _ranked_closest(
    table: PeerTable, target: float, exclude: set[bytes], own: float
) -> Peer | None:
    """The rule as stated: the least (reach, own distance, id) among peers not excluded,
    each peer's reach over its neighbours other than ``own``."""

    def reach(peer: Peer) -> float:
        others = tuple(x for x in peer.neighbours if x != own)
        return Peer(peer.id, peer.location, 1, neighbours=others).reach(target)

    ranked = [
        ((reach(peer), distance(target, peer.location), peer.id), peer)
        for peer in table
        if peer.id not in exclude
    ]
    return min(ranked, key=lambda pair: pair[0])[1] if ranked else None


def test_closest_picks_what_the_stated_rank_picks_on_random_tables() -> None:
    """``closest`` computes reach and distance inline; on random tables (peers with and
    without announced neighbours, shared locations, exclusions, targets on the seam at 0)
    it picks the peer the plain rank does."""
    rng = random.Random(7)
    grid = [i / 64 for i in range(64)]  # coarse locations, so exact ties happen
    for _ in range(3000):
        own = rng.choice(grid)  # often among the peers' neighbours, and at times all of them
        table = PeerTable(own)
        ids = [bytes([i]) for i in range(rng.randrange(0, 12))]
        for peer_id in ids:
            table.add(peer_id, rng.choice(grid), 1, 0.0)
            record = table.get(peer_id)
            assert record is not None
            if rng.random() < 0.7:
                near = [own, *grid[:4]] if rng.random() < 0.3 else grid
                record.neighbours = tuple(
                    sorted(rng.choice(near) for _ in range(rng.randrange(1, 6)))
                )
        exclude = {peer_id for peer_id in ids if rng.random() < 0.2}
        target = rng.choice([*grid, rng.random(), 0.0, 0.999999, own])
        assert table.closest(target, exclude) is _ranked_closest(table, target, exclude, own)


def test_a_new_hello_from_the_same_run_of_a_peer_moves_it_and_keeps_its_neighbours() -> None:
    """A peer that moved (a location swap) says so in a new Hello with its boot id: its
    links are the same, so its announced neighbours stay. A new boot id is a new run of
    the peer, whose links are not known yet."""
    peers = PeerTable(0.5)
    peers.add(b"p", 0.2, 7, 0.0)
    record = peers.get(b"p")
    assert record is not None
    record.neighbours = (0.1, 0.5, 0.9)
    peers.add(b"p", 0.7, 7, 1.0)
    moved = peers.get(b"p")
    assert moved is not None and (moved.location, moved.neighbours) == (0.7, (0.1, 0.5, 0.9))
    peers.add(b"p", 0.7, 8, 2.0)
    restarted = peers.get(b"p")
    assert restarted is not None and restarted.neighbours == ()
    peers.move(0.25)
    assert peers.own == 0.25
