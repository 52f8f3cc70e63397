"""The async client against a real one-node network over loopback: its errors, signed
streams (signing, and re-signing after a collision), the publish window, subscriptions
(catch-up, unsubscribe, overflow)."""

from __future__ import annotations

import functools
import socket

import pytest
import trio
import trio.testing
from client_node import running_node

from keyspace.stream_key import StreamAddressError
from keyspace.topology import Topology
from overlay.client import (
    ClientClosed,
    NodeUnreachable,
    NotAClientPort,
    PublishCollisionError,
    PublishRejectedError,
    SignedStream,
    SubscribeFailedError,
    SubscriptionOverflow,
    connect,
    open_client,
)
from overlay.core.config import NodeConfig
from overlay.core.events import Missed, Packet
from overlay.messages import PacketKind, PublishError
from testnet.local import LocalNetwork

STREAM = "ovl:open/aio"
HANG = 60  # turns a hang on real sockets into a failure; never reached when passing


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_unreachable_and_bad_addresses_name_the_address() -> None:
    port = free_port()
    with pytest.raises(NodeUnreachable, match=f"127.0.0.1:{port}"):
        await connect(f"127.0.0.1:{port}")
    with pytest.raises(NodeUnreachable, match="bad node address 'host:port:x'"):
        await connect("host:port:x")


async def test_a_bad_stream_address_is_the_keyspace_error() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            with pytest.raises(StreamAddressError, match="no '/'"):
                await client.publish("ovl:nokey", b"x")


@pytest.fixture
def slow_clock() -> trio.testing.MockClock:
    # Virtual time that jumps once every task has been idle for 50 ms of real time: the
    # client's 10 s wait for a Welcome passes at once, socket round trips still finish first.
    return trio.testing.MockClock(autojump_threshold=0.05)


async def test_a_listener_that_is_not_a_node_is_unreachable(
    slow_clock: trio.testing.MockClock,
) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(HANG):  # virtual seconds here
        async with trio.open_nursery() as nursery:
            serve = functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1")
            (listener,) = await nursery.start(serve)
            port = listener.socket.getsockname()[1]
            with pytest.raises(NodeUnreachable, match="did not answer as a node"):
                async with await connect(("127.0.0.1", port)):
                    pass
            nursery.cancel_scope.cancel()


async def test_a_peer_port_is_named_as_not_a_client_port() -> None:
    with trio.fail_after(HANG):
        async with LocalNetwork(Topology((0.5,), ((),))) as network:
            peer = str(network.node(0).peer_address)
            with pytest.raises(NotAClientPort, match=f"{peer} .*probably a node's peer port"):
                async with await connect(peer):
                    pass


async def test_a_closed_node_connection_raises_client_closed() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (port, address), open_client(address) as client:
            subscription = await client.subscribe(STREAM)
            (session,) = port.sessions
            await session.stream.aclose()
            with pytest.raises(ClientClosed):
                await subscription.next()
            with pytest.raises(ClientClosed):
                await client.publish(STREAM, b"x")


async def test_signed_streams_are_signed_by_the_client() -> None:
    signed = SignedStream.generate("sensor")
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            # A subscriber needs only the address.
            subscription = await client.subscribe(signed.address)
            assert [await client.publish(signed, b"%d" % i) for i in range(3)] == [0, 1, 2]
            event = await subscription.next()
            assert isinstance(event, Packet) and event.data == b"0"
            # A second publisher guesses 0, collides, re-signs for the free number.
            async with open_client(address) as second:
                assert await second.publish(signed, b"late") == 3
            # Publishing to a signed stream without its key is refused by the node.
            with pytest.raises(PublishRejectedError) as refused:
                await client.publish(signed.address, b"forged")
            assert refused.value.error in {PublishError.NEEDS_NUMBER, PublishError.BAD_SIGNATURE}


async def test_a_named_number_that_is_taken_raises_the_collision() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            await client.publish(STREAM, b"a")
            with pytest.raises(PublishCollisionError) as collided:
                await client.publish(STREAM, b"b", packet=0)
            assert collided.value.suggested_next == 1
            with pytest.raises(PublishRejectedError, match="BAD_MARKER"):
                await client.publish(STREAM, b"", kind=PacketKind.EPOCH_CLOSED)


async def test_the_publish_window_is_bounded() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address, max_in_flight=3) as client:
            uids = [client.publish_nowait(STREAM, b"%d" % i) for i in range(3)]
            with pytest.raises(trio.WouldBlock):
                client.publish_nowait(STREAM, b"x")
            assert await client.wait(uids[1]) == 1
            assert await client.flush() == [0, 2]
            assert await client.abort_epoch(STREAM, 5) == 3


async def test_catch_up_from_last_seen_and_unsubscribe() -> None:
    with trio.fail_after(HANG):
        async with (
            running_node() as (_, address),
            open_client(address) as publisher,
            open_client(address) as client,
        ):
            # (The publisher's membership keeps the one-node network in the stream's tree
            # while the subscriber comes and goes; alone, the root would forget the stream.)
            for i in range(5):
                publisher.publish_nowait(STREAM, b"%d" % i)
            await publisher.flush()
            async with await client.subscribe(STREAM, last_seen=2) as subscription:
                assert subscription.subscribed.last_packet == 4
                events = [await subscription.next() for _ in range(2)]
                assert [e.number for e in events if isinstance(e, Packet)] == [3, 4]
            # After unsubscribing, the next subscriber starts at the head.
            subscription = await client.subscribe(STREAM)
            await publisher.publish(STREAM, b"new")
            event = await subscription.next()
            assert isinstance(event, Packet) and event.number == 5
            await client.unsubscribe(STREAM)


async def test_a_stream_outlives_a_script_that_published_and_left() -> None:
    # The user's story the root's keep is for (``keeping``): a script publishes and
    # disconnects with nobody subscribed; a reader comes later, and so does the next script.
    with trio.fail_after(HANG):
        async with running_node() as (_, address):
            async with open_client(address) as script:
                for i in range(3):
                    await script.publish(STREAM, b"%d" % i)
            async with open_client(address) as reader, open_client(address) as later:
                subscription = await reader.subscribe(STREAM, last_seen=-1)
                events = [await subscription.next() for _ in range(3)]
                assert [(e.number, e.data) for e in events if isinstance(e, Packet)] == [
                    (0, b"0"),
                    (1, b"1"),
                    (2, b"2"),
                ]
                assert await later.publish(STREAM, b"3") == 3  # not 0 again


async def test_a_subscriber_beyond_the_window_is_told_what_it_missed() -> None:
    core = NodeConfig(window_packets=4)
    with trio.fail_after(HANG):
        async with running_node(core=core) as (_, address), open_client(address) as client:
            for i in range(10):
                client.publish_nowait(STREAM, b"%d" % i)
            await client.flush()
            subscription = await client.subscribe(STREAM, last_seen=0)
            first = await subscription.next()
            assert isinstance(first, Missed) and (first.first, first.last) == (1, 5)


async def test_a_failed_subscribe_raises() -> None:
    core = NodeConfig(max_streams=1)
    with trio.fail_after(HANG):
        async with running_node(core=core) as (_, address), open_client(address) as client:
            await client.subscribe(STREAM)
            with pytest.raises(SubscribeFailedError, match="limit"):
                await client.subscribe("ovl:open/another")


async def test_a_reader_that_falls_behind_overflows_cleanly() -> None:
    with trio.fail_after(HANG):
        async with (
            running_node() as (_, address),
            open_client(address) as publisher,
            open_client(address) as client,
        ):
            client.connection.max_buffered_events = 5
            subscription = await client.subscribe(STREAM)
            for i in range(8):
                publisher.publish_nowait(STREAM, b"%d" % i)
            await publisher.flush()
            seen = [await subscription.next() for _ in range(5)]
            assert [e.number for e in seen if isinstance(e, Packet)] == [0, 1, 2, 3, 4]
            with pytest.raises(SubscriptionOverflow) as overflow:
                await subscription.next()
            assert overflow.value.last_seen == 4
            # Resubscribing from last_seen goes on without a gap.
            again = await client.subscribe(STREAM, last_seen=4)
            event = await again.next()
            assert isinstance(event, Packet) and event.number == 5


async def test_flush_raises_the_first_refusal_after_taking_every_answer() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            keeper = await client.subscribe(STREAM)  # keeps the stream (and its numbers) alive
            client.publish_nowait(STREAM, b"a", packet=0)
            client.publish_nowait(STREAM, b"b", packet=0)  # collides with a
            client.publish_nowait(STREAM, b"c")
            with pytest.raises(PublishCollisionError) as refused:
                await client.flush()
            assert refused.value.suggested_next == 1
            assert client.connection.in_flight == 0  # every answer was taken
            assert await client.flush() == []
            assert await client.publish(STREAM, b"d") == 2
            del keeper


async def test_a_subscriber_can_ask_for_the_stream_from_its_first_packet() -> None:
    with trio.fail_after(HANG):
        async with running_node() as (_, address), open_client(address) as client:
            keeper = await client.subscribe(STREAM)  # holds the stream while it is published
            for i in range(3):
                await client.publish(STREAM, b"%d" % i)
            async with open_client(address) as late:
                again = await late.subscribe(STREAM, last_seen=-1)
                events = [await again.next() for _ in range(3)]
            assert [e.number for e in events if isinstance(e, Packet)] == [0, 1, 2]
            del keeper
