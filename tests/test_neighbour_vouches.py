"""A neighbour announcement is taken only as far as each neighbour's own signed word shows.

The unit tests build ``NeighbourVouches`` alone: node C judges what its peer B announces
about B's neighbours. The real-socket tests dial a node of a loopback network as a genuine
identity from outside it and announce neighbours by hand.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
from loopback_nets import FAST, LIMIT, chain
from raw_peers import closed_by_peer, connect, handshake, still_works

from keyspace.id_work import DEFAULT_ID_WORK
from keyspace.location import location_from_id
from overlay.codec import encode
from overlay.core.peers import Peer
from overlay.messages import MAX_NEIGHBOURS, Hello, Message, Neighbours
from overlay.runtime import neighbour_vouches
from overlay.runtime.config import Address, PeerAddress, RuntimeConfig
from overlay.runtime.framing import frame, record
from overlay.runtime.identity import Identity
from overlay.runtime.neighbour_vouches import NeighbourVouches, vouch
from testnet.local import LocalNetwork
from testnet.pool import NodePool

NET = b"testnet"
# The stranger sends no heartbeats: the node must not drop it as silent while a test runs.
PATIENT = dataclasses.replace(FAST, heartbeat_interval=1.0, dead_after=LIMIT)
A, B, C = Identity.generate(), Identity.generate(), Identity.generate()


def _entry(neighbour: Identity, announcer: Identity, network: bytes = NET) -> bytes:
    return neighbour.public + vouch(neighbour, network, announcer.public)


def _announced(*neighbours: tuple[float, bytes]) -> Neighbours:
    return Neighbours(
        tuple(location for location, _ in neighbours), tuple(entry for _, entry in neighbours)
    )


def _c(
    trusted: frozenset[bytes] = frozenset(), work: int = 0, clock: list[float] | None = None
) -> NeighbourVouches:
    now = clock if clock is not None else [0.0]
    return NeighbourVouches(C, NET, work, trusted, lambda: now[0])


def test_a_neighbour_shown_by_its_own_vouch_is_taken() -> None:
    where = location_from_id(A.public)
    taken = _c().heard_neighbours(B.public, _announced((where, _entry(A, B))))
    assert taken == Neighbours((where,))


def test_a_neighbour_without_a_vouch_is_dropped_without_fault() -> None:
    where = location_from_id(A.public)
    assert _c().heard_neighbours(B.public, Neighbours((where, 0.25))) == Neighbours(())
    assert _c().heard_neighbours(B.public, _announced((where, b""))) == Neighbours(())


def test_a_location_the_neighbour_id_does_not_give_is_dropped_without_fault() -> None:
    """A neighbour its announcer's operator placed by hand: honest, but not ours to take."""
    elsewhere = (location_from_id(A.public) + 0.5) % 1.0
    assert _c().heard_neighbours(B.public, _announced((elsewhere, _entry(A, B)))) == (
        Neighbours(())
    )


def test_a_neighbour_id_without_the_network_work_is_dropped() -> None:
    cheap = Identity.generate()
    where = location_from_id(cheap.public)
    vouches = _c(work=30)
    assert vouches.heard_neighbours(B.public, _announced((where, _entry(cheap, B)))) == (
        Neighbours(())
    )


def test_a_vouch_for_another_announcer_is_a_lie() -> None:
    """B shows a vouch that A gave a third node: it does not verify for (A, B)."""
    where = location_from_id(A.public)
    why = _c().heard_neighbours(B.public, _announced((where, _entry(A, C))))
    assert isinstance(why, str) and A.text in why


def test_a_vouch_from_another_network_is_a_lie() -> None:
    where = location_from_id(A.public)
    why = _c().heard_neighbours(B.public, _announced((where, _entry(A, B, b"other"))))
    assert isinstance(why, str)


def test_more_or_fewer_vouches_than_locations_is_a_fault() -> None:
    where = location_from_id(A.public)
    message = Neighbours((where, 0.5), (_entry(A, B),))
    why = _c().heard_neighbours(B.public, message)
    assert isinstance(why, str) and "2 locations and 1 vouches" in why


def test_a_verified_entry_listed_again_elsewhere_is_dropped() -> None:
    """The second announcement reuses the entry already verified, at the key B wants."""
    vouches = _c()
    entry = _entry(A, B)
    where = location_from_id(A.public)
    assert vouches.heard_neighbours(B.public, _announced((where, entry))) == Neighbours((where,))
    wanted = (where + 0.25) % 1.0
    assert vouches.heard_neighbours(B.public, _announced((wanted, entry))) == Neighbours(())


def test_a_trusted_announcer_is_taken_at_its_word() -> None:
    assert _c(trusted=frozenset({B.public})).heard_neighbours(
        B.public, Neighbours((0.25, 0.75))
    ) == Neighbours((0.25, 0.75))


@pytest.fixture
def verifies(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The keys ``neighbour_vouches`` verifies a signature of, in order."""
    calls: list[bytes] = []
    real = neighbour_vouches.verify

    def counted(public: bytes, sig: bytes, data: bytes) -> bool:
        calls.append(public)
        return real(public, sig, data)

    monkeypatch.setattr(neighbour_vouches, "verify", counted)
    return calls


def test_an_announcement_repeated_or_alternated_costs_no_second_verify(
    verifies: list[bytes],
) -> None:
    vouches = _c()
    message = _announced((location_from_id(A.public), _entry(A, B)))
    for announced in (message, message, Neighbours(()), message):
        expected = Neighbours(announced.locations)
        assert vouches.heard_neighbours(B.public, announced) == expected
    assert verifies == [A.public]
    vouches.forget(B.public)
    assert vouches.heard_neighbours(B.public, message) == Neighbours(message.locations)
    assert verifies == [A.public, A.public]


def test_a_sender_past_its_verify_budget_is_not_verified_until_it_refills(
    verifies: list[bytes],
) -> None:
    """Entries past the budget are dropped without fault; the budget refills with time."""
    budget, period = neighbour_vouches.VERIFY_BUDGET, neighbour_vouches.BUDGET_PERIOD
    friends = [Identity.generate() for _ in range(budget + 1)]
    entries = [(location_from_id(f.public), _entry(f, B)) for f in friends]
    clock = [0.0]
    vouches = _c(clock=clock)
    for first in range(0, budget, MAX_NEIGHBOURS):
        part = _announced(*entries[first : first + MAX_NEIGHBOURS])
        assert vouches.heard_neighbours(B.public, part) == Neighbours(part.locations)
    assert len(verifies) == budget
    last = _announced(entries[-1])
    assert vouches.heard_neighbours(B.public, last) == Neighbours(())
    assert len(verifies) == budget
    clock[0] += period / budget  # one verify's worth
    assert vouches.heard_neighbours(B.public, last) == Neighbours(last.locations)
    assert len(verifies) == budget + 1


def test_a_hello_repeating_its_vouch_costs_no_second_verify(verifies: list[bytes]) -> None:
    hello = NeighbourVouches(B, NET, 0, frozenset(), lambda: 0.0).hello(C.public, Hello(0.5, 1))
    vouches = _c()
    for _ in range(3):
        assert vouches.heard_hello(B.public, hello) is None
    assert verifies == [B.public]


def test_the_hello_carries_a_vouch_the_peer_can_check_and_show() -> None:
    """B's Hello to C carries B's vouch for C; C keeps it and shows it in its own
    announcement, where D takes it."""
    hello = NeighbourVouches(B, NET, 0, frozenset(), lambda: 0.0).hello(C.public, Hello(0.5, 1))
    c = _c()
    assert c.heard_hello(B.public, hello) is None
    where = location_from_id(B.public)
    shown = c.announcement(Neighbours((where, 0.125)), [Peer(B.public, where, 1)])
    assert shown.vouches == (B.public + (hello.vouch or b""), b"")
    d = NeighbourVouches(Identity.generate(), NET, 0, frozenset(), lambda: 0.0)
    assert d.heard_neighbours(C.public, shown) == Neighbours((where,))


def test_a_hello_whose_vouch_does_not_verify_is_refused() -> None:
    hello = NeighbourVouches(B, NET, 0, frozenset(), lambda: 0.0).hello(A.public, Hello(0.5, 1))
    assert _c().heard_hello(B.public, hello) is not None  # made for A, not for C
    assert _c().heard_hello(B.public, Hello(0.5, 1)) is None  # none at all: taken


# --- over a real link ----------------------------------------------------------------------

Sender = Callable[[Message], Awaitable[None]]


@asynccontextmanager
async def _stranger_at_node_0() -> AsyncIterator[
    tuple[LocalNetwork, Identity, Sender, trio.SocketStream]
]:
    """A two-node network, and a stranger with the network's work linked to node 0 but for
    its Hello; the whole within the test's time limit."""
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=PATIENT) as net:
            await net.wait_linked()
            stranger = Identity.generate(work=DEFAULT_ID_WORK)
            stream = await connect(net.node(0))
            session, _ = await handshake(stream, stranger)

            async def send(message: Message) -> None:
                await stream.send_all(frame(session.seal(record(encode(message)))))

            yield net, stranger, send, stream


async def test_an_open_node_takes_only_the_neighbours_a_peer_can_show(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stranger links to node 0 and announces two neighbours: one real, shown by its own
    vouch, and one on the key it wants, without one. Node 0 keeps the first only. Then it
    announces a forged vouch, and node 0 cuts it off with a warning."""
    caplog.set_level(logging.WARNING)
    async with _stranger_at_node_0() as (net, stranger, send, stream):
        node = net.node(0)
        friend = Identity.generate(work=DEFAULT_ID_WORK)
        await send(Hello(location_from_id(stranger.public), 1))
        real = location_from_id(friend.public)
        wanted = 0.123456
        await send(_announced((wanted, b""), (real, _entry(friend, stranger))))
        await node.host.wait_until(
            lambda: any(p.neighbours for p in node.host.core.peers if p.id == stranger.public)
        )
        (record_,) = [p for p in node.host.core.peers if p.id == stranger.public]
        assert record_.neighbours == (real,)

        await send(_announced((real, _entry(friend, friend))))  # not made for stranger
        assert await closed_by_peer(stream)
        await node.host.wait_until(lambda: stranger.public not in node.host.links)
        assert node.host.describe()["refusals"] == {"vouch": 1}
        assert "does not verify" in caplog.text and stranger.text in caplog.text
        await still_works(net)


async def test_a_hello_whose_vouch_is_for_another_node_is_refused_as_a_fault() -> None:
    async with _stranger_at_node_0() as (net, stranger, send, stream):
        node = net.node(0)
        elsewhere = vouch(stranger, NET, net.node(1).identity.public)
        await send(Hello(location_from_id(stranger.public), 1, elsewhere))
        assert await closed_by_peer(stream)
        await node.host.wait_until(lambda: bool(node.host.describe()["refusals"]))
        assert node.host.describe()["refusals"] == {"vouch": 1}
        assert stranger.public not in {p.id for p in node.host.core.peers}
        await still_works(net)


async def test_neighbours_before_hello_cost_no_verify(verifies: list[bytes]) -> None:
    """The core cuts off a peer whose first message is not its Hello; the host does not
    verify what such a message shows first."""
    async with _stranger_at_node_0() as (net, stranger, send, stream):
        node = net.node(0)
        friend = Identity.generate(work=DEFAULT_ID_WORK)
        await send(_announced((location_from_id(friend.public), _entry(friend, stranger))))
        assert await closed_by_peer(stream)
        await node.host.wait_until(lambda: bool(node.host.describe()["refusals"]))
        assert node.host.describe()["refusals"] == {"peer_dropped": 1}
        assert friend.public not in verifies


async def test_open_nodes_show_each_other_their_neighbours() -> None:
    """Three open-mode nodes, none vouching for another: 1 and 2 both link to 0. Node 0's
    announcement to 2 names 1 with 1's vouch, so 2 learns where 1 sits through 0."""
    with trio.fail_after(LIMIT):
        async with NodePool() as pool:
            ids = [Identity.generate() for _ in range(3)]
            base = RuntimeConfig(
                network="testnet",
                identity_work=0,
                listen=Address("127.0.0.1", 0),
                client=Address("127.0.0.1", 0),
                core=PATIENT,
            )
            hub = await pool.start(0, ids[0], base)
            to_hub = (PeerAddress(hub.peer_address, ids[0].public),)
            await pool.start(1, ids[1], dataclasses.replace(base, connect=to_hub))
            edge = await pool.start(2, ids[2], dataclasses.replace(base, connect=to_hub))
            where = location_from_id(ids[1].public)

            def hub_shows_node_1() -> bool:
                peer = edge.host.core.peers.get(ids[0].public)
                return peer is not None and peer.neighbours == (where,)

            await edge.host.wait_until(hub_shows_node_1)
            for node in (hub, edge):
                assert node.host.describe()["refusals"] == {}
