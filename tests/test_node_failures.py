"""The core under failure: timeouts, Accepted, losing the parent, restarts through a subtree.

A search that is never accepted or answered backtracks at its deadline; a node that loses
its parent labels its subtree with a restart and resubscribes, never closing a cycle
through its own subtree; a detached subtree's members move to an attached tree their relay
found.
"""

from __future__ import annotations

from corenet import CoreNet
from detached_subtrees import DATA, child_of_b, found_beyond_a_labelled_member
from nodes import (
    ACCEPT,
    KEY,
    MAX_HTL,
    NO_ANNOUNCE,
    NO_BEATS,
    TIMEOUT,
    chain,
    joined_node,
    look_sent,
    make,
    meet,
    one_send,
    own_uid,
    proto,
    relay,
    relayed,
    sends,
)

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Send, SetTimer
from overlay.core.events import Subscribed
from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    Accepted,
    DataNotFound,
    FillRequest,
    PastQuery,
    PublishData,
    RejectedLoop,
    RestartConfirmed,
    RestartEnded,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
    Unsubscribe,
)


def soon(net: CoreNet) -> dict[bytes, float]:
    """Each node's next timer, but for the far-off heartbeats these tests move aside."""
    return {name: at for name, at in net.timers.items() if at < NO_BEATS["heartbeat_interval"]}


# --- request timeout ------------------------------------------------------------------------------


def test_request_never_accepted_backtracks_after_accept_timeout() -> None:
    node = relay()
    effects = node.receive(100.0, b"U", SubscribeRequest(1, KEY, 5, 0.49, None))
    assert SetTimer(100.0 + ACCEPT) in effects
    assert node.next_deadline() == 100.0 + ACCEPT
    assert node.handle_timer(100.0 + ACCEPT - 0.001) == []
    effects = node.handle_timer(100.0 + ACCEPT)
    assert sends(effects) == [(b"P2", SubscribeRequest(1, KEY, 4, 0.49, None))]
    assert SetTimer(100.0 + 2 * ACCEPT) in effects
    assert node.stats.timeouts == 1
    # A late Accepted from the peer we gave up on changes nothing.
    assert node.receive(100.0 + ACCEPT + 0.5, b"P1", Accepted(1)) == []
    assert node.routes[1].current == b"P2"
    # A late success from it: it listed us as a child, undo that.
    assert node.receive(100.0 + ACCEPT + 1, b"P1", SubscribeSucceeded(1, KEY, None)) == [
        Send(b"P1", Unsubscribe(KEY))
    ]
    assert node.streams == {}
    # P2 does answer, with no Accepted first (a reply may come at any time before the
    # deadline); the old deadline then passes harmlessly.
    effects = node.receive(100.0 + ACCEPT + 2, b"P2", SubscribeSucceeded(1, KEY, None))
    assert sends(effects) == [(b"U", SubscribeSucceeded(1, KEY, None))]
    assert node.streams[KEY].parent == b"P2"
    assert proto(node.handle_timer(100.0 + 2 * ACCEPT)) == []
    assert node.next_deadline() == NO_ANNOUNCE  # no route timer is left


def test_accepted_extends_the_deadline_to_request_timeout() -> None:
    node = relay()
    node.receive(100.0, b"U", SubscribeRequest(1, KEY, 5, 0.49, None))
    # Accepted from a peer we are not waiting on, or for another uid, counts for nothing.
    assert node.receive(101.0, b"P2", Accepted(1)) == []
    assert node.receive(101.0, b"P1", Accepted(12345)) == []
    assert node.routes[1].deadline == 100.0 + ACCEPT
    assert node.receive(101.0, b"P1", Accepted(1)) == []
    assert node.routes[1].deadline == 101.0 + TIMEOUT
    # A second Accepted does not push the deadline further.
    assert node.receive(102.0, b"P1", Accepted(1)) == []
    assert node.routes[1].deadline == 101.0 + TIMEOUT
    # The accept deadline passes harmlessly; the request deadline is announced then.
    assert node.handle_timer(100.0 + ACCEPT) == [SetTimer(101.0 + TIMEOUT)]
    assert node.stats.timeouts == 0 and node.routes[1].current == b"P1"
    # A reply before the deadline still counts, e.g. a failure that backtracks.
    assert one_send(node.receive(110.0, b"P1", RejectedLoop(1))) == (
        b"P2",
        SubscribeRequest(1, KEY, 4, 0.49, None),
    )
    assert node.routes[1].deadline == 110.0 + ACCEPT  # P2 is new: the short wait again
    node.receive(111.0, b"P2", Accepted(1))
    assert node.handle_timer(111.0 + TIMEOUT - 0.001) == [SetTimer(111.0 + TIMEOUT)]
    effects = node.handle_timer(111.0 + TIMEOUT)
    assert sends(effects) == [(b"P3", SubscribeRequest(1, KEY, 4, 0.49, None))]
    assert node.stats.timeouts == 1


def test_timer_uses_the_configured_timeouts() -> None:
    node = make(0.3, accept_timeout=2.0, request_timeout=7.0)
    meet(node, b"P", 0.49)
    effects = node.subscribe(1000.0, KEY, 1)
    assert effects[-1] == SetTimer(1002.0)
    node.receive(1001.0, b"P", Accepted(own_uid(effects)))
    assert node.handle_timer(1002.0) == [SetTimer(1008.0)]


def test_own_search_whose_only_peer_never_answers_ends_at_the_deadline() -> None:
    node = make(0.45)
    meet(node, b"P", 0.2)
    node.subscribe(0.0, KEY, 1)
    assert node.handle_timer(ACCEPT - 1) == []
    effects = node.handle_timer(ACCEPT)
    assert proto(effects)[0] == Deliver(1, Subscribed(KEY, root=True))
    look_sent(effects, b"P", 0.45)  # before numbering, a look (``merges``)


def test_timeout_and_late_answer_in_a_network() -> None:
    net = CoreNet(seed=1, config=NodeConfig(**NO_BEATS))
    net.add(b"A", 0.1)
    net.add(b"C", 0.48)
    net.connect(b"A", b"C")
    net.hold(b"C")  # C is slow: A's request waits
    net.subscribe(b"A", KEY)
    net.advance(ACCEPT - 0.5)
    assert soon(net) == {b"A": ACCEPT}  # C never sent Accepted: A waits only briefly
    assert net.state(b"A", KEY) is State.JOINING
    net.advance(ACCEPT)
    # A gave up on C at the deadline; it is the closest node its search saw.
    assert net.state(b"A", KEY) is State.ROOT
    assert net.events[(b"A", 1)] == [Subscribed(KEY, root=True)]
    net.release(b"C")
    # C gets the search late and becomes root, but A's look for another tree (``merges``),
    # which waited at C too, now finds C, closer to the key: A's tree joins C's. One tree,
    # rooted at the closest node, and C has no child that does not name it.
    assert net.roots(KEY) == [b"C"] and net.stream(b"A", KEY).parent == b"C"  # type: ignore[union-attr]
    assert net.tree_problems(KEY) == []


# --- losing the parent ----------------------------------------------------------------------------


def test_link_down_of_parent_restarts_and_reattaches() -> None:
    node = joined_node()
    effects = node.link_down(5.0, b"P")
    [(child, restarted)] = sends(effects)
    assert child == b"C" and restarted == SubscribeRestarted(restarted.uid, KEY, 0.45)
    # The resubscribe goes out only once the subtree confirmed the restart.
    effects = node.receive(5.0, b"C", RestartConfirmed(restarted.uid, KEY))
    [(hop, resubscribe)] = sends(effects)
    assert hop == b"Q"
    # last_seen -1: the client waits for packet 0 (see test_liveness).
    assert resubscribe == ResubscribeRequest(restarted.uid, KEY, MAX_HTL, 0.45, 0.45, -1)
    assert node.streams[KEY].state is State.RESTARTING
    effects = node.receive(5.1, b"Q", SubscribeSucceeded(restarted.uid, KEY, None))
    # Attached to an attached tree: the subtree is no longer detached.
    assert sends(effects) == [(b"C", RestartEnded(restarted.uid, KEY))]
    stream = node.streams[KEY]
    assert (stream.state, stream.parent, list(stream.children)) == (State.JOINED, b"Q", [b"C"])
    assert stream.restart_uid is None and stream.restart_origin is None


def test_restart_with_nothing_closer_keeps_the_subtree_under_us_as_root() -> None:
    net = chain()
    net.subscribe(b"A", KEY)
    net.trace.clear()
    net.disconnect(b"B", b"C")
    [(src, dst, restarted)] = net.sent(SubscribeRestarted)
    assert (src, dst) == (b"B", b"A")
    [(_, _, resub)] = net.sent(ResubscribeRequest)
    assert isinstance(resub, ResubscribeRequest) and isinstance(restarted, SubscribeRestarted)
    assert resub.uid == restarted.uid
    assert resub.must_beat == 0.3
    assert net.roots(KEY) == [b"B"]
    a = net.stream(b"A", KEY)
    # B became the root: its subtree is attached again, and remembers the restart.
    assert a is not None and a.parent == b"B" and a.restart_uid is None
    assert resub.uid in a.restarts_seen
    [(_, _, confirmed)] = net.sent(RestartConfirmed)
    [(_, _, ended)] = net.sent(RestartEnded)
    assert confirmed == RestartConfirmed(resub.uid, KEY) and ended == RestartEnded(resub.uid, KEY)
    assert net.tree_problems(KEY) == []


def test_subscribe_restarted_is_relayed_to_children_once_and_confirmed_after_them() -> None:
    node = child_of_b()
    assert node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.49)) == [
        Send(b"D", SubscribeRestarted(70, KEY, 0.49))
    ]
    stream = node.streams[KEY]
    assert (stream.restart_uid, stream.restart_origin) == (70, 0.49)
    # A duplicate is not relayed again, nor answered before D has confirmed: that would
    # tell B the subtree is labelled while D is not yet.
    assert sends(node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.49))) == []
    # Not from our parent: confirmed (the sender must not wait) and told we are not its child.
    assert sends(node.receive(1.0, b"W", SubscribeRestarted(71, KEY, 0.3))) == [
        (b"W", RestartConfirmed(71, KEY)),
        (b"W", Unsubscribe(KEY)),
    ]
    assert stream.restart_uid == 70
    # D confirms: now N's whole subtree knows, and N confirms to B.
    assert sends(node.receive(1.1, b"D", RestartConfirmed(70, KEY))) == [
        (b"B", RestartConfirmed(70, KEY))
    ]
    assert sends(node.receive(1.1, b"D", RestartConfirmed(70, KEY))) == []  # once only
    # A duplicate after that is confirmed at once (B may be asking again).
    assert sends(node.receive(1.2, b"B", SubscribeRestarted(70, KEY, 0.49))) == [
        (b"B", RestartConfirmed(70, KEY))
    ]


def test_a_confirmation_carries_the_newest_packet_its_subtree_holds_or_held() -> None:
    node = child_of_b()
    for number in range(3):
        data = SubscribeData(KEY, number, b"p%d" % number, None, DATA, None)
        node.receive(0.5, b"B", data)
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.49))
    # D's subtree holds up to 5, more than N: N passes 5 up.
    assert sends(node.receive(1.1, b"D", RestartConfirmed(70, KEY, 5))) == [
        (b"B", RestartConfirmed(70, KEY, 5))
    ]
    node.receive(2.0, b"B", SubscribeRestarted(71, KEY, 0.49))
    # D now reports less, even less than N's own 2: N still passes 5. The tree had 5, and a
    # member of D's subtree that held it may have gone elsewhere since (``_label``).
    assert sends(node.receive(2.1, b"D", RestartConfirmed(71, KEY, 1))) == [
        (b"B", RestartConfirmed(71, KEY, 5))
    ]
    # A claim far beyond N's head is kept only up to one window past it (N holds 2).
    node.receive(3.0, b"B", SubscribeRestarted(72, KEY, 0.49))
    node.receive(3.1, b"D", RestartConfirmed(72, KEY, 10**6))
    node.receive(4.0, b"B", SubscribeRestarted(73, KEY, 0.49))
    window = node.config.window_packets
    assert sends(node.receive(4.1, b"D", RestartConfirmed(73, KEY, 1))) == [
        (b"B", RestartConfirmed(73, KEY, 2 + window))
    ]


def test_an_origin_that_becomes_root_numbers_above_what_its_subtree_holds() -> None:
    """N lags at nothing while its child's subtree holds up to packet 7 (it reattached below
    N after N's parent had stopped sending). N's parent dies and N's own search finds
    nobody: N is root of its subtree, and must not give 0..7 to new publishes."""
    node = joined_node()
    [(_, restarted)] = sends(node.link_down(5.0, b"P"))
    [(hop, resubscribe)] = sends(node.receive(5.0, b"C", RestartConfirmed(restarted.uid, KEY, 7)))
    assert hop == b"Q" and isinstance(resubscribe, ResubscribeRequest)
    effects = node.receive(5.1, b"Q", DataNotFound(resubscribe.uid, KEY, 0))
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.high == 7
    # 0..7 are holes it asks its subtree for (``gathering``), filled in order as they come.
    # (The query runs on one window beyond 7, for claims past it: ``gathering``.)
    beyond = 7 + NodeConfig().window_packets
    assert (b"C", PastQuery(KEY, 0, beyond, MAX_WIRE_HTL)) in sends(effects)
    # A publish waits meanwhile: what does not come by the grace's end is announced missed,
    # and numbering goes on at 8 (``test_takeover``), never from 0.
    node.publish(5.2, KEY, 1, 900, b"waits")
    assert [m.uid for _, m in stream.queued] == [900] and len(stream.window) == 0


def test_child_that_saw_the_restart_routes_that_resubscribe_as_if_it_had_no_stream() -> None:
    node = child_of_b()
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.2))
    effects = node.receive(1.1, b"W", ResubscribeRequest(70, KEY, 5, 0.3, 0.1, None))
    (hop, forwarded) = relayed(effects, b"W", 70)
    # Not a SubscribeSucceeded: routed on, closest untried peer first, N's location as best.
    assert isinstance(forwarded, ResubscribeRequest) and forwarded.uid == 70
    assert forwarded.must_beat == 0.1 and forwarded.best_loc == 0.45
    assert hop == b"B"
    assert list(node.streams[KEY].children) == [b"D"]
    # Any other resubscribe from W that N and its detached subtree's origin (0.2) beat is
    # accepted; the success hands W the label.
    effects = node.receive(1.2, b"W", ResubscribeRequest(72, KEY, 5, 0.3, 0.1, None))
    assert sends(effects)[0] == (b"W", SubscribeSucceeded(72, KEY, None, restart=70, origin=0.2))
    assert b"W" in node.streams[KEY].children


def test_child_whose_parent_carried_the_restarts_search_on_stays_its_child() -> None:
    """The ancestor's resubscribe came to N through W, N routed it on to its own parent B
    (B carries the same label and routes it on too), and B's success comes back: N hangs
    from B as before. Leaving its "old parent", B itself, with an Unsubscribe would name
    as parent a node that had dropped it: an orphan whose publishes B would refuse for
    ever."""
    node = child_of_b()
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.2))
    effects = node.receive(1.1, b"W", ResubscribeRequest(70, KEY, 5, 0.3, 0.1, None))
    assert relayed(effects, b"W", 70)[0] == b"B"
    effects = node.receive(1.2, b"B", SubscribeSucceeded(70, KEY, None))
    assert (b"B", Unsubscribe(KEY)) not in sends(effects)
    assert (b"W", SubscribeSucceeded(70, KEY, None)) in sends(effects)
    stream = node.streams[KEY]
    assert (stream.state, stream.parent) == (State.JOINED, b"B")
    assert set(stream.children) == {b"D", b"W"}


def test_child_that_found_a_new_root_for_its_ancestors_search_names_no_head() -> None:
    """The ancestor's resubscribe, routed on by N, made X a new root. X holds none of the
    tree's past, so N's answer names no head and the ancestor pushes up all it has. Told
    N's head, it would push nothing, and the only copy of an acknowledged packet could stay
    in the ancestor's old tree. W is still caught up from N: N holds 5, which W lacks."""
    node = child_of_b()
    for number in range(6):
        packet = SubscribeData(KEY, number, b"p%d" % number, None, DATA, None, None, number)
        node.receive(0.5, b"B", packet)
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.2))
    effects = node.receive(1.1, b"W", ResubscribeRequest(70, KEY, 5, 0.3, 0.1, 4))
    assert relayed(effects, b"W", 70)[0] == b"B"
    (hop, forwarded) = one_send(node.receive(1.2, b"B", DataNotFound(70, KEY, 4)))
    assert hop == b"X" and isinstance(forwarded, ResubscribeRequest)
    effects = node.receive(1.3, b"X", SubscribeSucceededNewRoot(70, KEY))
    to_w = [m for peer, m in sends(effects) if peer == b"W"]
    assert to_w[0] == SubscribeSucceeded(70, KEY, None)
    assert [m.packet for m in to_w[1:] if isinstance(m, SubscribeData)] == [5]
    pushed = [m.packet for peer, m in sends(effects) if peer == b"X" and isinstance(m, PublishData)]
    assert pushed == [0, 1, 2, 3, 4, 5]  # N's own window goes up to the new root too
    stream = node.streams[KEY]
    assert (stream.state, stream.parent) == (State.JOINED, b"X")
    assert b"W" in stream.children


def test_every_remembered_restart_counts_not_only_the_most_recent() -> None:
    """The spec says only the most recent SubscribeRestarted counts; but a restart that a
    newer one overtook still comes from one of our ancestors, so its resubscribe is refused
    too (accepting it would close a cycle)."""
    node = child_of_b()
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.05))
    assert node.receive(1.0, b"B", SubscribeRestarted(71, KEY, 0.05)) == [
        Send(b"D", SubscribeRestarted(71, KEY, 0.05))
    ]
    for uid, peer, at in ((70, b"W", 0.3), (71, b"X", 0.35)):
        effects = node.receive(1.1, peer, ResubscribeRequest(uid, KEY, 5, at, 0.1, None))
        assert isinstance(relayed(effects, peer, uid)[1], ResubscribeRequest)
    assert list(node.streams[KEY].children) == [b"D"]


def test_detached_subtree_takes_only_resubscribes_from_origins_farther_than_its_own() -> None:
    """Two detached subtrees must not adopt each other: one whose origin is at 0.2 takes a
    resubscribe that must beat 0.1 (its origin is closer to the key at 0.5), never one that
    must beat 0.3."""
    node = child_of_b()
    node.receive(1.0, b"B", SubscribeRestarted(70, KEY, 0.2))
    effects = node.receive(1.1, b"W", ResubscribeRequest(81, KEY, 5, 0.3, 0.3, None))
    assert isinstance(relayed(effects, b"W", 81)[1], ResubscribeRequest)
    effects = node.receive(1.2, b"X", ResubscribeRequest(82, KEY, 5, 0.35, 0.1, None))
    assert sends(effects)[0] == (b"X", SubscribeSucceeded(82, KEY, None, restart=70, origin=0.2))
    # Once the subtree is attached again (RestartEnded from B), the spec's rule alone applies.
    assert sends(node.receive(1.3, b"B", RestartEnded(70, KEY))) == [
        (b"D", RestartEnded(70, KEY)),
        (b"X", RestartEnded(70, KEY)),
    ]
    effects = node.receive(1.4, b"W", ResubscribeRequest(83, KEY, 5, 0.3, 0.3, None))
    assert sends(effects)[0] == (b"W", SubscribeSucceeded(83, KEY, None))


def test_resubscribe_is_refused_by_a_node_not_closer_than_must_beat() -> None:
    node = child_of_b()
    effects = node.receive(1.0, b"W", ResubscribeRequest(80, KEY, 5, 0.48, 0.48, None))
    (hop, forwarded) = relayed(effects, b"W", 80)
    assert hop == b"B" and isinstance(forwarded, ResubscribeRequest)
    assert b"W" not in node.streams[KEY].children


def test_parent_searching_through_its_child_is_not_adopted_by_it() -> None:
    node = child_of_b()
    effects = node.receive(1.0, b"B", SubscribeRequest(90, KEY, 5, 0.49, None))
    assert sends(effects) != [(b"B", SubscribeSucceeded(90, KEY, None))]
    assert b"B" not in node.streams[KEY].children


# --- restarts through a node's own subtree --------------------------------------------------------


def test_restarting_node_can_resubscribe_through_its_own_child() -> None:
    """Spec: "if we lose our uplink we may need to route our resubscribe request through one of
    our children; this must be handled correctly". R (root) is still reachable from B through
    its child A and Z, so the subtree must rejoin R's tree instead of forming a second one."""
    net = CoreNet(seed=3, config=NodeConfig(**NO_BEATS))
    for name, location in [(b"R", 0.5), (b"B", 0.45), (b"A", 0.3), (b"Z", 0.1)]:
        net.add(name, location)
    for a, b in [(b"R", b"B"), (b"B", b"A"), (b"A", b"Z"), (b"Z", b"R")]:
        net.connect(a, b)
    for name in (b"R", b"B", b"A"):
        net.subscribe(name, KEY)
    assert net.stream(b"A", KEY).parent == b"B"  # type: ignore[union-attr]
    net.disconnect(b"R", b"B")
    assert net.tree_problems(KEY) == []
    assert net.roots(KEY) == [b"R"]


def test_resubscribe_routed_through_the_subtree_forms_no_cycle() -> None:
    """B restarts; its ResubscribeRequest goes B -> W -> A (B's child, which rightly routes it
    on "as if it had no stream") -> Z -> R, which accepts. The tree must stay a tree."""
    net = CoreNet(seed=3, config=NodeConfig(**NO_BEATS))
    for name, location in [(b"R", 0.5), (b"B", 0.45), (b"A", 0.3), (b"Z", 0.1), (b"W", 0.35)]:
        net.add(name, location)
    for a, b in [(b"R", b"B"), (b"B", b"A"), (b"A", b"Z"), (b"Z", b"R")]:
        net.connect(a, b)
    for name in (b"R", b"B", b"A"):
        net.subscribe(name, KEY)
    net.connect(b"B", b"W")
    net.connect(b"W", b"A")
    net.disconnect(b"R", b"B")
    assert net.tree_problems(KEY) == []
    assert net.roots(KEY) == [b"R"]


def test_child_adopted_while_restarting_is_told_the_restart_uid() -> None:
    """A node that takes a new child while its own restart is under way labels it in the
    success itself, or that child may accept the resubscribe (see the next test)."""
    node = joined_node()
    [(_, restarted)] = sends(node.link_down(5.0, b"P"))
    assert isinstance(restarted, SubscribeRestarted)
    meet(node, b"E", 0.48)
    effects = node.receive(5.1, b"E", SubscribeRequest(800, KEY, 5, 0.48, None))
    assert sends(effects) == [
        (b"E", SubscribeSucceeded(800, KEY, None, restart=restarted.uid, origin=0.45)),
    ]


def test_child_adopted_while_restarting_does_not_close_a_cycle() -> None:
    """B restarts (R is gone for good); its resubscribe waits at the slow Y. Meanwhile C (closer
    than B) joins under B. The resubscribe then goes Y -> C, and C must not accept it."""
    net = CoreNet(seed=4, config=NodeConfig(**NO_BEATS))
    for name, location in [(b"R", 0.5), (b"B", 0.45), (b"Y", 0.2), (b"C", 0.48)]:
        net.add(name, location)
    for a, b in [(b"R", b"B"), (b"B", b"Y"), (b"C", b"Y")]:
        net.connect(a, b)
    net.subscribe(b"R", KEY)
    net.subscribe(b"B", KEY)
    net.hold(b"Y")
    net.disconnect(b"R", b"B")
    net.connect(b"C", b"B")
    net.subscribe(b"C", KEY)
    assert net.stream(b"C", KEY).parent == b"B"  # type: ignore[union-attr]
    net.release(b"Y")
    assert net.tree_problems(KEY) == []


# --- link loss while searches finish each other ---------------------------------------------------


def test_link_down_that_completes_a_join_does_not_touch_finished_routes() -> None:
    """N's own search and U's search both wait on P. P's link dies: N's own search has nobody
    left, so N becomes root and at once answers U's search (coalescing). The loop over routes
    waiting on P must not then backtrack U's search, which no longer exists."""
    node = make(0.45)
    meet(node, b"U", 0.49)
    meet(node, b"P", 0.3)
    uid = own_uid(node.subscribe(0.0, KEY, 1))  # to U, the closest
    assert one_send(node.receive(0.1, b"U", DataNotFound(uid, KEY, 5)))[0] == b"P"
    effects = node.receive(0.2, b"U", SubscribeRequest(77, KEY, 10, 0.49, None))
    assert relayed(effects, b"U", 77)[0] == b"P"
    effects = node.link_down(1.0, b"P")
    assert Deliver(1, Subscribed(KEY, root=True)) in effects
    # U is adopted, then labelled for N's look (``merges``), which waits for U's confirmation.
    answer, (to, label) = sends(effects)
    assert answer == (b"U", SubscribeSucceeded(77, KEY, None))
    assert to == b"U" and isinstance(label, SubscribeRestarted)
    assert node.routes == {}
    assert list(node.streams[KEY].children) == [b"U"]


# --- every hop of a search has the same deadline --------------------------------------------------


def test_silent_node_two_hops_away_does_not_cost_the_whole_branch() -> None:
    """A - B - C, B - D. C (0.48) never answers (the request was lost, or C is stuck; the link
    stays up, so heartbeats do not help); D (0.47) is the closest live node. Were every hop
    to wait the same time, A's deadline would pass one link latency before B's and A would
    give up on the whole branch. With Accepted, B tells A at once that it took the search on,
    so A waits request_timeout, while B, which never hears Accepted from C, gives up on C
    after accept_timeout and backtracks to D, which becomes root. (Latency is one second
    here, made explicit by holding B.)"""
    net = CoreNet(seed=1, config=NodeConfig(**NO_BEATS))
    for name, location in [(b"A", 0.1), (b"B", 0.3), (b"C", 0.48), (b"D", 0.47)]:
        net.add(name, location)
    for a, b in [(b"A", b"B"), (b"B", b"C"), (b"B", b"D")]:
        net.connect(a, b)
    net.hold(b"C")  # C never answers
    net.hold(b"B")
    net.subscribe(b"A", KEY)
    net.advance(1.0)
    net.release(b"B")  # B gets A's request one second after A sent it, and accepts it
    # Both still have their accept timers pending; A's search now runs to 1 + request_timeout.
    assert soon(net) == {b"A": ACCEPT, b"B": 1.0 + ACCEPT}
    [route] = net.nodes[b"A"].routes.values()
    assert route.accepted and route.deadline == 1.0 + TIMEOUT
    net.advance(ACCEPT)
    assert soon(net) == {b"A": 1.0 + TIMEOUT, b"B": 1.0 + ACCEPT}
    net.advance(1.0 + ACCEPT)  # B gives up on C: A's search is still alive
    assert net.nodes[b"B"].stats.timeouts == 1 and net.nodes[b"A"].stats.timeouts == 0
    assert net.roots(KEY) == [b"D"]
    assert net.state(b"A", KEY) is State.JOINED
    assert net.events[(b"A", 1)] == [Subscribed(KEY, root=False)]
    assert net.tree_problems(KEY) == []


def test_member_of_a_detached_subtree_moves_to_an_attached_tree_its_relay_found() -> None:
    """Refusing the success would end W's search as "nothing found" while a tree was
    found: W, closer to the key than N's origin, would number on as a second root (as in
    THREE_ROOTS in test_sim_chaos_restarts). N moves to X's tree, its subtree with it."""
    node, effects = found_beyond_a_labelled_member(SubscribeSucceeded(81, KEY, 4))
    # X's tree is attached: N's label ends in its subtree; B loses N, and W hangs below N.
    # N holds nothing, and its client and D expect packet 0: N resumes there, not after
    # X's head 4, asks X for 0..4, and names W no head (W pushes up what it holds).
    assert effects == [
        (b"D", RestartEnded(70, KEY)),
        (b"B", Unsubscribe(KEY)),
        (b"X", FillRequest(KEY, 0, 4)),
        (b"W", SubscribeSucceeded(81, KEY, None)),
    ]
    stream = node.streams[KEY]
    assert (stream.state, stream.parent) == (State.JOINED, b"X")
    assert (stream.restart_uid, stream.restart_origin) == (None, None)
    assert set(stream.children) == {b"D", b"W"}


def test_a_member_holding_nothing_that_moves_resumes_at_its_own_point() -> None:
    """N holds nothing yet, its client and child D owed packet 0 on; W's search (fresh)
    found X at head 4. N must not start X's tree at 5: X sends it nothing before 5, and its
    client would be told 0..4 were missed (as a partitioned member, moved for a resubscriber
    that had seen 29, would enter at 30 and tell its client 0..29 were missed, which the
    tree held). It resumes at 0 and asks X for 0..4."""
    node, effects = found_beyond_a_labelled_member(SubscribeSucceeded(81, KEY, 4))
    assert (b"X", FillRequest(KEY, 0, 4)) in effects
    stream = node.streams[KEY]
    assert (stream.parent, stream.next_in, stream.high) == (b"X", 0, 4)
    assert [member.cursor for member in stream.local.values()] == [0]


def test_a_member_that_moves_asks_its_new_parent_for_what_it_lacks_below_its_head() -> None:
    """W's search resumed after W's own head, 4; N holds only 0..2. The success says
    nothing of 3 and 4 to N: N asks X for them. Otherwise a member that moved below a
    parent further on would tell its subtree at the next packet that those were missed."""
    node, effects = found_beyond_a_labelled_member(SubscribeSucceeded(81, KEY, 4), held=3)
    assert (b"X", FillRequest(KEY, 3, 4)) in effects
    assert node.streams[KEY].parent == b"X"


def test_member_of_a_detached_subtree_does_not_move_below_another_detached_one() -> None:
    """X's success carries a label of its own: X's tree is detached too, and may come to
    hang below N's. N refuses the success, as before, and W's search goes on."""
    labelled = SubscribeSucceeded(81, KEY, 4, restart=90, origin=0.4)
    node, effects = found_beyond_a_labelled_member(labelled)
    # (``lost``: only N's label kept it from taking W's search, so "not found" may be
    # wrong, and W, if a looking root, looks again: ``merges``.)
    found = DataNotFound(81, KEY, MAX_HTL, lost=True)
    assert effects == [(b"X", Unsubscribe(KEY)), (b"W", found)]
    stream = node.streams[KEY]
    assert (stream.parent, stream.restart_origin) == (b"B", 0.2)
    assert set(stream.children) == {b"D"}


def test_member_whose_label_is_not_yet_confirmed_below_it_does_not_move() -> None:
    """D has not confirmed N's label when W's search leaves N: X may be in N's own subtree,
    unlabelled only because the label has not reached it yet, and moving below it would
    close a cycle. N refuses the success, as before."""
    node, effects = found_beyond_a_labelled_member(SubscribeSucceeded(81, KEY, 4), False)
    found = DataNotFound(81, KEY, MAX_HTL, lost=True)  # N's label refused it (above)
    assert effects == [(b"X", Unsubscribe(KEY)), (b"W", found)]
    stream = node.streams[KEY]
    assert (stream.parent, stream.restart_origin) == (b"B", 0.2)
    assert set(stream.children) == {b"D"}
