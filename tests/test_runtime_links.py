"""Hostile and broken peers against a real node over loopback TCP: each closes only its own
connection; the node, its other links and its streams go on.

The node under test runs in a two-node network (so there is a real link to disturb); the
attacker is this test, speaking raw bytes, or a genuine handshake followed by bad frames.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket

import pytest
import trio
from loopback_nets import FAST, KEY, LIMIT, Inbox, _key_near, chain, join
from raw_peers import closed_by_peer, connect, handshake, still_works

from keyspace.id_work import DEFAULT_ID_WORK
from keyspace.location import distance, location_from_id
from overlay.codec import encode
from overlay.messages import Heartbeat, Hello, Message, SubscribeRequest
from overlay.runtime.config import PeerAddress, RuntimeConfig, parse_address
from overlay.runtime.framing import SEALED_MAX, FrameReader, frame, record
from overlay.runtime.handshake import (
    MAGIC,
    MAX_HANDSHAKE_MESSAGE,
    VERSION,
    HandshakeError,
    refusal_text,
)
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity
from overlay.runtime.link import Link
from overlay.runtime.peering import LinkParams, authenticate, keep_dialled
from overlay.schema import SCHEMA_SIZE, WIRE_SCHEMA
from testnet.local import LocalNetwork


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


async def test_wrong_network_is_refused_and_the_dialler_is_told_why() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            params = LinkParams(Identity.generate(), b"another-net", None, 5.0, 1 << 20)
            with pytest.raises(HandshakeError, match="refused the link: this node is on network"):
                await authenticate(stream, params, initiator=True)  # the dialler's own code
            assert len(net.node(0).host.links) == 1
            await still_works(net)


async def test_a_node_of_another_build_is_refused_naming_both_schemas() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            network = b"testnet"  # LocalNetwork's default
            other = bytes(SCHEMA_SIZE)  # what another build's messages hash to
            hello = MAGIC + bytes((VERSION,)) + other + bytes((len(network),)) + network
            await stream.send_all(frame(hello + bytes(range(1, 33))))
            reader = FrameReader(MAX_HANDSHAKE_MESSAGE)
            bodies: list[bytes] = []
            while not bodies:
                data = await stream.receive_some(65536)
                assert data, "closed without a refusal"
                bodies = reader.feed(data)
            text = refusal_text(bodies[0])
            assert text is not None and WIRE_SCHEMA.hex() in text and other.hex() in text
            assert "same build" in text
            assert await closed_by_peer(stream)
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
    intruder = Identity.generate(DEFAULT_ID_WORK)  # (its Hello is taken)
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            host = net.node(0).host
            stream = await connect(net.node(0))
            session, _ = await handshake(stream, intruder)
            hello = Hello(location_from_id(intruder.public), 1)
            await stream.send_all(frame(session.seal(record(encode(hello)))))
            await host.wait_until(lambda: intruder.public in {p.id for p in host.core.peers})
            await stream.send_all((SEALED_MAX + 1).to_bytes(4, "big"))
            assert await closed_by_peer(stream)
            await host.wait_until(lambda: intruder.public not in host.links)
            assert intruder.public not in {p.id for p in host.core.peers}
            await still_works(net)


async def test_tampered_frame_closes_only_that_link(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="overlay.node")
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            host = net.node(0).host
            stream = await connect(net.node(0))
            intruder = Identity.generate()
            session, _ = await handshake(stream, intruder)
            sealed = bytearray(session.seal(record(encode(SubscribeRequest(5, KEY, 5, 0.9, None)))))
            sealed[3] ^= 0x40
            await stream.send_all(frame(bytes(sealed)))
            assert await closed_by_peer(stream)
            await host.wait_until(lambda: intruder.public not in host.links)
            # The operator sees why, by default (a warning, not an info line).
            assert "LinkAuthError" in caplog.text and intruder.text in caplog.text
            await still_works(net)


async def test_malformed_message_in_a_good_frame_closes_only_that_link() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            stream = await connect(net.node(0))
            session, _ = await handshake(stream, Identity.generate())
            await stream.send_all(frame(session.seal(record(b"\x82\x01\xff not cbor"))))
            assert await closed_by_peer(stream)
            await still_works(net)


async def test_a_child_that_never_reads_is_cut_off_and_memory_stays_bounded() -> None:
    """A peer that joins a stream as a child and stops reading: once the node's send queue to
    it passes ``send_queue_bytes`` the link closes ("send queue full"), and the queue never
    held more than the bound plus one frame. The node's other subscriber gets everything."""
    bound = 256 * 1024
    intruder = _far_from(0.25)
    with trio.fail_after(LIMIT):
        async with (
            LocalNetwork(chain(2), core=FAST, runtime=RuntimeConfig(send_queue_bytes=bound)) as net,
            trio.open_nursery() as nursery,
        ):
            await net.wait_linked()
            node = net.node(0)
            host = node.host
            sock = trio.socket.socket()
            # A tiny receive buffer, so the kernel absorbs little before the node's own queue.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await sock.connect((node.peer_address.host, node.peer_address.port))
            stream = trio.SocketStream(sock)
            session, _ = await handshake(stream, intruder)
            key = _key_near(0.25)  # node 0 is the closest node: it roots the stream

            async def send(message: Message) -> None:
                await stream.send_all(frame(session.seal(record(encode(message)))))

            async def beat() -> None:  # it writes (so it is alive) but never reads
                with contextlib.suppress(trio.BrokenResourceError):  # until it is cut off
                    for n in range(10_000):
                        await send(Heartbeat(n))
                        await trio.sleep(FAST.heartbeat_interval / 2)

            where = location_from_id(intruder.public)
            await send(Hello(where, 1))
            await send(SubscribeRequest(77, key, 5, where, None))
            nursery.start_soon(beat)
            await host.wait_until(lambda: intruder.public in _children(host, key))
            link = host.links[intruder.public]
            assert isinstance(link, Link)
            peak = 0

            def watch() -> bool:
                nonlocal peak
                peak = max(peak, link.queued_bytes)
                return link.closed

            inbox = await join(net.node(1), key)
            publisher = host.add_client(Inbox())
            # 400 x 32 KiB, far beyond the bound and any kernel buffer, in batches paced by
            # the healthy subscriber: only the child that never reads falls behind. A batch
            # (128 KiB) is queued at once, so it must fit the bound on the healthy link too.
            for batch in range(100):
                for uid in range(batch * 4, batch * 4 + 4):
                    host.publish(publisher, key, uid, bytes(32 * 1024))
                    watch()
                await net.node(1).host.wait_until(inbox.has(batch * 4 + 4))
            await host.wait_until(watch)
            assert link.reason is not None and "send queue full" in link.reason
            assert peak <= bound + 64 * 1024
            await host.wait_until(lambda: intruder.public not in host.links)
            await net.node(1).host.wait_until(lambda: len(inbox.numbers()) >= 400)
            assert inbox.numbers() == list(range(400))
            nursery.cancel_scope.cancel()
            await stream.aclose()


def _far_from(target: float) -> Identity:
    """A new identity whose id puts it at least a quarter circle from ``target`` (a node
    sits where its id puts it; one identity in two qualifies), carrying the work a node asks
    of a peer's id by default."""
    while True:
        identity = Identity.generate(DEFAULT_ID_WORK)
        if distance(location_from_id(identity.public), target) >= 0.25:
            return identity


def _children(host: NodeHost, key: bytes) -> dict[bytes, None]:
    stream = host.core.streams.get(key)
    return {} if stream is None else stream.children


async def test_a_node_that_is_not_the_configured_id_is_refused_by_the_dialler() -> None:
    """``connect = ["host:port@<id>"]``: the dialler checks the answering node proves that id
    (the same ``authenticate`` its redial loop runs); a node with another key is refused,
    and the node dialled keeps its other links."""
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            target = net.node(0)
            dialler = Identity.generate()
            params = LinkParams(dialler, b"testnet", None, 5.0, 1 << 20)
            stream = await connect(target)
            with pytest.raises(HandshakeError, match="dialled"):
                await authenticate(stream, params, initiator=True, expect=bytes(range(32)))
            await stream.aclose()
            assert dialler.public not in target.host.links
            await still_works(net)


@pytest.fixture
def slow_clock() -> trio.testing.MockClock:
    # Virtual time that jumps only once every task has been idle for 50 ms of real time, so
    # socket round trips (which autojump cannot see) finish first.
    return trio.testing.MockClock(autojump_threshold=0.05)


async def test_the_dialler_keeps_a_peer_in_its_cooldown_out_until_it_ends(
    slow_clock: trio.testing.MockClock,
) -> None:
    """This side cut the peer off for a fault: it does not dial it back before the cooldown
    the listener would refuse it for has passed either."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    peer = Identity.generate().public
    host = NodeHost(Identity.generate().public, 0.5, rng=random.Random(1))
    cooldown = host.cooldowns.cut_off(peer, None, trusted=False)
    params = LinkParams(Identity.generate(), b"testnet", None, 5.0, 1 << 20)
    config = RuntimeConfig()
    dialled = PeerAddress(parse_address(f"127.0.0.1:{port}"), peer)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keep_dialled, host, params, dialled, config, random.Random(1))
        with trio.fail_after(cooldown * 2):
            stream = await listener.accept()
        assert trio.current_time() >= cooldown
        await stream.aclose()
        nursery.cancel_scope.cancel()
    await listener.aclose()
