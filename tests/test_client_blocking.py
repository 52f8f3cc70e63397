"""The blocking client against a node run by its own trio.run in a background thread (the
one place a thread is the point: the client is for code without an event loop). Every wait
has a timeout, and the node thread is stopped and joined by ``node_in_thread``."""

from __future__ import annotations

import socket

import pytest
from client_node import network_in_thread, node_in_thread

from overlay.client import (
    Client,
    ClientTimeout,
    NodeUnreachable,
    NotAClientPort,
    PublishCollisionError,
    SignedStream,
)
from overlay.client.connection import parse_address
from overlay.client.protocol import DEFAULT_CLIENT_PORT
from overlay.core.events import Epoch, Packet

STREAM = "ovl:open/blocking"
TIMEOUT = 30.0  # per wait: only a broken test waits this long


def test_publish_and_subscribe_in_order() -> None:
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as client:
        subscription = client.subscribe(STREAM, event_timeout=TIMEOUT)
        assert subscription.subscribed.root
        assert [client.publish(STREAM, b"%d" % i) for i in range(20)] == list(range(20))
        received = []
        for event in subscription:
            assert isinstance(event, Packet)
            received.append(event.data)
            if len(received) == 20:
                break
        assert received == [b"%d" % i for i in range(20)]


def test_pipelined_publishes_with_a_bounded_window() -> None:
    with (
        node_in_thread() as (_, address),
        Client(address, timeout=TIMEOUT, max_in_flight=50) as client,
    ):
        for i in range(3000):
            client.publish_nowait(STREAM, b"%d" % i)
            assert client.connection.in_flight <= 50
        assert client.flush() == list(range(3000))
        assert client.flush() == []


def test_uids_signed_streams_and_epochs() -> None:
    signed = SignedStream.generate("meter")
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as client:
        assert client.publish(STREAM, b"a", uid=5) == client.publish(STREAM, b"a", uid=5) == 0
        with pytest.raises(PublishCollisionError):
            client.publish(STREAM, b"b", packet=0)
        atomic = client.subscribe(signed.address, atomic=True)
        with Client(address, timeout=TIMEOUT) as publisher:
            for i in range(3):
                publisher.publish_nowait(signed, b"%d" % i, epoch=7)
            assert publisher.flush() == [0, 1, 2]
            assert publisher.close_epoch(signed, 7) == 3
        event = atomic.next(TIMEOUT)
        assert isinstance(event, Epoch) and [p.data for p in event.packets] == [b"0", b"1", b"2"]
        state = client.describe(signed.address)
        assert len(state["streams"]) == 1  # type: ignore[arg-type]


def test_waits_time_out_and_connect_errors_name_the_address() -> None:
    with node_in_thread() as (_, address), Client(address, timeout=TIMEOUT) as client:
        subscription = client.subscribe(STREAM)
        with pytest.raises(ClientTimeout, match="next event"):
            subscription.next(timeout=0.05)  # (a real wait: the timeout is under test)
        client.unsubscribe(STREAM)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NodeUnreachable, match=f"127.0.0.1:{port}"):
        Client(f"127.0.0.1:{port}", timeout=TIMEOUT)


def test_node_addresses_take_a_tcp_scheme_and_refuse_others() -> None:
    assert parse_address("tcp://127.0.0.1:7902") == ("127.0.0.1", 7902)
    assert parse_address("TCP://[::1]:7") == ("::1", 7)
    assert parse_address("localhost") == ("localhost", DEFAULT_CLIENT_PORT)
    assert parse_address("[::1]") == ("::1", DEFAULT_CLIENT_PORT)
    with pytest.raises(NodeUnreachable, match="'localhost': no port"):
        parse_address("localhost", default_port=None)
    with pytest.raises(NodeUnreachable, match="'http://h:1': a node's client port is plain TCP"):
        parse_address("http://h:1")
    with node_in_thread() as (_, address), Client(f"tcp://{address}", timeout=TIMEOUT) as client:
        assert client.address == address


def test_a_peer_port_is_named_as_not_a_client_port() -> None:
    with network_in_thread(1) as (node,):
        peer = str(node.peer_address)
        with pytest.raises(NotAClientPort, match=f"{peer} .*probably a node's peer port"):
            Client(peer, timeout=TIMEOUT)
        with Client(str(node.client_address), timeout=TIMEOUT) as client:
            assert client.connection.welcome is not None
