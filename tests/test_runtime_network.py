"""Real nodes over real loopback TCP: authenticated links, the core's protocol end to end.

Every node here is a full ``run_node`` (handshake, sealed frames, coalescing writers); local
clients are attached straight to the host with an in-memory sink, so these tests are about
the node-to-node runtime (the client port has its own tests). Waits are on the nodes' own
state (``NodeHost.wait_until``), under a ``fail_after`` so a regression fails, never hangs.
Timers are shortened so recovery after a kill takes a fraction of a second of real time.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
import trio
from loopback_nets import FAST, KEY, LIMIT, Inbox, _key_near, chain, join, publish_all

from keyspace.topology import Topology, small_world
from overlay.core.events import Subscribed
from overlay.core.streams import State
from testnet.local import LocalNetwork


# (4, True): ``confirm_publishes`` (the default), so every packet from a peer waits for
# PublishNumbered and PublishConfirmed to cross the real links before it goes down; the
# smaller ones with it off.
@pytest.mark.parametrize(("size", "confirm"), [(2, False), (3, False), (4, True)])
async def test_small_networks_deliver_in_order(size: int, confirm: bool) -> None:
    core = dataclasses.replace(FAST, confirm_publishes=confirm)
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(size), core=core) as net:
            await net.wait_linked()
            inbox = await join(net.node(size - 1))
            acks = await publish_all(net.node(0).host, 200)
            numbers = sorted(acks.acked().values())
            await net.node(size - 1).host.wait_until(lambda: len(inbox.numbers()) >= 200)
            assert inbox.numbers() == numbers == list(range(numbers[0], numbers[0] + 200))
            confirmed = sum(n.host.core.stats.confirmed for n in net.nodes)
            assert confirmed == (200 if confirm else 0)
            described = net.node(0).host.describe(KEY)
            assert described["links"] == 1 and len(described["streams"]) == 1
            assert described["queued"] >= 0 and described["queued_max"] <= described["queued"]
            assert [p["queued"] for p in described["peers"]] == [described["queued"]]


@pytest.mark.slow
async def test_twenty_nodes_deliver_to_every_subscriber_in_order() -> None:
    topology = small_world(20, 6, random.Random(7))
    with trio.fail_after(LIMIT * 2):
        async with LocalNetwork(topology, core=FAST, seed=7) as net:
            await net.wait_linked()
            subscribers = [3, 8, 11, 17, 19]
            inboxes = [await join(net.node(i)) for i in subscribers]
            acks = await publish_all(net.node(5).host, 300)
            numbers = sorted(acks.acked().values())
            assert numbers == list(range(numbers[0], numbers[0] + 300))
            for i, inbox in zip(subscribers, inboxes, strict=True):
                await net.node(i).host.wait_until(inbox.has(300))
                assert inbox.numbers() == numbers, f"subscriber on node {i}"
            roots = [
                n
                for n in net.nodes
                if any(s.state.value == "root" for s in n.host.core.streams.values())
            ]
            assert len(roots) == 1


@pytest.mark.slow
async def test_restarted_node_subtree_recovers_without_loss() -> None:
    """A ring of 6: kill a relay on the subscriber's path while publishing, start it again
    (new boot id): the subscriber gets every acknowledged packet exactly once, in order."""
    n = 6
    topology = Topology(
        tuple((i + 0.5) / n for i in range(n)),
        tuple(tuple(sorted(((i - 1) % n, (i + 1) % n))) for i in range(n)),
    )
    with trio.fail_after(LIMIT * 2):
        async with LocalNetwork(topology, core=FAST, seed=3) as net:
            await net.wait_linked()
            key = _key_near(0.5 / n)  # the root is node 0
            subscriber = 3
            inbox = await join(net.node(subscriber), key)
            parent = net.node(subscriber).host.core.streams[key].parent
            relay = next(i for i, node in enumerate(net.nodes) if node.identity.public == parent)
            assert relay in (2, 4)
            before = await publish_all(net.node(0).host, 50, key)
            old_boot = net.node(relay).host.core.boot_id
            await net.stop(relay)
            during = await publish_all(net.node(0).host, 50, key, start=50)
            restarted = await net.restart(relay)
            assert restarted.host.core.boot_id != old_boot
            after = await publish_all(net.node(0).host, 50, key, start=100)
            numbers = sorted(
                [*before.acked().values(), *during.acked().values(), *after.acked().values()]
            )
            host = net.node(subscriber).host
            await host.wait_until(lambda: len(inbox.numbers()) >= len(numbers))
            assert inbox.numbers() == numbers


async def test_node_restarted_while_its_peers_are_down_joins_only_once_one_is_up() -> None:
    """A node with peers to dial (its ``connect`` list) does not become the root of a tree
    of one while none is up: that root would number publishes beside the real tree. Node 1
    dials node 0; node 0, which dials nobody, is alone from each start and roots at once."""
    key = _key_near(0.25)  # node 0's location: node 1 cannot be its root
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            await net.stop(0)
            await net.stop(1)
            host = (await net.restart(1)).host
            inbox = Inbox()
            host.subscribe(host.add_client(inbox), key)
            assert inbox.events == []  # a root would have said Subscribed already
            assert host.core.streams[key].state is State.JOINING
            first = (await net.restart(0)).host
            await host.wait_until(lambda: any(isinstance(e, Subscribed) for e in inbox.events))
            stream = host.core.streams[key]
            assert stream.state is State.JOINED and stream.parent == first.core.id
            await net.stop(1)
            await net.stop(0)
            fresh = (await net.restart(0)).host
            alone = Inbox()
            fresh.subscribe(fresh.add_client(alone), key)
            [event] = alone.events
            assert isinstance(event, Subscribed) and event.root
