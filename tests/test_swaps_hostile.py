"""A hostile peer against the location-swap protocol of a real node, over real links: a
reveal that breaks its commitment, and a flood of swap walks. The node must cut off the
cheat with one warning, keep its walks within bounds, and go on carrying streams."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
from loopback_nets import FAST, LIMIT, chain
from raw_peers import closed_by_peer, linked, still_works

from overlay.codec import encode
from overlay.core.swaps import STARTER, Reveal, commitment
from overlay.messages import Message, SwapCommit, SwapRequest
from overlay.runtime.config import RuntimeConfig
from overlay.runtime.framing import frame, record
from overlay.runtime.identity import Identity
from testnet.local import LocalNetwork

# Swapping on, but no node starts a swap of its own while a test runs.
SWAPPING = dataclasses.replace(FAST, swap_interval=1e6)


@asynccontextmanager
async def attacked() -> AsyncIterator[
    tuple[LocalNetwork, trio.SocketStream, Callable[..., Awaitable[None]]]
]:
    """Two nodes in listed trust that vouch for an attacker, linked to node 0 at 0.3; the
    network, the attacker's link, and how to send its messages over it."""
    attacker = Identity.generate()
    runtime = RuntimeConfig(trust_listed=True, trusted=frozenset({attacker.public}))
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=SWAPPING, runtime=runtime) as net:
            await net.wait_linked()
            stream, session = await linked(net.node(0), attacker, 0.3)

            async def send(*messages: Message) -> None:
                sealed = (frame(session.seal(record(encode(m)))) for m in messages)
                await stream.send_all(b"".join(sealed))

            yield net, stream, send


async def test_a_peer_whose_swap_reveal_breaks_its_commitment_is_cut_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The attacker asks node 0 to be its partner (a walk of one hop), then reveals another
    location than it committed to, as one that wants a location beside a key would: node
    0 closes the link with one warning naming the fault, and stays where it was."""
    caplog.set_level(logging.WARNING)
    async with attacked() as (net, stream, send):
        host = net.node(0).host
        committed = Reveal(bytes(32), 0.3, (0.25,))
        await send(
            SwapRequest(77, 1, commitment(77, committed, STARTER)),
            SwapCommit(77, bytes(32), 0.26, (0.25,)),
        )
        assert await closed_by_peer(stream)
        assert host.core.stats.swap_cheats == 1
        assert host.core.location == 0.25
        said = [r for r in caplog.records if "committed to" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.WARNING
        await still_works(net)


async def test_a_flood_of_swap_walks_is_bounded_and_costs_the_node_nothing() -> None:
    """2,000 swap requests with fresh uids: node 0 relays at most a quarter of its walk
    table for this one peer and refuses the rest, and its streams go on."""
    async with attacked() as (net, _, send):
        host = net.node(0).host
        flood = [SwapRequest(uid, 5, bytes(32)) for uid in range(1, 2001)]
        stats = host.core.stats
        await send(*flood)
        # Every request is relayed or refused; none is lost or breaks the node.
        await host.wait_until(lambda: stats.swap_walks + stats.swaps_refused == len(flood))
        # A burst outruns the walks' answers: past its quarter, the peer is refused.
        assert stats.swaps_refused > len(flood) // 4
        assert len(host.core.swaps.walks) <= SWAPPING.max_swap_walks // 4
        await still_works(net)
