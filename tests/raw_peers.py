"""Speaking to a real node over loopback as a peer by hand: dialling it, a genuine handshake,
a Hello claiming any location, waiting for the node to close the connection, and checking
afterwards that its real link still carries a stream."""

from __future__ import annotations

import trio
from loopback_nets import join, publish_all

from overlay.codec import encode
from overlay.messages import Hello
from overlay.runtime.framing import SEALED_MAX, FrameReader, frame, record
from overlay.runtime.handshake import Handshake, HandshakeError, Session
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity
from overlay.runtime.service import RunningNode
from testnet.bench.hostile_attacks import HALF_HELLO
from testnet.local import LocalNetwork


async def connect(node: RunningNode) -> trio.SocketStream:
    return await trio.open_tcp_stream(node.peer_address.host, node.peer_address.port)


async def stall(node: RunningNode) -> trio.SocketStream:
    """Dial ``node`` and begin a handshake that never goes on: the first bytes of a hello
    and no more. (A connection that sends nothing reaches the node's accept() on Linux only
    once its deferral ends.)"""
    stream = await connect(node)
    await stream.send_all(HALF_HELLO)
    return stream


async def closed_by_peer(stream: trio.SocketStream) -> bool:
    """Read until the node closes the connection (True), however much it sends first."""
    with trio.fail_after(10):
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
    return True


async def handshake(
    stream: trio.SocketStream, identity: Identity, network: bytes = b"testnet"
) -> tuple[Session, FrameReader]:
    """A genuine handshake as the dialling side."""
    shake = Handshake(identity, initiator=True, network=network)
    reader = FrameReader(SEALED_MAX)
    await stream.send_all(frame(shake.start()))
    while not shake.done:
        data = await stream.receive_some(65536)
        if not data:
            raise HandshakeError("the node closed the connection")
        for body in reader.feed(data):
            reply = shake.receive(body)
            if reply:
                await stream.send_all(frame(reply))
    return shake.session(), reader


async def still_works(net: LocalNetwork) -> None:
    """The node's real link still carries a stream end to end."""
    inbox = await join(net.node(1))
    acks = await publish_all(net.node(0).host, 20)
    numbers = sorted(acks.acked().values())
    await net.node(1).host.wait_until(lambda: inbox.numbers()[-1:] == numbers[-1:])
    assert inbox.numbers() == numbers


async def _say_hello(node: RunningNode, identity: Identity, location: float) -> trio.SocketStream:
    """Link to ``node`` as ``identity`` and claim ``location`` in the Hello."""
    stream, _ = await linked(node, identity, location)
    return stream


async def linked(
    node: RunningNode, identity: Identity, location: float
) -> tuple[trio.SocketStream, Session]:
    """Link to ``node`` as ``identity``, claim ``location`` in the Hello, and keep the
    session to send more with."""
    stream = await connect(node)
    session, _ = await handshake(stream, identity)
    await stream.send_all(frame(session.seal(record(encode(Hello(location, 1))))))
    return stream, session


def _peer_locations(host: NodeHost) -> dict[bytes, float]:
    return {peer.id: peer.location for peer in host.core.peers}
