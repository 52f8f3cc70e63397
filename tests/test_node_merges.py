"""Looking again (``overlay.core.merges``): a root that took over a tree looks for another tree
of its stream when its takeover grace ends, before it numbers anything, and joins it if one
is there; and an attached root takes any resubscribe (``must_beat.may_accept``).

The split scene is ``test_takeover``'s drawn tree: R (0.5) is the root; its link to X (0.47)
breaks while C (0.3) is slow, so X's restart search dies at C and X becomes root of its own
subtree (X, E) beside R's (R, C, A). Without a look, both would stay roots for good.
"""

from __future__ import annotations

from looking_roots import new_root_looking, not_found
from nodes import MAX_HTL, joined_node, make, meet, sends
from takeovers import (
    ACCEPT,
    GRACE,
    KEY,
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

from overlay.core.probes import _settled_root
from overlay.core.streams import State
from overlay.messages import (
    DataNotFound,
    Hello,
    Message,
    ResubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
)


def test_a_split_from_a_takeover_beside_the_root_is_mended_by_the_first_look() -> None:
    """R lost its child X, so R held numbering and looked when that hold ended (``merges``:
    a root that loses a child): its search, labelled so that its own C routes it on, went
    to X, a root not looking, which takes any. C hangs from X's side and R below C: one
    tree, one numbering. (Before roots looked on losing a child, X's look at its own
    grace end mended it the other way round.)"""
    net, _, _ = taken_over_by_a_restart()
    assert net.roots(KEY) == [X] and net.tree_problems(KEY) == []
    assert carried(net, R).state is State.JOINED
    stats = net.nodes[R].stats
    assert (stats.looks, stats.merges) == (2, 1)  # the first as a new tree, found nothing
    assert all(carried(net, n).restart_uid is None for n in (X, E, C, A, R))
    # One numbering: X's next publish reaches both sides under the same number.
    net.advance(net.now + 2 * GRACE)
    net.publish(X, KEY, b"after", uid=999)
    for name in (E, A):
        assert seen(net, name) == [*((n, OLD[n]) for n in range(3)), (3, b"after")]


def test_a_root_alone_looks_once_finds_nothing_and_numbers_then() -> None:
    """R's whole tree loses R; X, closest, takes over. Its look at the grace's end finds
    no other tree, so it stays root, ends the labels and numbers what waited."""
    net = tree()
    for n in range(3):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    lose_root(net, "at once")
    assert net.roots(KEY) == [R, X]  # R, cut off, is root of nothing
    net.publish(A, KEY, b"waits", uid=300)
    assert acked(net, A) == {}
    stream = carried(net, X)
    net.advance(stream.root.recover_until or 0.0)
    assert stream.state is State.ROOT and stream.root.looking is None
    assert net.nodes[X].stats.looks == 1 and net.nodes[X].stats.merges == 0
    assert acked(net, A) == {300: 3}
    assert all(carried(net, n).restart_uid is None for n in (X, E, C, A))
    # Once per takeover: the next grace end (there is none) and later timers look no more.
    net.advance(net.now + 10 * GRACE)
    assert net.nodes[X].stats.looks == 1


def test_a_look_lost_beyond_a_broken_link_is_repeated_after_a_pause() -> None:
    """A look may reach a closer root whose success is dropped with a link on the way back;
    the relay backtracks and the look comes back "not found". Taken as final, that leaves
    two roots numbering side by side. A look that comes back ``lost`` is repeated,
    numbering held."""
    node = make(0.45)
    meet(node, b"P", 0.2)
    node.subscribe(0.0, KEY, 1)
    node.handle_timer(ACCEPT)  # the search dies at P: N is root, and looks
    stream = node.streams[KEY]
    look = stream.root.looking
    assert stream.state is State.ROOT and look is not None
    node.receive(ACCEPT + 0.1, b"P", DataNotFound(look, KEY, 3, lost=True))
    assert stream.state is State.ROOT and stream.root.looking is None
    assert stream.root.look_due and stream.root.recover_until is not None  # numbering still held
    node.handle_timer(stream.root.recover_until)
    assert stream.root.looking not in (None, look) and node.stats.looks == 2
    # The same answer without ``lost``: the look found nothing, and numbering goes on.
    node.receive(stream.root.recover_until, b"P", DataNotFound(stream.root.looking, KEY, 3))
    assert (
        stream.root.looking is None
        and not stream.root.look_due
        and stream.root.recover_until is None
    )


def test_an_attached_root_takes_a_resubscribe_whatever_its_must_beat() -> None:
    """It has no parent, so it is nobody's descendant: adopting closes no cycle."""
    node = make(0.45)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.49)
    node.subscribe(0.0, KEY, 1)
    node.handle_timer(ACCEPT)
    node.handle_timer(2 * ACCEPT)  # the search dies at both peers: N is root
    node.handle_timer(3 * ACCEPT)
    node.handle_timer(4 * ACCEPT)  # and so does its look for another tree
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.root.looking is None
    # Q (0.49) is closer to the key than we are; the spec's rule alone would send it on.
    effects = node.receive(20.0, b"Q", ResubscribeRequest(7, KEY, MAX_HTL, 0.49, 0.49, None))
    assert sends(effects) == [(b"Q", SubscribeSucceeded(7, KEY, None))]
    assert list(stream.children) == [b"Q"]


def test_a_root_that_is_looking_takes_only_farther_origins() -> None:
    """While it looks, a root is a detached subtree's top like any restarting node: two
    looking roots must not adopt each other (``restarts``, race 3)."""
    node = make(0.45)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.49)
    node.subscribe(0.0, KEY, 1)
    node.handle_timer(ACCEPT)
    node.handle_timer(2 * ACCEPT)  # the search dies at both peers: N is root
    node.handle_timer(3 * ACCEPT)
    node.handle_timer(4 * ACCEPT)  # and so does its look for another tree
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.root.looking is None
    stream.restart_uid, stream.restart_origin = 55, 0.45  # as ``_look_first`` labels it
    effects = node.receive(20.0, b"Q", ResubscribeRequest(7, KEY, MAX_HTL, 0.49, 0.49, None))
    assert (b"Q", SubscribeSucceeded(7, KEY, None)) not in sends(effects)
    effects = node.receive(20.0, b"P", ResubscribeRequest(8, KEY, MAX_HTL, 0.2, 0.2, None))
    assert sends(effects)[0][1] == SubscribeSucceeded(8, KEY, None, None, (), 55, 0.45)


def test_a_member_that_its_label_makes_refuse_a_look_says_not_found_may_be_wrong() -> None:
    """Two roots that took over from one dead root may look at the same moment, each look
    refused by the other tree's labelled members; if neither has a closer peer outside its
    own tree, a plain "not found" leaves both numbering side by side. N (0.45), a member
    of a tree whose farther root (0.35) is looking, would take the look of a root at 0.4
    but for that label: the "not found" it sends back is marked ``lost``, and the looking
    root looks again after a pause, once the labels are off
    (``test_a_look_lost_beyond_a_broken_link_is_repeated_after_a_pause``)."""
    node = joined_node()  # N (0.45): parent P (0.49), child C (0.2), spare peer Q (0.4)
    node.receive(1.0, b"P", SubscribeRestarted(55, KEY, 0.35))  # our root looks
    effects = node.receive(1.1, b"Q", ResubscribeRequest(UID, KEY, MAX_HTL, 0.4, 0.4, 3))
    assert not any(isinstance(m, SubscribeSucceeded) for _, m in sends(effects))
    (ahead,) = [p for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    effects = node.receive(1.2, ahead, DataNotFound(UID, KEY, 0))
    assert sends(effects) == [(b"Q", DataNotFound(UID, KEY, 0, lost=True))]
    # Our own root's look, which the label is for, comes back a plain "not found".
    effects = node.receive(1.3, b"Q", ResubscribeRequest(55, KEY, MAX_HTL, 0.35, 0.35, 3))
    (ahead,) = [p for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    effects = node.receive(1.4, ahead, DataNotFound(55, KEY, 0))
    assert sends(effects) == [(b"Q", DataNotFound(55, KEY, 0))]


def test_a_looking_root_that_refuses_a_closer_look_says_not_found_may_be_wrong() -> None:
    """Two children of a dead root may each become root of a split and look at once. The
    farther one, which takes any look once its own is over, refuses the closer one's look
    only for its label; a plain "not found" ends that look, and if the farther one's look
    never reaches the other tree, both number side by side. N (0.45), a root looking under
    its own label, is farther from the key (0.5) than a look's must-beat (0.48): the "not
    found" it sends back is marked ``lost``, so the closer root looks again once N's labels
    are off, and N, a root again, takes it."""
    node = make(0.45)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.49)
    node.subscribe(0.0, KEY, 1)
    for n in range(1, 5):
        node.handle_timer(n * ACCEPT)  # the search and the look die at both peers: root
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.root.looking is None
    stream.restart_uid, stream.restart_origin = 55, 0.45  # as ``Merges.start_look`` labels it
    effects = node.receive(20.0, b"P", ResubscribeRequest(7, KEY, MAX_HTL, 0.48, 0.48, None))
    assert not any(isinstance(m, SubscribeSucceeded) for _, m in sends(effects))
    (ahead,) = [p for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    effects = node.receive(20.1, ahead, DataNotFound(7, KEY, 0))
    assert sends(effects) == [(b"P", DataNotFound(7, KEY, 0, lost=True))]


def test_a_root_that_hands_off_mid_look_and_stays_root_looks_again() -> None:
    """N (0.45) is root and its look is out at Q when a closer peer C (0.48) links: N
    restarts to hand the tree on (spec: "when a new node is added"), and the restart's label
    replaces the look's, so the look is over. C's link drops, P and Q find nothing, N takes
    its tree over again, and at the takeover's grace it looks anew, then settles. Kept as
    running, the old look would end as lost at that grace with the takeover's look still
    due and never started: a root that neither looks nor probes again, numbering beside
    any closer root it missed."""
    node, look = new_root_looking()
    stream = node.streams[KEY]
    node.link_up(1.0, b"C")
    [(peer, search)] = looks(sends(node.receive(1.0, b"C", Hello(0.48, 100))))
    assert peer == b"C" and search.uid != look.uid
    assert stream.state is State.RESTARTING and stream.root.looking is None
    node.receive(1.1, b"Q", not_found(look))  # the old look's search ends: it found nothing
    assert looks(sends(node.link_down(1.2, b"C"))) == [(b"Q", search)]
    node.receive(1.3, b"Q", not_found(search))  # no budget left: nobody closer
    assert stream.state is State.ROOT and stream.root.look_due
    grace = stream.root.recover_until
    assert grace is not None
    [(peer, again)] = looks(sends(node.handle_timer(grace)))
    assert again.uid not in (look.uid, search.uid) and again.must_beat == 0.45
    assert stream.root.looking == again.uid and not stream.root.look_due
    for peer in (b"Q", b"P"):
        node.receive(grace + 0.1, peer, not_found(again))
    assert _settled_root(stream)


def looks(out: list[tuple[bytes, Message]]) -> list[tuple[bytes, ResubscribeRequest]]:
    return [(p, m) for p, m in out if isinstance(m, ResubscribeRequest)]
