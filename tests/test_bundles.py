"""A ``Bundle`` in the core: several publish-path messages of one stream in one frame mean
exactly those messages, handled in order as if each had come alone; none after one that
gets its sender cut off."""

from __future__ import annotations

from publish_tree import KEY, SUBSCRIBERS, packets, publish_data, tree, window
from signed_streams import DATA, SKEY, sign, signed_tree

from overlay.core.config import NodeConfig
from overlay.core.effects import Send
from overlay.messages import (
    MAX_WIRE_HTL,
    Bundle,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
)

# The root sends a publish down as soon as it numbers it: these tests look at the order
# and the answers, not at the publisher's confirmation (``test_confirming``).
UNCONFIRMED = NodeConfig(confirm_publishes=False)
PAYLOADS = (b"one", b"two", b"three")


def test_a_bundle_of_publishes_from_a_child_is_numbered_as_those_publishes_in_order() -> None:
    # Leaf A sends relay B three publishes in one Bundle; B passes them up to root R.
    bundled = tree(config=UNCONFIRMED)
    publishes = [publish_data(uid, data=d) for uid, d in zip((1, 2, 3), PAYLOADS, strict=True)]
    bundled.inject(b"A", b"B", Bundle(tuple(publishes)))
    alone = tree(config=UNCONFIRMED)
    for publish in publishes:
        alone.inject(b"A", b"B", publish)
    expected = [(0, b"one"), (1, b"two"), (2, b"three")]
    for net in (bundled, alone):
        for name in SUBSCRIBERS:
            assert packets(net, name) == expected
        answers = [m for s, d, m in net.sent(PublishSucceeded) if (s, d) == (b"B", b"A")]
        assert [(m.uid, m.packet) for m in answers] == [(1, 0), (2, 1), (3, 2)]
    assert bundled.nodes[b"B"].stats.received < alone.nodes[b"B"].stats.received


def test_a_bundle_stops_at_the_message_that_gets_its_sender_cut_off() -> None:
    # A's bundle to B holds a forged publish, then a genuinely signed one: B cuts A off at
    # the forgery and handles nothing more A sent in that frame.
    net = signed_tree()
    forged = PublishData(7, SKEY, 0, 0.1, MAX_WIRE_HTL, b"evil", None, DATA, sign(0, b"good"))
    genuine = PublishData(8, SKEY, 0, 0.1, MAX_WIRE_HTL, b"good", None, DATA, sign(0, b"good"))
    mark = len(net.trace)
    net.inject(b"A", b"B", Bundle((forged, genuine)))
    assert [(name, drop.peer) for name, drop in net.dropped] == [(b"B", b"A")]
    assert net.trace[mark + 1 :] == [] and window(net, b"R", SKEY) == []


def _numbered_after_a_grace(bundled: bool) -> list[tuple[int, int]]:
    """Root R with a full window (four packets) holds B's publishes 5 and 6 in its backlog;
    B then sends a member's push past R's head (which starts a takeover grace) and a new
    publish 7, in one Bundle or one by one. (uid, number) of each PublishNumbered R sends
    when the grace ends."""
    net = tree(config=NodeConfig(window_packets=4))
    root, stream = net.nodes[b"R"], net.stream(b"R", KEY)
    assert stream is not None and stream.root is not None
    for uid in range(1, 7):
        root.receive(0.0, b"B", publish_data(uid))
    assert list(stream.root.backlog) == [5, 6]
    push = publish_data(100, packet=stream.next_in + 2, pushed=True)
    later = publish_data(7)
    if bundled:
        root.receive(0.0, b"B", Bundle((push, later)))
    else:
        root.receive(0.0, b"B", push)
        root.receive(0.0, b"B", later)
    assert stream.root.recover_until is not None
    effects = root.handle_timer(stream.root.recover_until)
    return [
        (e.message.uid, e.message.packet)
        for e in effects
        if type(e) is Send and type(e.message) is PublishNumbered
    ]


def test_a_publish_bundled_behind_a_push_does_not_overtake_the_backlog() -> None:
    # Between a bundle's messages the root ends an event as between lone ones, so its
    # backlog drains before the next publish of the bundle waits in the grace: B's
    # publishes keep their order, 5 and 6 first, as when they come alone. (The push names
    # 2: B's 4, pending as 3 above it, keeps its number, set aside, and goes down as the
    # grace ends; 7 waits behind 5 and 6 for room in the window.)
    assert _numbered_after_a_grace(bundled=True) == [(5, 4), (6, 5)]
    assert _numbered_after_a_grace(bundled=False) == [(5, 4), (6, 5)]
