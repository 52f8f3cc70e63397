"""Publishing in the core: up to the root, its numbering, broadcast down the tree, catch-up."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from corenet import CoreNet, key_at
from publish_tree import (
    KEY,
    SUBSCRIBERS,
    TIMEOUT,
    add_f,
    packets,
    publish_data,
    tree,
    window,
)

from overlay.core.config import NodeConfig
from overlay.core.events import (
    Missed,
    Packet,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    Subscribed,
)
from overlay.messages import (
    MAX_PACKET,
    MAX_PAYLOAD,
    Committed,
    PacketKind,
    PacketsMissed,
    PublishData,
    PublishError,
    PublishRejected,
    PublishSucceeded,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
    Unsubscribe,
)

KEY2 = key_at(0.5, tag=2)
ATTEMPTS = NodeConfig().publish_attempts


# --- helpers ----------------------------------------------------------------------------------


def data_per_link(net: CoreNet) -> Counter[tuple[bytes, bytes, bytes, int]]:
    """How often each (sender, receiver, key, packet number) SubscribeData was delivered."""
    return Counter((s, d, m.key, m.packet) for s, d, m in net.trace if isinstance(m, SubscribeData))


def publish_all(net: CoreNet, *items: tuple[bytes, bytes]) -> None:
    for name, data in items:
        net.publish(name, KEY, data)


# --- the root's numbering ---------------------------------------------------------------------


def test_root_numbers_publishes_densely_from_zero() -> None:
    net = tree()
    sources = (b"A", b"E", b"D", b"R", b"B", b"A")
    for i, name in enumerate(sources):
        uid = net.publish(name, KEY, b"p%d" % i)
        assert net.answers(name)[-1] == PublishAcked(KEY, uid, i)
    expected = [(i, b"p%d" % i) for i in range(len(sources))]
    assert window(net, b"R") == list(range(len(sources)))
    for name in SUBSCRIBERS:
        assert packets(net, name) == expected


def test_explicit_number_equal_to_next_is_accepted() -> None:
    net = tree()
    net.publish(b"A", KEY, b"a", packet=0, uid=1)
    net.publish(b"E", KEY, b"b", packet=1, uid=2)
    net.publish(b"D", KEY, b"c", uid=3)
    assert net.answers(b"A") == [PublishAcked(KEY, 1, 0)]
    assert net.answers(b"E") == [PublishAcked(KEY, 2, 1)]
    assert net.answers(b"D") == [PublishAcked(KEY, 3, 2)]
    assert packets(net, b"D") == [(0, b"a"), (1, b"b"), (2, b"c")]


@pytest.mark.parametrize("publisher", [b"R", b"A"])
def test_explicit_held_number_with_the_same_content_is_acked_again(publisher: bytes) -> None:
    net = tree()
    publish_all(net, (b"E", b"x"), (b"E", b"y"))
    to_root = len([m for m in net.trace if m[1] == b"R"])
    net.publish(publisher, KEY, b"x", packet=0, uid=77)
    assert net.answers(publisher)[-1] == PublishAcked(KEY, 77, 0)
    if publisher == b"A":
        # A holds packet 0 itself but still asks the root: after a takeover the root may
        # lack a packet a relay holds, and only a publish that reaches it keeps it from
        # giving that number to another packet (two packets under one number).
        assert len([m for m in net.trace if m[1] == b"R"]) == to_root + 1
    assert window(net, b"R") == [0, 1]
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x"), (1, b"y")]


@pytest.mark.parametrize("publisher", [b"R", b"A"])
def test_explicit_held_number_with_other_content_collides(publisher: bytes) -> None:
    net = tree()
    publish_all(net, (b"E", b"x"), (b"E", b"y"), (b"E", b"z"))
    net.publish(publisher, KEY, b"other", packet=1, uid=77)
    assert net.answers(publisher)[-1] == PublishCollided(KEY, 77, 1, 3)
    assert window(net, b"R") == [0, 1, 2]
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x"), (1, b"y"), (2, b"z")]


@pytest.mark.parametrize("publisher", [b"R", b"A"])
def test_explicit_number_past_next_collides_with_the_next_free_one(publisher: bytes) -> None:
    net = tree()
    publish_all(net, (b"E", b"x"), (b"E", b"y"))
    net.publish(publisher, KEY, b"late", packet=7, uid=77)
    assert net.answers(publisher)[-1] == PublishCollided(KEY, 77, 7, 2)
    assert window(net, b"R") == [0, 1]
    net.publish(publisher, KEY, b"late", packet=2, uid=78)
    assert net.answers(publisher)[-1] == PublishAcked(KEY, 78, 2)
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x"), (1, b"y"), (2, b"late")]


@pytest.mark.parametrize("publisher", [b"R", b"A"])
@pytest.mark.parametrize("packet", [None, 0])
def test_retried_uid_is_acked_with_its_original_number(
    publisher: bytes, packet: int | None
) -> None:
    net = tree()
    net.publish(publisher, KEY, b"x", uid=42)
    net.publish(b"E", KEY, b"y", uid=43)
    net.publish(publisher, KEY, b"x", uid=42, packet=packet)
    assert net.answers(publisher) == [PublishAcked(KEY, 42, 0), PublishAcked(KEY, 42, 0)]
    assert window(net, b"R") == [0, 1]
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x"), (1, b"y")]


@pytest.mark.parametrize("publisher", [b"R", b"A"])
@pytest.mark.parametrize(
    ("packet", "data", "epoch"),
    [(None, b"changed", None), (None, b"x", 3), (5, b"changed", None), (1, b"changed", None),
     (0, b"changed", None)],
    ids=["other-data", "other-epoch", "number-past-next", "number-held", "own-number"],
)  # fmt: skip
def test_a_uid_reused_for_other_content_is_refused_and_nothing_is_stored(
    publisher: bytes, packet: int | None, data: bytes, epoch: int | None
) -> None:
    """Root R numbered uid 42 for b"x". A publish under uid 42 with other content (data or
    epoch, whatever number it names) is refused UID_REUSED: answered with packet 0's number
    it would be acknowledged while its content was dropped."""
    net = tree()
    net.publish(publisher, KEY, b"x", uid=42)
    net.publish(b"E", KEY, b"y", uid=43)
    net.publish(publisher, KEY, data, uid=42, packet=packet, epoch=epoch)
    first, second = net.answers(publisher)
    assert first == PublishAcked(KEY, 42, 0)
    assert isinstance(second, PublishFailed) and second.error is PublishError.UID_REUSED
    assert net.nodes[b"R"].stats.uids_reused == 1
    assert window(net, b"R") == [0, 1]
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x"), (1, b"y")]


def test_a_reused_uid_is_refused_after_its_packet_left_the_window() -> None:
    """The uid table keeps a digest of each packet's content, so the refusal holds after
    the packet itself is gone from the root's window."""
    net = tree(config=NodeConfig(window_packets=2))
    net.publish(b"A", KEY, b"x", uid=42)
    for i in range(4):
        net.publish(b"E", KEY, b"y%d" % i, uid=100 + i)
    assert 0 not in window(net, b"R")
    net.publish(b"A", KEY, b"x", uid=42)
    net.publish(b"A", KEY, b"other", uid=42)
    answers = net.answers(b"A")
    assert answers[:2] == [PublishAcked(KEY, 42, 0), PublishAcked(KEY, 42, 0)]
    assert isinstance(answers[2], PublishFailed) and answers[2].error is PublishError.UID_REUSED


def test_concurrent_publishers_are_ordered_once_for_everyone() -> None:
    net = tree()
    net.hold(b"R")  # every publish reaches the root only at release, interleaved
    uids: dict[int, tuple[bytes, bytes]] = {}
    for round_ in range(3):
        for name in (b"A", b"E", b"D", b"B", b"R"):
            data = b"%s%d" % (name, round_)
            uids[net.publish(name, KEY, data)] = (name, data)
    net.release(b"R")
    numbered: list[tuple[int, bytes]] = []
    for name in (b"A", b"E", b"D", b"B", b"R"):
        for answer in net.answers(name):
            assert isinstance(answer, PublishAcked), answer
            publisher, data = uids.pop(answer.uid)
            assert publisher == name
            numbered.append((answer.number, data))
    assert uids == {}, "a publish got no answer"
    assert sorted(n for n, _ in numbered) == list(range(15))
    for name in SUBSCRIBERS:
        assert packets(net, name) == sorted(numbered)


# --- broadcast: exactly once, in order --------------------------------------------------------


def test_every_link_carries_each_packet_at_most_once() -> None:
    net = tree(also=KEY2)
    add_f(net)
    for i in range(4):
        net.publish((b"A", b"E", b"R", b"D")[i], KEY, b"k%d" % i)
        net.publish(b"D", KEY2, b"j%d" % i, client=2)
    net.subscribe(b"F", KEY, last_seen=1)  # catch-up 2..3, then live packets
    net.subscribe(b"B", KEY, client=3, last_seen=0)
    for i in range(4, 8):
        net.publish((b"F", b"E", b"A", b"B")[i % 4], KEY, b"k%d" % i)
    twice = [link for link, count in data_per_link(net).items() if count > 1]
    assert twice == []
    assert all(node.stats.duplicates == 0 for node in net.nodes.values())
    everything = [(i, b"k%d" % i) for i in range(8)]
    for name in SUBSCRIBERS:
        assert packets(net, name) == everything
        assert packets(net, name, client=2, key=KEY2) == [(i, b"j%d" % i) for i in range(4)]
    assert packets(net, b"F") == everything[2:]
    assert packets(net, b"B", client=3) == everything[1:]


def test_number_past_the_expected_one_is_reported_as_missed_never_silent() -> None:
    net = tree()
    net.publish(b"E", KEY, b"zero")
    net.inject(b"R", b"B", SubscribeData(KEY, 3, b"three", None, PacketKind.DATA, None))
    zero, three = (
        Packet(KEY, n, d, None, PacketKind.DATA) for n, d in ((0, b"zero"), (3, b"three"))
    )
    for child in (b"A", b"D"):
        assert (b"B", child, PacketsMissed(KEY, 1, 2)) in net.trace
        assert net.received(child) == [zero]  # shown once the root says it committed 3
    net.inject(b"R", b"B", Committed(KEY, 3))
    for child in (b"A", b"D"):
        assert net.received(child) == [zero, Missed(KEY, 1, 2), three]


# --- catch-up ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["new node", "node in the tree"])
def test_late_subscriber_with_last_seen_gets_every_later_packet_in_order(where: str) -> None:
    net = tree()
    add_f(net)
    publish_all(net, *((b"E", b"p%d" % i) for i in range(5)))
    name, client = (b"F", 1) if where == "new node" else (b"B", 2)
    net.subscribe(name, KEY, client=client, last_seen=1)
    assert net.events[(name, client)][0] == Subscribed(KEY, False, 4)
    publish_all(net, (b"A", b"p5"), (b"R", b"p6"))
    assert net.received(name, client) == [
        Packet(KEY, i, b"p%d" % i, None, PacketKind.DATA) for i in range(2, 7)
    ]


@pytest.mark.parametrize("where", ["new node", "node in the tree"])
def test_catch_up_past_a_small_window_reports_exactly_what_left_it(where: str) -> None:
    net = tree(config=NodeConfig(window_packets=3))
    add_f(net)
    publish_all(net, *((b"E", b"p%d" % i) for i in range(10)))
    assert window(net, b"B") == [7, 8, 9]
    name, client = (b"F", 1) if where == "new node" else (b"B", 2)
    net.subscribe(name, KEY, client=client, last_seen=2)
    net.publish(b"A", KEY, b"p10")
    assert net.received(name, client) == [
        Missed(KEY, 3, 6),
        *(Packet(KEY, i, b"p%d" % i, None, PacketKind.DATA) for i in range(7, 11)),
    ]


@pytest.mark.parametrize("where", ["new node", "node in the tree"])
def test_fresh_subscriber_starts_at_the_head(where: str) -> None:
    net = tree()
    add_f(net)
    publish_all(net, (b"E", b"a"), (b"A", b"b"), (b"R", b"c"))
    name, client = (b"F", 1) if where == "new node" else (b"B", 2)
    net.subscribe(name, KEY, client=client)
    [subscribed] = net.events[(name, client)]
    assert isinstance(subscribed, Subscribed) and subscribed.last_packet == 2
    net.publish(b"D", KEY, b"d")
    assert packets(net, name, client) == [(subscribed.last_packet + 1, b"d")]


def test_fresh_subscriber_of_an_empty_stream_gets_packet_zero_first() -> None:
    net = tree()
    add_f(net)
    net.subscribe(b"F", KEY)
    assert net.events[(b"F", 1)] == [Subscribed(KEY, False, None)]
    net.publish(b"E", KEY, b"first")
    assert packets(net, b"F") == [(0, b"first")]


# --- bad input: refused, never a crash, other streams untouched --------------------------------


def assert_still_works(net: CoreNet) -> None:
    """Both streams still deliver, numbered from 0, to every subscriber."""
    net.publish(b"A", KEY, b"after")
    net.publish(b"D", KEY2, b"after2", client=2)
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"after")]
        assert packets(net, name, client=2, key=KEY2) == [(0, b"after2")]


@pytest.mark.parametrize(
    ("src", "dst", "message", "error"),
    [
        (b"A", b"B", publish_data(900, key_at(0.5, tag=9)), PublishError.NOT_CARRIED),
        (b"R", b"B", publish_data(901), PublishError.NOT_CHILD),  # R is B's parent
        (b"A", b"B", publish_data(902, htl=0), PublishError.TOO_DEEP),
        (b"B", b"R", publish_data(903, kind=PacketKind.EPOCH_CLOSED), PublishError.BAD_MARKER),
    ],
    ids=["not-carried", "not-a-child", "htl-0", "marker-without-epoch"],
)
def test_bad_publish_from_a_peer_is_refused(
    src: bytes, dst: bytes, message: PublishData, error: PublishError
) -> None:
    net = tree(also=KEY2)
    mark = len(net.trace)
    net.inject(src, dst, message)
    assert [t for t in net.trace[mark:] if t[0] == dst] == [
        (dst, src, PublishRejected(message.uid, message.key, int(error)))
    ]
    assert net.dropped == [] and net.sent(SubscribeData) == []
    assert_still_works(net)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"data": b"x" * (MAX_PAYLOAD + 1)}, PublishError.INVALID),
        ({"packet": -1}, PublishError.INVALID),
        ({"packet": MAX_PACKET + 1}, PublishError.INVALID),
        ({"epoch": -1}, PublishError.INVALID),
        ({"uid": -1}, PublishError.INVALID),
        ({"kind": PacketKind.EPOCH_CLOSED}, PublishError.BAD_MARKER),
        ({"kind": PacketKind.EPOCH_ABORTED}, PublishError.BAD_MARKER),
    ],
    ids=["oversized", "negative-number", "huge-number", "bad-epoch", "bad-uid", "close", "abort"],
)
@pytest.mark.parametrize("publisher", [b"A", b"R"])
def test_bad_local_publish_fails_and_sends_nothing(
    publisher: bytes, options: dict[str, Any], error: PublishError
) -> None:
    net = tree(also=KEY2)
    mark = len(net.trace)
    options = {"uid": 5, "data": b"ok", **options}
    net.publish(publisher, KEY, **options)
    [answer] = net.answers(publisher)
    assert isinstance(answer, PublishFailed) and answer.error is error
    assert answer.uid == options["uid"]
    assert net.trace[mark:] == [] and not net.queue
    assert window(net, b"R") == []
    assert_still_works(net)


@pytest.mark.parametrize("sender", [b"D", b"X"], ids=["a-child", "outside-the-tree"])
def test_data_from_a_peer_that_is_not_the_parent_is_refused(sender: bytes) -> None:
    net = tree(also=KEY2)
    if sender == b"X":
        net.add(b"X", 0.7)
        net.connect(b"X", b"B")
    net.inject(sender, b"B", SubscribeData(KEY, 0, b"bogus", None, PacketKind.DATA, None))
    assert net.trace[-1] == (b"B", sender, Unsubscribe(KEY))
    assert window(net, b"B") == [] and net.dropped == []
    assert net.received(b"A") == []
    assert net.tree_problems(KEY) == []
    assert_still_works(net)


@pytest.mark.parametrize(
    "bad",
    [
        SubscribeData(KEY, 0, b"m", 1, PacketKind.DATA, None, None),
        SubscribeData(KEY, 0, b"m", None, PacketKind.DATA, None, 0),
        SubscribeData(KEY, 0, b"m", 1, PacketKind.DATA, None, 5),
        SubscribeData(KEY, 0, b"", None, PacketKind.EPOCH_CLOSED, None, None),
    ],
    ids=["epoch-without-first", "first-without-epoch", "first-after-packet", "bare-marker"],
)
def test_malformed_data_from_the_parent_drops_only_the_parent(bad: SubscribeData) -> None:
    net = tree(also=KEY2)
    mark = len(net.trace)
    net.inject(b"R", b"B", bad)
    assert [(name, drop.peer) for name, drop in net.dropped] == [(b"B", b"R")]
    assert net.trace[mark + 1 :] == []  # B sent nothing on
    assert window(net, b"B") == [] and net.received(b"A") == []
    assert_still_works(net)


# --- joining first, timeouts, resends --------------------------------------------------------


def test_publish_from_outside_the_tree_joins_first_then_sends_what_waited() -> None:
    net = tree()
    add_f(net)
    net.hold(b"B")  # F's search waits at B
    first = net.publish(b"F", KEY, b"one")
    second = net.publish(b"F", KEY, b"two")
    assert net.sent(PublishData) == []
    net.release(b"B")
    sent = [m for s, _, m in net.trace if s == b"F"]
    kinds = [type(m) for m in sent if isinstance(m, SubscribeRequest | PublishData)]
    assert kinds == [SubscribeRequest, PublishData, PublishData]
    assert net.answers(b"F") == [PublishAcked(KEY, first, 0), PublishAcked(KEY, second, 1)]
    assert net.received(b"F") == []  # a publisher only: it is sent no packets
    stream = net.stream(b"F", KEY)
    assert stream is not None and stream.parent == b"B"
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"one"), (1, b"two")]


def test_publish_waiting_for_a_slow_join_is_sent_once() -> None:
    net = tree()
    add_f(net, config=NodeConfig(publish_timeout=2.0))  # the join takes longer than this
    net.hold(b"B")
    uid = net.publish(b"F", KEY, b"one")
    net.advance(3.0)  # the publish timer fires; the search's accept timeout (5 s) has not
    net.release(b"B")
    assert net.answers(b"F") == [PublishAcked(KEY, uid, 0)]
    assert window(net, b"R") == [0]
    assert [(s, d) for s, d, _ in net.sent(PublishData)] == [(b"F", b"B"), (b"B", b"R")]


@pytest.mark.parametrize("confirm", [False, True])
def test_unanswered_publish_is_resent_with_its_uid_then_fails(confirm: bool) -> None:
    # The root is slow, not dead: heartbeats would (rightly) give up on it long before.
    config = NodeConfig(heartbeat_interval=1e6, dead_after=2e6, confirm_publishes=confirm)
    net = tree(config=config)
    net.hold(b"R")  # the root hears nothing until release
    uid = net.publish(b"A", KEY, b"x")
    [(_, _, sent)] = [t for t in net.sent(PublishData) if t[0] == b"A"]
    for attempt in range(2, ATTEMPTS + 1):
        net.advance((attempt - 1) * TIMEOUT - 0.001)
        assert len([t for t in net.sent(PublishData) if t[0] == b"A"]) == attempt - 1
        net.advance((attempt - 1) * TIMEOUT)
        resent = [m for s, _, m in net.sent(PublishData) if s == b"A"]
        assert resent == [sent] * attempt
    assert net.answers(b"A") == []
    net.advance(ATTEMPTS * TIMEOUT)
    [failed] = net.answers(b"A")
    assert isinstance(failed, PublishFailed) and failed.error is PublishError.TIMEOUT
    assert failed.uid == uid
    net.advance(10 * ATTEMPTS * TIMEOUT)
    assert len([t for t in net.sent(PublishData) if t[0] == b"A"]) == ATTEMPTS
    # The root was only slow: it orders the packet once, and a retry learns its number.
    net.release(b"R")
    if confirm:
        # A's node gave the publish up, so it confirms no number for it: the root sends
        # nothing down, and numbers the retry afresh.
        assert window(net, b"R") == []
        net.advance(net.now + config.confirm_timeout + 0.01)
    else:
        assert window(net, b"R") == [0]
    net.publish(b"A", KEY, b"x", uid=uid)
    assert net.answers(b"A")[1:] == [PublishAcked(KEY, uid, 0)]
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x")]


def test_answer_after_a_resend_is_not_stored_twice() -> None:
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"x")
    net.advance(TIMEOUT)  # resent
    net.release(b"R")  # both copies reach the root
    assert len(net.sent(PublishData)) == 4  # A->B and B->R, twice
    assert net.answers(b"A") == [PublishAcked(KEY, uid, 0)]
    assert window(net, b"R") == [0]
    net.advance(10 * ATTEMPTS * TIMEOUT)
    assert len(net.sent(PublishData)) == 4 and len(net.answers(b"A")) == 1
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"x")]
    assert all(node.stats.duplicates == 0 for node in net.nodes.values())


def test_busy_parent_makes_the_publisher_wait_and_resend_not_fail() -> None:
    net = tree(config=NodeConfig(max_relayed_publishes=1))
    net.hold(b"R")
    first = net.publish(b"A", KEY, b"a")  # B relays it: B's relay table is full
    second = net.publish(b"D", KEY, b"d")
    assert net.sent(PublishRejected) == [
        (b"B", b"D", PublishRejected(second, KEY, PublishError.BUSY))
    ]
    assert net.answers(b"D") == []  # BUSY is for the timer to retry, not for the client
    net.release(b"R")
    net.advance(TIMEOUT)
    assert net.answers(b"A") == [PublishAcked(KEY, first, 0)]
    assert net.answers(b"D") == [PublishAcked(KEY, second, 1)]
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(0, b"a"), (1, b"d")]


def test_local_publishes_in_flight_are_bounded() -> None:
    net = CoreNet(config=NodeConfig(max_relayed_publishes=2))
    net.add(b"A", 0.1)
    net.add(b"R", 0.5)
    net.connect(b"A", b"R")
    net.hold(b"R")  # answers never come while R is held
    for uid in (1, 2, 3):
        net.publish(b"A", KEY, b"x", client=5, uid=uid)
    failed = [e for e in net.answers(b"A", 5) if isinstance(e, PublishFailed)]
    assert [(e.uid, e.error) for e in failed] == [(3, PublishError.BUSY)]


def test_subscriber_whose_parent_dies_before_packet_zero_still_gets_it() -> None:
    """A node that joined an empty stream waits for packet 0. If its parent dies before
    anything arrives, its resubscribe must ask for everything from 0 (last_seen -1): asking
    as a fresh member would place it at the head and skip what was published meanwhile,
    with no Missed to say so."""
    key = key_at(0.1)
    net = CoreNet(seed=5)
    for name, location in ((b"R", 0.1), (b"A", 0.3), (b"B", 0.35), (b"S", 0.6)):
        net.add(name, location)
    for a, b in ((b"R", b"A"), (b"R", b"B"), (b"A", b"S"), (b"B", b"S")):
        net.connect(a, b)
    net.subscribe(b"R", key, client=9)  # R roots the stream
    net.subscribe(b"S", key)
    parent = net.stream(b"S", key).parent  # type: ignore[union-attr]
    assert parent in (b"A", b"B") and net.roots(key) == [b"R"]
    net.hold(b"S")  # nothing reaches S: its parent's packets are lost with the link
    for i in range(3):
        net.publish(b"R", key, b"p%d" % i, client=9)
    net.disconnect(parent, b"S")
    net.release(b"S")
    assert [m.last_seen for _, _, m in net.sent(ResubscribeRequest)][:1] == [-1]
    packets = [e for e in net.received(b"S") if isinstance(e, Packet)]
    assert [p.number for p in packets] == [0, 1, 2]
    assert [p.data for p in packets] == [b"p0", b"p1", b"p2"]
    assert net.tree_problems(key) == [] and net.roots(key) == [b"R"]


def _two_node_stream() -> tuple[CoreNet, bytes]:
    """R roots ``key``; A is a member whose publishes go up to R."""
    key = key_at(0.1)
    net = CoreNet(seed=9)
    net.add(b"R", 0.1)
    net.add(b"A", 0.6)
    net.connect(b"R", b"A")
    net.subscribe(b"R", key, client=9)
    net.subscribe(b"A", key, client=8)
    assert net.roots(key) == [b"R"] and net.stream(b"A", key) is not None
    return net, key


def test_two_clients_publishing_one_uid_in_flight_both_get_its_answer() -> None:
    """A Spark task and its speculative copy publish the same uid through one node: one
    publish, stored once, and each client is answered (neither waits for a timeout)."""
    net, key = _two_node_stream()
    net.hold(b"R")  # the publish stays in flight
    net.publish(b"A", key, b"rows", client=1, uid=4242)
    net.publish(b"A", key, b"rows", client=2, uid=4242)
    assert net.answers(b"A", 1) == net.answers(b"A", 2) == []
    net.release(b"R")
    assert net.answers(b"A", 1) == net.answers(b"A", 2) == [PublishAcked(key, 4242, 0)]
    assert net.nodes[b"R"].stats.published == 1


def test_two_clients_publishing_one_uid_that_times_out_are_both_told() -> None:
    # The second client used to wait for ever: only the first was told of the timeout.
    net, key = _two_node_stream()
    net.hold(b"R")  # no answer ever comes
    net.publish(b"A", key, b"rows", client=1, uid=4243)
    net.publish(b"A", key, b"rows", client=2, uid=4243)
    config = net.nodes[b"A"].config
    net.advance(net.now + config.publish_attempts * config.publish_timeout + 0.01)
    for client in (1, 2):
        [failed] = net.answers(b"A", client)
        assert isinstance(failed, PublishFailed) and failed.error == PublishError.TIMEOUT


def test_the_publish_goes_on_for_the_other_client_when_the_first_leaves() -> None:
    net, key = _two_node_stream()
    net.hold(b"R")
    net.publish(b"A", key, b"rows", client=1, uid=77)
    net.publish(b"A", key, b"rows", client=2, uid=77)
    net._apply(b"A", net.nodes[b"A"].remove_client(net.now, 1))
    net.release(b"R")
    assert net.answers(b"A", 2) == [PublishAcked(key, 77, 0)]
    assert net.answers(b"A", 1) == []


def test_a_push_beyond_a_settled_roots_head_is_taken_after_a_grace() -> None:
    # A subtree numbered by another root joined R (a merge, a handoff) and pushes up what
    # it holds: 3, where R is at 0. R holds numbering as after a takeover, takes 3 under
    # its number (1 and 2 it never gets: missed), and numbers on after it.
    net = tree(config=NodeConfig(confirm_publishes=False))
    net.publish(b"A", KEY, b"p0")
    pushed = PublishData(99, KEY, 3, 0.0, 9, b"three", None, PacketKind.DATA, None, pushed=True)
    net.inject(b"E", b"R", pushed)
    assert net.stream(b"R", KEY).root.recover_until is not None  # type: ignore[union-attr]
    net.advance(net.now + 2 * NodeConfig().takeover_grace)
    assert (b"R", b"E", PublishSucceeded(99, KEY, 3)) in net.sent(PublishSucceeded)
    net.publish(b"A", KEY, b"p4")
    assert packets(net, b"D") == [(0, b"p0"), (3, b"three"), (4, b"p4")]
