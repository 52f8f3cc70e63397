"""The attacker's side of ``testnet.bench.hostile_attacks``: a peer built from the project's
own handshake, framing and codec, the identities it links as, and the loop that dials again
each connection the node closes.

A ``Peer`` behaves as an honest peer in all but what an attack makes it do: it reads and
counts everything the node sends (never a slow reader), heartbeats, and sends each frame
whole. Identities sit at least a quarter circle from the attacked stream's key, so a Hello
never makes the root hand the tree on (that is churn, not an attack), and are made before
the attack's clock starts (``prepare``).
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from keyspace.id_work import DEFAULT_ID_WORK
from keyspace.location import distance, key_location, location_from_id
from overlay.codec import decode, encode
from overlay.errors import RemoteProtocolError
from overlay.messages import (
    Heartbeat,
    Held,
    HeldQuery,
    Hello,
    Message,
    RestartConfirmed,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeSucceeded,
    Unsubscribe,
)
from overlay.runtime.framing import (
    SEALED_MAX,
    FrameReader,
    frame,
    record,
    split_records,
)
from overlay.runtime.handshake import Handshake, Session
from overlay.runtime.identity import Identity

NETWORK = b"testnet"  # LocalNetwork's default


HTL = 10  # a search's budget, as a node's own (NodeConfig.max_htl)


# Each loop of connect-and-misbehave waits this long between tries: the attack is about
# what one bad connection does, so a few dozen a second are plenty and keep the attacker's
# own CPU (on a shared machine) from being what slows the honest nodes.
PAUSE = 0.02


# The longest a whole frame may take to send (why: ``Peer.send_body``).
SEND_TIMEOUT = 5.0


# An honest peer's heartbeat: well inside the node's dead_after (15 s by default).
HEARTBEAT = 2.0


class Tally:
    """What the attacker saw; printed as JSON at the end."""

    def __init__(self) -> None:
        self.connections = 0
        self.cut = 0  # closed or refused by the node before we closed them
        self.received: Counter[str] = Counter()
        self.sent: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()
        self.open: list[Peer] = []  # connections of the current try, closed after it

    def report(self) -> dict[str, Any]:
        return {
            "connections": self.connections,
            "cut": self.cut,
            "received": dict(self.received),
            "sent": dict(self.sent),
            "notes": dict(self.notes),
        }


class Peer:
    """One connection to the node, as a peer: handshake, sealed messages, and a reader that
    drains (and counts) whatever the node sends, so the attacker is never a slow reader."""

    def __init__(self, stream: trio.SocketStream, tally: Tally) -> None:
        self.stream = stream
        self.tally = tally
        self.session: Session | None = None
        self.reader = FrameReader(SEALED_MAX)
        self.closed_by_node = trio.Event()
        self.messages: list[Message] = []
        self.arrived = trio.Event()
        self._closing = False
        self._sending = trio.Lock()
        self.high: dict[bytes, int] = {}  # newest packet received, by stream
        self.wanted: dict[bytes, int] = {}  # the packet a HeldQuery waits for, by stream
        self.mute = False  # True: no heartbeat, no answer (a child cut off, as the node sees it)

    @classmethod
    async def connect(cls, target: tuple[str, int], tally: Tally) -> Peer:
        stream = await trio.open_tcp_stream(*target)
        tally.connections += 1
        peer = cls(stream, tally)
        tally.open.append(peer)
        return peer

    async def handshake(self, identity: Identity) -> bool:
        """A genuine handshake as the dialling side; False if the node closed first."""
        shake = Handshake(identity, initiator=True, network=NETWORK)
        await self.stream.send_all(frame(shake.start()))
        while not shake.done:
            data = await self.receive()
            if not data:
                return False
            for body in self.reader.feed(data):
                reply = shake.receive(body)
                if reply:
                    await self.stream.send_all(frame(reply))
        self.session = shake.session()
        return True

    async def send(self, message: Message) -> None:
        self.tally.sent[type(message).__name__] += 1
        await self.send_body(encode(message))

    async def send_body(self, body: bytes) -> None:
        # One sender at a time: frames must reach the wire in the order of their nonces.
        # And whole: a send cut short by the attack's time would leave half a frame, which
        # the node rightly takes for a broken peer, so the frame is shielded (for at most
        # ``SEND_TIMEOUT``: past it the link is closed, never written to again).
        assert self.session is not None
        async with self._sending:
            data = frame(self.session.seal(record(body)))
            with trio.CancelScope(shield=True):
                with trio.move_on_after(SEND_TIMEOUT):
                    await self.stream.send_all(data)
                    return
                await self.aclose()
                raise trio.ClosedResourceError("a frame could not be sent in time")

    async def read_forever(self) -> None:
        """Read and decode until the node closes the link, answering what an honest child
        must (``_answer``) and sending a Heartbeat every ``HEARTBEAT`` seconds: each attack
        misbehaves only as it says, never also as a silent child the node would wait for."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._beat)
            await self._read()
            nursery.cancel_scope.cancel()

    async def _beat(self) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            for n in itertools.count():
                await trio.sleep(HEARTBEAT)
                if not self.mute:
                    await self.send(Heartbeat(n))

    async def _read(self) -> None:
        assert self.session is not None
        while True:
            data = await self.receive()
            if not data:
                return
            for body in self.reader.feed(data):
                for one in split_records(self.session.open(body)):
                    message = decode(one)
                    self.tally.received[type(message).__name__] += 1
                    self.messages.append(message)
                    for answer in self._answer(message):
                        if not self.mute:
                            await self.send(answer)
            self.arrived.set()
            self.arrived = trio.Event()

    def _answer(self, message: Message) -> list[Message]:
        """An honest child's answers: Held once it holds what a HeldQuery asks about (the
        root waits ``confirm_timeout`` for a child that stays silent), RestartConfirmed to
        a SubscribeRestarted (the restart waits for it too)."""
        if isinstance(message, SubscribeData):
            self.high[message.key] = max(self.high.get(message.key, -1), message.packet)
        elif isinstance(message, HeldQuery):
            self.wanted[message.key] = max(self.wanted.get(message.key, -1), message.packet)
        elif isinstance(message, SubscribeRestarted):
            seen = self.high.get(message.key)
            return [RestartConfirmed(message.uid, message.key, seen)]
        key = getattr(message, "key", None)
        if key in self.wanted and self.high.get(key, -1) >= self.wanted[key]:
            return [Held(key, self.wanted.pop(key))]
        return []

    async def wait_for(self, kind: type[Message], timeout: float) -> Message | None:
        with trio.move_on_after(timeout):
            while True:
                for message in self.messages:
                    if type(message) is kind:
                        return message
                if self.closed_by_node.is_set():
                    return None
                await self.arrived.wait()
        return None

    async def receive(self) -> bytes:
        try:
            data = await self.stream.receive_some(65536)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._node_closed()
        return data

    def _node_closed(self) -> None:
        if not self._closing and not self.closed_by_node.is_set():
            self.tally.cut += 1
            self.closed_by_node.set()
            self.arrived.set()

    async def leave(self, keys: list[bytes]) -> None:
        """Leave as an honest child does when its time is up: Unsubscribe from ``keys``,
        then close. Shielded, so it runs when the attack's time cancels it; an abrupt drop
        is an attack of its own (``join_drop``), not how every other attack should end."""
        with trio.CancelScope(shield=True), trio.move_on_after(1.0):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                for key in keys:
                    await self.send(Unsubscribe(key))
            await self.aclose()

    async def aclose(self) -> None:
        self._closing = True
        await trio.aclose_forcefully(self.stream)


# Identities made before an attack's clock starts (``prepare``): the bench times what the
# node goes through, from the attack's first connection, not the attacker's key making.
_MADE: dict[bytes, list[Identity]] = {}


def prepare(key: bytes, count: int = 1) -> None:
    """Make ``count`` identities for attacks on ``key`` ahead of time (``far_identity``)."""
    made = _MADE.setdefault(key, [])
    while len(made) < count:
        made.append(_far(key, DEFAULT_ID_WORK))


def far_identity(key: bytes, work: int = DEFAULT_ID_WORK) -> Identity:
    """An identity at least a quarter circle from ``key`` (one in two qualifies), whose id
    carries ``work`` bits: what a node asks of a peer it takes the Hello of (one made by
    ``prepare`` if there is one left). An attack refused before that check needs none."""
    made = _MADE.get(key)
    if work == DEFAULT_ID_WORK and made:
        return made.pop()
    return _far(key, work)


def _far(key: bytes, work: int) -> Identity:
    target = key_location(key)
    while True:
        identity = Identity.generate(work)
        if distance(location_from_id(identity.public), target) >= 0.25:
            return identity


Target = tuple[str, int]


async def keep_trying(tally: Tally, one: Callable[[], Awaitable[None]]) -> None:
    """Run ``one`` connection's misbehaviour again and again, ``PAUSE`` apart: a link the
    node closes is dialled again, as a real attacker would. Whatever a try leaves open
    (it failed half way) is closed after it, so the attacker's sockets stay bounded."""
    while True:
        try:
            await one()
        except* (OSError, trio.BrokenResourceError, trio.ClosedResourceError, RemoteProtocolError):
            pass
        finally:
            for peer in tally.open:
                await peer.aclose()
            tally.open.clear()
        await trio.sleep(PAUSE)


async def until_closed(peer: Peer, timeout: float = 2.0) -> None:
    """Read until the node closes the connection (it is counted as cut then), or give up."""
    with trio.move_on_after(timeout):
        while await peer.receive():
            pass
    await peer.aclose()


async def linked(target: Target, tally: Tally, identity: Identity) -> Peer | None:
    """A connection with a finished handshake (None if the node closed it during it)."""
    peer = await Peer.connect(target, tally)
    if not await peer.handshake(identity):
        await peer.aclose()
        return None
    return peer


async def as_child(
    target: Target, key: bytes, tally: Tally, nursery: trio.Nursery, identity: Identity
) -> tuple[Peer, SubscribeSucceeded | None]:
    """Link, say Hello where the id puts us, and join the stream as the node's child; the
    peer's reader runs in ``nursery``. Raises OSError if the node closed the link."""
    peer = await linked(target, tally, identity)
    if peer is None:
        raise OSError("closed during the handshake")
    where = location_from_id(identity.public)
    nursery.start_soon(peer.read_forever)
    await peer.send(Hello(where, 1))
    await peer.send(SubscribeRequest(random.getrandbits(63), key, HTL, where, None))
    joined = await peer.wait_for(SubscribeSucceeded, 5.0)
    return peer, joined if isinstance(joined, SubscribeSucceeded) else None
