"""How a link uses its socket. Writing: ``flush`` puts what a step queued on the socket
before the step ends, with no task switch; what the socket does not take goes out later
from the writer task, ahead of anything queued after it. Reading: straight from the
socket, with a checkpoint between reads. Real ``Link`` objects over a connected socket
pair, with the sessions of a real handshake."""

from __future__ import annotations

import socket

import trio
import trio.testing
from socket_reads import waiting_bytes
from test_link_frames import Inbox, packet, sessions

from overlay.codec import encode
from overlay.messages import Heartbeat, Message
from overlay.runtime.budget import QueueBudget
from overlay.runtime.direct_io import receive
from overlay.runtime.framing import SEALED_MAX, FrameReader
from overlay.runtime.handshake import Session
from overlay.runtime.link import Link


def socket_links(
    budget: QueueBudget | None = None,
) -> tuple[Link, Link, socket.socket, socket.socket]:
    """A sending link (sharing ``budget``) and a receiving one over a socket pair, and the
    pair's two sockets (the links' trio sockets wrap these very objects)."""
    ours, theirs = sessions()
    left, right = socket.socketpair()

    def link(
        sock: socket.socket, session: Session, peer: bytes, shares: QueueBudget | None
    ) -> Link:
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        reader = FrameReader(SEALED_MAX)
        return Link(stream, session, reader, peer=peer, initiator=b"A", budget=shares)

    return link(left, ours, b"B", budget), link(right, theirs, b"A", None), left, right


def read_now(receiver_socket: socket.socket, receiver: Link) -> list[Message]:
    """The messages on the receiving socket already, read and opened without waiting."""
    inbox = Inbox(10**9)
    for body in receiver._reader.feed(waiting_bytes(receiver_socket)):
        receiver._take(inbox, body)
    return inbox.messages


async def test_a_flush_puts_the_frames_of_a_step_on_the_socket_before_it_returns() -> None:
    # Neither link's task runs: whatever reaches the peer was written by ``flush`` itself,
    # in the step that queued it.
    sender, receiver, _, right = socket_links()
    sender.send_encoded(encode(Heartbeat(1)))
    sender.send_encoded(encode(packet(0)))
    assert read_now(right, receiver) == []  # queued, not yet written
    sender.flush()
    assert read_now(right, receiver) == [Heartbeat(1), packet(0)]
    assert sender.held_bytes == 0


async def test_what_the_socket_does_not_take_goes_out_later_in_order() -> None:
    # A peer that reads slowly: the socket's buffers fill, ``flush`` writes what fits, the
    # writer task sends the rest when the socket drains, and frames queued meanwhile follow
    # it. The receiver gets every message once, in the order they were queued.
    sender, receiver, left, _ = socket_links()
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    messages: list[Message] = [packet(n, 4000) for n in range(600)]
    inbox = Inbox(len(messages))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.run, Inbox(0))
        for start in range(0, len(messages), 100):
            for message in messages[start : start + 100]:
                sender.send_encoded(encode(message))
            sender.flush()
        assert sender.held_bytes > 0  # (the socket did not take it all: the writer has it)
        nursery.start_soon(receiver.run, inbox)
        with trio.fail_after(10):
            await inbox.done.wait()
        assert receiver.reason is None and sender.reason is None
        await trio.testing.wait_all_tasks_blocked()  # (the writer's last send returns)
        assert sender.held_bytes == 0
        nursery.cancel_scope.cancel()
    assert inbox.messages == messages


async def test_a_closed_link_writes_nothing_more() -> None:
    # Its descriptor is closed once its task ends, and the number may then name another
    # connection: nothing may be written through it after the close.
    sender, receiver, _, right = socket_links()
    sender.send_encoded(encode(Heartbeat(1)))
    sender.close("test")
    sender.send_encoded(encode(Heartbeat(2)))
    sender.flush()
    assert read_now(right, receiver) == []
    assert sender.held_bytes == 0


async def test_a_reader_hands_over_what_arrives_and_closes_at_the_peers_end() -> None:
    sender, receiver, left, _ = socket_links()
    inbox = Inbox(3)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(receiver.run, inbox)
        for n in range(3):
            sender.send(Heartbeat(n))
        with trio.fail_after(5):
            await inbox.done.wait()
        assert inbox.messages == [Heartbeat(0), Heartbeat(1), Heartbeat(2)]
        left.shutdown(socket.SHUT_WR)
        with trio.fail_after(5):
            await receiver.wait_closed()
    assert receiver.reason == "the peer closed the link"


async def test_a_read_is_a_checkpoint_even_when_data_is_waiting() -> None:
    # A peer that keeps the socket full must not hold the node: every read lets the other
    # tasks run first, though its bytes are there already.
    sender, receiver, _, _ = socket_links()
    sender.send_encoded(encode(Heartbeat(1)))
    sender.flush()
    with trio.testing.assert_checkpoints():
        data = await receive(receiver._stream, receiver._fd, 1 << 20)
    inbox = Inbox(1)
    for body in receiver._reader.feed(data):
        receiver._take(inbox, body)
    assert inbox.messages == [Heartbeat(1)]


async def test_a_read_is_its_own_copy_of_the_bytes_that_arrived() -> None:
    # Reads land in one buffer kept for the thread: what a read returned must stay as it
    # was when the next read fills that buffer with other bytes.
    _, _, left, right = socket_links()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(right))
    fd = right.fileno()
    left.sendall(b"a" * 1000)
    first = await receive(stream, fd, 1 << 18)
    left.sendall(b"b" * 10)
    second = await receive(stream, fd, 1 << 18)
    assert (first, second) == (b"a" * 1000, b"b" * 10)


async def test_a_link_that_closes_holding_a_partial_write_gives_its_bytes_back() -> None:
    # The socket took part of a flush; the link closes before its writer ever sends the
    # rest. The node's queue budget must not keep counting those bytes once the link is
    # gone, or it would cut healthy links for room that no longer exists.
    budget = QueueBudget(1 << 30)
    sender, _, left, right = socket_links(budget)
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender.run, Inbox(0))
        for n in range(100):
            sender.send_encoded(encode(packet(n, 4000)))
        sender.flush()
        assert budget.total == sender.held_bytes > 0
        sender.close("test")
    assert sender.reason == "test"
    assert budget.total == 0
    left.close()
    right.close()
