"""A real node's per-node bounds over loopback TCP: connections still in their handshake,
per address and in total; links; local clients. Each refusal is quick (no timeout is waited
for), is counted by reason, and is one WARNING line naming the peer.

Waits are on the node's own state and on sockets closing, under ``fail_after`` bounds far
below the handshake timeout each test configures: a node that waits for the timeout instead
of refusing at once fails the test.
"""

from __future__ import annotations

import functools
import logging
import math
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from client_node import running_node
from loopback_nets import FAST, chain
from raw_peers import closed_by_peer, connect, handshake, stall, still_works

from overlay.client.protocol import (
    PROTOCOL_VERSION,
    ErrorCode,
    Hello,
    ProtocolError,
    decode_event,
    encode_request,
)
from overlay.codec import encode
from overlay.messages import Heartbeat
from overlay.runtime.client_port import ClientPortConfig
from overlay.runtime.config import RuntimeConfig
from overlay.runtime.cooldown import ADDRESS_ALLOWANCE
from overlay.runtime.framing import SEALED_MAX, FrameReader, frame, record
from overlay.runtime.handshake import Handshake
from overlay.runtime.identity import Identity
from overlay.runtime.service import RunningNode
from testnet.bench.hostile_attacks import HALF_HELLO
from testnet.local import LocalNetwork
from testnet.survey import Answer
from tools.stats_cmd import stats_table

# Long enough that no test here could pass by waiting for it; QUICK is what each refusal
# gets. Both bound real time only to turn a hang into a failure.
PATIENT = RuntimeConfig(handshake_timeout=120.0)
QUICK = 10.0
LIMIT = 60.0  # a whole test's bound: a regression fails, never hangs


def bounded(test: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> None:
        with trio.fail_after(LIMIT):
            await test(*args, **kwargs)

    return run


def refusals(node: RunningNode) -> dict[str, int]:
    counts = node.host.describe()["refusals"]
    assert isinstance(counts, dict)
    return counts


async def refused(node: RunningNode) -> bool:
    """Begin a handshake and read until the node closes the connection; True once it has (a
    reset may come before the connect is even reported or the bytes sent: the node closes
    refused connections at once)."""
    try:
        stream = await stall(node)
    except (OSError, trio.BrokenResourceError):
        return True
    try:
        return await closed_by_peer(stream)
    except trio.BrokenResourceError:
        return True


@bounded
async def test_a_large_frame_announced_in_the_handshake_closes_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handshake message is a few hundred bytes: a connection announcing a sealed frame's
    worth is cut at once instead of pinning a 64 KiB buffer until the handshake timeout."""
    caplog.set_level(logging.WARNING)
    async with LocalNetwork(chain(2), core=FAST, runtime=PATIENT) as net:
        await net.wait_linked()
        stream = await connect(net.node(0))
        await stream.send_all((60_000).to_bytes(4, "big") + bytes(59_999))
        with trio.fail_after(QUICK):
            assert await closed_by_peer(stream)
        assert refusals(net.node(0)) == {"handshake": 1}
        (line,) = [r for r in caplog.records if "handshake" in r.getMessage()]
        assert line.levelno == logging.WARNING and "60000 bytes" in line.getMessage()
        assert "127.0.0.1:" in line.getMessage()
        await still_works(net)


@bounded
async def test_a_node_whose_handshakes_never_time_out_still_links() -> None:
    """``handshake_timeout = inf`` is a valid setting: the listener's deferral is bounded
    instead of failing to start."""
    runtime = RuntimeConfig(handshake_timeout=math.inf)
    async with LocalNetwork(chain(2), core=FAST, runtime=runtime) as net:
        await net.wait_linked()
        with trio.fail_after(QUICK):
            await handshake(await connect(net.node(0)), Identity.generate())
        await still_works(net)


@bounded
async def test_connections_past_one_address_s_share_are_closed_at_accept() -> None:
    runtime = RuntimeConfig(handshake_timeout=120.0, max_handshakes_per_address=2)
    async with LocalNetwork(chain(2), core=FAST, runtime=runtime) as net:
        await net.wait_linked()
        node = net.node(0)
        idle = [await stall(node), await stall(node)]
        with trio.fail_after(QUICK):
            assert await refused(node)
        assert refusals(node) == {"address_full": 1}
        for stream in idle:  # their slots come back when they go
            await stream.aclose()
        with trio.fail_after(QUICK):
            await handshake(await connect(node), Identity.generate())


@bounded
async def test_the_oldest_handshake_makes_room_and_an_honest_peer_still_links() -> None:
    runtime = RuntimeConfig(handshake_timeout=120.0, max_handshakes=3)
    async with LocalNetwork(chain(2), core=FAST, runtime=runtime) as net:
        await net.wait_linked()
        node = net.node(0)
        stalled = [await stall(node) for _ in range(3)]
        honest = Identity.generate()
        with trio.fail_after(QUICK):
            await handshake(await connect(node), honest)
            assert await closed_by_peer(stalled[0])  # the oldest made room
        assert refusals(node) == {"handshakes_full": 1}
        await still_works(net)


@bounded
async def test_a_peer_whose_hello_comes_late_still_links_when_every_slot_is_held() -> None:
    """Every slot is held by a stalled handshake. A peer connects, and its hello comes only
    after the node has accepted and refused a connection made after it: the node must not
    have judged the peer silent meanwhile (its first bytes decide), so it links."""
    runtime = RuntimeConfig(handshake_timeout=120.0, max_handshakes=3)
    async with LocalNetwork(chain(2), core=FAST, runtime=runtime) as net:
        await net.wait_linked()
        node = net.node(0)
        stalled = [await stall(node) for _ in range(3)]
        with trio.fail_after(QUICK):
            assert await refused(node)  # every slot is held
        late = await connect(node)
        with trio.fail_after(QUICK):
            assert await refused(node)  # the node has gone past the late peer's connect
        honest = Identity.generate()
        with trio.fail_after(QUICK):
            await handshake(late, honest)
            await node.host.wait_until(lambda: honest.public in node.host.links)
            assert await closed_by_peer(stalled[0])  # the oldest made room
        assert refusals(node) == {"handshakes_full": 3}
        await still_works(net)


@bounded
async def test_a_peer_whose_hello_is_in_gets_a_slot_from_a_crowded_backlog_of_silent_ones() -> None:
    """Connections queued faster than one accept burst takes: the silent ones past the slots
    are refused at accept, and a peer whose first message is in takes a silent one's slot,
    even with more silent connections queued behind it."""
    runtime = RuntimeConfig(handshake_timeout=120.0, max_handshakes=8)
    async with LocalNetwork(chain(2), core=FAST, runtime=runtime) as net:
        await net.wait_linked()
        node = net.node(0)
        honest = Identity.generate()
        shake = Handshake(honest, initiator=True, network=b"testnet")
        target = (node.peer_address.host, node.peer_address.port)

        def stalled() -> socket.socket:
            sock = socket.create_connection(target)
            sock.sendall(HALF_HELLO)
            return sock

        # Blocking connects: the node's tasks do not run until all are in its backlog.
        silent = [stalled() for _ in range(12)]
        sock = socket.create_connection(target)
        sock.sendall(frame(shake.start()))
        silent += [stalled() for _ in range(12)]
        stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
        reader = FrameReader(SEALED_MAX)
        with trio.fail_after(QUICK):
            while not shake.done:
                data = await stream.receive_some(65536)
                assert data, "the node closed the honest peer's connection"
                for body in reader.feed(data):
                    if reply := shake.receive(body):
                        await stream.send_all(frame(reply))
            await node.host.wait_until(lambda: honest.public in node.host.links)
        await still_works(net)  # (by then the node has taken in its whole backlog)
        # At most eight silent ones hold a slot; every other was refused or made room.
        assert refusals(node).keys() == {"handshakes_full"}
        assert refusals(node)["handshakes_full"] >= len(silent) - 8
        for quiet in silent:
            quiet.close()


@bounded
async def test_an_authenticated_peer_past_max_links_is_refused() -> None:
    runtime = RuntimeConfig(handshake_timeout=120.0, max_links=1)
    async with LocalNetwork(chain(2), core=FAST, runtime=runtime) as net:
        await net.wait_linked()
        node = net.node(0)
        intruder = Identity.generate()
        stream = await connect(node)
        await handshake(stream, intruder)
        with trio.fail_after(QUICK):
            assert await closed_by_peer(stream)
        assert set(node.host.links) == {net.node(1).identity.public}
        assert refusals(node) == {"links_full": 1}
        await still_works(net)


@bounded
async def test_a_message_before_hello_is_a_warning_naming_the_peer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without ``-v`` (WARNING) the operator sees a peer the protocol cut off."""
    caplog.set_level(logging.WARNING)
    async with LocalNetwork(chain(2), core=FAST) as net:
        await net.wait_linked()
        node = net.node(0)
        intruder = Identity.generate()
        stream = await connect(node)
        session, _ = await handshake(stream, intruder)
        await stream.send_all(frame(session.seal(record(encode(Heartbeat(0))))))
        with trio.fail_after(QUICK):
            assert await closed_by_peer(stream)
            await node.host.wait_until(lambda: "peer_dropped" in refusals(node))
        text = caplog.text
        assert intruder.text in text and "before Hello" in text and "WARNING" in text
        await still_works(net)


@bounded
async def test_a_client_past_max_clients_is_told_the_node_is_busy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    config = ClientPortConfig(max_clients=1)
    async with running_node(config) as (port, address):
        host_name, number = address.rsplit(":", 1)
        first = await trio.open_tcp_stream(host_name, int(number))
        await first.send_all(encode_request(Hello(0, PROTOCOL_VERSION)))
        with trio.fail_after(QUICK):
            assert await first.receive_some(65536)  # its Welcome: it is a client now
        second = await trio.open_tcp_stream(host_name, int(number))
        reader = FrameReader(1 << 20)
        events: list[object] = []
        with trio.fail_after(QUICK):
            while data := await second.receive_some(65536):
                events.extend(decode_event(body) for body in reader.feed(data))
        (last,) = events
        assert isinstance(last, ProtocolError) and last.code is ErrorCode.BUSY
        assert port.host.describe()["refusals"] == {"clients_full": 1}
        assert "clients_full" in caplog.text
        await first.aclose()


async def cut_off_before_hello(node: RunningNode, intruder: Identity) -> None:
    """``intruder`` links and sends a message before its Hello: the protocol drops it."""
    stream = await connect(node)
    session, _ = await handshake(stream, intruder)
    await stream.send_all(frame(session.seal(record(encode(Heartbeat(0))))))
    with trio.fail_after(QUICK):
        assert await closed_by_peer(stream)
        await node.host.wait_until(lambda: intruder.public not in node.host.links)


@bounded
async def test_a_peer_cut_off_for_a_fault_is_refused_when_it_redials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    async with LocalNetwork(chain(2), core=FAST) as net:
        await net.wait_linked()
        node = net.node(0)
        intruder = Identity.generate()
        await cut_off_before_hello(node, intruder)
        assert refusals(node) == {"peer_dropped": 1}
        stream = await connect(node)
        await handshake(stream, intruder)
        with trio.fail_after(QUICK):
            assert await closed_by_peer(stream)
            await node.host.wait_until(lambda: "cooldown" in refusals(node))
        assert refusals(node) == {"peer_dropped": 1, "cooldown": 1}
        table = stats_table([Answer(str(node.peer_address), node.host.describe())])
        assert "refused by reason: cooldown 1, peer_dropped 1" in table  # overlay stats
        (line,) = [r for r in caplog.records if "(cooldown)" in r.getMessage()]
        assert line.levelno == logging.WARNING
        assert intruder.text in line.getMessage() and "s more" in line.getMessage()
        assert intruder.public not in node.host.links
        await still_works(net)


@bounded
async def test_a_peer_that_hung_up_honestly_links_again_at_once() -> None:
    async with LocalNetwork(chain(2), core=FAST) as net:
        await net.wait_linked()
        node = net.node(0)
        peer = Identity.generate()
        for _ in range(3):
            stream = await connect(node)
            await handshake(stream, peer)
            with trio.fail_after(QUICK):
                await node.host.wait_until(lambda: peer.public in node.host.links)
            await stream.aclose()
            with trio.fail_after(QUICK):
                await node.host.wait_until(lambda: peer.public not in node.host.links)
        assert refusals(node) == {}


@bounded
async def test_an_address_whose_fresh_ids_keep_faulting_is_refused_at_accept() -> None:
    async with LocalNetwork(chain(2), core=FAST) as net:
        await net.wait_linked()
        node = net.node(0)
        for _ in range(ADDRESS_ALLOWANCE):
            await cut_off_before_hello(node, Identity.generate())
        with trio.fail_after(QUICK):
            assert await refused(node)
            await node.host.wait_until(lambda: "cooldown" in refusals(node))
        assert refusals(node) == {"peer_dropped": ADDRESS_ALLOWANCE, "cooldown": 1}
        await still_works(net)
