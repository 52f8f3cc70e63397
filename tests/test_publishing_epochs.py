"""Publishing in the core: atomic epochs, and signed streams whose packets every node checks."""

from __future__ import annotations

from typing import Any

import pytest
from corenet import CoreNet
from publish_tree import (
    KEY,
    SUBSCRIBERS,
    TIMEOUT,
    add_f,
    packets,
    place,
    publish_data,
    tree,
    window,
)
from signed_streams import (
    ABORTED,
    CLOSED,
    DATA,
    DESCRIPTOR,
    INTRUDER,
    PRIVATE,
    SKEY,
    sign,
    signed_tree,
)

from keyspace.stream_key import StreamKey
from overlay.core.config import NodeConfig
from overlay.core.events import (
    Epoch,
    EpochAborted,
    EpochSkipped,
    Packet,
    PublishAcked,
    PublishFailed,
    Subscribed,
    SubscribeFailed,
)
from overlay.messages import (
    MAX_WIRE_HTL,
    PacketKind,
    PublishData,
    PublishError,
    PublishRejected,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
)

OTHER_DESCRIPTOR = StreamKey.signed(PRIVATE.public_key().public_bytes_raw(), "other").descriptor


def p(number: int, data: bytes, epoch: int | None = None, kind: PacketKind = DATA) -> Packet:
    """The event a plain subscriber gets for one packet of KEY."""
    return Packet(KEY, number, data, epoch, kind)


def in_epoch(net: CoreNet, epoch: int, *data: bytes, by: bytes = b"E") -> None:
    """Publish ``data`` as packets of ``epoch`` (the first one opens it)."""
    for item in data:
        net.publish(by, KEY, item, epoch=epoch)


def close(net: CoreNet, epoch: int, kind: PacketKind = CLOSED, by: bytes = b"E") -> int:
    return net.publish(by, KEY, b"", epoch=epoch, kind=kind)


def atomic_tree() -> CoreNet:
    """The test tree, plus an atomic subscriber (client 2) at A."""
    net = tree()
    net.subscribe(b"A", KEY, client=2, atomic=True)
    return net


# --- atomic epochs ----------------------------------------------------------------------------


def test_closed_epoch_reaches_atomic_subscribers_whole_at_its_close() -> None:
    net = atomic_tree()
    in_epoch(net, 1, b"a")
    net.publish(b"A", KEY, b"loose")  # no epoch: delivered as it comes
    in_epoch(net, 1, b"b", by=b"D")
    assert net.received(b"A", 2) == [p(1, b"loose")]
    close(net, 1)
    whole = Epoch(KEY, 1, (p(0, b"a", 1), p(2, b"b", 1)), closed_at=3)
    assert net.received(b"A", 2) == [p(1, b"loose"), whole]
    everything = [p(0, b"a", 1), p(1, b"loose"), p(2, b"b", 1), p(3, b"", 1, CLOSED)]
    for name in SUBSCRIBERS:  # plain subscribers: every packet as it comes, the marker too
        assert net.received(name) == everything


def test_aborted_epoch_is_never_delivered_to_atomic_subscribers() -> None:
    net = atomic_tree()
    in_epoch(net, 2, b"c", b"d")
    close(net, 2, ABORTED)
    assert net.received(b"A", 2) == [EpochAborted(KEY, 2)]
    for name in SUBSCRIBERS:
        assert net.received(name) == [p(0, b"c", 2), p(1, b"d", 2), p(2, b"", 2, ABORTED)]


def test_interleaved_epochs_are_each_delivered_whole_in_close_order() -> None:
    net = atomic_tree()
    net.publish(b"E", KEY, b"x1", epoch=1)
    net.publish(b"A", KEY, b"y1", epoch=2)
    net.publish(b"D", KEY, b"x2", epoch=1)
    net.publish(b"R", KEY, b"y2", epoch=2)
    close(net, 2)
    net.publish(b"E", KEY, b"x3", epoch=1)
    close(net, 1)
    assert net.received(b"A", 2) == [
        Epoch(KEY, 2, (p(1, b"y1", 2), p(3, b"y2", 2)), closed_at=4),
        Epoch(KEY, 1, (p(0, b"x1", 1), p(2, b"x2", 1), p(5, b"x3", 1)), closed_at=6),
    ]


@pytest.mark.parametrize("where", ["new node", "node in the tree"])
def test_late_atomic_joiner_gets_an_epoch_open_since_before_it_joined_whole(where: str) -> None:
    net = atomic_tree()
    add_f(net)
    in_epoch(net, 1, b"old")
    close(net, 1)
    in_epoch(net, 3, b"a", b"b")
    net.publish(b"E", KEY, b"loose")
    name, client = (b"F", 1) if where == "new node" else (b"B", 2)
    net.subscribe(name, KEY, client=client, atomic=True)
    assert net.events[(name, client)] == [Subscribed(KEY, False, 4, 1, ((3, 2),))]
    in_epoch(net, 3, b"c")
    assert net.received(name, client) == []  # nothing of an open epoch
    close(net, 3)
    assert net.received(name, client) == [
        Epoch(KEY, 3, (p(2, b"a", 3), p(3, b"b", 3), p(5, b"c", 3)), closed_at=6)
    ]


@pytest.mark.parametrize("how", ["start left the window", "resumed after the start"])
def test_late_atomic_joiner_without_the_epoch_start_is_told_it_skipped(how: str) -> None:
    config = NodeConfig(window_packets=2) if how == "start left the window" else None
    net = tree(config=config)
    add_f(net)
    in_epoch(net, 3, b"a", b"b", b"c")
    options: dict[str, Any] = {} if config is not None else {"last_seen": 1}
    net.subscribe(b"F", KEY, atomic=True, **options)
    in_epoch(net, 3, b"d")
    assert net.received(b"F") == []
    close(net, 3)
    [skipped] = net.received(b"F")  # told at the close, and no packet of the epoch ever
    assert isinstance(skipped, EpochSkipped) and skipped.epoch == 3


@pytest.mark.parametrize("publisher", [b"R", b"A"])
@pytest.mark.parametrize(
    ("epoch", "kind"),
    [(1, DATA), (1, CLOSED), (1, ABORTED), (2, DATA), (2, CLOSED)],
    ids=["closed-data", "closed-close", "closed-abort", "aborted-data", "aborted-close"],
)
def test_packet_for_a_finished_epoch_is_refused(
    publisher: bytes, epoch: int, kind: PacketKind
) -> None:
    net = atomic_tree()
    in_epoch(net, 1, b"a")
    close(net, 1)
    in_epoch(net, 2, b"b")
    close(net, 2, ABORTED)
    before = {name: list(net.received(name)) for name in SUBSCRIBERS}
    net.publish(publisher, KEY, b"late", uid=99, epoch=epoch, kind=kind)
    [answer] = net.answers(publisher)
    assert isinstance(answer, PublishFailed) and answer.error is PublishError.EPOCH_DONE
    assert window(net, b"R") == [0, 1, 2, 3]
    assert {name: net.received(name) for name in SUBSCRIBERS} == before


def test_subscribed_carries_the_frontier() -> None:
    net = tree()
    add_f(net)
    in_epoch(net, 1, b"a")
    close(net, 1)
    in_epoch(net, 2, b"b")
    in_epoch(net, 4, b"c")
    in_epoch(net, 2, b"d")
    frontier = Subscribed(KEY, False, 4, last_closed=1, open_epochs=((2, 2), (4, 3)))
    net.subscribe(b"F", KEY)
    net.subscribe(b"B", KEY, client=2)
    net.subscribe(b"R", KEY, client=2)
    assert net.events[(b"F", 1)] == [frontier]
    assert net.events[(b"B", 2)] == [frontier]
    assert net.events[(b"R", 2)] == [Subscribed(KEY, True, 4, 1, ((2, 2), (4, 3)))]


def test_root_refuses_to_open_more_epochs_than_configured() -> None:
    net = tree(config=NodeConfig(max_open_epochs=2))
    in_epoch(net, 1, b"a")
    in_epoch(net, 2, b"b")
    net.publish(b"A", KEY, b"c", uid=99, epoch=3)
    [answer] = net.answers(b"A")
    assert isinstance(answer, PublishFailed) and answer.error is PublishError.TOO_MANY_EPOCHS
    close(net, 1)
    net.publish(b"A", KEY, b"c", uid=100, epoch=3)  # one closed: room again
    assert net.answers(b"A")[-1] == PublishAcked(KEY, 100, 3)


# --- signed streams ---------------------------------------------------------------------------


def publish_signed(
    net: CoreNet,
    by: bytes,
    number: int,
    data: bytes,
    epoch: int | None = None,
    kind: PacketKind = DATA,
) -> int:
    """Publish packet ``number`` of SKEY from ``by``, signed by the stream's owner."""
    sig = sign(number, data, epoch, kind)
    return net.publish(
        by, SKEY, data, packet=number, epoch=epoch, kind=kind, sig=sig, descriptor=DESCRIPTOR
    )


def spackets(net: CoreNet, name: bytes, client: int = 1) -> list[tuple[int, bytes]]:
    return packets(net, name, client, key=SKEY)


def test_signed_publish_is_delivered() -> None:
    net = signed_tree()
    for number, by in enumerate((b"A", b"E", b"R")):
        uid = publish_signed(net, by, number, b"s%d" % number)
        assert net.answers(by) == [PublishAcked(SKEY, uid, number)]
    for name in SUBSCRIBERS:
        assert spackets(net, name) == [(0, b"s0"), (1, b"s1"), (2, b"s2")]
    assert net.dropped == []


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"packet": 0, "sig": None}, PublishError.BAD_SIGNATURE),
        ({"packet": 0, "sig": sign(0, b"s", private=INTRUDER)}, PublishError.BAD_SIGNATURE),
        ({"packet": 0, "sig": sign(0, b"other data")}, PublishError.BAD_SIGNATURE),
        ({"packet": 0, "sig": sign(1, b"s")}, PublishError.BAD_SIGNATURE),
        ({"packet": 0, "sig": sign(0, b"s", epoch=1)}, PublishError.BAD_SIGNATURE),
        ({"packet": None, "sig": sign(0, b"s")}, PublishError.NEEDS_NUMBER),
    ],
    ids=["unsigned", "other-key", "other-data", "other-number", "other-epoch", "no-number"],
)
@pytest.mark.parametrize("publisher", [b"A", b"R"])
def test_badly_signed_local_publish_fails_and_sends_nothing(
    publisher: bytes, options: dict[str, Any], error: PublishError
) -> None:
    net = signed_tree()
    mark = len(net.trace)
    net.publish(publisher, SKEY, b"s", uid=5, descriptor=DESCRIPTOR, **options)
    [answer] = net.answers(publisher)
    assert isinstance(answer, PublishFailed) and (answer.uid, answer.error) == (5, error)
    assert net.trace[mark:] == [] and window(net, b"R", SKEY) == []


@pytest.mark.parametrize("number", [0, 2], ids=["expected-number", "number-ahead"])
@pytest.mark.parametrize(
    ("data", "sig"),
    [
        (b"evil", sign(0, b"genuine")),  # a genuine signature on other data
        (b"evil", sign(0, b"evil", private=INTRUDER)),
        (b"evil", None),
    ],
    ids=["tampered", "other-key", "unsigned"],
)
def test_forged_data_from_the_parent_is_refused_and_the_genuine_packet_still_arrives(
    number: int, data: bytes, sig: bytes | None
) -> None:
    net = signed_tree()
    mark = len(net.trace)
    net.inject(b"R", b"B", SubscribeData(SKEY, number, data, None, DATA, sig))
    assert [(name, drop.peer) for name, drop in net.dropped] == [(b"B", b"R")]
    assert net.trace[mark + 1 :] == []  # nothing stored, nothing sent on, no hole reported
    assert window(net, b"B", SKEY) == [] and net.received(b"A") == []
    assert net.nodes[b"B"].stats.forged == 1
    for n in range(number + 1):
        publish_signed(net, b"E", n, b"genuine" if n == 0 else b"g%d" % n)
    expected = [(n, b"genuine" if n == 0 else b"g%d" % n) for n in range(number + 1)]
    for name in SUBSCRIBERS:
        assert spackets(net, name) == expected


def test_forged_publish_from_a_child_is_not_forwarded_and_the_child_is_dropped() -> None:
    net = signed_tree()
    mark = len(net.trace)
    forged = PublishData(7, SKEY, 0, 0.1, MAX_WIRE_HTL, b"evil", None, DATA, sign(0, b"good"))
    net.inject(b"A", b"B", forged)
    assert [(name, drop.peer) for name, drop in net.dropped] == [(b"B", b"A")]
    assert net.trace[mark + 1 :] == [] and window(net, b"R", SKEY) == []
    publish_signed(net, b"D", 0, b"good")
    for name in SUBSCRIBERS:
        assert spackets(net, name) == [(0, b"good")]


def test_unnumbered_publish_from_a_child_of_a_signed_stream_is_refused() -> None:
    net = signed_tree()
    net.inject(b"A", b"B", publish_data(8, SKEY, sig=sign(0, b"z")))
    assert net.trace[-1] == (b"B", b"A", PublishRejected(8, SKEY, PublishError.NEEDS_NUMBER))
    assert net.dropped == [] and window(net, b"R", SKEY) == []


def test_each_node_verifies_each_packet_at_most_once() -> None:
    net = signed_tree()
    add_f(net, SKEY)
    total = 5
    publish_signed(net, b"A", 0, b"s0")
    publish_signed(net, b"E", 1, b"s1")
    net.hold(b"R")  # packet 2 goes up twice: its publish is resent before the root answers
    publish_signed(net, b"A", 2, b"s2")
    net.advance(TIMEOUT)
    net.release(b"R")
    sent = [m for s, _, m in net.sent(PublishData) if s == b"A"]
    resent = [m for m in sent if isinstance(m, PublishData) and m.packet == 2]
    assert len(resent) == 2
    net.subscribe(b"F", SKEY, last_seen=0, descriptor=DESCRIPTOR)  # catch-up of 1 and 2
    publish_signed(net, b"F", 3, b"s3")
    publish_signed(net, b"D", 4, b"s4")
    for name in SUBSCRIBERS:
        assert spackets(net, name) == [(n, b"s%d" % n) for n in range(total)]
    for name, node in net.nodes.items():
        held = len(window(net, name, SKEY))
        assert node.flow.signatures.verified == held <= total, name


@pytest.mark.parametrize(
    "descriptor", [None, OTHER_DESCRIPTOR], ids=["no-descriptor", "wrong-descriptor"]
)
@pytest.mark.parametrize("kind", [SubscribeRequest, ResubscribeRequest])
def test_subscribe_request_for_a_signed_key_without_its_descriptor_drops_the_sender(
    kind: type[SubscribeRequest | ResubscribeRequest], descriptor: bytes | None
) -> None:
    net = signed_tree()
    add_f(net, SKEY)
    mark = len(net.trace)
    loc = place(SKEY, b"F")
    if kind is SubscribeRequest:
        request: SubscribeRequest | ResubscribeRequest = SubscribeRequest(
            31, SKEY, 5, loc, None, descriptor
        )
    else:
        request = ResubscribeRequest(31, SKEY, 5, loc, loc, None, descriptor)
    net.inject(b"F", b"B", request)
    assert [(name, drop.peer) for name, drop in net.dropped] == [(b"B", b"F")]
    assert net.trace[mark + 1 :] == []
    b = net.stream(b"B", SKEY)
    assert b is not None and b"F" not in b.children


def test_local_subscribe_to_a_signed_key_needs_its_descriptor() -> None:
    net = signed_tree()
    add_f(net, SKEY)
    for client, descriptor in ((1, None), (2, OTHER_DESCRIPTOR)):
        net.subscribe(b"F", SKEY, client=client, descriptor=descriptor)
        [failed] = net.events[(b"F", client)]
        assert isinstance(failed, SubscribeFailed)
    assert net.stream(b"F", SKEY) is None


def test_forged_close_marker_cannot_cut_a_signed_epoch_short() -> None:
    net = signed_tree()
    net.subscribe(b"A", SKEY, client=2, atomic=True, descriptor=DESCRIPTOR)
    publish_signed(net, b"E", 0, b"a", epoch=1)
    forged = SubscribeData(SKEY, 1, b"", 1, CLOSED, sign(1, b"", 1, ABORTED), 0)
    net.inject(b"R", b"B", forged)
    assert [(name, drop.peer) for name, drop in net.dropped] == [(b"B", b"R")]
    assert net.received(b"A", 2) == []
    publish_signed(net, b"E", 1, b"b", epoch=1)
    publish_signed(net, b"E", 2, b"", epoch=1, kind=CLOSED)
    packets_ = (Packet(SKEY, 0, b"a", 1, DATA), Packet(SKEY, 1, b"b", 1, DATA))
    assert net.received(b"A", 2) == [Epoch(SKEY, 1, packets_, closed_at=2)]
