"""Hostile and broken peers against a real node over loopback TCP: each closes only its own
connection; the node, its other links and its streams go on.

The node under test runs in a two-node network (so there is a real link to disturb); the
attacker is this test, speaking raw bytes, or a genuine handshake followed by bad frames.
"""

from __future__ import annotations

import pytest
import trio
from test_runtime_network import FAST, KEY, LIMIT, chain, join, publish_all

from overlay.codec import encode
from overlay.messages import Hello, SubscribeRequest
from overlay.runtime.framing import SEALED_MAX, FrameReader, frame
from overlay.runtime.handshake import Handshake, HandshakeError, Session
from overlay.runtime.identity import Identity
from overlay.runtime.service import RunningNode
from testnet.local import LocalNetwork


async def connect(node: RunningNode) -> trio.SocketStream:
    return await trio.open_tcp_stream(node.peer_address.host, node.peer_address.port)


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


async def test_garbage_bytes_close_only_that_connection() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10)
            assert await closed_by_peer(stream)
            assert len(net.node(0).host.links) == 1
            await still_works(net)


async def test_oversized_length_prefix_before_handshake_closes_the_connection() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            await stream.send_all((2**31).to_bytes(4, "big"))
            assert await closed_by_peer(stream)
            await still_works(net)


async def test_wrong_network_is_refused() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            with pytest.raises(HandshakeError):
                await handshake(stream, Identity.generate(), network=b"another-net")
            assert len(net.node(0).host.links) == 1
            await still_works(net)


async def test_untrusted_identity_is_refused_in_trust_mode() -> None:
    """Trust mode (Freenet's darknet): the node links only with the ids it lists."""
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            friend = net.node(1).identity.public
            net.set_runtime(0, trust_listed=True, trusted=frozenset({friend}))
            node = await net.restart(0)
            await net.wait_linked()  # the friend is listed: it links again
            stranger = await connect(node)
            # The node judges the dialler's identity on the handshake's last message, which
            # the dialler sends: it learns of the refusal only as the connection closing.
            await handshake(stranger, Identity.generate())
            assert await closed_by_peer(stranger)
            assert set(node.host.links) == {friend}
            await still_works(net)


async def test_oversized_frame_after_handshake_closes_only_that_link() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            host = net.node(0).host
            stream = await connect(net.node(0))
            intruder = Identity.generate()
            session, _ = await handshake(stream, intruder)
            await stream.send_all(frame(session.seal(encode(Hello(0.9, 1)))))
            await host.wait_until(lambda: intruder.public in {p.id for p in host.core.peers})
            await stream.send_all((SEALED_MAX + 1).to_bytes(4, "big"))
            assert await closed_by_peer(stream)
            await host.wait_until(lambda: intruder.public not in host.links)
            assert intruder.public not in {p.id for p in host.core.peers}
            await still_works(net)


async def test_tampered_frame_closes_only_that_link() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            host = net.node(0).host
            stream = await connect(net.node(0))
            intruder = Identity.generate()
            session, _ = await handshake(stream, intruder)
            sealed = bytearray(session.seal(encode(SubscribeRequest(5, KEY, 5, 0.9, None))))
            sealed[3] ^= 0x40
            await stream.send_all(frame(bytes(sealed)))
            assert await closed_by_peer(stream)
            assert intruder.public not in host.links
            await still_works(net)


async def test_malformed_message_in_a_good_frame_closes_only_that_link() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            session, _ = await handshake(stream, Identity.generate())
            await stream.send_all(frame(session.seal(b"\x82\x01\xff not cbor")))
            assert await closed_by_peer(stream)
            await still_works(net)
