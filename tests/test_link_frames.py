"""A link's writer seals what is queued into as few frames as fit, and its reader hands every
message of a frame to the host in order: two real ``Link`` objects over an in-memory stream,
with the sessions of a real handshake."""

from __future__ import annotations

import trio
import trio.testing

from overlay.messages import MAX_FRAME, MAX_PAYLOAD, Heartbeat, Message, PacketKind, SubscribeData
from overlay.runtime.framing import MAX_PLAINTEXT, SEALED_MAX, FrameReader
from overlay.runtime.handshake import Handshake, Session
from overlay.runtime.identity import Identity
from overlay.runtime.link import Link

KEY = bytes(32)


def sessions() -> tuple[Session, Session]:
    initiator = Handshake(Identity.generate(), initiator=True, network=b"t")
    responder = Handshake(Identity.generate(), initiator=False, network=b"t")
    responder.start()
    responder.receive(initiator.receive(responder.receive(initiator.start())))
    return initiator.session(), responder.session()


class Inbox:
    """The receiving link's owner: keeps what arrives, wakes the test at a count."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.messages: list[Message] = []
        self.done = trio.Event()

    def received(self, link: Link, message: Message) -> None:
        self.messages.append(message)
        if len(self.messages) >= self.want:
            self.done.set()

    def read_done(self) -> None:
        pass

    def link_closed(self, link: Link, reason: str) -> None:
        self.done.set()


def packet(number: int, size: int = 1024) -> SubscribeData:
    return SubscribeData(KEY, number, bytes(size), None, PacketKind.DATA, None, None, None)


async def carry(messages: list[Message]) -> tuple[list[Message], int]:
    """Send ``messages`` in one synchronous step; the messages received, and frames opened."""
    ours, theirs = sessions()
    left, right = trio.testing.memory_stream_pair()
    sender = Link(left, ours, FrameReader(SEALED_MAX), peer=b"B", initiator=b"A")
    receiver = Link(right, theirs, FrameReader(SEALED_MAX), peer=b"A", initiator=b"A")
    inbox = Inbox(len(messages))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.run, Inbox(0))
        nursery.start_soon(receiver.run, inbox)
        for message in messages:
            sender.send(message)
        with trio.fail_after(5):
            await inbox.done.wait()
        assert receiver.reason is None, receiver.reason
        nursery.cancel_scope.cancel()
    return inbox.messages, theirs.received


async def test_messages_queued_together_travel_in_as_few_sealed_frames_as_fit() -> None:
    # 300 messages of about 1 KB and 200 heartbeats: some 310 KB of plaintext, so at least
    # five frames of at most MAX_PLAINTEXT bytes, and no more than six.
    messages: list[Message] = []
    for n in range(300):
        messages.append(packet(n))
        if n % 3 == 0:
            messages += [Heartbeat(n), Heartbeat(n + 1)]
    received, frames = await carry(messages)
    assert received == messages
    assert 300 * 1024 // MAX_PLAINTEXT < frames <= 6


async def test_a_message_that_does_not_fit_the_frame_being_filled_starts_the_next() -> None:
    largest = [packet(n, MAX_PAYLOAD) for n in (1, 2)]
    messages: list[Message] = [Heartbeat(0), largest[0], largest[1], Heartbeat(1)]
    received, frames = await carry(messages)
    assert received == messages
    # A largest packet fits one plaintext with room for a heartbeat, never beside another.
    assert 2 * MAX_PAYLOAD > MAX_PLAINTEXT > MAX_FRAME > MAX_PAYLOAD
    assert frames == 2


async def test_a_lone_message_is_sent_at_once_in_its_own_frame() -> None:
    received, frames = await carry([Heartbeat(7)])
    assert received == [Heartbeat(7)]
    assert frames == 1
