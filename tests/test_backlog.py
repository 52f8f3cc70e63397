"""A root holds new publishes back while its window holds only uncommitted packets
(``overlay.core.backlog``), so members, which show only what it committed, never lose a
packet out of their windows before they may show it.

N (0.45) is root of KEY for its local client 1, with children C1 and C2, and a window of
four packets: with nothing committed it numbers four and holds the fifth back.
"""

from __future__ import annotations

from corenet import CoreNet, key_at
from flowkit import Calls, Kit, store
from flowkit import publish as flow_publish
from nodes import KEY, make, meet, sends

from overlay.codec import decode, encode
from overlay.core.backlog import Backlog
from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect
from overlay.core.events import Missed, Packet, PublishAcked, PublishFailed, Subscribed
from overlay.core.local_publishes import LocalPublish
from overlay.core.node import Node
from overlay.core.streams import State, Stream
from overlay.messages import (
    Held,
    PacketKind,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    SubscribeData,
    SubscribeRequest,
    SubscribeSucceeded,
    Unsubscribe,
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
    assert list(stream.root.backlog) == [UID + 4, UID + 5]
    assert node.stats.held_back == 2 and stream.next_in == 4


def test_a_commit_lets_the_backlog_go_on_in_order_as_far_as_there_is_room() -> None:
    node = root()
    for n in range(WINDOW + 3):
        publish(node, UID + n)
    effects = held(node, 1)  # 0 and 1 committed: room for two more
    assert down(effects) == [4, 5]
    assert acked(effects) == [0, 1]
    stream = node.streams[KEY]
    assert list(stream.root.backlog) == [UID + 6]
    effects = held(node, 5, now=1.2)
    assert down(effects) == [6] and not stream.root.backlog
    assert node.flow.backlog.backlogged == {}


def test_a_new_publish_waits_behind_the_backlog_though_the_window_has_room() -> None:
    # Each publisher's packets keep their order: 6 may not overtake 4 and 5, though the
    # window has room when it comes (the commit moved, and no event let the backlog on).
    node = root()
    for n in range(WINDOW + 2):
        publish(node, UID + n)
    stream = node.streams[KEY]
    stream.root.committed = 1
    effects = publish(node, UID + 6)
    assert stream.uids is not None and stream.uids[UID + 4] == 4
    sent = down(effects)
    assert sent[0] == 4 and sent == [4, 5, 6][: len(sent)]
    assert list(stream.root.backlog) == [UID + 4, UID + 5, UID + 6][len(sent) :]


def test_a_retry_of_a_numbered_publish_is_answered_at_once() -> None:
    node = root()
    for n in range(WINDOW + 1):
        publish(node, UID + n)
    retry = b"p%d" % (UID + 2)  # what the first publish of UID + 2 held
    data = PublishData(UID + 2, KEY, None, 0.2, 10, retry, None, PacketKind.DATA, None)
    effects = node.receive(1.0, b"C1", data)
    # Answered once another branch holds it, as any child's publish (``commits``): not
    # held back behind the backlog, which would leave it waiting for room it never needs.
    assert [m for _, m in sends(effects) if isinstance(m, PublishRejected)] == []
    assert UID + 2 not in node.streams[KEY].root.backlog


def test_past_max_queued_publishes_a_publish_is_refused_busy() -> None:
    node = root()
    for n in range(WINDOW + QUEUE):
        publish(node, UID + n)
    effects = publish(node, UID + 99)
    failed = [
        e.event for e in effects if isinstance(e, Deliver) and isinstance(e.event, PublishFailed)
    ]
    assert [(f.uid, f.error) for f in failed] == [(UID + 99, PublishError.BUSY)]
    assert len(node.streams[KEY].root.backlog) == QUEUE


def test_a_resend_of_a_held_back_publish_is_held_once() -> None:
    node = root()
    for n in range(WINDOW + 1):
        publish(node, UID + n)
    data = PublishData(UID + 50, KEY, None, 0.2, 10, b"p", None, PacketKind.DATA, None)
    node.receive(1.0, b"C1", data)
    node.receive(1.5, b"C1", data)
    assert list(node.streams[KEY].root.backlog) == [UID + 4, UID + 50]


def test_a_root_that_begins_a_grace_passes_its_backlog_to_the_queue() -> None:
    node = root()
    for n in range(WINDOW + 1):
        publish(node, UID + n)
    meet(node, b"W", 0.3)
    # W has seen up to 9: the root holds numbering for a grace, and what waited for room
    # waits for the grace's end with everything else.
    node.receive(1.0, b"W", SubscribeRequest(9, KEY, 5, 0.3, 9))
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.root.recover_until is not None
    assert not stream.root.backlog
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


def burst(publisher: bytes, count: int, window: int) -> CoreNet:
    """Root R (0.5) with subscriber S below it, and P (a child publishing) if it is the
    publisher: ``publisher``'s client 7 publishes ``count`` packets at once."""
    net = CoreNet(seed=1, config=NodeConfig(window_packets=window, max_queued_publishes=64))
    net.add(b"R", 0.5)
    net.add(b"S", 0.9)
    net.connect(b"R", b"S")
    if publisher == b"P":
        net.add(b"P", 0.1)
        net.connect(b"R", b"P")
    key = key_at(0.5)
    net.subscribe(b"S", key)
    node = net.nodes[publisher]
    for n in range(count):
        net._apply(publisher, node.publish(net.now, key, 7, 100 + n, b"p%d" % n))
    net.run()
    return net


def assert_whole(net: CoreNet, count: int) -> None:
    """S's client was shown packets 0..count-1, each once, and told of no gap."""
    got = net.received(b"S")
    assert [e.number for e in got if isinstance(e, Packet)] == list(range(count))
    assert not [e for e in got if isinstance(e, Missed)]


def test_over_real_cores_a_burst_four_windows_long_reaches_a_member_whole() -> None:
    # The forwarding bench with ``--window 4096`` (windows of 1024) in small: the root's
    # client publishes 64 packets before its child has processed any, windows of 16. Each
    # packet is shown at the child only once the root commits it, so without a bound on
    # how far the root runs ahead the child's window let go of packets before it could
    # show them, and its client was told they were missed.
    net = burst(b"R", 64, window=16)
    assert_whole(net, 64)
    assert net.nodes[b"R"].stats.held_back > 0


# --- with the publisher's node confirming (``confirming``) ------------------------------------


def peer_publish(uid: int, data: bytes = b"x") -> PublishData:
    return PublishData(uid, KEY, None, 0.2, 10, data, None, PacketKind.DATA, None)


def test_numbers_pending_a_confirmation_count_against_the_window() -> None:
    # A child's publishes wait in ``pending`` until its node confirms them and reach the
    # window only then: counting the window alone, the root numbered three windows of
    # them with nothing committed.
    node = root(max_queued_publishes=64)
    numbered: list[int] = []
    for n in range(3 * WINDOW):
        effects = node.receive(1.0, b"C1", peer_publish(700 + n))
        numbered += [m.packet for _, m in sends(effects) if isinstance(m, PublishNumbered)]
    assert numbered == list(range(WINDOW))
    assert len(node.streams[KEY].root.backlog) == 2 * WINDOW


def test_over_real_cores_a_peer_publishers_burst_reaches_a_member_whole() -> None:
    net = burst(b"P", 40, window=4)
    for t in range(1, 40):
        net.advance(t * 5.0)
    acked = sorted(e.number for e in net.events.get((b"P", 7), []) if isinstance(e, PublishAcked))
    assert acked == list(range(40))
    assert_whole(net, 40)


def test_a_held_back_publish_from_a_child_that_left_is_dropped_not_numbered() -> None:
    # Numbered, it would wait in ``pending`` for a confirmation that can only come through
    # the child that left, and hold every packet after it for ``confirm_timeout``.
    node = root(max_queued_publishes=8)
    for n in range(WINDOW):
        publish(node, UID + n)
    stream = node.streams[KEY]
    node.receive(1.0, b"C1", peer_publish(500))
    assert list(stream.root.backlog) == [500]
    node.receive(1.1, b"C1", Unsubscribe(KEY))
    effects = node.receive(1.2, b"C2", Held(KEY, 3))
    assert [m for _, m in sends(effects) if isinstance(m, PublishNumbered)] == []
    effects = publish(node, UID + 10, now=1.3)
    assert [m.packet for p, m in sends(effects) if p == b"C2" and isinstance(m, SubscribeData)] == [
        4
    ]


def test_a_resend_through_another_child_is_answered_the_way_it_came_last() -> None:
    # The publisher's node moved under C2; a number sent through C1 would be lost.
    node = root(max_queued_publishes=8)
    for n in range(WINDOW):
        publish(node, UID + n)
    node.receive(1.0, b"C1", peer_publish(500))
    node.receive(2.0, b"C2", peer_publish(500))
    effects = node.receive(2.1, b"C1", Held(KEY, 3)) + node.receive(2.1, b"C2", Held(KEY, 3))
    assert [p for p, m in sends(effects) if isinstance(m, PublishNumbered)] == [b"C2"]


def test_a_local_publish_behind_a_number_given_up_goes_down_in_its_place() -> None:
    # Client 1 publishes X1 then X2. X1 waits in ``pending`` behind C2's unconfirmed 4,
    # and with 0..5 numbered and nothing committed X2 waits in the backlog. C2 leaves: N
    # gives 4 up with X1 behind it, but X1 is a publisher on N's side, so both go down at
    # once under their numbers (C2's node may hold 4 as a claim), and X2 is numbered
    # after X1, not before it.
    node = root(window_packets=6, max_queued_publishes=8)
    stream = node.streams[KEY]
    for n in range(3):
        publish(node, UID + n)  # 0..2
    node.receive(1.0, b"C1", peer_publish(501))  # pending 3
    node.receive(1.0, b"C2", peer_publish(502))  # pending 4
    x1, x2 = UID + 10, UID + 11
    publish(node, x1)  # pending 5
    node.receive(1.0, b"C1", PublishConfirmed(501, KEY, 3))  # 3 goes down
    assert list(stream.root.pending) == [4, 5]
    publish(node, x2)
    assert list(stream.root.backlog) == [x2]
    node.receive(1.1, b"C2", Unsubscribe(KEY))
    assert not stream.root.pending and not stream.root.set_aside
    node.receive(1.2, b"C1", Held(KEY, 3))
    assert stream.uids is not None
    assert [stream.uids.get(uid) for uid in (502, x1, x2)] == [4, 5, 6]


def test_a_childs_publish_past_a_full_backlog_is_refused_busy_on_the_wire() -> None:
    """Root N's backlog is full (``max_queued_publishes`` held back behind an uncommitted
    window) and child C1 sends one more PublishData: N answers PublishRejected(BUSY), and
    that answer encodes (it once carried the enum where the wire has an int, and the
    runtime closed C1's honest link with "internal error")."""
    node = root()
    for n in range(WINDOW + QUEUE):
        publish(node, UID + n)
    data = PublishData(UID + 99, KEY, None, 0.2, 10, b"late", None, PacketKind.DATA, None)
    effects = node.receive(1.0, b"C1", data)
    refused = [m for peer, m in sends(effects) if peer == b"C1"]
    assert refused == [PublishRejected(UID + 99, KEY, PublishError.BUSY)]
    assert decode(encode(refused[0])) == refused[0]


# --- Backlog built alone: a full root holds new publishes, and lets them go in order -------


def backlog(kit: Kit) -> tuple[Backlog, dict[int, LocalPublish], Calls, Calls]:
    local: dict[int, LocalPublish] = {}
    reply, route = Calls(), Calls()
    return Backlog(kit.config, kit.streams, kit.stats, local, reply, route), local, reply, route


def full_root(kit: Kit) -> Stream:
    stream = kit.stream(State.ROOT, children=(b"C",))
    store(stream, 0, 1)
    stream.root.committed = -1  # nothing committed: the window of 2 is all uncommitted
    return stream


def test_a_full_root_holds_a_new_publish_back() -> None:
    kit = Kit(config=NodeConfig(window_packets=2))
    part, _, _, route = backlog(kit)
    stream = full_root(kit)
    assert part.held_back(stream, b"C", flow_publish(7))
    assert list(stream.root.backlog) == [7]
    assert KEY in part.backlogged and kit.stats.held_back == 1
    assert route.calls == []


def test_room_again_lets_the_backlog_go_in_order_and_a_gone_child_drops_its_own() -> None:
    kit = Kit(config=NodeConfig(window_packets=2))
    part, _, _, route = backlog(kit)
    stream = full_root(kit)
    for uid, source in ((7, b"C"), (8, b"X"), (9, b"C")):
        part.held_back(stream, source, flow_publish(uid))
    stream.root.committed = 1
    part.drain(2.0)
    assert [call[3].uid for call in route.calls] == [7, 9]  # X is no child: nobody to answer
    assert not part.backlogged


def test_past_its_bound_a_publish_is_refused_busy() -> None:
    kit = Kit(config=NodeConfig(window_packets=2, max_queued_publishes=1))
    part, _, reply, _ = backlog(kit)
    stream = full_root(kit)
    part.held_back(stream, b"C", flow_publish(7))
    assert part.held_back(stream, b"C", flow_publish(8))
    assert reply.calls == [(b"C", PublishRejected(8, KEY, PublishError.BUSY))]


def test_dropped_local_publishes_go_back_to_the_front() -> None:
    kit = Kit()
    part, _, _, _ = backlog(kit)
    stream = kit.stream(State.ROOT)
    stream.root.backlog[5] = (1, flow_publish(5))
    part.requeue(stream, [(1, flow_publish(3)), (b"C", flow_publish(4))])
    assert list(stream.root.backlog) == [3, 5]  # a peer's node retries its own
    assert KEY in part.backlogged
