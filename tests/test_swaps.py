"""Location swapping between live cores (``overlay.core.swaps``): the walk, the commit and
reveal, the shared decision, and what a node does with a peer that cheats or floods."""

from __future__ import annotations

import random

import pytest
from corenet import CoreNet, key_at
from swapping_nets import SWAPPING, chain

from keyspace.swapping import swap_gain
from overlay.core.config import NodeConfig
from overlay.core.effects import DropPeer, Effect, Send
from overlay.core.node import Node
from overlay.core.swaps import (
    AWAY_CELLS,
    PARTNER,
    STARTER,
    Reveal,
    away_cell,
    commitment,
    decide,
)
from overlay.messages import (
    Hello,
    Message,
    SwapCommit,
    SwapComplete,
    SwapRejected,
    SwapReply,
    SwapRequest,
)

NONCE_A, NONCE_B = bytes(range(32)), bytes(range(32, 64))


def sends(effects: list[Effect]) -> list[tuple[bytes, Message]]:
    return [(e.peer, e.message) for e in effects if isinstance(e, Send)]


def drops(effects: list[Effect]) -> list[DropPeer]:
    return [e for e in effects if isinstance(e, DropPeer)]


def relay(config: NodeConfig = SWAPPING) -> Node:
    """A core at 0.5 linked to A (at 0.1) and B (at 0.9), as a walk's middle hop."""
    node = Node(b"R", 0.5, random.Random(1), config)
    for peer, location in ((b"A", 0.1), (b"B", 0.9)):
        node.link_up(0.0, peer)
        node.receive(0.0, peer, Hello(location, 7))
    return node


# --- the commitment and the decision ----------------------------------------------------


def test_a_commitment_binds_the_uid_the_role_the_nonce_the_location_and_each_neighbour() -> None:
    base = Reveal(NONCE_A, 0.25, (0.1, 0.3))
    others = [
        (8, base, STARTER),
        (7, base, PARTNER),
        (7, Reveal(NONCE_B, 0.25, (0.1, 0.3)), STARTER),
        (7, Reveal(NONCE_A, 0.26, (0.1, 0.3)), STARTER),
        (7, Reveal(NONCE_A, 0.25, (0.1, 0.31)), STARTER),
        (7, Reveal(NONCE_A, 0.25, (0.1,)), STARTER),
        (7, Reveal(NONCE_A, 0.25, (0.1, 0.3), (0.5,)), STARTER),
        # The same numbers split another way between the two lists.
        (7, Reveal(NONCE_A, 0.25, (0.1,), (0.3,)), STARTER),
    ]
    made = {commitment(uid, r, role) for uid, r, role in others}
    assert len(made | {commitment(7, base, STARTER)}) == 9


def test_neither_end_of_a_swap_moves_toward_a_key_it_carries() -> None:
    """A swap that shortens every link is refused when it would bring either end closer to
    one of the keys it names, and taken when it brings them no closer."""
    starter = Reveal(NONCE_A, 0.1, (0.88, 0.9, 0.92))
    partner = Reveal(NONCE_B, 0.9, (0.08, 0.1, 0.12))
    assert decide(1, starter, partner)
    for toward_partner in (0.8, 0.95):  # nearer 0.9 than 0.1 is
        bound = Reveal(NONCE_A, 0.1, starter.neighbours, (0.3, toward_partner))
        assert not decide(1, bound, partner) and not decide(1, partner, bound)
    assert decide(1, Reveal(NONCE_A, 0.1, starter.neighbours, (0.05, 0.3)), partner)
    toward_starter = Reveal(NONCE_B, 0.9, partner.neighbours, (0.2,))
    assert not decide(1, starter, toward_starter)
    # A key is named by its arc's middle, within half an arc of it: a move must take the
    # end an arc's width farther from that middle. The partner moving from 0.9 to 0.1 keeps
    # its distance to 0.5 (a tie: refused), and gains about two fifths of an arc on 0.51's.
    assert not decide(1, starter, Reveal(NONCE_B, 0.9, partner.neighbours, (0.5,)))
    assert away_cell(0.51) != 0.51
    assert decide(1, starter, Reveal(NONCE_B, 0.9, partner.neighbours, (away_cell(0.51),)))


def test_a_reveal_names_a_key_by_its_arc_alone() -> None:
    """Keys in one arc are named alike, by its middle; keys an arc apart are not."""
    width = 1 / AWAY_CELLS
    assert away_cell(0.0) == away_cell(width / 3) == width / 2
    assert away_cell(0.51) == away_cell(0.5101)
    assert away_cell(0.51 + width) != away_cell(0.51)
    assert away_cell(1.0 - 1e-12) == 1.0 - width / 2


def test_a_swap_that_shortens_links_is_always_taken() -> None:
    # A sits among B's neighbours and B among A's: trading places shortens every link.
    starter = Reveal(NONCE_A, 0.1, (0.88, 0.9, 0.92))
    partner = Reveal(NONCE_B, 0.9, (0.08, 0.1, 0.12))
    assert decide(1, starter, partner)
    assert decide(1, partner, starter)  # (the ratio is the same seen from either end)


def test_a_worse_swap_is_taken_with_the_ratio_as_its_chance() -> None:
    starter = Reveal(NONCE_A, 0.1, (0.12, 0.15))
    partner = Reveal(NONCE_B, 0.6, (0.62, 0.7))
    gain = swap_gain(0.1, 0.6, [0.12, 0.15], [0.62, 0.7])
    assert 0.0 < gain < 1.0
    rng = random.Random(5)
    trials = 4000
    taken = sum(
        decide(uid, Reveal(rng.randbytes(32), 0.1, (0.12, 0.15)), partner) for uid in range(trials)
    )
    assert abs(taken / trials - gain) < 0.03
    assert decide(3, starter, partner) in (True, False)


def test_both_ends_of_a_swap_the_rule_may_refuse_reach_the_same_decision() -> None:
    """A (0.1) linked to C (0.12) and R (0.5), R to B (0.55): most swaps A can make lengthen
    the links (the ratio is below 1), so the coin decides. Over many runs each end decides
    on its own, and they always agree: both moved or neither did (no location is lost or
    held twice), and the coin went each way."""
    start = {b"C": 0.12, b"A": 0.1, b"R": 0.5, b"B": 0.55}
    moved = stayed = 0
    for seed in range(40):
        net = CoreNet(seed=seed, config=SWAPPING)
        for name, location in start.items():
            net.add(name, location)
        for x, y in ((b"C", b"A"), (b"A", b"R"), (b"R", b"B")):
            net.connect(x, y)
        net.start_swap(b"A")
        if net.nodes[b"A"].stats.swaps_rejected:
            continue  # (a walk that came back to A: refused as a loop, nothing decided)
        now = {name: node.location for name, node in net.nodes.items()}
        assert sorted(now.values()) == sorted(start.values())
        changed = [name for name in start if now[name] != start[name]]
        assert len(changed) in (0, 2) and (not changed or b"A" in changed)
        assert sum(node.stats.swaps for node in net.nodes.values()) == len(changed)
        moved += bool(changed)
        stayed += not changed
    assert moved > 0 and stayed > 0  # (the coin said yes and no)


# --- a swap end to end -------------------------------------------------------------------


def test_a_swap_walks_commits_reveals_and_trades_the_two_locations() -> None:
    net = chain()
    start = len(net.trace)
    net.start_swap(b"A")
    swap_flow = [
        (src, dst, type(m).__name__) for src, dst, m in net.trace[start:] if type(m) is not Hello
    ]
    assert swap_flow[:8] == [
        (b"A", b"R", "SwapRequest"),
        (b"R", b"B", "SwapRequest"),
        (b"B", b"R", "SwapReply"),
        (b"R", b"A", "SwapReply"),
        (b"A", b"R", "SwapCommit"),
        (b"R", b"B", "SwapCommit"),
        (b"B", b"R", "SwapComplete"),
        (b"R", b"A", "SwapComplete"),
    ]
    a, r, b = net.nodes[b"A"], net.nodes[b"R"], net.nodes[b"B"]
    # Both have R as their one neighbour, so the products are equal: the rule says yes.
    assert (a.location, b.location) == (0.8, 0.2)
    assert (a.stats.swaps, b.stats.swaps, a.stats.swap_attempts) == (1, 1, 1)
    # Every part that judges by the node's location moved with it.
    assert a.peers.own == a.links.location == a.clients.location == a.probes.location == 0.8
    # R heard both Hellos: its table has each at its new place, and keeps no walk.
    assert r.peers.get(b"A").location == 0.8  # type: ignore[union-attr]
    assert r.peers.get(b"B").location == 0.2  # type: ignore[union-attr]
    assert r.swaps.walks == {}
    assert net.dropped == []


def test_a_swap_nobody_answers_is_given_up_after_its_timeout() -> None:
    net = chain()
    net.hold(b"B")
    net.start_swap(b"A")
    a = net.nodes[b"A"]
    net.advance(SWAPPING.swap_timeout + 1.0)
    assert a.stats.swap_timeouts == 1
    assert net.nodes[b"R"].swaps.walks == {}
    net.start_swap(b"A")  # free again
    assert a.stats.swap_attempts == 2


def test_a_lost_link_ends_the_walks_through_it_on_both_sides() -> None:
    net = chain()
    net.hold(b"B")
    net.start_swap(b"A")
    assert len(net.nodes[b"R"].swaps.walks) == 1
    net.disconnect(b"R", b"B")
    assert net.nodes[b"R"].swaps.walks == {}
    assert net.nodes[b"A"].stats.swaps_rejected == 1


# --- hostile peers -------------------------------------------------------------------------


def test_a_relay_cuts_off_the_peer_whose_reveal_breaks_its_commitment() -> None:
    r = relay()
    honest = Reveal(NONCE_A, 0.1, (0.5,))
    sent = sends(r.receive(1.0, b"A", SwapRequest(9, 2, commitment(9, honest, STARTER))))
    assert sent == [(b"B", SwapRequest(9, 1, commitment(9, honest, STARTER)))]
    reply = SwapReply(9, bytes(32))
    assert sends(r.receive(1.0, b"B", reply)) == [(b"A", reply)]
    # A reveals another location than it committed to (say, one beside a key it wants).
    effects = r.receive(1.0, b"A", SwapCommit(9, NONCE_A, 0.74, (0.5,)))
    assert [d.peer for d in drops(effects)] == [b"A"]
    assert sends(effects) == [(b"B", SwapRejected(9))]
    assert r.stats.swap_cheats == 1 and r.swaps.walks == {}


def test_a_partner_cuts_off_a_starter_whose_reveal_breaks_its_commitment() -> None:
    node = relay()
    committed = Reveal(NONCE_A, 0.1, (0.5,))
    effects = node.receive(1.0, b"A", SwapRequest(4, 1, commitment(4, committed, STARTER)))
    assert [type(m) for _, m in sends(effects)] == [SwapReply]
    effects = node.receive(1.0, b"A", SwapCommit(4, NONCE_B, 0.1, (0.5,)))  # another nonce
    assert [d.peer for d in drops(effects)] == [b"A"]
    assert node.location == 0.5 and node.stats.swap_cheats == 1


def test_a_starter_cuts_off_a_partner_whose_reveal_breaks_its_commitment() -> None:
    a = Node(b"A", 0.2, random.Random(2), SWAPPING)
    a.link_up(0.0, b"R")
    a.receive(0.0, b"R", Hello(0.5, 7))
    request = next(m for _, m in sends(a.start_swap(1.0)) if isinstance(m, SwapRequest))
    partner = Reveal(NONCE_B, 0.8, (0.5,))
    a.receive(1.0, b"R", SwapReply(request.uid, commitment(request.uid, partner, PARTNER)))
    effects = a.receive(1.0, b"R", SwapComplete(request.uid, NONCE_B, 0.79, (0.5,)))
    assert [d.peer for d in drops(effects)] == [b"R"]
    assert a.location == 0.2


def test_a_replayed_swap_request_is_refused_as_a_loop() -> None:
    r = relay()
    request = SwapRequest(11, 9, bytes(32))  # (a budget above ours is cut to ours: 2)
    assert [m for _, m in sends(r.receive(1.0, b"A", request))] == [SwapRequest(11, 1, bytes(32))]
    assert sends(r.receive(2.0, b"A", request)) == [(b"A", SwapRejected(11))]
    assert sends(r.receive(2.0, b"B", request)) == [(b"B", SwapRejected(11))]
    assert r.stats.swaps_refused == 2


def test_a_flood_of_swap_requests_from_one_peer_gets_a_quarter_of_the_walks() -> None:
    config = NodeConfig(swap_interval=1e6, swap_htl=5, max_swap_walks=8)
    node = Node(b"R", 0.5, random.Random(1), config)
    for peer, location in ((b"A", 0.1), (b"B", 0.9), (b"C", 0.3)):
        node.link_up(0.0, peer)
        node.receive(0.0, peer, Hello(location, 7))
    refused = 0
    for uid in range(100):
        effects = node.receive(1.0, b"A", SwapRequest(uid, 5, bytes(32)))
        refused += sends(effects) == [(b"A", SwapRejected(uid))]
    assert (len(node.swaps.walks), refused) == (2, 98)
    # Another peer's walk still goes through.
    effects = node.receive(1.0, b"B", SwapRequest(500, 5, bytes(32)))
    assert [type(m) for _, m in sends(effects)] == [SwapRequest]


def test_a_node_that_does_not_swap_refuses_every_swap() -> None:
    node = relay(NodeConfig())
    assert sends(node.receive(1.0, b"A", SwapRequest(3, 1, bytes(32)))) == [(b"A", SwapRejected(3))]
    assert sends(node.start_swap(1.0)) == []


def test_stray_swap_messages_change_nothing() -> None:
    """A reply or reveal for a swap this node has no part in, or from a peer that is not
    where the swap stands, may be late; it is ignored, not punished."""
    r = relay()
    r.receive(1.0, b"A", SwapRequest(9, 3, bytes(32)))
    for peer, message in (
        (b"A", SwapReply(9, bytes(32))),  # (a reply comes from ahead, not from behind)
        (b"B", SwapCommit(9, NONCE_A, 0.1, ())),  # (a reveal before the reply)
        (b"A", SwapComplete(9, NONCE_A, 0.1, ())),
        (b"B", SwapReply(12345, bytes(32))),
    ):
        effects = r.receive(2.0, peer, message)
        assert sends(effects) == [] and drops(effects) == []
    assert r.swaps.walks[9].partner is None


@pytest.mark.parametrize("bad", [{"swap_htl": 0}, {"swap_timeout": 0.0}, {"swap_interval": -1}])
def test_swap_settings_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        NodeConfig(**bad)  # type: ignore[arg-type]


def test_a_swapping_node_starts_a_swap_each_interval_once_it_knows_a_peer() -> None:
    net = CoreNet(config=NodeConfig(swap_interval=5.0, swap_htl=2))
    lone = net.add(b"L", 0.3)
    net.advance(20.0)
    assert lone.stats.swap_attempts == 0  # (no peer: nothing to start)
    for name, location in ((b"A", 0.2), (b"R", 0.5), (b"B", 0.8)):
        net.add(name, location)
    net.connect(b"A", b"R")
    net.connect(b"R", b"B")
    net.advance(net.now + 60.0)
    # One a node every 2.5 to 7.5 s, after a random first phase.
    attempts = [net.nodes[n].stats.swap_attempts for n in (b"A", b"R", b"B")]
    assert all(7 <= a <= 25 for a in attempts), attempts


# --- an end that joins a tree, slow walks, and what a peer may ask ----------------------


def lone(name: bytes = b"A", location: float = 0.2) -> Node:
    """A core linked to R (at 0.5) alone."""
    node = Node(name, location, random.Random(2), SWAPPING)
    node.link_up(0.0, b"R")
    node.receive(0.0, b"R", Hello(0.5, 7))
    return node


def started(node: Node, at: float) -> SwapRequest:
    return next(m for _, m in sends(node.start_swap(at)) if isinstance(m, SwapRequest))


def test_a_starter_that_joins_a_tree_before_revealing_withdraws() -> None:
    a = lone()
    request = started(a, 1.0)
    a.subscribe(1.5, key_at(0.3), 1)  # (a search from A: it is no longer free to move)
    partner = Reveal(NONCE_B, 0.8, (0.5,))
    effects = a.receive(
        2.0, b"R", SwapReply(request.uid, commitment(request.uid, partner, PARTNER))
    )
    assert sends(effects)[-1] == (b"R", SwapRejected(request.uid))
    assert not any(isinstance(m, SwapCommit) for _, m in sends(effects))
    assert a.stats.swaps_withdrawn == 1 and a.location == 0.2


def test_a_partner_that_joins_a_tree_before_revealing_withdraws() -> None:
    b = lone(b"B", 0.8)
    starter = Reveal(NONCE_A, 0.2, (0.5,))
    b.receive(1.0, b"R", SwapRequest(5, 1, commitment(5, starter, STARTER)))
    b.subscribe(1.5, key_at(0.3), 1)
    effects = b.receive(2.0, b"R", SwapCommit(5, NONCE_A, 0.2, (0.5,)))
    assert sends(effects)[-1] == (b"R", SwapRejected(5))
    assert not any(isinstance(m, SwapComplete) for _, m in sends(effects))
    assert b.stats.swaps_withdrawn == 1 and b.location == 0.8


def test_a_slow_walk_gives_the_starter_a_fresh_wait_once_it_reveals() -> None:
    """The partner's reply takes 9 s of a 10 s wait; the starter reveals then, and waits
    10 s more, so the partner's reveal at 12 s moves it (the first deadline, at 10 s,
    ends nothing)."""
    a = lone()
    request = started(a, 0.0)
    partner = Reveal(NONCE_B, 0.8, (0.5,))
    a.receive(9.0, b"R", SwapReply(request.uid, commitment(request.uid, partner, PARTNER)))
    a.handle_timer(10.0)
    assert a.stats.swap_timeouts == 0
    a.receive(12.0, b"R", SwapComplete(request.uid, NONCE_B, 0.8, (0.5,)))
    assert a.location == 0.8 and a.stats.swaps == 1


def test_a_peer_makes_this_node_its_partner_once_an_interval_and_less_if_it_stalls() -> None:
    config = NodeConfig(swap_interval=30.0, swap_htl=2, swap_timeout=10.0)
    b = Node(b"B", 0.8, random.Random(3), config)
    b.link_up(0.0, b"R")
    b.receive(0.0, b"R", Hello(0.5, 7))

    def ask(at: float, uid: int) -> Message:
        (reply,) = [m for _, m in sends(b.receive(at, b"R", SwapRequest(uid, 1, bytes(32))))]
        return reply

    assert isinstance(ask(1.0, 1), SwapReply)
    b.handle_timer(11.0)  # R never revealed: B waited in vain
    assert b.stats.swap_timeouts == 1
    assert ask(12.0, 2) == SwapRejected(2)  # (within the interval: refused)
    assert ask(200.0, 3) == SwapRejected(3)  # (stalled once: refused for 10 intervals)
    assert isinstance(ask(312.0, 4), SwapReply)


def test_a_move_reaches_a_peer_whose_hello_has_not_come_yet() -> None:
    a = lone()
    a.link_up(1.0, b"S")  # (S's Hello has not come: A told it 0.2)
    a.relocate(2.0, 0.7)
    told = {peer: m for peer, m in sends(a.handle_timer(2.0)) if isinstance(m, Hello)}
    assert told == {b"R": Hello(0.7, a.boot_id), b"S": Hello(0.7, a.boot_id)}


def test_a_swap_interval_too_short_to_be_meant_is_refused() -> None:
    with pytest.raises(ValueError, match=r"at least 0\.01 s"):
        NodeConfig(swap_interval=1e-300)


@pytest.mark.parametrize("seed", range(8))
def test_any_sequence_of_swap_messages_leaves_a_node_whole(seed: int) -> None:
    """Swap messages from three peers in any order, with uids from a small pool (so
    replies, reveals and refusals meet real walks and swaps), valid and forged reveals,
    time moving on and links going down: nothing raises, the walk table stays within its
    bound and names only linked peers, and the node sits at a location some reveal gave
    or its own."""
    rng = random.Random(seed)
    config = NodeConfig(swap_interval=5.0, swap_htl=3, swap_timeout=4.0, max_swap_walks=8)
    node = Node(b"N", 0.5, random.Random(seed), config)
    peers = [b"A", b"B", b"C"]
    linked: set[bytes] = set()
    places = {0.5}
    now = 0.0
    for _ in range(3000):
        now += rng.choice((0.0, 0.0, 0.01, 0.5, 3.0))
        peer = rng.choice(peers)
        if peer not in linked:
            node.link_up(now, peer)
            node.receive(now, peer, Hello(rng.random(), 7))
            linked.add(peer)
            continue
        uid = rng.randrange(6)
        away = rng.choice(((), (rng.random(),), (0.25, away_cell(rng.random()))))
        reveal = Reveal(rng.choice((NONCE_A, NONCE_B)), rng.random(), (0.5, rng.random()), away)
        places.add(reveal.location)
        role = rng.choice((STARTER, PARTNER))
        sealed = commitment(uid, reveal, role) if rng.random() < 0.7 else bytes(32)
        message = rng.choice(
            (
                SwapRequest(uid, rng.randrange(5), sealed),
                SwapReply(uid, sealed),
                SwapCommit(uid, reveal.nonce, reveal.location, reveal.neighbours, away),
                SwapComplete(uid, reveal.nonce, reveal.location, reveal.neighbours, away),
                SwapRejected(uid),
            )
        )
        effects = node.receive(now, peer, message)
        effects += node.handle_timer(now)
        if rng.random() < 0.02 or drops(effects):
            node.link_down(now, peer)
            linked.discard(peer)
        if rng.random() < 0.05:
            node.start_swap(now)
        walks = node.swaps.walks
        assert len(walks) <= config.max_swap_walks
        assert all({w.back, w.ahead} <= linked for w in walks.values())
        assert node.location in places
