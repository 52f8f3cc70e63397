"""Back-pressure end to end, on real nodes over loopback TCP with the default limits.

A client keeps 1,000 publishes of ~60 KB in flight through its node, which is not the
root, while subscribers on other nodes keep reading. 1,000 such publishes are 60 MB, far
past a link's send queue (16 MiB): were the publisher's node to pass them all up at once,
the link would be cut as "send queue full" and the subtree below it told ``Missed``. The
tree must slow the publisher instead: every subscriber gets every packet once, in order,
and no link closes. Waits are on the clients' own events, under a ``fail_after``.
"""

from __future__ import annotations

import logging
from collections import deque

import pytest
import trio

from keyspace.stream_key import StreamKey
from keyspace.topology import Topology
from overlay.client import Client, open_client
from overlay.core.events import Packet
from overlay.core.streams import State
from overlay.runtime.service import RunningNode
from testnet.local import LocalNetwork

PACKETS = 2_000
IN_FLIGHT = 1_000
SIZE = 60 * 1024
LIMIT = 60.0  # seconds of real time before a hang fails the test


def _chain(n: int) -> Topology:
    locations = tuple((i + 0.5) / n for i in range(n))
    neighbours = tuple(tuple(j for j in (i - 1, i + 1) if 0 <= j < n) for i in range(n))
    return Topology(locations, neighbours)


def _name_near(location: float) -> str:
    """An open stream name whose key lies within 1% of ``location``."""
    for i in range(100_000):
        name = f"pressure-{i}"
        if abs(StreamKey.open(name).location - location) < 0.01:
            return name
    raise AssertionError("no key found")


def _address(node: RunningNode) -> tuple[str, int]:
    return (node.client_address.host, node.client_address.port)


async def _publish(client: Client, stream: str) -> list[int]:
    """Publish ``PACKETS`` packets keeping ``IN_FLIGHT`` unanswered; their numbers."""
    waiting: deque[int] = deque()
    numbers = []
    for i in range(PACKETS):
        if len(waiting) >= IN_FLIGHT:
            numbers.append(await client.wait(waiting.popleft()))
        data = i.to_bytes(4, "big") * (SIZE // 4)
        waiting.append(client.publish_nowait(stream, data))
    while waiting:
        numbers.append(await client.wait(waiting.popleft()))
    return numbers


async def _read(
    node: RunningNode, stream: str, got: list[object], *, task_status: trio.TaskStatus[None]
) -> None:
    """Subscribe at ``node`` (started once subscribed), then read ``stream`` until
    ``PACKETS`` events came, into ``got``."""
    async with open_client(_address(node)) as client, await client.subscribe(stream) as events:
        task_status.started()
        async for event in events:
            got.append(event)
            if len(got) >= PACKETS:
                return


@pytest.mark.slow
async def test_a_fast_publisher_through_a_relay_is_slowed_not_cut(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Chain 0-1-2, the root is node 2; the publisher is on node 0, so its packets go up
    through relay 1 and come back down through it to a subscriber on node 0; another
    subscribes at the root. (About 6 s of CPU: 120 MB cross four sealed links.)"""
    caplog.set_level(logging.INFO, logger="overlay")
    stream = f"ovl:open/{_name_near(2.5 / 3)}"
    readers = (2, 0)
    with trio.fail_after(LIMIT):
        async with LocalNetwork(_chain(3)) as net:
            await net.wait_linked()
            opened = [n.host.links_opened for n in net.nodes]
            received: dict[int, list[object]] = {i: [] for i in readers}
            async with trio.open_nursery() as nursery:
                for i in readers:
                    await nursery.start(_read, net.node(i), stream, received[i])
                key = StreamKey.open(stream.removeprefix("ovl:open/")).key
                assert net.node(2).host.core.streams[key].state is State.ROOT
                assert net.node(0).host.core.streams[key].parent == net.node(1).host.node_id
                async with open_client(_address(net.node(0)), max_in_flight=IN_FLIGHT) as pub:
                    numbers = await _publish(pub, stream)
                assert numbers == list(range(numbers[0], numbers[0] + PACKETS))
                # (the nursery waits for every reader to have its PACKETS events)
            for i in readers:
                got = received[i]
                assert all(isinstance(e, Packet) for e in got), f"node {i}: {_odd(got)}"
                assert [e.number for e in got if isinstance(e, Packet)] == numbers, f"node {i}"
                for n, event in zip(numbers, got, strict=True):
                    assert isinstance(event, Packet)
                    assert event.data[:4] == (n - numbers[0]).to_bytes(4, "big")
            assert [n.host.links_opened for n in net.nodes] == opened
            assert all(
                len(n.host.links) == len(net.topology.neighbours[i])
                for i, n in enumerate(net.nodes)
            )
    assert "send queue full" not in caplog.text


def _odd(events: list[object]) -> list[object]:
    return [e for e in events if not isinstance(e, Packet)][:3]
