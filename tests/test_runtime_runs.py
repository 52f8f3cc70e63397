"""``Runs`` built alone: what one step sends a peer goes as runs of consecutive packets, in
the order the core sent it, within a frame; and, end to end over real TCP, a burst reaches
a subscriber two hops down as runs, every packet once and in order."""

from __future__ import annotations

import trio
from flowkit import packet
from loopback_nets import FAST, LIMIT, Inbox, _key_near, join, publish_all

from keyspace.topology import Topology
from overlay.codec import decode, encode
from overlay.messages import (
    KEY_SIZE,
    MAX_FRAME,
    MAX_PAYLOAD,
    Bundle,
    Committed,
    Message,
    PacketKind,
    PublishConfirmed,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
    SubscribeData,
    SubscribeRun,
)
from overlay.run_packing import unrun
from overlay.runtime.runs import Runs
from testnet.local import LocalNetwork

_KEY = bytes(range(KEY_SIZE))


class Sent:
    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes, Message]] = []
        self.runs: Runs[str] = Runs(self.send)

    def send(self, link: str, peer: bytes, message: Message) -> None:
        self.messages.append((link, peer, message))

    def numbers(self) -> list[tuple[bytes, list[int]]]:
        """Each message sent, as its peer and the packet numbers it carries."""
        out = []
        for _, peer, message in self.messages:
            if isinstance(message, SubscribeRun):
                out.append((peer, [p.packet for p in unrun(message)]))
            else:
                assert isinstance(message, SubscribeData)
                out.append((peer, [message.packet]))
        return out


def test_consecutive_packets_to_a_peer_go_as_one_run_and_a_gap_starts_another() -> None:
    sent = Sent()
    for number in (1, 2, 3):
        sent.runs.offer("link", b"C", packet(number))
    assert sent.messages == [] and sent.runs  # nothing goes before the step ends
    for number in (5, 6):
        sent.runs.offer("link", b"C", packet(number))
    assert sent.numbers() == [(b"C", [1, 2, 3])]  # (5 does not continue it)
    sent.runs.send_all()
    assert sent.numbers() == [(b"C", [1, 2, 3]), (b"C", [5, 6])]
    assert not sent.runs


def test_a_lone_packet_goes_as_itself() -> None:
    sent = Sent()
    one = packet(4)
    sent.runs.offer("link", b"C", one)
    sent.runs.send_all()
    assert sent.messages == [("link", b"C", one)]


def test_a_peers_pending_run_goes_before_whatever_is_sent_it_next() -> None:
    sent = Sent()
    sent.runs.offer("link", b"C", packet(1))
    sent.runs.offer("link", b"D", packet(1))
    sent.runs.offer("link", b"C", packet(2))
    sent.runs.send(b"C")  # (the driver is about to send C another message)
    assert sent.numbers() == [(b"C", [1, 2])]
    sent.runs.send_all()
    assert sent.numbers() == [(b"C", [1, 2]), (b"D", [1])]


def test_the_same_packets_to_several_peers_are_one_run_object() -> None:
    sent = Sent()
    packets = [packet(n) for n in (1, 2, 3)]
    for p in packets:
        for peer in (b"C", b"D", b"E"):
            sent.runs.offer("link", peer, p)
    sent.runs.send_all()
    runs = [message for _, _, message in sent.messages]
    assert len(runs) == 3 and runs[0] is runs[1] is runs[2]  # (encoded once)


def test_a_new_link_to_the_peer_starts_a_new_run() -> None:
    sent = Sent()
    sent.runs.offer("old", b"C", packet(1))
    sent.runs.offer("new", b"C", packet(2))
    sent.runs.send_all()
    assert [
        (link, n) for (link, _, _), (_, n) in zip(sent.messages, sent.numbers(), strict=True)
    ] == [
        ("old", [1]),
        ("new", [2]),
    ]


def test_a_run_never_outgrows_a_frame() -> None:
    sent = Sent()
    big = MAX_PAYLOAD // 4
    for number in range(1, 12):
        sent.runs.offer("link", b"C", packet(number, uid=2**64 - 1, data=b"d" * big))
    sent.runs.send_all()
    counts = [len(n) for _, n in sent.numbers()]
    assert sum(counts) == 11 and max(counts) > 1
    assert all(len(encode(m)) <= MAX_FRAME for _, _, m in sent.messages)


async def test_a_burst_reaches_a_subscriber_two_hops_down_as_runs() -> None:
    # A chain R - M - L with the stream's root at R (at the key's location): a burst that
    # R's publisher puts out reaches M and L in fewer frames than packets, and L's client
    # gets every packet once, in order.
    key = _key_near(0.1)
    topology = Topology((0.1, 0.5, 0.9), ((1,), (0, 2), (1,)))
    with trio.fail_after(LIMIT):
        async with LocalNetwork(topology, core=FAST) as net:
            await net.wait_linked()
            inbox = await join(net.node(2), key)
            middle, leaf = net.node(1).host, net.node(2).host
            assert middle.core.streams[key].parent == net.node(0).host.core.id
            acks = await publish_all(net.node(0).host, 300, key)
            numbers = sorted(acks.acked().values())
            await leaf.wait_until(inbox.has(300))
            assert inbox.numbers() == numbers == list(range(numbers[0], numbers[0] + 300))
            for host in (middle, leaf):
                assert host.packets_in == 300 and host.data_in < 300 / 2, host.data_in


# --- Bundles ----------------------------------------------------------------------------------


def _numbered(uid: int, key: bytes = _KEY) -> PublishNumbered:
    return PublishNumbered(uid, key, uid + 100)


def _bundled(message: Message) -> list[Message]:
    return list(message.messages) if isinstance(message, Bundle) else [message]


def test_a_steps_publish_answers_to_a_peer_go_as_one_bundle_in_order() -> None:
    sent = Sent()
    answers = [_numbered(uid) for uid in (5, 6, 9)]
    for answer in answers:
        sent.runs.offer("link", b"C", answer)
    assert sent.messages == [] and sent.runs  # nothing goes before the step ends
    sent.runs.send_all()
    ((link, peer, message),) = sent.messages
    assert (link, peer) == ("link", b"C") and isinstance(message, Bundle)
    assert list(message.messages) == answers
    assert decode(encode(message)) == message


def test_a_lone_publish_answer_goes_as_itself() -> None:
    sent = Sent()
    one = _numbered(5)
    sent.runs.offer("link", b"C", one)
    sent.runs.send_all()
    assert sent.messages == [("link", b"C", one)]


def test_another_type_stream_or_message_between_starts_a_new_bundle() -> None:
    # What the peer reads must be what the core sent, in that order: a bundle holds one
    # type of one stream, and a packet (or any other message) between two answers ends it.
    sent = Sent()
    other_key = bytes(KEY_SIZE)
    sent.runs.offer("link", b"C", _numbered(1))
    sent.runs.offer("link", b"C", _numbered(2))
    sent.runs.offer("link", b"C", PublishConfirmed(3, _KEY, 103))
    sent.runs.offer("link", b"C", _numbered(4, other_key))
    sent.runs.offer("link", b"C", packet(7))
    sent.runs.offer("link", b"C", _numbered(5, other_key))
    sent.runs.send(b"C")  # (the driver is about to send C another message)
    sent.runs.send_all()
    shapes = [[type(m).__name__ for m in _bundled(message)] for _, _, message in sent.messages]
    assert shapes == [
        ["PublishNumbered", "PublishNumbered"],
        ["PublishConfirmed"],
        ["PublishNumbered"],
        ["SubscribeData"],
        ["PublishNumbered"],
    ]


def test_a_bundle_never_outgrows_a_frame() -> None:
    sent = Sent()
    data = b"d" * (MAX_PAYLOAD // 3)
    for uid in range(12):
        sent.runs.offer(
            "link", b"C", PublishData(uid, _KEY, None, 0.5, 10, data, None, PacketKind.DATA, None)
        )
    sent.runs.send_all()
    counts = [len(_bundled(m)) for _, _, m in sent.messages]
    assert sum(counts) == 12 and max(counts) > 1
    assert all(len(encode(m)) <= MAX_FRAME for _, _, m in sent.messages)


async def test_a_burst_of_publishes_climbs_and_is_answered_in_bundles() -> None:
    # A chain P - M - R with the stream's root at R: a burst that P's client publishes in
    # one request goes up, is numbered, confirmed and acknowledged in bundles, so R reads
    # fewer frames than it has publishes (each publish alone would be two frames at R: the
    # publish and its confirmation); every packet reaches P's subscriber once, in order.
    key = _key_near(0.9)
    topology = Topology((0.1, 0.5, 0.9), ((1,), (0, 2), (1,)))
    with trio.fail_after(LIMIT):
        async with LocalNetwork(topology, core=FAST) as net:
            await net.wait_linked()
            inbox = await join(net.node(0), key)
            publisher, root = net.node(0).host, net.node(2).host
            assert root.core.streams[key].parent is None
            frames = root.frames_in
            sender = Inbox()
            client = publisher.add_client(sender)
            publisher.publish_batch(client, key, [(uid, b"p%d" % uid) for uid in range(200)])
            await publisher.wait_until(lambda: len(sender.acked()) == 200)
            await publisher.wait_until(inbox.has(200))
            numbers = [sender.acked()[uid] for uid in range(200)]
            assert inbox.numbers() == numbers == list(range(numbers[0], numbers[0] + 200))
            assert root.frames_in - frames < 200, root.frames_in - frames


def test_offer_gathers_packets_and_bundled_messages_and_sends_the_rest_after_them() -> None:
    # What a driver does with each message the core sends: ``offer`` keeps a packet or a
    # publish-path message for the step's runs and bundles; any other message is the
    # driver's to send now, after the peer's pending run or bundle, which goes first.
    sent = Sent()
    assert sent.runs.offer("link", b"C", packet(1))
    assert sent.runs.offer("link", b"C", _numbered(5))
    assert sent.runs.offer("link", b"C", _numbered(6))
    assert sent.messages == [("link", b"C", packet(1))]  # (the answers do not continue it)
    other = PublishSucceeded(7, _KEY, 3)
    assert sent.runs.offer("link", b"D", other)  # (bundled: D has its own pending)
    held = Committed(_KEY, 2)
    assert not sent.runs.offer("link", b"C", held)  # the driver sends it now, after:
    assert [_bundled(m) for _, _, m in sent.messages[1:]] == [[_numbered(5), _numbered(6)]]
    sent.runs.send_all()
    assert sent.messages[-1] == ("link", b"D", other)
