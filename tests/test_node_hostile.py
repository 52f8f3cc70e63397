"""Hostile peers against one core, fed by hand with explicit times: protocol-valid messages
(each would decode) that name what the peer should not name. Each is refused, and no later
input or timer finds the core's tables inconsistent. A search whose uid names another
stream's search here is refused as a loop (RejectedLoop), not by dropping the link: the
peer that sends it may be an honest relay of the one that reused the uid.

N (0.45) roots KEY (0.5) for its local client 1; H (0.2) is a hostile child of it, and Q
(0.49) a peer closer to the key whose Hello makes N restart to hand the tree on (spec:
"when a new node is added").
"""

from __future__ import annotations

from collections.abc import Sequence

from nodes import KEY, KEY2, MAX_HTL, joined_node, make, meet, own_uid, proto, sends

from overlay.codec import decode, encode
from overlay.core.config import NodeConfig
from overlay.core.confirm_lapses import QUIET
from overlay.core.effects import DropPeer, Effect, Send
from overlay.core.node import Node
from overlay.core.probes import back_trail
from overlay.core.streams import LAST_CLAIM, State
from overlay.messages import (
    MAX_PACKET,
    FillRequest,
    Heartbeat,
    Held,
    HeldQuery,
    Hello,
    Message,
    PacketKind,
    PacketsMissed,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishNumbered,
    RejectedLoop,
    RejectOverload,
    RestartConfirmed,
    ResubscribeRequest,
    RootProbe,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
    Unsubscribe,
)


def consistent(node: Node) -> None:
    """Every search the per-key and per-peer tables list is a search in flight, for that
    key (``Hops._start_route``: one uid, one search, one key)."""
    for key, uids in node.searches.by_key.items():
        for uid in uids:
            assert uid in node.routes and node.routes[uid].key == key, (uid, key)
    assert sum(len(uids) for uids in node.searches.by_key.values()) == len(node.routes)
    relayed = sum(1 for route in node.routes.values() if route.upstream is not None)
    assert sum(node.searches.by_peer.values()) == relayed


def restarting_root() -> tuple[Node, int]:
    """N roots KEY with child H; Q's Hello makes it restart: SubscribeRestarted(U) goes to
    H, and N routes its resubscribe with uid U once H confirms."""
    node = make()
    node.subscribe(0.0, KEY, 1)
    meet(node, b"H", 0.2)
    effects = node.receive(0.1, b"H", SubscribeRequest(300, KEY, 5, 0.2, None))
    assert sends(effects) == [(b"H", SubscribeSucceeded(300, KEY, None))]
    node.link_up(0.2, b"Q")
    [(to, restarted)] = sends(node.receive(0.2, b"Q", Hello(0.49, 5)))
    assert to == b"H" and isinstance(restarted, SubscribeRestarted)
    return node, restarted.uid


def test_a_restart_uid_reused_by_a_child_for_another_stream_is_refused() -> None:
    """Root N sends SubscribeRestarted(U) to child H before routing its resubscribe U. H
    answers ResubscribeRequest(U, KEY2): were it routed, N's own resubscribe would later
    find U taken, leave KEY2's table naming a search that is gone, and the route timer
    that makes N root of KEY2 would raise (KeyError in ``Membership.complete_pending``). H is
    refused instead, and N's restart goes on as if H had said nothing."""
    node, uid = restarting_root()
    effects = node.receive(0.3, b"H", ResubscribeRequest(uid, KEY2, 5, 0.2, 0.2, None))
    assert proto(effects) == [Send(b"H", RejectedLoop(uid))]
    assert node.stats.uids_refused == 1 and uid not in node.routes
    effects = node.receive(0.4, b"H", RestartConfirmed(uid, KEY, None))
    [(to, resubscribe)] = sends(effects)
    assert to == b"Q" and isinstance(resubscribe, ResubscribeRequest)
    assert (resubscribe.uid, resubscribe.key) == (uid, KEY)
    consistent(node)
    # KEY2's own search, later, ends with N as its root, through timers only.
    node.subscribe(500.0, KEY2, 2)
    for now in (506.0, 512.0, 600.0):
        node.handle_timer(now)
        consistent(node)
    assert node.streams[KEY2].state is State.ROOT


def test_a_restart_uid_sent_back_for_the_same_stream_is_a_loop() -> None:
    """H sends ResubscribeRequest(U, KEY) before N routes U: our own search's uid coming
    back is a loop (RejectedLoop), and N's resubscribe still gets the uid to itself."""
    node, uid = restarting_root()
    effects = node.receive(0.3, b"H", ResubscribeRequest(uid, KEY, 5, 0.2, 0.2, None))
    assert sends(effects) == [(b"H", RejectedLoop(uid))]
    effects = node.receive(0.4, b"H", RestartConfirmed(uid, KEY, None))
    [(to, resubscribe)] = sends(effects)
    assert to == b"Q" and resubscribe == ResubscribeRequest(uid, KEY, 10, 0.45, 0.45, -1)
    route = node.routes[uid]
    assert route.upstream is None and route.key == KEY
    consistent(node)


def test_a_search_uid_in_flight_reused_for_another_stream_is_refused() -> None:
    """H relays SubscribeRequest(X, KEY2) through N to Q, then SubscribeRequest(X, KEY):
    the uid names KEY2's search here, so the second is refused, though N carries KEY and
    would take a fresh search for it."""
    node, _ = restarting_root()
    effects = node.receive(0.3, b"H", SubscribeRequest(77, KEY2, 5, 0.2, None))
    assert 77 in node.routes
    effects = node.receive(0.4, b"H", SubscribeRequest(77, KEY, 5, 0.2, None))
    assert sends(effects) == [(b"H", RejectedLoop(77))]
    assert node.routes[77].key == KEY2 and b"H" in node.streams[KEY].children
    consistent(node)


def test_a_probe_whose_trail_names_a_search_in_flight_makes_a_look_with_a_fresh_uid() -> None:
    """A root follows a closer root's probe back with a look along a trail whose key is
    derived from the probe's uid (``probes.back_trail``): H, knowing that, first relays a
    search for KEY2 under that key as its uid, then sends RootProbe(X, KEY) from a "closer
    root". The look takes a fresh uid, not the trail's key, and both searches run."""
    node = make(probe_interval=30.0)
    node.subscribe(0.0, KEY, 1)
    meet(node, b"H", 0.2)
    meet(node, b"Q", 0.3)
    trail = back_trail(5)
    node.receive(1.0, b"H", SubscribeRequest(trail, KEY2, 5, 0.2, None))
    assert node.routes[trail].key == KEY2
    node.receive(2.0, b"H", RootProbe(5, KEY, 10, 0.2, 0.49))
    assert node.streams[KEY].root.looking not in (None, trail)
    assert node.routes[trail].key == KEY2
    consistent(node)


def test_a_resubscribe_claiming_the_last_packet_number_does_not_push_numbering_past_it() -> None:
    """H's ResubscribeRequest(last_seen=MAX_PACKET) ends at N, which becomes the root of
    a tree H says has seen the very last number. Continued after it, N's numbering and
    the question its grace asks the subtree (PastQuery up to a window past its head) ran
    past MAX_PACKET, and the PastQuery did not encode. A search's word beyond the bound a
    child's report has (``_LAST_CLAIM``) is ignored, as that report's is."""
    node = make()
    meet(node, b"H", 0.2)
    effects = node.receive(1.0, b"H", ResubscribeRequest(9, KEY, 5, 0.2, 0.3, MAX_PACKET))
    effects += node.handle_timer(30.0)
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and b"H" in stream.children
    assert stream.next_in is not None and stream.next_in < MAX_PACKET
    for _, message in sends(effects):
        assert decode(encode(message)) == message


# --- catch-up budget (``catch_up_budget``) ----------------------------------------------------

WINDOW = NodeConfig().window_packets
# What one peer may draw in a second from a full bucket: the burst, and a second's rate.
BUDGET_PER_SECOND = int((NodeConfig().catch_up_burst + NodeConfig().catch_up_rate) * WINDOW)


def carrying_node(packets: int = WINDOW) -> Node:
    """N (0.45) in KEY's tree below P, its child C (0.2) caught up, holding packets
    0..``packets - 1`` (each committed: its mark rides it). H (0.3) is a peer."""
    node = joined_node()
    meet(node, b"H", 0.3)
    for number in range(packets):
        node.receive(0.5, b"P", packet(number))
    assert len(node.streams[KEY].window) == packets
    return node


def packet(number: int) -> SubscribeData:
    return SubscribeData(KEY, number, b"x" * 100, None, PacketKind.DATA, None, mark=number)


def frames_to(effects: list[Effect], peer: bytes) -> list[Message]:
    return [m for to, m in sends(effects) if to == peer and isinstance(m, SubscribeData)]


def test_fresh_searches_for_a_whole_window_in_a_loop_draw_only_the_peers_budget() -> None:
    """H sends 100 SubscribeRequests with fresh uids and ``last_seen`` -1 in one second,
    each asking for the whole window (1024 packets for a 70-byte request) while P's
    stream goes on at 100 packets a second. H gets at most its budget's worth of packets
    (the burst and a second's rate); every other request is refused with RejectOverload,
    counted, and H is cut off as a fault once it has been refused far past it. C gets
    every live packet at once, in order, throughout."""
    node = carrying_node()
    to_hostile: list[Message] = []
    to_child: list[int] = []
    answers = refusals = 0
    cut_off = False
    for i in range(100):
        now = 1.0 + i / 100
        live = node.receive(now, b"P", packet(WINDOW + i))
        to_child += [m.packet for m in frames_to(live, b"C")]
        effects = node.receive(now, b"H", SubscribeRequest(9000 + i, KEY, MAX_HTL, 0.3, -1))
        to_hostile += frames_to(effects, b"H")
        to_child += [m.packet for m in frames_to(effects, b"C")]
        for e in effects:
            if isinstance(e, Send) and e.peer == b"H":
                answers += isinstance(e.message, SubscribeSucceeded)
                refusals += e.message == RejectOverload(9000 + i, KEY)
            cut_off |= isinstance(e, DropPeer) and e.peer == b"H" and e.fault
    assert to_child == list(range(WINDOW, WINDOW + 100))
    assert len(to_hostile) <= BUDGET_PER_SECOND + 100  # (+ the live packets, once a child)
    assert answers + refusals == 100 and refusals >= 90
    assert node.stats.catch_ups_refused == refusals
    assert cut_off
    # Its link closed, H's bucket goes with it.
    node.link_down(2.0, b"H")
    assert len(node.catch_ups) == 0


def test_one_subscriber_catching_up_on_a_whole_window_is_served_it_all() -> None:
    """An honest subscriber joining from the first packet (``last_seen`` -1) gets the
    whole window; a few seconds later its resubscribe from -1 gets it all again, and one
    more search right after it the packets after its ``last_seen``: within its budget."""
    node = carrying_node()
    effects = node.receive(1.0, b"H", SubscribeRequest(700, KEY, MAX_HTL, 0.3, -1))
    assert sends(effects)[0] == (b"H", SubscribeSucceeded(700, KEY, WINDOW - 1))
    assert [m.packet for m in frames_to(effects, b"H")] == list(range(WINDOW))
    effects = node.receive(5.0, b"H", ResubscribeRequest(701, KEY, MAX_HTL, 0.3, 0.3, -1))
    assert [m.packet for m in frames_to(effects, b"H")] == list(range(WINDOW))
    effects = node.receive(5.0, b"H", SubscribeRequest(702, KEY, MAX_HTL, 0.3, 99))
    assert [m.packet for m in frames_to(effects, b"H")] == list(range(100, WINDOW))
    assert node.stats.catch_ups_refused == 0


def test_fill_requests_for_a_whole_window_in_a_loop_draw_only_the_childs_budget() -> None:
    """A replay answers a FillRequest as a catch-up answers a search: C, a child, asking
    for the whole window 100 times in a second gets at most its budget's worth; the rest
    go unanswered, counted, and C is cut off once refused far past it."""
    node = carrying_node()
    replayed = 0
    cut_off = False
    for i in range(100):
        effects = node.receive(1.0 + i / 100, b"C", FillRequest(KEY, 0, WINDOW - 1))
        replayed += len(frames_to(effects, b"C"))
        cut_off |= any(isinstance(e, DropPeer) and e.peer == b"C" and e.fault for e in effects)
    assert replayed <= BUDGET_PER_SECOND
    assert node.stats.catch_ups_refused >= 90 and cut_off


DEADLINE = NodeConfig().confirm_deadline


def root_with_silent_publisher() -> Node:
    """N roots KEY for its client 1; H joined as its child and publishes, and never sends
    PublishConfirmed for the numbers N gives it (PublishNumbered)."""
    node = make()
    node.subscribe(0.0, KEY, 1)
    meet(node, b"H", 0.2)
    node.receive(0.1, b"H", SubscribeRequest(300, KEY, 5, 0.2, None))
    return node


def hostile_publish(node: Node, now: float, uid: int) -> int:
    """H publishes; N numbers it and tells H the number, holding the packet for H's word."""
    effects = node.receive(
        now, b"H", PublishData(uid, KEY, None, 0.2, 5, b"h%d" % uid, None, PacketKind.DATA, None)
    )
    [number] = [m.packet for to, m in sends(effects) if isinstance(m, PublishNumbered)]
    return number


def packets_to(effects: Sequence[Effect], peer: bytes) -> list[bytes]:
    return [m.data for to, m in sends(effects) if to == peer and isinstance(m, SubscribeData)]


def refused_to(effects: Sequence[Effect], peer: bytes) -> list[int]:
    """The numbers ``peer`` is told are refused (PublishCollision), so it publishes afresh."""
    return [m.packet for to, m in sends(effects) if to == peer and isinstance(m, PublishCollision)]


def test_a_packet_behind_a_number_its_publisher_never_confirms_waits_one_deadline() -> None:
    """H's publish is numbered 0 and held for H's confirmation; client 1's publish, numbered
    1, waits behind it (packets go down in number order). H never confirms: at
    ``confirm_deadline`` after H's number, both go down, 0 unconfirmed, and the stream
    carries on; it is not held for ``confirm_timeout``."""
    node = root_with_silent_publisher()
    assert hostile_publish(node, 1.0, 7) == 0
    effects = node.publish(1.1, KEY, 1, 8, b"honest")
    assert packets_to(effects, b"H") == []
    node.receive(1.0 + DEADLINE * 0.6, b"H", Heartbeat(1))  # H is linked and well
    assert packets_to(node.handle_timer(1.0 + DEADLINE - 0.01), b"H") == []
    effects = node.handle_timer(1.0 + DEADLINE)
    assert packets_to(effects, b"H") == [b"h7", b"honest"]
    assert node.stats.released_unconfirmed == 1 and not node.streams[KEY].root.pending


def test_a_number_whose_child_fell_silent_is_not_passed_over_while_it_may_answer() -> None:
    """After H's publish, nothing more comes from H: the link may be cut, and H may hold
    its number as a claim it will push to the root of its side of the cut. Past the
    deadline N asks H something it answers at once (HeldQuery) and holds the packets
    behind H's; H answers within half a deadline, so it is linked and well: both go down,
    H's unconfirmed."""
    node = root_with_silent_publisher()
    hostile_publish(node, 1.0, 7)
    node.publish(1.1, KEY, 1, 8, b"honest")
    effects = node.handle_timer(1.0 + DEADLINE)
    assert [m for to, m in sends(effects) if to == b"H"] == [HeldQuery(KEY, 0)]
    assert packets_to(node.handle_timer(1.0 + 1.25 * DEADLINE), b"H") == []
    node.receive(1.0 + 1.3 * DEADLINE, b"H", Held(KEY, 0))
    effects = node.handle_timer(1.0 + 1.5 * DEADLINE)
    assert packets_to(effects, b"H") == [b"h7", b"honest"]
    assert node.stats.released_unconfirmed == 1 and node.stats.silent_drops == 0


def test_a_number_whose_child_stays_silent_is_set_aside_until_a_publisher_shows_up() -> None:
    """H publishes (0), then says nothing and leaves N's question unanswered; behind it
    waits Q's publish (1), which Q confirms. Half a deadline after asking, N gives 0 up
    with 1: H's node may hold 0 as a claim beyond a cut, so no other publish may have 0,
    and N, which may be cut off from every publisher, shows nothing under either. Q (H
    too) is told to publish afresh (PublishCollision); Q's retry reaching N shows a
    publisher on its side, and 0 and 1 go down under the numbers their nodes were told.
    H lapses: its next publish is not waited for. The stream stood still one and a half
    deadlines, not ``confirm_timeout``; H stays linked (it may be an honest relay, cut
    off for a moment)."""
    node = root_with_silent_publisher()
    meet(node, b"Q", 0.3)
    node.receive(0.2, b"Q", SubscribeRequest(301, KEY, 5, 0.3, None))
    assert hostile_publish(node, 1.0, 7) == 0
    q20 = PublishData(20, KEY, None, 0.3, 5, b"q20", None, PacketKind.DATA, None)
    effects = node.receive(1.05, b"Q", q20)
    assert [m for _, m in sends(effects)] == [PublishNumbered(20, KEY, 1)]
    node.receive(1.2, b"Q", PublishConfirmed(20, KEY, 1))  # Q is well; H says nothing
    node.handle_timer(1.0 + DEADLINE)  # H asked
    assert packets_to(node.handle_timer(1.0 + 1.25 * DEADLINE), b"Q") == []
    effects = node.handle_timer(1.0 + 1.5 * DEADLINE)
    assert packets_to(effects, b"Q") == []
    assert refused_to(effects, b"Q") == [1] and refused_to(effects, b"H") == [0]
    assert not [e for e in effects if isinstance(e, DropPeer)]
    stats = node.stats
    assert (stats.silent_drops, stats.set_aside, stats.renewed, stats.lapses) == (1, 2, 2, 1)
    stream = node.streams[KEY]
    assert list(stream.root.set_aside) == [0, 1] and not stream.root.pending
    now = 1.0 + 2 * DEADLINE
    effects = node.receive(now, b"Q", q20)  # Q's node publishes afresh
    assert packets_to(effects, b"Q") == [b"h7", b"q20"]
    assert stats.resolved == 2 and not stream.root.set_aside
    node.receive(now, b"H", PublishData(9, KEY, None, 0.2, 5, b"h9", None, PacketKind.DATA, None))
    effects = node.publish(now + 0.1, KEY, 1, 8, b"honest")
    assert packets_to(effects, b"Q") == [b"honest"]  # H's 2 went down as its turn came
    assert stream.uids is not None
    assert [stream.uids.get(uid) for uid in (7, 20, 9, 8)] == [0, 1, 2, 3]


def test_a_lone_unconfirmed_number_holds_nobody_up_and_is_not_sent_early() -> None:
    """With nothing behind it, H's unconfirmed packet is no stall: it waits as before, and a
    publish that comes after its deadline finds it overdue and both go down at once."""
    node = root_with_silent_publisher()
    hostile_publish(node, 1.0, 7)
    node.receive(1.0 + 1.5 * DEADLINE, b"H", Heartbeat(1))
    assert packets_to(node.handle_timer(1.0 + 2 * DEADLINE), b"H") == []
    assert node.stats.released_unconfirmed == 0
    effects = node.publish(1.0 + 2.5 * DEADLINE, KEY, 1, 8, b"honest")
    assert packets_to(effects, b"H") == [b"h7", b"honest"]


def test_after_a_lapse_a_childs_publishes_are_not_waited_for_for_a_while() -> None:
    """H publishes twice a second and confirms nothing, while client 1 publishes behind
    it. H's first number holds client 1's packet one deadline; from then on N does not wait
    for H (``confirm_lapses``): H's packets go down as their turn comes, and nothing behind
    them is held. H is not cut off: N cannot tell it from an honest relay with a hostile
    publisher below. Once its quiet is over, H is waited for again, up to a deadline."""
    node = root_with_silent_publisher()
    hostile_publish(node, 1.0, 10)
    node.publish(1.01, KEY, 1, 110, b"honest")
    node.receive(1.0 + 0.6 * DEADLINE, b"H", Heartbeat(1))
    assert packets_to(node.handle_timer(1.0 + DEADLINE), b"H") == [b"h10", b"honest"]
    now = 1.0 + DEADLINE
    effects: list[Effect] = []
    for uid in range(11, 20):
        now += 0.5
        effects += node.receive(
            now,
            b"H",
            PublishData(uid, KEY, None, 0.2, 5, b"h%d" % uid, None, PacketKind.DATA, None),
        )
        effects += node.publish(now + 0.01, KEY, 1, 100 + uid, b"honest %d" % uid)
        assert not node.streams[KEY].root.pending  # nothing held
    assert not [e for e in effects if isinstance(e, DropPeer)]
    assert node.stats.lapses == 1 and node.stats.released_unconfirmed == 10
    now = 1.0 + DEADLINE + QUIET * DEADLINE
    hostile_publish(node, now, 30)
    node.publish(now + 0.01, KEY, 1, 130, b"honest again")
    assert node.streams[KEY].root.pending  # waited for again


def test_a_packet_sent_down_unconfirmed_is_not_dropped_when_its_child_goes() -> None:
    """N holds Q's number 2 for Q's confirmation; H, not waited for since its lapse,
    publishes number 3 behind it, and Q number 4. H's link goes: its packet needs nothing
    more from H, so N keeps 3 and Q's 4 (Q's node may already hold 4 as a claim); once Q
    confirms, all three go down in order."""
    node = root_with_silent_publisher()
    meet(node, b"Q", 0.3)
    node.receive(0.2, b"Q", SubscribeRequest(301, KEY, 5, 0.3, None))
    hostile_publish(node, 1.0, 10)  # 0
    node.publish(1.01, KEY, 1, 110, b"honest")  # 1
    node.receive(1.0 + 0.6 * DEADLINE, b"H", Heartbeat(1))
    node.handle_timer(1.0 + DEADLINE)  # H lapses: 0 and 1 go down
    now = 1.0 + 1.5 * DEADLINE

    def publish_from(peer: bytes, uid: int) -> int:
        effects = node.receive(
            now,
            peer,
            PublishData(uid, KEY, None, 0.3, 5, b"p%d" % uid, None, PacketKind.DATA, None),
        )
        [number] = [m.packet for _, m in sends(effects) if isinstance(m, PublishNumbered)]
        return number

    assert [publish_from(b"Q", 20), publish_from(b"H", 21), publish_from(b"Q", 22)] == [2, 3, 4]
    node.link_down(now + 0.1, b"H")
    assert list(node.streams[KEY].root.pending) == [2, 3, 4] and node.stats.unconfirmed == 0
    node.receive(now + 0.2, b"Q", PublishConfirmed(20, KEY, 2))
    effects = node.receive(now + 0.3, b"Q", PublishConfirmed(22, KEY, 4))
    assert packets_to(effects, b"Q") == [b"p22"] and not node.streams[KEY].root.pending


def test_a_child_cannot_end_its_quiet_by_confirming_a_packet_not_waited_for() -> None:
    """After H's lapse, H's publish 3 waits only for Q's unconfirmed 2 ahead of it. H
    confirms 3 in time: that proves nothing (N was not waiting for it), so H's quiet goes
    on, and H's next publish goes down at once rather than holding the stream again."""
    node = root_with_silent_publisher()
    meet(node, b"Q", 0.3)
    node.receive(0.2, b"Q", SubscribeRequest(301, KEY, 5, 0.3, None))
    hostile_publish(node, 1.0, 10)
    node.publish(1.01, KEY, 1, 110, b"honest")
    node.receive(1.0 + 0.6 * DEADLINE, b"H", Heartbeat(1))
    node.handle_timer(1.0 + DEADLINE)  # H lapses
    now = 1.0 + 1.5 * DEADLINE
    node.receive(now, b"Q", PublishData(20, KEY, None, 0.3, 5, b"q20", None, PacketKind.DATA, None))
    assert hostile_publish(node, now, 21) == 3
    node.receive(now + 0.1, b"H", PublishConfirmed(21, KEY, 3))
    node.receive(now + 0.2, b"Q", PublishConfirmed(20, KEY, 2))
    assert not node.streams[KEY].root.pending
    effects = node.receive(
        now + 0.3, b"H", PublishData(22, KEY, None, 0.2, 5, b"h22", None, PacketKind.DATA, None)
    )
    assert packets_to(effects, b"H") == [b"h22"]  # down at once: still not waited for


def test_a_publish_numbered_while_a_silent_childs_number_is_overdue_keeps_its_number() -> None:
    """H's number 0 is past its deadline and H was asked, unanswered, for half a deadline;
    Q's publish arrives before N's timer runs. Q is told its number (2), and nothing is
    dropped under it: only the timer drops, so Q is never told a number after being told
    it was refused. Then the timer drops 0 and all behind it, and Q is told so."""
    node = root_with_silent_publisher()
    meet(node, b"Q", 0.3)
    node.receive(0.2, b"Q", SubscribeRequest(301, KEY, 5, 0.3, None))
    hostile_publish(node, 1.0, 7)
    node.publish(1.1, KEY, 1, 8, b"honest")
    node.handle_timer(1.0 + DEADLINE)  # H asked
    effects = node.receive(
        1.0 + 1.5 * DEADLINE,
        b"Q",
        PublishData(20, KEY, None, 0.3, 5, b"q20", None, PacketKind.DATA, None),
    )
    assert [m for _, m in sends(effects)] == [PublishNumbered(20, KEY, 2)]
    assert list(node.streams[KEY].root.pending) == [0, 1, 2]
    effects = node.handle_timer(1.0 + 1.5 * DEADLINE)
    refused = [
        m.packet for to, m in sends(effects) if to == b"Q" and isinstance(m, PublishCollision)
    ]
    assert refused == [2] and node.stats.silent_drops == 1


def test_a_child_that_confirms_just_before_it_would_be_dropped_lapses() -> None:
    """H says nothing past its number's deadline, then confirms just before the half
    deadline N gave it is up. The packets behind go down, and H lapses all the same: its
    next publish is not waited for, so it cannot hold the stream a deadline and a half
    with every publish."""
    node = root_with_silent_publisher()
    hostile_publish(node, 1.0, 7)
    node.publish(1.01, KEY, 1, 8, b"honest")
    node.handle_timer(1.0 + DEADLINE)  # H asked
    effects = node.receive(1.0 + 1.49 * DEADLINE, b"H", PublishConfirmed(7, KEY, 0))
    assert packets_to(effects, b"H") == [b"h7", b"honest"]
    assert node.stats.lapses == 1
    now = 1.0 + 2 * DEADLINE
    effects = node.receive(
        now, b"H", PublishData(9, KEY, None, 0.2, 5, b"h9", None, PacketKind.DATA, None)
    )
    assert packets_to(effects, b"H") == [b"h9"]  # down at once: not waited for


def test_a_child_that_leaves_holding_the_stream_up_lapses_and_its_number_is_set_aside() -> None:
    """H's number 0 holds Q's 1 up; H leaves (Unsubscribe) before N would give it up, and
    joins again. 0 and 1 are set aside; Q is told at once to publish afresh, and its
    retry sends both down under their numbers. H lapses, so leaving and rejoining cannot
    stall the stream publish after publish: its next publish goes down as its turn
    comes."""
    node = root_with_silent_publisher()
    meet(node, b"Q", 0.3)
    node.receive(0.2, b"Q", SubscribeRequest(301, KEY, 5, 0.3, None))
    hostile_publish(node, 1.0, 7)
    q = PublishData(20, KEY, None, 0.3, 5, b"q", None, PacketKind.DATA, None)
    node.receive(1.05, b"Q", q)
    node.receive(1.06, b"Q", PublishConfirmed(20, KEY, 1))
    node.handle_timer(1.0 + DEADLINE)  # H asked
    effects = node.receive(1.0 + 1.45 * DEADLINE, b"H", Unsubscribe(KEY))
    assert refused_to(effects, b"Q") == [1] and node.stats.lapses == 1
    assert packets_to(effects, b"Q") == []
    now = 1.0 + 1.5 * DEADLINE
    node.receive(now, b"H", SubscribeRequest(302, KEY, 5, 0.2, None))
    effects = node.receive(now, b"Q", q)
    assert packets_to(effects, b"Q") == [b"h7", b"q"]
    effects = node.receive(
        now, b"H", PublishData(9, KEY, None, 0.2, 5, b"h9", None, PacketKind.DATA, None)
    )
    assert packets_to(effects, b"Q") == [b"h9"]  # H's, not waited for, goes down at once


def test_a_parents_head_past_the_last_number_a_claim_may_name_is_not_believed() -> None:
    """P answers N's search with SubscribeSucceeded naming its head as MAX_PACKET. Were N
    to believe it, then, root once P is gone, it would give its next publish MAX_PACKET +
    1, which no message can carry, and every publish would fail. Beyond ``LAST_CLAIM`` the
    head is ignored, as a search's word is in a takeover: N starts at 0."""
    node = make()
    meet(node, b"P", 0.49)
    uid = own_uid(node.subscribe(0.0, KEY, 1))
    node.receive(0.0, b"P", SubscribeSucceeded(uid, KEY, MAX_PACKET))
    stream = node.streams[KEY]
    assert (stream.state, stream.high, stream.start) == (State.JOINED, None, 0)
    node = make()
    meet(node, b"P", 0.49)
    uid = own_uid(node.subscribe(0.0, KEY, 1))
    node.receive(0.0, b"P", SubscribeSucceeded(uid, KEY, LAST_CLAIM))
    assert node.streams[KEY].high == LAST_CLAIM  # (at the bound, it is)


def test_a_parents_packet_or_gap_past_the_last_number_cuts_it_off() -> None:
    """P, N's parent, sends SubscribeData numbered MAX_PACKET, or PacketsMissed up to it.
    Taken, N's next expected number would be MAX_PACKET + 1, its subtree's too, and N as
    root could number nothing a message can carry. No stream gets past ``LAST_CLAIM``: it
    is a fault, and N's numbering is untouched."""
    for lie in (
        SubscribeData(KEY, MAX_PACKET, b"x", None, PacketKind.DATA, None, None, None, None),
        PacketsMissed(KEY, 0, MAX_PACKET),
    ):
        node = joined_node()
        effects = node.receive(0.1, b"P", lie)
        [drop] = [e for e in effects if isinstance(e, DropPeer)]
        assert drop.peer == b"P" and drop.fault and str(LAST_CLAIM) in drop.reason
        assert node.streams[KEY].next_in is None and node.streams[KEY].high is None


def test_a_childs_resume_point_past_the_last_number_does_not_move_the_relays() -> None:
    """C asks N to join from after MAX_PACKET; N routes the search to P, which becomes the
    new root. N, a relay on its path, would start at MAX_PACKET + 1 and take every packet
    after for a duplicate. The word is ignored, as a takeover ignores it."""
    node = make()
    meet(node, b"P", 0.49)
    meet(node, b"C", 0.2)
    effects = node.receive(0.1, b"C", SubscribeRequest(500, KEY, MAX_HTL, 0.2, MAX_PACKET))
    [(to, forwarded)] = [(to, m) for to, m in sends(effects) if isinstance(m, SubscribeRequest)]
    assert to == b"P"
    node.receive(0.2, b"P", SubscribeSucceededNewRoot(forwarded.uid, KEY, None))
    stream = node.streams[KEY]
    assert stream.next_in is None and stream.start in (None, 0)
    effects = node.receive(
        0.3, b"P", SubscribeData(KEY, 0, b"first", None, PacketKind.DATA, None, None, None, None)
    )
    assert packets_to(effects, b"C") == [b"first"]
