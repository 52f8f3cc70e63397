"""What one child can cost a stream's availability: a bounded, small delay, never a freeze.

A hostile peer can join a stream as the root's child at will. Dropping its link makes the
root hold numbering while it looks for a tree the lost subtree may make (``merges``). Each
test drives the tree of ``test_publishing`` (root R, children B and E; A and D below B)
plus a hostile child H of R, with explicit times.
"""

from __future__ import annotations

from corenet import CoreNet, key_at
from nodes import make, meet
from publish_tree import KEY, packets, place, tree

from overlay.core.child_drops import LIMIT, WINDOW, ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import DropPeer
from overlay.core.events import PublishAcked
from overlay.messages import Hello, SubscribeRequest

H = b"H"
CONFIG = NodeConfig()


def with_hostile_child() -> CoreNet:
    """The tree, one packet published and delivered, and H (linked to R only) a child of R."""
    net = tree()
    net.publish(b"A", KEY, b"first", uid=100)
    net.add(H, (place(KEY, b"E") - 0.01) % 1.0)
    net.connect(H, b"R")
    net.subscribe(H, KEY)
    root = net.stream(b"R", KEY)
    assert root is not None and H in root.children
    net.advance(net.now + 2 * CONFIG.takeover_grace)  # past the new tree's first look
    return net


def acked(net: CoreNet, name: bytes) -> list[int]:
    return [e.number for e in net.answers(name) if isinstance(e, PublishAcked)]


def test_a_child_dropping_its_link_holds_numbering_only_for_the_short_grace() -> None:
    """H drops its link to the root. Its subtree (if it had one) saw the close at the same
    moment, so the root holds numbering for ``lost_child_grace``, looks (nothing else is
    there) and numbers: a publish made just after the drop is acknowledged and delivered
    within that grace and a look's round trips, not after ``takeover_grace``."""
    net = with_hostile_child()
    dropped = net.now
    net.disconnect(H, b"R")
    net.publish(b"A", KEY, b"after the drop", uid=101)
    assert acked(net, b"A") == [0]  # held while the root looks
    net.advance(dropped + CONFIG.lost_child_grace + 0.1)
    assert acked(net, b"A") == [0, 1]
    assert packets(net, b"E")[-1] == (1, b"after the drop")
    assert CONFIG.lost_child_grace + 0.1 < CONFIG.takeover_grace / 5


def test_a_child_lost_to_silence_still_holds_for_the_takeover_grace() -> None:
    """A child found dead by liveness may be noticed by its own children a heartbeat
    interval later than by the root: the root holds for the whole ``takeover_grace``."""
    net = with_hostile_child()
    net.links.discard(frozenset((H, b"R")))  # cut without a close: neither end is told
    silent_from = net.now
    root = net.stream(b"R", KEY)
    assert root is not None
    while H in root.children:
        net.advance(net.now + CONFIG.heartbeat_interval)
        assert net.now - silent_from < 4 * CONFIG.dead_after, "H never declared dead"
    lost = net.now
    net.publish(b"A", KEY, b"after the silence", uid=101)
    net.advance(lost + CONFIG.takeover_grace / 2)
    assert acked(net, b"A") == [0]
    net.advance(lost + CONFIG.takeover_grace + 1.0)
    assert acked(net, b"A") == [0, 1]


def test_a_child_that_keeps_joining_and_dropping_its_link_is_cut_off() -> None:
    """Each time H joins and drops its link, R holds numbering for the short grace. After
    ``LIMIT`` such holds within ``WINDOW``, H's next request to join is answered by cutting
    it off (a fault, which the runtime logs and refuses for a cooldown)."""
    net = with_hostile_child()
    for _ in range(LIMIT):
        net.disconnect(H, b"R")
        net.advance(net.now + CONFIG.lost_child_grace + 1.0)
        net.connect(H, b"R")
        net.subscribe(H, KEY)
    [(at, drop)] = [(name, d) for name, d in net.dropped if d.peer == H]
    assert at == b"R" and drop.fault and f"{LIMIT} times" in drop.reason
    root = net.stream(b"R", KEY)
    assert root is not None and H not in root.children


def test_a_child_that_drops_its_link_again_before_the_hold_ends_is_counted_too() -> None:
    """H joins and drops its link ``LIMIT`` times, each within the hold the one before
    brought on (a join and a drop take H a few milliseconds, the hold and look a second):
    each drop makes the root look again, so each counts, and H's next request to join
    cuts it off as if it had waited for each hold to end."""
    net = with_hostile_child()
    for _ in range(LIMIT):
        net.disconnect(H, b"R")
        net.advance(net.now + 0.01)
        net.connect(H, b"R")
        net.subscribe(H, KEY)
    [(at, drop)] = [(name, d) for name, d in net.dropped if d.peer == H]
    assert at == b"R" and drop.fault and f"{LIMIT} times" in drop.reason


def test_a_child_on_several_streams_whose_link_drops_once_may_join_again() -> None:
    """N roots ``LIMIT`` streams, and H is its child on each. H's link closes once (its node
    restarted): one drop, not one per stream, so H's requests to join again are taken,
    not answered by cutting it off."""
    keys = [key_at(0.5, tag=10 + i) for i in range(LIMIT)]
    node = make()
    meet(node, H, 0.2)
    for i, key in enumerate(keys):
        node.subscribe(0.0, key, 1)
        node.receive(0.1, H, SubscribeRequest(300 + i, key, 5, 0.2, None))
        assert H in node.streams[key].children
    node.link_down(1.0, H)
    node.link_up(1.1, H)
    node.receive(1.1, H, Hello(0.2, 101))  # (a new boot: the restarted node)
    effects = node.receive(1.2, H, SubscribeRequest(400, keys[0], 5, 0.2, None))
    assert not [e for e in effects if isinstance(e, DropPeer)]
    assert H in node.streams[keys[0]].children


def test_holds_older_than_the_window_are_forgiven() -> None:
    drops = ChildDrops()
    for at in (0.0, 1.0):
        drops.dropped(at, H)
    assert drops.too_many(2.0, H) is None
    drops.dropped(2.0, H)
    assert drops.too_many(2.0, H) == LIMIT
    assert drops.too_many(WINDOW + 1.5, H) is None  # the first two have aged out
    assert drops.too_many(0.0, b"other") is None
