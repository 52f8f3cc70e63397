"""The node side of the client port over real loopback TCP, against a real NodeHost with no
links (a one-node network): ordering, pipelining, idempotency, atomic epochs, describe, and
hostile or slow clients, which lose their own connection and nothing else."""

from __future__ import annotations

import logging
import socket
import struct

import pytest
import trio
import trio.testing
from client_node import SilentHost, running_node
from socket_reads import waiting_bytes

from keyspace.stream_key import StreamKey
from overlay.client import open_client
from overlay.client.connection import ClientConnection
from overlay.client.protocol import (
    MAX_REQUEST_FRAME,
    PROTOCOL_VERSION,
    ErrorCode,
    Hello,
    ProtocolError,
    Publish,
    Subscribe,
    decode_event,
    encode_request,
)
from overlay.core.events import Epoch, Packet, PublishAcked, PublishFailed
from overlay.core.pace import INITIAL_WINDOW
from overlay.messages import PacketKind, PublishError
from overlay.runtime.budget import QueueBudget
from overlay.runtime.client_port import ClientPortConfig, ClientSession
from overlay.runtime.framing import FrameReader

STREAM = "ovl:open/prices"

# Every test here waits on the kernel (real sockets): this bound only turns a hang into a
# failure, it is never reached by a passing test.
HANG = 60


async def raw_connect(address: str) -> trio.SocketStream:
    host, port = address.rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


async def read_until_closed(stream: trio.SocketStream) -> list[object]:
    """Every event the node sends before it closes the connection."""
    reader = FrameReader(16 * 1024 * 1024)
    events: list[object] = []
    while data := await stream.receive_some(65536):
        events.extend(decode_event(body) for body in reader.feed(data))
    return events


async def test_publishes_reach_a_subscriber_in_order() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            subscription = await client.subscribe(STREAM)
            assert subscription.subscribed.root
            numbers = [await client.publish(STREAM, b"%d" % i) for i in range(50)]
            assert numbers == list(range(50))
            for i in range(50):
                event = await subscription.next()
                assert isinstance(event, Packet)
                assert (event.number, event.data) == (i, b"%d" % i)


async def test_many_pipelined_publishes() -> None:
    with trio.fail_after(HANG):
        async with (
            running_node() as (_, address),
            open_client(address) as publisher,
            open_client(address) as reader,
        ):
            subscription = await reader.subscribe(STREAM)
            for i in range(5000):
                publisher.publish_nowait(STREAM, b"%d" % i)
            assert await publisher.flush() == list(range(5000))
            for i in range(5000):
                event = await subscription.next()
                assert isinstance(event, Packet) and event.number == i


async def test_pipelined_plain_publishes_are_numbered_in_batches_in_the_order_sent() -> None:
    # A client writes 2,000 publishes without waiting, every 500th with an epoch (not
    # plain: it goes alone). The root numbers the plain ones read together as batches, and
    # every publish keeps its place: numbers follow the order the client sent them in.
    with trio.fail_after(HANG):
        async with (
            running_node() as (port, address),
            open_client(address) as publisher,
            open_client(address) as reader,
        ):
            subscription = await reader.subscribe(STREAM)
            await publisher.publish(STREAM, b"first")  # (the root's look is over)
            for i in range(1, 2000):
                epoch = 1 if i % 500 == 0 else None
                publisher.publish_nowait(STREAM, b"%d" % i, epoch=epoch)
            assert await publisher.flush() == list(range(1, 2000))
            assert port.host.core.stats.batches > 0
            for i in range(2000):
                event = await subscription.next()
                assert isinstance(event, Packet) and event.number == i
                assert event.data == (b"first" if i == 0 else b"%d" % i)
                assert event.epoch == (1 if i and i % 500 == 0 else None)


async def test_the_same_uid_is_ordered_once() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            subscription = await client.subscribe(STREAM)
            first = await client.publish(STREAM, b"a", uid=77)
            again = await client.publish(STREAM, b"a", uid=77)
            other = await client.publish(STREAM, b"b")
            assert (first, again, other) == (0, 0, 1)
            numbers = [(await subscription.next()), (await subscription.next())]
            assert [e.number for e in numbers if isinstance(e, Packet)] == [0, 1]


async def test_atomic_subscribers_get_epochs_whole() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            atomic = await client.subscribe(STREAM, atomic=True)
            async with open_client(address) as other:
                plain = await other.subscribe(STREAM)
                for i in range(3):
                    client.publish_nowait(STREAM, b"e%d" % i, epoch=1)
                await client.flush()
                assert await client.close_epoch(STREAM, 1) == 3
                event = await atomic.next()
                assert isinstance(event, Epoch)
                assert [p.data for p in event.packets] == [b"e0", b"e1", b"e2"]
                assert event.closed_at == 3
                kinds = [(await plain.next()) for _ in range(4)]
                assert [e.kind for e in kinds if isinstance(e, Packet)] == [
                    PacketKind.DATA,
                    PacketKind.DATA,
                    PacketKind.DATA,
                    PacketKind.EPOCH_CLOSED,
                ]


async def test_describe_answers_the_hosts_snapshot() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (port, address), open_client(address) as client:
            await client.subscribe(STREAM)
            await client.publish(STREAM, b"x")
            state = await client.describe()
            assert state["id"] == port.host.node_id
            assert state["clients"] == 1
            one = await client.describe(STREAM)
            streams = one["streams"]
            assert isinstance(streams, list) and len(streams) == 1
            assert streams[0]["key"] == StreamKey.parse(STREAM).key
            assert streams[0]["high"] == 0
            pace = streams[0]["publishing"]  # (its client published once, answered)
            assert pace["window"] == INITIAL_WINDOW and pace["out"] == pace["held"] == 0
            assert pace["base"] >= 0
            empty = await client.describe("ovl:open/other")
            assert empty["streams"] == []


@pytest.mark.parametrize(
    ("garbage", "code"),
    [
        (b"\x00\x00\x00\x03\xff\xff\xff", ErrorCode.MALFORMED),
        ((MAX_REQUEST_FRAME + 1).to_bytes(4, "big"), ErrorCode.FRAME_TOO_LARGE),
        (encode_request(Subscribe(0, bytes(32))), ErrorCode.NOT_HELLO),
        (encode_request(Hello(0, 0)), ErrorCode.BAD_VERSION),
        (encode_request(Hello(0)) + encode_request(Hello(1)), ErrorCode.NOT_HELLO),
    ],
    ids=["garbage", "oversized", "no-hello", "bad-version", "second-hello"],
)
async def test_a_bad_client_loses_only_its_own_connection(garbage: bytes, code: ErrorCode) -> None:
    with trio.fail_after(HANG):
        async with running_node() as (port, address), open_client(address) as good:
            subscription = await good.subscribe(STREAM)
            bad = await raw_connect(address)
            await bad.send_all(garbage)
            events = await read_until_closed(bad)
            last = events[-1]
            assert isinstance(last, ProtocolError) and last.code is code
            assert last.reason
            # The node and its other client go on.
            assert await good.publish(STREAM, b"still here") == 0
            event = await subscription.next()
            assert isinstance(event, Packet) and event.data == b"still here"
            assert port.dropped_malformed == 1


@pytest.fixture
def slow_clock() -> trio.testing.MockClock:
    # Virtual time that jumps only once every task has been idle for 50 ms of real time:
    # the slow client's close_timeout passes without the test waiting 5 s, while socket
    # round trips (which autojump cannot see) still finish first.
    return trio.testing.MockClock(autojump_threshold=0.05)


async def test_a_slow_client_is_cut_off_and_the_queue_stays_bounded(
    slow_clock: trio.testing.MockClock,
) -> None:
    bound = 256 * 1024
    config = ClientPortConfig(max_queue_bytes=bound, max_queue_events=1000)
    with trio.fail_after(HANG):
        async with running_node(config) as (port, address), open_client(address) as publisher:
            # A client that subscribes and then never reads, with a small receive buffer.
            sock = trio.socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            host, number = address.rsplit(":", 1)
            await sock.connect((host, int(number)))
            slow = trio.SocketStream(sock)
            hello = ClientConnection()
            hello.subscribe(STREAM)
            await slow.send_all(hello.data_to_send())
            while port.host.describe()["clients"] < 2 or not port.host.core.streams:
                await trio.sleep(0.01)
            (session,) = [s for s in port.sessions if s.client == 2]
            payload = b"x" * 60_000
            sent = 0
            while session.closing is None:
                for _ in range(10):
                    publisher.publish_nowait(STREAM, payload)
                await publisher.flush()
                sent += 10
                assert sent < 2000, "the slow client was never cut off"
            assert session.peak_queued_bytes <= bound
            assert session.closing is not None and session.closing.code is ErrorCode.TOO_SLOW
            while session in port.sessions:
                await trio.sleep(0.1)
            assert port.dropped_slow == 1
            # Its subscription is gone; the publisher's connection is untouched.
            state = await publisher.describe(STREAM)
            assert state["clients"] == 1
            assert await publisher.publish(STREAM, b"after") == sent
            await slow.aclose()


async def test_a_client_with_too_many_unanswered_publishes_is_not_read_until_answers_come() -> None:
    """Back-pressure: the session stops reading requests at ``max_unanswered_publishes``
    and reads on once an answer comes (however slowly the client reads it)."""
    host = SilentHost()
    config = ClientPortConfig(max_unanswered_publishes=2)
    ours, theirs = trio.testing.memory_stream_pair()
    session = ClientSession(host, theirs, config)  # type: ignore[arg-type]
    key = StreamKey.open("unanswered").key
    with trio.fail_after(HANG):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            await ours.send_all(encode_request(Hello(1, PROTOCOL_VERSION, "")))
            for uid in (10, 11, 12, 13):
                await ours.send_all(encode_request(Publish(2, key, uid, b"x")))
                await trio.testing.wait_all_tasks_blocked()
            assert host.published == [10, 11]
            session.deliver(PublishAcked(key, 11, 0))
            await trio.testing.wait_all_tasks_blocked()
            assert host.published == [10, 11, 12]
            session.deliver(PublishFailed(key, 10, PublishError.BUSY, "busy"))
            await trio.testing.wait_all_tasks_blocked()
            assert host.published == [10, 11, 12, 13]
            nursery.cancel_scope.cancel()


def _events_waiting(sock: socket.socket, frames: FrameReader | None = None) -> list[object]:
    """The whole events on the client's socket already, read without waiting; ``frames``
    keeps a part of one for the next call."""
    frames = frames if frames is not None else FrameReader(1 << 24)
    return [decode_event(body) for body in frames.feed(waiting_bytes(sock))]


async def test_a_steps_events_are_on_the_clients_socket_when_the_step_ends() -> None:
    """The host delivers a packet and an ack in one step: both are written before the step
    returns, with no task of the session's run in between (``flush``)."""
    from overlay.core.effects import Deliver
    from overlay.runtime.host import NodeHost

    host = NodeHost(bytes(32), 0.5)
    node_side, client_side = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(node_side))
    session = ClientSession(host, stream, ClientPortConfig())
    client = host.add_client(session, session.flush)
    key = StreamKey.open("flushed").key
    packet = Packet(key, 0, b"x", None, PacketKind.DATA)
    host._apply([Deliver(client, packet), Deliver(client, PublishAcked(key, 7, 0))])
    assert _events_waiting(client_side) == [packet, PublishAcked(key, 7, 0)]
    assert session.held_bytes == 0
    node_side.close()
    client_side.close()


async def test_the_last_word_follows_the_rest_of_a_frame_already_begun() -> None:
    """A client that reads slowly: ``flush`` wrote part of its queue, ending inside a
    frame, and the session then ends (too slow) while its reader waits for the client's
    next request, which comes only in part. The client gets the rest of the batch begun
    (the send in progress) and then the ProtocolError, never the error inside a frame,
    and the reader's end does not cut the writer short."""
    node_side, client_side = socket.socketpair()
    node_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(node_side))
    session = ClientSession(SilentHost(), stream, ClientPortConfig())  # type: ignore[arg-type]
    key = StreamKey.open("slow").key
    packets = [Packet(key, n, bytes(60_000), None, PacketKind.DATA) for n in range(16)]
    received: list[object] = []
    frames = FrameReader(1 << 24)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            await trio.testing.wait_all_tasks_blocked()
            for packet in packets:
                session.deliver(packet)
            session.flush()
            assert session.held_bytes > 0  # (the socket took part of it)
            session.fail(None, ErrorCode.TOO_SLOW, "test")
            client_side.sendall(encode_request(Hello(1, PROTOCOL_VERSION, ""))[:3])
            while not received or not isinstance(received[-1], ProtocolError):
                await trio.sleep(0)
                received += _events_waiting(client_side, frames)
    # The batch the socket had begun to take goes out whole, then the last word.
    assert received[:-1] == packets
    assert isinstance(received[-1], ProtocolError) and received[-1].code is ErrorCode.TOO_SLOW
    client_side.close()


class _BudgetedHost(SilentHost):
    """A silent host with a node-wide queue bound."""

    def __init__(self) -> None:
        super().__init__()
        self.budget = QueueBudget(1 << 30)  # type: ignore[assignment]


def _tcp_session(host: SilentHost) -> tuple[ClientSession, socket.socket, socket.socket]:
    """A session over a real loopback TCP connection; the node's and the client's sockets."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    node_side, _ = listener.accept()
    listener.close()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(node_side))
    return ClientSession(host, stream, ClientPortConfig()), node_side, client  # type: ignore[arg-type]


async def test_a_client_that_resets_its_connection_ends_its_session_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A subscriber killed with events unread resets its TCP connection; the session's next
    read meets the reset. The session ends as for any client that went away, not logged as
    a fault of the node."""
    session, _, client = _tcp_session(SilentHost())
    key = StreamKey.open("reset").key
    with trio.fail_after(HANG):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            client.sendall(encode_request(Hello(1, PROTOCOL_VERSION, "")))
            await trio.testing.wait_all_tasks_blocked()
            session.deliver(Packet(key, 0, b"unread", None, PacketKind.DATA))
            session.flush()
            await trio.testing.wait_all_tasks_blocked()
            assert session.held_bytes == 0  # (all written: the writer has nothing to send)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # (a reset: unread data, linger 0)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_a_session_that_ends_holding_a_partial_write_gives_its_bytes_back() -> None:
    """The socket took part of a flush, and the session ends (here: the node shuts down)
    before its writer sends the rest: what it held of the node's queue budget is given
    back, or the budget would go on cutting healthy links and clients for it."""
    host = _BudgetedHost()
    session, node_side, client = _tcp_session(host)
    node_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = StreamKey.open("partial").key
    for n in range(40):
        session.deliver(Packet(key, n, bytes(60_000), None, PacketKind.DATA))
    session.flush()
    assert host.budget.total == session.held_bytes > 0
    with trio.fail_after(HANG):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            nursery.cancel_scope.cancel()  # (before the session's writer ever runs)
    assert host.budget.total == 0
    client.close()
