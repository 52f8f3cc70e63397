"""Publish windows on the client port: the node tells a client how many of a stream's
publishes it sends up its tree at once (``PublishWindow``), and a client asked for room
keeps to it, so a fast publisher's packets do not wait at its node behind its own backlog.

The session is driven by hand over a memory stream with a host whose window the test sets;
the connection is sans-IO; the last tests run real nodes on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing
from client_node import SilentHost, node_in_thread

from keyspace.stream_key import StreamKey
from keyspace.topology import Topology
from overlay.client import open_client
from overlay.client.blocking import Client
from overlay.client.connection import ClientConnection
from overlay.client.protocol import (
    PROTOCOL_VERSION,
    Hello,
    Publish,
    PublishWindow,
    Welcome,
    decode_event,
    encode_event,
    encode_request,
)
from overlay.core.events import PublishAcked, PublishFailed
from overlay.core.pace import INITIAL_WINDOW
from overlay.messages import PublishError
from overlay.runtime.client_port import ClientPortConfig, ClientSession
from overlay.runtime.framing import FrameReader
from overlay.runtime.publish_windows import Publishers
from testnet.local import LocalNetwork

STREAM = StreamKey.open("windows")
KEY = STREAM.key
HANG = 60  # seconds: turns a hang into a failure, never reached by a passing test


async def _events(stream: trio.abc.ReceiveStream, frames: FrameReader) -> list[object]:
    """The whole events the session has sent until it has nothing more to send (virtual
    time: the wait for more passes once every task is blocked)."""
    data = b""
    while True:
        with trio.move_on_after(1) as scope:
            data += await stream.receive_some(1 << 20)
        if scope.cancelled_caught:
            return [decode_event(body) for body in frames.feed(data)]


@asynccontextmanager
async def _session(
    host: SilentHost, version: int = PROTOCOL_VERSION, publishers: Publishers | None = None
) -> AsyncIterator[tuple[trio.abc.Stream, ClientSession, FrameReader]]:
    """A session run over a memory stream, past its Welcome (in the version it answers)."""
    ours, theirs = trio.testing.memory_stream_pair()
    session = ClientSession(host, theirs, ClientPortConfig(), publishers)  # type: ignore[arg-type]
    frames = FrameReader(1 << 24)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run)
        await ours.send_all(encode_request(Hello(1, version, "")))
        (welcome,) = await _events(ours, frames)
        assert isinstance(welcome, Welcome) and welcome.version == min(version, PROTOCOL_VERSION)
        yield ours, session, frames
        nursery.cancel_scope.cancel()


async def test_a_client_is_told_a_streams_window_when_it_publishes_and_when_it_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A version 2 client publishes: the step that reads it ends with the stream's window
    (8). An answer while the window moved to 16 is followed by the new window; an answer
    with it unchanged by nothing more; an answer to a uid it never published, by nothing."""
    host = SilentHost()
    with trio.fail_after(HANG):
        async with _session(host) as (ours, session, frames):
            await ours.send_all(encode_request(Publish(2, KEY, 10, b"x")))
            assert await _events(ours, frames) == [PublishWindow(KEY, 8)]
            host.window = 16
            session.deliver(PublishAcked(KEY, 10, 0))
            session.flush()
            assert await _events(ours, frames) == [
                PublishAcked(KEY, 10, 0),
                PublishWindow(KEY, 16),
            ]
            await ours.send_all(encode_request(Publish(3, KEY, 11, b"y")))
            failed = PublishFailed(KEY, 11, PublishError.BUSY, "busy")
            session.deliver(failed)
            session.flush()
            assert await _events(ours, frames) == [failed]
            host.window = 4
            other = StreamKey.open("other").key
            session.deliver(PublishAcked(other, 99, 0))
            session.flush()
            assert await _events(ours, frames) == [PublishAcked(other, 99, 0)]


async def test_sessions_publishing_one_stream_share_its_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The node's credit is one per stream: a client is told what the others publishing it
    leave of its window (8), and at least an even share. A has 2 unanswered, so B is told
    6; A, once one is answered, 7; A alone again, the whole 8. A version 1 client (C) is
    told nothing but counts: with its 5 unanswered, a new publisher D gets the even 4."""
    host, publishers = SilentHost(), Publishers()
    with trio.fail_after(HANG):
        async with (
            _session(host, publishers=publishers) as (a, first, a_frames),
            _session(host, publishers=publishers) as (b, second, b_frames),
        ):
            await a.send_all(encode_request(Publish(2, KEY, 10, b"x")))
            await a.send_all(encode_request(Publish(3, KEY, 11, b"x")))
            assert await _events(a, a_frames) == [PublishWindow(KEY, 8)]
            await b.send_all(encode_request(Publish(2, KEY, 20, b"x")))
            assert await _events(b, b_frames) == [PublishWindow(KEY, 6)]
            first.deliver(PublishAcked(KEY, 10, 0))
            first.flush()
            assert await _events(a, a_frames) == [PublishAcked(KEY, 10, 0), PublishWindow(KEY, 7)]
            second.deliver(PublishAcked(KEY, 20, 1))
            second.flush()
            first.deliver(PublishAcked(KEY, 11, 2))
            first.flush()
            assert await _events(a, a_frames) == [PublishAcked(KEY, 11, 2), PublishWindow(KEY, 8)]
            assert publishers.counts == publishers.out == {}
        async with (
            _session(host, version=1, publishers=publishers) as (c, _, c_frames),
            _session(host, publishers=publishers) as (d, _, d_frames),
        ):
            for uid in range(5):
                await c.send_all(encode_request(Publish(2, KEY, 30 + uid, b"x")))
            assert await _events(c, c_frames) == []
            await d.send_all(encode_request(Publish(2, KEY, 40, b"x")))
            assert await _events(d, d_frames) == [PublishWindow(KEY, 4)]
        assert publishers.counts == publishers.out == {}  # (the sessions ended)


async def test_a_version_1_client_is_welcomed_in_its_version_and_told_no_window(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client that speaks version 1 would not decode a PublishWindow: the node answers
    its Hello in version 1 and never sends it one."""
    host = SilentHost()
    with trio.fail_after(HANG):
        async with _session(host, version=1) as (ours, session, frames):
            await ours.send_all(encode_request(Publish(2, KEY, 10, b"x")))
            session.deliver(PublishAcked(KEY, 10, 0))
            session.flush()
            assert await _events(ours, frames) == [PublishAcked(KEY, 10, 0)]


async def test_a_client_newer_than_the_node_is_welcomed_in_the_nodes_version(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A Hello of a version after this node's is answered in this node's (``_session``
    checks the Welcome), and the session goes on in it."""
    host = SilentHost()
    with trio.fail_after(HANG):
        async with _session(host, version=PROTOCOL_VERSION + 1) as (ours, _, frames):
            await ours.send_all(encode_request(Publish(2, KEY, 10, b"x")))
            assert await _events(ours, frames) == [PublishWindow(KEY, 8)]


def _welcomed() -> ClientConnection:
    connection = ClientConnection()
    connection.receive_data(encode_event(Welcome(0, PROTOCOL_VERSION, bytes(32), 1 << 20)))
    connection.data_to_send()
    return connection


def test_a_connection_keeps_to_the_window_it_was_told_and_to_its_own_bound() -> None:
    """Before the node says, a stream's window is the one a node's pace starts with; once
    told 2, a third waits while two are unanswered; ``max_in_flight`` bounds all streams."""
    connection = _welcomed()
    uids = []
    for _ in range(INITIAL_WINDOW):
        assert connection.may_publish(KEY, 1000)
        uids.append(connection.publish(STREAM, b"x"))
    assert not connection.may_publish(KEY, 1000)
    connection.receive_data(encode_event(PublishWindow(KEY, 40)))
    assert connection.publish_window(KEY) == 40 and connection.may_publish(KEY, 1000)
    assert not connection.may_publish(KEY, INITIAL_WINDOW)  # (its own bound)
    connection.receive_data(encode_event(PublishWindow(KEY, 2)))
    for number, uid in enumerate(uids[:-2]):
        connection.receive_data(encode_event(PublishAcked(KEY, uid, number)))
    assert not connection.may_publish(KEY, 1000)  # (two unanswered)
    connection.receive_data(encode_event(PublishFailed(KEY, uids[-1], PublishError.BUSY, "")))
    assert connection.may_publish(KEY, 1000)
    other = StreamKey.open("other").key
    assert connection.may_publish(other, 1000)


def test_a_connection_to_a_version_1_node_keeps_only_its_own_bound() -> None:
    """A node of version 1 tells no windows: the connection does not wait for one."""
    connection = ClientConnection()
    connection.receive_data(encode_event(Welcome(0, 1, bytes(32), 1 << 20)))
    for _ in range(2 * INITIAL_WINDOW):
        assert connection.may_publish(KEY, 1000)
        connection.publish(STREAM, b"x")
    assert not connection.may_publish(KEY, 2 * INITIAL_WINDOW)


def test_a_window_for_a_stream_the_connection_never_published_to_is_ignored() -> None:
    """The connection takes a window only for its own streams: a node cannot make it
    keep one per key it names."""
    connection = _welcomed()
    connection.receive_data(encode_event(PublishWindow(KEY, 1)))
    assert connection.publish_window(KEY) == INITIAL_WINDOW


async def test_a_publisher_keeps_to_its_nodes_pace_off_the_root_and_at_it() -> None:
    """Two real nodes: the stream's root, and the node a publisher connects to. Awaiting
    ``room`` before each publish, the publisher never has more of the stream unanswered
    than its node's window, which is its node's pace; a client of the root is told the
    root's. Every publish is acknowledged."""
    locations = (STREAM.location, (STREAM.location + 0.5) % 1.0)
    with trio.fail_after(HANG):
        async with LocalNetwork(Topology(locations, ((1,), (0,)))) as net:
            await net.wait_linked()
            member, root = net.node(1), net.node(0)
            address = member.client_address
            async with open_client(f"{address.host}:{address.port}") as client:
                conn = client.connection
                crowded = peak = 0
                for i in range(600):
                    await client.room(STREAM)
                    crowded += conn.in_flight >= conn.publish_window(KEY)
                    client.publish_nowait(STREAM, b"%d" % i)
                    peak = max(peak, conn.in_flight)
                assert sorted(await client.flush()) == list(range(600))
                assert crowded == 0 and peak >= INITIAL_WINDOW
                assert conn.publish_window(KEY) == member.host.publish_window(KEY)
            address = root.client_address
            async with open_client(f"{address.host}:{address.port}") as client:
                assert await client.publish(STREAM, b"at the root") == 600
                await client.publish(STREAM, b"and once answered")
                assert client.connection.publish_window(KEY) == root.host.publish_window(KEY)


def test_a_blocking_publisher_that_asks_for_room_keeps_to_its_window() -> None:
    """The blocking client's ``room`` reads answers until the stream has room: before each
    of 300 publishes to a node (the stream's root), fewer than its window are unanswered."""
    with node_in_thread() as (_, address), Client(address) as client:
        conn = client.connection
        crowded = 0
        for i in range(300):
            client.room(STREAM)
            crowded += conn.in_flight >= conn.publish_window(KEY)
            client.publish_nowait(STREAM, b"%d" % i)
        assert client.flush() == list(range(300))
        assert crowded == 0
