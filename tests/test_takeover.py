"""Taking over a tree: a new root keeps the packet numbering (overlay.core.publishing,
"Taking over"), a root hands its tree to a closer node, Unsubscribes wait for searches in
flight (``Node._leave``), and hostile restart traffic stays bounded.

Most tests run on one tree drawn around the key at 0.5 (``diverged``)::

    R 0.5 (root, publishes)
    +-- X 0.47 -- E 0.4 (subscriber)
    +-- C 0.3  -- A 0.2 (subscriber)        and a link X - C, not a tree edge

Packets 0..2 reach everybody; 3 and 4 reach C's branch only (they were still on the R - X
link when it broke), so after R goes, X (the closest node left) lacks what C holds.

The tests at the end build ``Takeover`` alone, without a Node (``flowkit``): a root's grace, its
tokens and timers, and a claim that moves its head.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from corenet import CoreNet, key_at
from flowkit import Calls, Kit, store
from nodes import KEY2, make, meet, own_uid, sends
from takeovers import (
    ACCEPT,
    CONFIG,
    GRACE,
    KEY,
    MAX_HTL,
    OLD,
    UID,
    A,
    C,
    E,
    R,
    X,
    acked,
    carried,
    lose_root,
    seen,
    taken_over_by_a_restart,
    tree,
)

from overlay.core.admission import PEER_SHARE
from overlay.core.events import Missed
from overlay.core.memory import Memory
from overlay.core.node import Node
from overlay.core.streams import RESTARTS_REMEMBERED, State, Stream
from overlay.core.takeover import RECOVER_TIMER, Takeover
from overlay.core.tokens import Tokens
from overlay.messages import (
    Accepted,
    Committed,
    DataNotFound,
    PacketKind,
    PacketsMissed,
    PublishData,
    RejectedLoop,
    RejectOverload,
    RestartConfirmed,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    Unsubscribe,
)

# --- helpers ----------------------------------------------------------------------------------


def live_roots(net: CoreNet) -> list[bytes]:
    """Roots other than R (which, cut off, may still think itself root of nothing)."""
    return [name for name in net.roots(KEY) if name != R]


def diverged() -> CoreNet:
    """The drawn tree after R published 0..4; X is held, with 3 and 4 still on its way."""
    net = tree()
    for n in range(3):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    net.hold(X)
    for n in (3, 4):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    return net


def x_root_then_c_reports(net: CoreNet) -> None:
    """On ``diverged``: X loses R and, its search stuck at the slow C, becomes root; only
    then does C lose R and resubscribe to X, reporting last_seen 4."""
    net.hold(C)
    net.disconnect(R, X)
    net.release(X)
    net.advance(net.now + ACCEPT)  # X gives up on C: its own search ends, X is root
    assert carried(net, X).state is State.ROOT and carried(net, X).high == 2
    net.disconnect(R, C)
    net.release(C)
    assert carried(net, C).parent == X


# --- 1. a lost root: numbering goes on --------------------------------------------------------


@pytest.mark.parametrize("order", ["at once", "X first", "C first"])
def test_new_root_numbers_above_every_reported_packet_and_nobody_gets_one_twice(
    order: str,
) -> None:
    net = diverged()
    lose_root(net, order)
    net.advance(net.now + ACCEPT + GRACE)  # searches over, any takeover grace too
    assert len(live_roots(net)) == 1 and net.tree_problems(KEY) == []
    uids = [net.publish(name, KEY, b"q%d" % i) for i, name in enumerate((A, E, A))]
    numbers = {**acked(net, A), **acked(net, E)}
    # C reported last_seen 4: the new root continues at 5, whoever it is.
    assert [numbers[uid] for uid in uids] == [5, 6, 7]
    expected = {**OLD, **{numbers[uid]: b"q%d" % i for i, uid in enumerate(uids)}}
    for name in (E, A):
        assert seen(net, name) == sorted(expected.items())
    for name in (X, C):  # no number holds two packets anywhere
        window = carried(net, name).window.packets
        assert {n: p.data for n, p in window.items()} == expected


def test_root_that_falls_silent_is_replaced_by_liveness_and_numbering_continues() -> None:
    net = tree()
    for n in range(5):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    net.hold(R)  # R hears nothing: it drops its peers, then they stop hearing it
    net.advance(2 * (CONFIG.dead_after + CONFIG.heartbeat_interval) + GRACE)
    assert {(name, drop.peer) for name, drop in net.dropped} >= {(X, R), (C, R)}
    assert live_roots(net) == [X] and net.tree_problems(KEY) == []
    uid = net.publish(A, KEY, b"new")
    assert acked(net, A) == {uid: 5}
    for name in (E, A):
        assert seen(net, name) == [*OLD.items(), (5, b"new")]


# --- 2. the takeover grace --------------------------------------------------------------------


def taken_over_by_a_resubscribe() -> tuple[CoreNet, bytes, bytes]:
    """R - C - A, and N (0.45) linked to C only. R goes at t=1: C's resubscribe reaches N,
    which does not carry the stream and, closest, becomes root through it."""
    net = CoreNet(seed=6)
    for name, location in ((R, 0.5), (C, 0.3), (A, 0.2), (b"N", 0.45)):
        net.add(name, location)
    for a, b in ((R, C), (C, A)):
        net.connect(a, b)
    net.subscribe(A, KEY)
    net.connect(b"N", C)
    for n in range(3):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    net.advance(1.0)
    net.disconnect(R, C)
    assert net.nodes[b"N"].stats.roots == 1 and carried(net, C).parent == b"N"
    return net, b"N", A


@pytest.mark.parametrize(
    ("build", "began"),
    [(taken_over_by_a_resubscribe, 1.0), (taken_over_by_a_restart, 1.0 + ACCEPT)],
    ids=["through-a-resubscribe", "own-search-ended"],
)
def test_root_that_took_over_numbers_nothing_new_until_the_grace_ends(
    build: Callable[[], tuple[CoreNet, bytes, bytes]], began: float
) -> None:
    net, root, publisher = build()
    stream = carried(net, root)
    assert stream.state is State.ROOT and stream.root.recover_until == began + GRACE
    assert (stream.high, stream.next_in) == (2, 3)
    net.publish(publisher, KEY, b"waits", uid=300)
    assert acked(net, publisher) == {} and [m.uid for _, m in stream.queued] == [300]
    # A publish that names the next number is in order: nothing can collide with it.
    net.publish(publisher, KEY, b"three", uid=301, packet=3)
    assert acked(net, publisher) == {301: 3}
    net.advance(began + GRACE - 0.001)
    assert acked(net, publisher) == {301: 3}
    net.advance(began + GRACE)
    after = carried(net, root)  # (a fresh name: the type checker narrowed ``stream``)
    if after.state is State.ROOT:
        assert acked(net, publisher) == {301: 3, 300: 4}
    else:
        # X looked again at the grace's end and joined R's tree: 301 went up to R as
        # packet 3 (R's own grace took it in order) and 300 waits for R's grace.
        assert net.nodes[root].stats.merges == 1 and after.parent == C
        net.advance(began + 2 * GRACE)
        assert acked(net, publisher) == {301: 3, 300: 4}
    assert after.root.recover_until is None and after.queued == []
    assert seen(net, publisher) == [*((n, OLD[n]) for n in range(3)), (3, b"three"), (4, b"waits")]


# --- 3. push-up and refill --------------------------------------------------------------------


def test_restarted_child_pushes_up_what_the_new_root_lacks_and_the_other_branch_gets_it() -> None:
    net = diverged()
    x_root_then_c_reports(net)
    [success] = [m for s, d, m in net.sent(SubscribeSucceeded) if (s, d) == (X, C)]
    assert isinstance(success, SubscribeSucceeded) and success.last_packet == 2
    # Once as C attaches (``push_up``), once more when X asks its new child for what it
    # lacks (``gathering``); X takes each once.
    pushed = [m for s, d, m in net.trace if (s, d) == (C, X) and isinstance(m, PublishData)]
    brought = [(UID + n, n, OLD[n]) for n in (3, 4)]
    assert [(m.uid, m.packet, m.data) for m in pushed] == brought * 2
    assert net.nodes[C].stats.pushed_up == 4 and net.nodes[X].stats.refilled == 2
    assert net.nodes[X].stats.published == 0  # taken as the old root's, not ordered anew
    window = carried(net, X).window.packets
    assert {n: (p.uid, p.data) for n, p in window.items()} == {
        n: (UID + n, OLD[n]) for n in range(5)
    }
    assert seen(net, E) == list(OLD.items())
    net.advance(net.now + GRACE)
    uid = net.publish(E, KEY, b"new")
    assert acked(net, E) == {uid: 5}
    for name in (E, A):
        assert seen(net, name) == [*OLD.items(), (5, b"new")]


def test_resubscriber_that_made_a_new_root_gives_it_the_past_it_holds() -> None:
    # N holds nothing of the tree it took over; the answer that made it root says so, and
    # C pushes up its window, so a later resubscriber can be caught up from N.
    net, new_root, _ = taken_over_by_a_resubscribe()
    window = carried(net, new_root).window.packets
    assert {n: (p.uid, p.data) for n, p in window.items()} == {
        n: (UID + n, OLD[n]) for n in range(3)
    }
    assert net.nodes[C].stats.pushed_up == 3 and net.nodes[new_root].stats.backfilled == 3
    assert net.nodes[new_root].stats.published == 0


def test_what_nobody_brings_within_the_grace_is_reported_missed_before_the_next_packet() -> None:
    net = diverged()
    x_root_then_c_reports(net)
    # W reports having seen 6, then goes before it can bring 5 and 6.
    net.add(b"W", 0.35)
    net.connect(b"W", X)
    net.inject(b"W", X, ResubscribeRequest(555, KEY, MAX_HTL, 0.35, 0.35, 6))
    net.disconnect(b"W", X)
    assert carried(net, X).high == 6
    net.advance(net.now + GRACE)
    # Still open with nothing after it: a tree X merges into later may hold 5 and 6.
    assert not [m for _, _, m in net.trace if isinstance(m, PacketsMissed)]
    uid = net.publish(A, KEY, b"new")
    assert (X, E, PacketsMissed(KEY, 5, 6)) in net.trace
    assert acked(net, A) == {uid: 7}
    for name in (E, A):
        assert seen(net, name) == [*OLD.items(), Missed(KEY, 5, 6), (7, b"new")]


def test_packet_pushed_up_past_a_gap_reaches_the_other_branch() -> None:
    """C holds 4 but never had 3 (R had a hole there, left by an earlier takeover). X
    lacks both; C brings 4 within the grace. Only 3 was brought by nobody."""
    net = tree()
    for n in range(3):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    net.inject(R, C, SubscribeData(KEY, 4, OLD[4], None, PacketKind.DATA, None, None, UID + 4))
    assert seen(net, A) == [(n, OLD[n]) for n in range(3)]  # until R says it committed 4
    net.inject(R, C, Committed(KEY, 4))
    assert seen(net, A) == [*((n, OLD[n]) for n in range(3)), Missed(KEY, 3, 3), (4, OLD[4])]
    net.hold(X)
    x_root_then_c_reports(net)
    pushed = [m for s, d, m in net.trace if (s, d) == (C, X) and isinstance(m, PublishData)]
    assert [m.packet for m in pushed] == [4, 4]  # as it attaches, and asked (``gathering``)
    net.advance(net.now + GRACE)
    uid = net.publish(A, KEY, b"new")
    assert acked(net, A) == {uid: 5}
    expected = [*((n, OLD[n]) for n in range(3)), Missed(KEY, 3, 3), (4, OLD[4]), (5, b"new")]
    for name in (A, E):  # both branches tell the same story
        assert seen(net, name) == expected


# --- 4. uids survive a takeover ---------------------------------------------------------------


def test_every_copy_of_a_packet_carries_its_publish_uid_also_after_a_takeover() -> None:
    net = diverged()
    x_root_then_c_reports(net)
    copies = [m for _, _, m in net.sent(SubscribeData)]
    assert {(m.packet, m.uid) for m in copies if isinstance(m, SubscribeData)} == {
        (n, UID + n) for n in range(5)
    }
    # (stamped with X's mark: the 0..2 it held as it took over, ``showing``)
    packet = SubscribeData(KEY, 3, OLD[3], None, PacketKind.DATA, None, None, UID + 3, 2)
    assert (X, E, packet) in net.trace


@pytest.mark.parametrize("when", ["in the grace", "after the grace"])
def test_retry_reaching_a_new_root_is_acked_with_its_original_number(when: str) -> None:
    """A publisher (a Spark task retried on another node) sends again uids whose answers it
    never saw, with the same content: one the new root held, one it took back from C's
    push-up."""
    net = diverged()
    x_root_then_c_reports(net)
    root = carried(net, X)
    assert (root.uids.numbers() if root.uids else {}) == {UID + n: n for n in range(5)}
    if when == "after the grace":
        net.advance(net.now + GRACE)
    stored = net.nodes[X].stats.stored
    copies = len(net.sent(SubscribeData))
    net.publish(A, KEY, OLD[1], client=2, uid=UID + 1)
    net.publish(E, KEY, OLD[4], client=2, uid=UID + 4)
    net.advance(net.now + GRACE)
    assert acked(net, A, client=2) == {UID + 1: 1}
    assert acked(net, E, client=2) == {UID + 4: 4}
    assert net.nodes[X].stats.stored == stored and len(net.sent(SubscribeData)) == copies
    for name in (E, A):
        assert seen(net, name) == list(OLD.items())


def handed_over() -> CoreNet:
    """R (0.45) is root of R - C - A with packets 0..2 from A. F (0.35), farther from the
    key than R, links to R: no reason to move the tree. At t=1 N (0.49), closer, links to R
    and takes the tree over."""
    net = CoreNet(seed=7)
    for name, location in ((R, 0.45), (C, 0.3), (A, 0.2), (b"F", 0.35)):
        net.add(name, location)
    net.connect(R, C)
    net.connect(C, A)
    net.subscribe(R, KEY)
    net.subscribe(A, KEY)
    for n in range(3):
        net.publish(A, KEY, OLD[n], client=2, uid=UID + n)
    net.connect(b"F", R)
    net.advance(1.0)
    net.add(b"N", 0.49)
    net.connect(b"N", R)
    return net


def test_retry_after_a_handoff_is_acked_with_its_original_number() -> None:
    net = handed_over()
    assert live_roots(net) == [b"N"]
    net.advance(1.0 + GRACE)
    net.publish(A, KEY, OLD[1], client=3, uid=UID + 1)  # a retry of packet 1's publish
    assert acked(net, A, client=3) == {UID + 1: 1}
    assert seen(net, A) == [(n, OLD[n]) for n in range(3)]


# --- 6. handing the tree to a closer node -----------------------------------------------------


def test_root_hands_its_tree_to_a_closer_new_peer() -> None:
    net = handed_over()
    # (The first of R's labels was for its look as a new tree, in ``tree``.)
    *_, (_, to, restarted) = [t for t in net.sent(SubscribeRestarted) if t[0] == R]
    [(_, hop, resubscribe)] = [t for t in net.sent(ResubscribeRequest) if t[2].uid == restarted.uid]
    assert to == C and hop == b"N" and isinstance(restarted, SubscribeRestarted)
    assert resubscribe == ResubscribeRequest(restarted.uid, KEY, MAX_HTL, 0.45, 0.45, 2)
    assert net.nodes[R].stats.restarts == 1  # for N only, not for F
    old = carried(net, R)
    assert (old.state, old.parent, list(old.children)) == (State.JOINED, b"N", [C])
    assert net.roots(KEY) == [b"N"] and net.tree_problems(KEY) == []
    for name in (R, C, A):  # one tree: every member's parent links lead to N
        up: bytes | None = name
        while up != b"N":
            assert up is not None
            up = carried(net, up).parent
    new = carried(net, b"N")
    assert (new.high, new.root.recover_until) == (2, 1.0 + GRACE)
    net.advance(1.0 + GRACE)
    uid = net.publish(A, KEY, b"new", client=2)
    assert acked(net, A, client=2)[uid] == 3
    for name in (R, A):
        assert seen(net, name) == [*((n, OLD[n]) for n in range(3)), (3, b"new")]


# --- 7. an Unsubscribe waits for the search that may be adopting us ---------------------------


def searching_through_p() -> tuple[Node, int]:
    """N (0.45) relayed U's search 40 to P (0.49), gave up on P (no Accepted) and sent it to
    Q (0.4), which accepted it; then N's own search for KEY went to P. Returns N and the
    uid of its own search."""
    node = make()
    meet(node, b"P", 0.49)
    meet(node, b"Q", 0.4)
    meet(node, b"U", 0.1)
    assert sends(node.receive(0.0, b"U", SubscribeRequest(40, KEY, 5, 0.1, None)))[1][0] == b"P"
    assert sends(node.handle_timer(ACCEPT))[0][0] == b"Q"
    node.receive(ACCEPT, b"Q", Accepted(40))
    uid = own_uid(node.subscribe(ACCEPT, KEY, 1))
    assert node.routes[uid].current == b"P" and node.routes[40].current == b"Q"
    return node, uid


def late_success_from_p(node: Node) -> None:
    """P answers search 40 late: it listed N as a child, which N must undo, but not yet."""
    effects = node.receive(ACCEPT + 1, b"P", SubscribeSucceeded(40, KEY, None))
    assert sends(effects) == []


def test_unsubscribe_waits_for_a_search_on_that_peer_and_is_dropped_when_it_adopts_us() -> None:
    node, uid = searching_through_p()
    late_success_from_p(node)
    data = SubscribeData(KEY, 0, b"x", None, PacketKind.DATA, None)
    assert sends(node.receive(ACCEPT + 1, b"P", data)) == []  # from a non-parent: held too
    effects = node.receive(ACCEPT + 2, b"P", SubscribeSucceeded(uid, KEY, None))
    assert (b"P", Unsubscribe(KEY)) not in sends(effects)
    assert (b"U", SubscribeSucceeded(40, KEY, None)) in sends(effects)  # coalesced
    stream = node.streams[KEY]
    assert (stream.state, stream.parent, list(stream.children)) == (State.JOINED, b"P", [b"U"])
    assert node.routes == {}


@pytest.mark.parametrize("answer", ["DataNotFound", "timeout"])
def test_unsubscribe_held_for_a_search_is_sent_once_that_search_leaves_the_peer(
    answer: str,
) -> None:
    node, uid = searching_through_p()
    late_success_from_p(node)
    if answer == "DataNotFound":
        effects = node.receive(ACCEPT + 2, b"P", DataNotFound(uid, KEY, 3))
    else:
        effects = node.handle_timer(2 * ACCEPT)
    out = sends(effects)
    assert out.count((b"P", Unsubscribe(KEY))) == 1
    assert node.routes[uid].current == b"Q"  # the search went on without P


def test_unsubscribe_held_for_a_search_completed_another_way_goes_with_the_answer() -> None:
    node, uid = searching_through_p()
    late_success_from_p(node)
    effects = node.receive(ACCEPT + 2, b"Q", SubscribeSucceeded(40, KEY, None))
    assert node.streams[KEY].parent == b"Q" and node.routes == {}
    sent = sends(effects)
    # P, which still has N's own search, answers it (it lists N already: a success).
    sent += sends(node.receive(ACCEPT + 3, b"P", SubscribeSucceeded(uid, KEY, None)))
    assert sent.count((b"P", Unsubscribe(KEY))) >= 1
    assert (b"Q", Unsubscribe(KEY)) not in sent


def test_unsubscribe_for_another_key_is_not_held() -> None:
    node, _ = searching_through_p()
    data = SubscribeData(KEY2, 0, b"x", None, PacketKind.DATA, None)
    assert sends(node.receive(ACCEPT + 1, b"P", data)) == [(b"P", Unsubscribe(KEY2))]


# --- 8. bad input: bounded, harmless, and no business of the other stream ---------------------


def two_streams(**config: object) -> Node:
    """N (0.45) carries KEY (parent P 0.49, children C1 0.2 and C2 0.25) and KEY2 (parent P,
    child D 0.15, packets 0..1); U (0.3) is the peer that misbehaves."""
    node = make(0.45, **config)
    for peer, location in ((b"P", 0.49), (b"C1", 0.2), (b"C2", 0.25), (b"D", 0.15), (b"U", 0.3)):
        meet(node, peer, location, boot_id=len(node.peers) + 1)
    for key, client, children in ((KEY, 1, (b"C1", b"C2")), (KEY2, 2, (b"D",))):
        uid = own_uid(node.subscribe(0.0, key, client))
        node.receive(0.0, b"P", SubscribeSucceeded(uid, key, None))
        for i, child in enumerate(children):
            node.receive(0.0, child, SubscribeRequest(700 + i + client * 10, key, 5, 0.2, None))
    for n in range(2):
        node.receive(0.0, b"P", SubscribeData(KEY2, n, b"o%d" % n, None, PacketKind.DATA, None))
    return node


def snapshot(node: Node, key: bytes = KEY2) -> tuple[object, ...]:
    s = node.streams[key]
    packets = [(n, p.data) for n, p in s.window.packets.items()]
    return (s.state, s.parent, list(s.children), packets, s.next_in, s.high, s.restart_uid)


def test_restart_traffic_for_a_stream_not_carried_starts_nothing() -> None:
    node = two_streams()
    other = key_at(0.9)
    before = snapshot(node)
    for peer in (b"P", b"U"):
        # Answered to the sender only: don't wait for us, and we are not your child.
        effects = node.receive(1.0, peer, SubscribeRestarted(77, other, 0.3))
        assert sends(effects) == [
            (peer, RestartConfirmed(77, other)),
            (peer, Unsubscribe(other)),
        ]
    assert other not in node.streams
    # Spec: "If we don't have the stream, we route it normally as a SubscribeRequest."
    effects = node.receive(1.0, b"U", ResubscribeRequest(78, other, MAX_HTL, 0.3, 0.3, None))
    [(_, accepted), (_, routed)] = sends(effects)
    assert accepted == Accepted(78) and isinstance(routed, ResubscribeRequest)
    assert (routed.uid, routed.must_beat) == (78, 0.3) and other not in node.streams
    assert snapshot(node) == before


def test_replayed_uid_of_a_search_is_rejected_as_a_loop() -> None:
    node = two_streams()
    other = key_at(0.9, tag=1)
    assert len(sends(node.receive(1.0, b"U", SubscribeRequest(90, other, 5, 0.3, None)))) == 2
    replays = [
        (b"U", SubscribeRequest(90, other, 5, 0.3, None)),
        (b"D", SubscribeRequest(90, other, 5, 0.15, None)),
        (b"U", ResubscribeRequest(90, other, 5, 0.3, 0.3, None)),
    ]
    for peer, message in replays:
        assert sends(node.receive(1.5, peer, message)) == [(peer, RejectedLoop(90))]
    assert node.stats.loops == 3 and list(node.routes) == [90]


def test_flood_of_subscribe_restarted_from_one_peer_is_bounded() -> None:
    node = two_streams()
    before = snapshot(node)
    children = list(node.streams[KEY].children)
    for i in range(2_000):
        effects = node.receive(1.0, b"P", SubscribeRestarted(10_000 + i, KEY, 0.49))
        assert sends(effects) == [(c, SubscribeRestarted(10_000 + i, KEY, 0.49)) for c in children]
        effects = node.receive(1.0, b"U", SubscribeRestarted(90_000 + i, KEY, 0.3))
        assert sends(effects) == [
            (b"U", RestartConfirmed(90_000 + i, KEY)),
            (b"U", Unsubscribe(KEY)),
        ]
    stream = node.streams[KEY]
    assert stream.restart_uid == 10_000 + 1_999 and list(stream.children) == children
    assert len(stream.restarts_seen) == RESTARTS_REMEMBERED
    assert (stream.state, stream.parent) == (State.JOINED, b"P")
    assert snapshot(node) == before and set(node.streams) == {KEY, KEY2}


def test_flood_of_resubscribes_that_we_accept_is_bounded() -> None:
    node = two_streams(seen_uid_capacity=64)
    before = snapshot(node)
    for i in range(2_000):
        request = ResubscribeRequest(20_000 + i, KEY, MAX_HTL, 0.3, 0.3, None)
        out = sends(node.receive(1.0, b"U", request))
        assert out == [(b"U", SubscribeSucceeded(20_000 + i, KEY, None))]
    # The same uid again (a replay) is accepted again, and U is still one child.
    request = ResubscribeRequest(20_000, KEY, MAX_HTL, 0.3, 0.3, None)
    assert sends(node.receive(2.0, b"U", request)) == [
        (b"U", SubscribeSucceeded(20_000, KEY, None))
    ]
    assert list(node.streams[KEY].children) == [b"C1", b"C2", b"U"]
    assert len(node.searches.seen) <= 64 and node.routes == {}
    assert snapshot(node) == before


def test_flood_of_resubscribes_that_we_route_on_is_bounded() -> None:
    """must_beat 0.48 is closer than N: each is routed on to P, which has not answered."""
    node = two_streams(seen_uid_capacity=64, max_searches_per_key=64)
    before = snapshot(node)
    for i in range(2_000):
        request = ResubscribeRequest(30_000 + i, KEY, MAX_HTL, 0.3, 0.48, None)
        out = sends(node.receive(1.0, b"U", request))
        if i < 64 // PEER_SHARE:
            assert [type(m) for _, m in out] == [Accepted, ResubscribeRequest]
        else:
            assert out == [(b"U", RejectOverload(30_000 + i, KEY))]
    assert snapshot(node) == before and b"U" not in node.streams[KEY].children
    assert len(node.searches.seen) <= 64
    # Searches in flight are state too: one peer holds at most its share of a key's.
    assert len(node.routes) == 64 // PEER_SHARE


def test_one_flooding_peer_leaves_the_others_room_to_search_for_the_key() -> None:
    node = two_streams(max_searches_per_key=64)
    for i in range(500):
        node.receive(1.0, b"U", ResubscribeRequest(30_000 + i, KEY, MAX_HTL, 0.3, 0.48, None))
    # Another peer's resubscribe for the key is routed on, not refused.
    out = sends(node.receive(1.0, b"D", ResubscribeRequest(31_000, KEY, MAX_HTL, 0.15, 0.48, None)))
    assert [type(m) for _, m in out] == [Accepted, ResubscribeRequest]
    # Routes that end give the peer its share back.
    for uid in [u for u, r in node.routes.items() if r.upstream == b"U"]:
        node.receive(2.0, b"P", DataNotFound(uid, KEY, 0))  # no budget left: it ends
    assert (b"U", KEY) not in node.searches.by_peer
    out = sends(node.receive(3.0, b"U", ResubscribeRequest(32_000, KEY, MAX_HTL, 0.3, 0.48, None)))
    assert [type(m) for _, m in out] == [Accepted, ResubscribeRequest]


def test_a_uid_replayed_while_its_search_is_in_flight_is_a_loop() -> None:
    """Loop detection forgets uids (here after 8 others); a search still in flight is not
    forgotten: a replay of its uid must not replace it and count it twice."""
    node = two_streams(seen_uid_capacity=8, max_searches_per_key=64)
    node.receive(1.0, b"U", ResubscribeRequest(50_000, KEY, MAX_HTL, 0.3, 0.48, None))
    assert 50_000 in node.routes
    for i in range(10):  # junk uids push 50_000 out of the seen set
        node.receive(
            1.0, b"D", ResubscribeRequest(51_000 + i, key_at(0.9, tag=i + 1), 0, 0.15, 0.15, None)
        )
    out = sends(node.receive(1.1, b"D", ResubscribeRequest(50_000, KEY, MAX_HTL, 0.15, 0.48, None)))
    assert out == [(b"D", RejectedLoop(50_000))]
    assert node.routes[50_000].upstream == b"U"
    for uid in list(node.routes):
        node.receive(
            2.0, node.routes[uid].current or b"P", DataNotFound(uid, node.routes[uid].key, 0)
        )
    assert node.routes == {} and node.searches.by_peer == {}


def test_flood_of_resubscribes_for_many_keys_stays_within_max_streams() -> None:
    node = two_streams(max_streams=4)
    before = snapshot(node)
    for i in range(200):
        key = key_at(0.9, tag=i + 1)
        out = sends(node.receive(1.0, b"U", ResubscribeRequest(40_000 + i, key, 5, 0.3, 0.3, 3)))
        assert 1 <= len(out) <= 2
    assert len(node.streams.keys() | node.searches.by_key.keys()) <= 4
    assert node.stats.overloads == 200 - 2
    assert snapshot(node) == before


# --- ``Takeover`` built alone ---------------------------------------------------------------------


class Setup:
    def __init__(self, kit: Kit) -> None:
        self.tokens = Tokens()
        self.ask_down, self.carried, self.missing = Calls(), Calls(), Calls()
        self.fired: list[tuple[int, int]] = []
        kit.timers.on(RECOVER_TIMER, lambda now, token, again: self.fired.append((token, again)))
        unreached = Calls()  # (confirming and claims: not reached by these tests)
        self.part = Takeover(
            kit.config,
            kit.streams,
            kit.timers,
            kit.stats,
            Memory(8, Calls()),
            self.tokens,
            unreached,  # type: ignore[arg-type]
            unreached,  # type: ignore[arg-type]
            self.ask_down,
            self.missing,
            Calls(),
            Calls(),
            Calls(),
            self.carried,
            Calls(),
            Calls(),
        )


def root(kit: Kit) -> Stream:
    stream = kit.stream(State.ROOT, children=(b"C",))
    store(stream, 0, 1)
    return stream


def test_a_grace_takes_a_token_from_the_shared_counter() -> None:
    kit = Kit()
    setup = Setup(kit)
    setup.tokens.take()  # (a question to a parent took one)
    stream = root(kit)
    setup.part.hold(0.0, stream)
    assert stream.root.recover_token == 2 and setup.part.recovering == {2: KEY}
    assert stream.root.recover_until == kit.config.takeover_grace


def test_a_childs_claim_beyond_the_head_holds_numbering_and_asks_the_subtree() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit)
    setup.part.reported(0.0, stream, 5)
    assert stream.high == 5 and stream.root.recover_until is not None
    assert setup.ask_down.calls == [(stream,)]
    kit.timers.run(kit.config.takeover_grace / 2)
    assert setup.fired == [(stream.root.recover_token, 1)]


def test_a_claim_is_moved_at_most_one_window() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit)
    setup.part.reported(0.0, stream, 10 * kit.config.window_packets)
    assert stream.high == 1 + kit.config.window_packets


def test_the_graces_end_sends_what_waited() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit)
    setup.part.hold(0.0, stream)
    token = stream.root.recover_token
    setup.part.on_recover_timer(kit.config.takeover_grace, token)
    assert stream.root.recover_until is None and not setup.part.recovering
    assert setup.carried.calls == [(kit.config.takeover_grace, stream)]
