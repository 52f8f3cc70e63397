"""A root holds new publishes back while its window holds only uncommitted packets
(``overlay.core.backlog``), so members, which show only what it committed, never lose a
packet out of their windows before they may show it.

N (0.45) is root of KEY for its local client 1, with children C1 and C2, and a window of
four packets: with nothing committed it numbers four and holds the fifth back.
"""

from __future__ import annotations

from corenet import CoreNet, key_at
from test_node import KEY, make, meet, sends

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect
from overlay.core.events import Missed, Packet, PublishAcked, PublishFailed, Subscribed
from overlay.core.node import Node
from overlay.core.streams import State
from overlay.messages import (
    Held,
    PacketKind,
    PublishData,
    PublishError,
    PublishRejected,
    SubscribeData,
    SubscribeRequest,
    SubscribeSucceeded,
)

UID = 100
WINDOW = 4
QUEUE = 3


def root(**config: object) -> Node:
    config.setdefault("window_packets", WINDOW)
    config.setdefault("max_queued_publishes", QUEUE)
    node = make(**config)
    assert node.subscribe(0.0, KEY, 1) == [Deliver(1, Subscribed(KEY, root=True))]
    for i, child in enumerate((b"C1", b"C2")):
        meet(node, child, 0.2, boot_id=200 + i)
        effects = node.receive(0.0, child, SubscribeRequest(300 + i, KEY, 5, 0.2, None))
        assert sends(effects) == [(child, SubscribeSucceeded(300 + i, KEY, None))]
    return node


def down(effects: list[Effect]) -> list[int]:
    """The packet numbers sent to C1."""
    return [
        m.packet for peer, m in sends(effects) if peer == b"C1" and isinstance(m, SubscribeData)
    ]


def acked(effects: list[Effect]) -> list[int]:
    return [
        e.event.number
        for e in effects
        if isinstance(e, Deliver) and isinstance(e.event, PublishAcked)
    ]


def publish(node: Node, uid: int, now: float = 1.0) -> list[Effect]:
    return node.publish(now, KEY, 1, uid, b"p%d" % uid)


def held(node: Node, upto: int, now: float = 1.1) -> list[Effect]:
    """Both children say they hold everything up to ``upto``."""
    return node.receive(now, b"C1", Held(KEY, upto)) + node.receive(now, b"C2", Held(KEY, upto))


def test_a_root_whose_window_is_all_uncommitted_holds_the_next_publish_back() -> None:
    node = root()
    sent: list[int] = []
    for n in range(WINDOW + 2):
        sent += down(publish(node, UID + n))
    stream = node.streams[KEY]
    assert sent == [0, 1, 2, 3]
    assert list(stream.backlog) == [UID + 4, UID + 5]
    assert node.stats.held_back == 2 and stream.next_in == 4


def test_a_commit_lets_the_backlog_go_on_in_order_as_far_as_there_is_room() -> None:
    node = root()
    for n in range(WINDOW + 3):
        publish(node, UID + n)
    effects = held(node, 1)  # 0 and 1 committed: room for two more
    assert down(effects) == [4, 5]
    assert acked(effects) == [0, 1]
    stream = node.streams[KEY]
    assert list(stream.backlog) == [UID + 6]
    effects = held(node, 5, now=1.2)
    assert down(effects) == [6] and not stream.backlog
    assert node.flow.backlogged == {}


def test_a_new_publish_waits_behind_the_backlog_though_the_window_has_room() -> None:
    # Each publisher's packets keep their order: 6 may not overtake 4 and 5, though the
    # window has room when it comes (the commit moved, and no event let the backlog on).
    node = root()
    for n in range(WINDOW + 2):
        publish(node, UID + n)
    stream = node.streams[KEY]
    stream.committed = 1
    effects = publish(node, UID + 6)
    assert stream.uids is not None and stream.uids[UID + 4] == 4
    sent = down(effects)
    assert sent[0] == 4 and sent == [4, 5, 6][: len(sent)]
    assert list(stream.backlog) == [UID + 4, UID + 5, UID + 6][len(sent) :]


def test_a_retry_of_a_numbered_publish_is_answered_at_once() -> None:
    node = root()
    for n in range(WINDOW + 1):
        publish(node, UID + n)
    data = PublishData(UID + 2, KEY, None, 0.2, 10, b"p", None, PacketKind.DATA, None)
    effects = node.receive(1.0, b"C1", data)
    # Answered once another branch holds it, as any child's publish (``commits``): not
    # held back behind the backlog, which would leave it waiting for room it never needs.
    assert [m for _, m in sends(effects) if isinstance(m, PublishRejected)] == []
    assert UID + 2 not in node.streams[KEY].backlog


def test_past_max_queued_publishes_a_publish_is_refused_busy() -> None:
    node = root()
    for n in range(WINDOW + QUEUE):
        publish(node, UID + n)
    effects = publish(node, UID + 99)
    failed = [
        e.event for e in effects if isinstance(e, Deliver) and isinstance(e.event, PublishFailed)
    ]
    assert [(f.uid, f.error) for f in failed] == [(UID + 99, PublishError.BUSY)]
    assert len(node.streams[KEY].backlog) == QUEUE


def test_a_resend_of_a_held_back_publish_is_held_once() -> None:
    node = root()
    for n in range(WINDOW + 1):
        publish(node, UID + n)
    data = PublishData(UID + 50, KEY, None, 0.2, 10, b"p", None, PacketKind.DATA, None)
    node.receive(1.0, b"C1", data)
    node.receive(1.5, b"C1", data)
    assert list(node.streams[KEY].backlog) == [UID + 4, UID + 50]


def test_a_root_that_begins_a_grace_passes_its_backlog_to_the_queue() -> None:
    node = root()
    for n in range(WINDOW + 1):
        publish(node, UID + n)
    meet(node, b"W", 0.3)
    # W has seen up to 9: the root holds numbering for a grace, and what waited for room
    # waits for the grace's end with everything else.
    node.receive(1.0, b"W", SubscribeRequest(9, KEY, 5, 0.3, 9))
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.recover_until is not None
    assert not stream.backlog
    assert [m.uid for _, m in stream.queued] == [UID + 4]


def test_without_a_commit_bound_nothing_is_held_back() -> None:
    # No child: nobody to wait for, so each packet is committed as it is numbered.
    node = make(window_packets=WINDOW)
    node.subscribe(0.0, KEY, 1)
    numbers: list[int] = []
    for n in range(WINDOW * 2):
        numbers += acked(publish(node, UID + n))
    assert numbers == list(range(WINDOW * 2))
    assert node.stats.held_back == 0


def test_over_real_cores_a_burst_four_windows_long_reaches_a_member_whole() -> None:
    # The forwarding bench with ``--window 4096`` (windows of 1024) in small: the root's
    # client publishes 64 packets before its child has processed any, windows of 16. Each
    # packet is shown at the child only once the root commits it, so without a bound on
    # how far the root runs ahead the child's window let go of packets before it could
    # show them, and its client was told they were missed.
    net = CoreNet(seed=1, config=NodeConfig(window_packets=16, max_queued_publishes=64))
    net.add(b"R", 0.5)
    net.add(b"S", 0.9)
    net.connect(b"R", b"S")
    key = key_at(0.5)
    net.subscribe(b"S", key)
    for n in range(64):
        net._apply(b"R", net.nodes[b"R"].publish(net.now, key, 7, 100 + n, b"p%d" % n))
    net.run()
    got = net.received(b"S")
    assert [e.number for e in got if isinstance(e, Packet)] == list(range(64))
    assert not [e for e in got if isinstance(e, Missed)]
    assert net.nodes[b"R"].stats.held_back > 0
