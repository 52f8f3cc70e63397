"""The hostile peer of ``testnet.bench.hostile``: one attack on one node, for a bounded time.

    python -m testnet.bench.hostile_attacks ATTACK --target HOST:PORT --key HEX --seconds S
        [--count N]

Run by the bench as a process of its own, so the attacker's sockets and CPU are not counted
as the attacked node's. It prints "started" as the attack starts, and one JSON line when the
time is up: ``connections`` opened, ``cut`` (how many of them the node closed or refused
before the attacker closed them itself), messages ``sent`` and ``received`` by type, and,
per attack, what it did (``notes``). A connection the node closes is dialled again.

An attacker that joins the stream behaves as an honest child in all but its attack: it
reads everything, answers HeldQuery and SubscribeRestarted, heartbeats, sends each frame
whole, and leaves with an Unsubscribe when its time is up. Otherwise every row would also
measure a silent or vanishing child (``join_drop`` measures the latter on purpose).

Every attacker that gets past the TCP connect is built from the project's own pieces: the
link handshake (``overlay.runtime.handshake``), framing and sealing, and messages encoded by
``overlay.codec`` (one deliberately left inconsistent is encoded field by field, since the
codec would refuse it). Its identity sits at least a quarter circle from the stream's key,
so its Hello never makes the root hand the tree on (that is churn, not an attack).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Awaitable, Callable
from dataclasses import fields
from enum import IntEnum
from typing import Any

import cbor2
import trio

from keyspace.location import key_location, location_from_id
from keyspace.stream_key import StreamKey
from overlay.messages import (
    SIGNATURE_SIZE,
    Heartbeat,
    Hello,
    Neighbours,
    PacketKind,
    PublishData,
    ResubscribeRequest,
    SubscribeData,
    SubscribeRequest,
)
from overlay.runtime.framing import PREFIX_SIZE
from overlay.runtime.handshake import MAGIC
from testnet.bench.hostile_peer import (
    HTL,
    Peer,
    Tally,
    Target,
    as_child,
    far_identity,
    keep_trying,
    linked,
    prepare,
    until_closed,
)

# A hello's first bytes: its length prefix (a hello of 60 bytes) and the magic, then nothing.
HALF_HELLO = (60).to_bytes(PREFIX_SIZE, "big") + MAGIC


# Kernel sources for the connection floods: all of 127/8 is loopback on Linux, and the node
# allows max_handshakes_per_address (32) at once from one address.
FLOOD_ADDRESSES = 100


# What an attacker publishes under its own name on the open stream (``unconfirmed_publish``):
# anyone may publish there, so such a packet delivered is no forgery; the bench counts it
# apart (``own``).
OWN_PUBLISH = b"the attacker's own publish "


def inconsistent_publish(uid: int, key: bytes, where: float) -> bytes:
    """PublishData(claim=True, pushed=True, packet=None) encoded field by field: ``encode``
    refuses it (a claim must name its number), so it is built in the codec's wire layout."""
    message = PublishData(
        uid, key, None, where, HTL, b"claim", None, PacketKind.DATA, None, True, True
    )
    values: list[object] = [PublishData.TYPE]
    for field in fields(PublishData):
        value = getattr(message, field.name)
        values.append(int(value) if isinstance(value, IntEnum) else value)
    return cbor2.dumps(values)


# --- attacks ---------------------------------------------------------------------------------
# Each runs until cancelled (the caller bounds it by --seconds) and counts into ``tally``.


async def garbage(target: Target, key: bytes, tally: Tally) -> None:
    """Random bytes instead of a handshake, a fresh connection each time."""
    rng = random.Random(1)

    async def one() -> None:
        peer = await Peer.connect(target, tally)
        await peer.stream.send_all(rng.randbytes(4096))
        await until_closed(peer)

    await keep_trying(tally, one)


async def oversized(target: Target, key: bytes, tally: Tally) -> None:
    """A handshake frame announcing 60,000 bytes (a hello is about a hundred)."""

    async def one() -> None:
        peer = await Peer.connect(target, tally)
        await peer.stream.send_all((60_000).to_bytes(PREFIX_SIZE, "big") + bytes(8192))
        await until_closed(peer)

    await keep_trying(tally, one)


async def before_hello(target: Target, key: bytes, tally: Tally) -> None:
    """A valid handshake, then a Heartbeat where the Hello must come first."""

    async def one() -> None:
        peer = await linked(target, tally, far_identity(key, work=0))
        if peer is not None:
            await peer.send(Heartbeat(0))
            await until_closed(peer)

    await keep_trying(tally, one)


async def false_location(target: Target, key: bytes, tally: Tally) -> None:
    """A Hello claiming to sit at the stream key's own location, which its id does not
    give: were it believed, the root would hand the stream's tree to the liar."""

    async def one() -> None:
        peer = await linked(target, tally, far_identity(key, work=0))
        if peer is not None:
            await peer.send(Hello(key_location(key), random.getrandbits(63)))
            await until_closed(peer)

    await keep_trying(tally, one)


async def false_neighbours(target: Target, key: bytes, tally: Tally) -> None:
    """Once linked, a Neighbours naming a neighbour on the stream key's own location without
    that neighbour's signed word (dropped: were it believed, every search for the key would
    come here), then one naming a real identity with a word it never signed (a lie: the
    link is cut off)."""
    identity = far_identity(key)
    shown = far_identity(key)  # an id with the network's work, where its id puts it

    async def one() -> None:
        peer = await linked(target, tally, identity)
        if peer is not None:
            await peer.send(Hello(location_from_id(identity.public), random.getrandbits(63)))
            await peer.send(Neighbours((key_location(key),)))
            forged = shown.public + random.randbytes(SIGNATURE_SIZE)
            await peer.send(Neighbours((location_from_id(shown.public),), (forged,)))
            tally.notes["forged_words"] += 1
            await until_closed(peer)

    await keep_trying(tally, one)


async def claim_without_number(target: Target, key: bytes, tally: Tally) -> None:
    """PublishData(claim=True, pushed=True, packet=None) to the root, once linked."""
    identity = far_identity(key)

    async def one() -> None:
        peer = await linked(target, tally, identity)
        if peer is not None:
            where = location_from_id(identity.public)
            await peer.send(Hello(where, random.getrandbits(63)))
            await peer.send_body(inconsistent_publish(random.getrandbits(63), key, where))
            tally.sent["PublishData(claim, no number)"] += 1
            await until_closed(peer)

    await keep_trying(tally, one)


async def forged_data(target: Target, key: bytes, tally: Tally) -> None:
    """Join the stream as a child (to learn its head), then send SubscribeData upward
    under the next numbers, as if we were the node's parent, ten a second."""
    identity = far_identity(key)

    async def one() -> None:
        async with trio.open_nursery() as nursery:
            peer, joined = await as_child(target, key, tally, nursery, identity)
            tally.notes["joined"] += joined is not None
            head = (joined.last_packet if joined is not None else None) or 0
            try:
                while not peer.closed_by_node.is_set():
                    for message in peer.messages:
                        if isinstance(message, SubscribeData):
                            head = max(head, message.packet)
                    peer.messages.clear()
                    forged = SubscribeData(key, head + 1, b"forged", None, PacketKind.DATA, None)
                    await peer.send(forged)
                    tally.notes["forged_sent"] += 1
                    await trio.sleep(0.1)
            finally:
                await peer.leave([key])
            nursery.cancel_scope.cancel()

    await keep_trying(tally, one)


async def uid_reuse(target: Target, key: bytes, tally: Tally) -> None:
    """Twenty times a second: a SubscribeRequest for another stream (which the node routes
    on), then, under the same uid, a SubscribeRequest and a ResubscribeRequest for the
    honest stream. The other keys are a fixed handful, so the attack does not also grow the
    network's stream count without bound."""
    others = [StreamKey.open(f"hostile-other-{n}").key for n in range(8)]
    identity = far_identity(key)
    where = location_from_id(identity.public)

    async def one() -> None:
        async with trio.open_nursery() as nursery:
            peer = await linked(target, tally, identity)
            if peer is None:
                return
            nursery.start_soon(peer.read_forever)
            await peer.send(Hello(where, 1))
            n = 0
            try:
                while not peer.closed_by_node.is_set():
                    uid = random.getrandbits(63)
                    other = others[n % len(others)]
                    await peer.send(SubscribeRequest(uid, other, HTL, where, None))
                    await peer.send(SubscribeRequest(uid, key, HTL, where, None))
                    await peer.send(ResubscribeRequest(uid, key, HTL, where, where, None))
                    tally.notes["reused"] += 1
                    peer.messages.clear()
                    n += 1
                    await trio.sleep(0.05)
            finally:
                await peer.leave([key, *others])
            nursery.cancel_scope.cancel()

    await keep_trying(tally, one)


async def join_drop(target: Target, key: bytes, tally: Tally) -> None:
    """One identity joins the stream as the node's child, drops the link as soon as it is
    in, redials and joins again, in a loop (a flapping child)."""
    identity = far_identity(key)

    async def one() -> None:
        async with trio.open_nursery() as nursery:
            peer, joined = await as_child(target, key, tally, nursery, identity)
            tally.notes["joined"] += joined is not None
            await peer.aclose()
            nursery.cancel_scope.cancel()

    await keep_trying(tally, one)


# How long ``silent_publish`` says nothing after each publish: well under the node's
# ``dead_after`` (15 s), so liveness never drops it.
MUTE = 10.0


async def _publishing_child(
    target: Target, key: bytes, tally: Tally, *, pause: float, mute: bool
) -> None:
    """A child of the root that publishes in its own name every ``pause`` seconds and never
    sends PublishConfirmed for the numbers the root gives it (PublishNumbered). ``mute``:
    between publishes it says nothing at all, heartbeats and answers included, and sends
    one heartbeat before the next."""
    identity = far_identity(key)
    where = location_from_id(identity.public)

    async def one() -> None:
        async with trio.open_nursery() as nursery:
            peer, joined = await as_child(target, key, tally, nursery, identity)
            tally.notes["joined"] += joined is not None
            try:
                while not peer.closed_by_node.is_set():
                    uid = random.getrandbits(63)
                    data = OWN_PUBLISH + b"%d" % uid
                    await peer.send(
                        PublishData(uid, key, None, where, HTL, data, None, PacketKind.DATA, None)
                    )
                    tally.notes["published"] += 1
                    peer.mute = mute
                    await trio.sleep(pause)
                    peer.messages.clear()
                    if mute:
                        peer.mute = False
                        await peer.send(Heartbeat(0))
            finally:
                peer.mute = False
                await peer.leave([key])
            nursery.cancel_scope.cancel()

    await keep_trying(tally, one)


async def unconfirmed_publish(target: Target, key: bytes, tally: Tally) -> None:
    """A child of the root that publishes twice a second and never confirms a number: the
    root holds each unsent."""
    await _publishing_child(target, key, tally, pause=0.5, mute=False)


async def silent_publish(target: Target, key: bytes, tally: Tally) -> None:
    """A child of the root that publishes, then says nothing at all for ``MUTE`` seconds
    (no confirmation, heartbeat or answer), then one heartbeat and its next publish, in a
    loop. To the root it is a child cut off just after its publish, which may hold its
    number as a claim."""
    await _publishing_child(target, key, tally, pause=MUTE, mute=True)


async def catch_up_flood(target: Target, key: bytes, tally: Tally) -> None:
    """SubscribeRequest(last_seen=-1) with a fresh uid, a hundred a second: each asks the
    node to send the stream from packet 0 (its whole window). The attacker reads it all,
    so this is a cost on the node, not a slow reader."""
    identity = far_identity(key)
    where = location_from_id(identity.public)

    async def one() -> None:
        async with trio.open_nursery() as nursery:
            peer = await linked(target, tally, identity)
            if peer is None:
                return
            nursery.start_soon(peer.read_forever)
            await peer.send(Hello(where, 1))
            try:
                while not peer.closed_by_node.is_set():
                    await peer.send(SubscribeRequest(random.getrandbits(63), key, HTL, where, -1))
                    tally.notes["requests"] += 1
                    peer.messages.clear()
                    await trio.sleep(0.01)
            finally:
                await peer.leave([key])
            nursery.cancel_scope.cancel()

    await keep_trying(tally, one)


async def _flood(target: Target, tally: Tally, connections: int, first: bytes) -> None:
    """``connections`` connections held open at once, spread over ``FLOOD_ADDRESSES``
    source addresses, each sending ``first`` (maybe nothing) and then staying silent; one
    the node closes is opened again at once."""

    async def one(n: int) -> None:
        source = f"127.0.1.{1 + n % FLOOD_ADDRESSES}"
        while True:
            sock = trio.socket.socket()
            connected = False
            try:
                await sock.bind((source, 0))
                await sock.connect(target)
                connected = True
                tally.connections += 1
                if first:
                    await sock.send(first)
                while await sock.recv(4096):
                    pass
                tally.cut += 1  # closed by the node
            except OSError:
                if connected:
                    tally.cut += 1  # reset by the node (a refusal at accept is a reset)
                else:
                    tally.notes["connect_failed"] += 1
                    await trio.sleep(0.01)
            finally:
                sock.close()

    async with trio.open_nursery() as nursery:
        for n in range(connections):
            nursery.start_soon(one, n)


async def half_handshake(target: Target, key: bytes, tally: Tally, *, count: int) -> None:
    """Slowloris: ``count`` connections that each send the first half of a hello."""
    await _flood(target, tally, count, HALF_HELLO)


async def idle_flood(target: Target, key: bytes, tally: Tally, *, count: int) -> None:
    """``count`` connections that send nothing at all."""
    await _flood(target, tally, count, b"")


async def perform(
    attack: str, target: Target, key: bytes, seconds: float, count: int, tally: Tally
) -> None:
    """Run ``attack`` against ``target`` for ``seconds``, counting into ``tally``.
    ``count``: the connections a flood holds (``half_handshake``, ``idle_flood``)."""
    simple: dict[str, Callable[[Target, bytes, Tally], Awaitable[None]]] = {
        "garbage": garbage,
        "oversized_frame": oversized,
        "before_hello": before_hello,
        "false_location": false_location,
        "false_neighbours": false_neighbours,
        "forged_data": forged_data,
        "uid_reuse": uid_reuse,
        "claim_without_number": claim_without_number,
        "join_drop": join_drop,
        "unconfirmed_publish": unconfirmed_publish,
        "silent_publish": silent_publish,
        "catch_up_flood": catch_up_flood,
    }
    with trio.move_on_after(seconds):
        if attack == "half_handshake":
            await half_handshake(target, key, tally, count=count)
        elif attack == "idle_flood":
            await idle_flood(target, key, tally, count=count)
        else:
            await simple[attack](target, key, tally)


def run(attack: str, target: Target, key: bytes, seconds: float, count: int) -> dict[str, Any]:
    """Run ``attack`` for ``seconds`` and return what the attacker saw."""
    tally = Tally()
    prepare(key, 2)  # (``false_neighbours`` uses two)

    async def main() -> None:
        # The bench times the attack from this line, not from the process's start.
        print("started", flush=True)
        await perform(attack, target, key, seconds, count, tally)

    trio.run(main)
    return tally.report()


ATTACKS = (
    "garbage",
    "half_handshake",
    "oversized_frame",
    "before_hello",
    "false_location",
    "false_neighbours",
    "forged_data",
    "uid_reuse",
    "claim_without_number",
    "join_drop",
    "unconfirmed_publish",
    "silent_publish",
    "catch_up_flood",
    "idle_flood",
)


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` is Ctrl-C, alone or as trio hands it out of a nursery (in an
    exception group beside the cancellations it caused)."""
    if isinstance(error, BaseExceptionGroup):
        return error.subgroup(KeyboardInterrupt) is not None
    return isinstance(error, KeyboardInterrupt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("attack", choices=ATTACKS)
    parser.add_argument("--target", required=True, metavar="HOST:PORT")
    parser.add_argument("--key", required=True, help="the honest stream's key, hex")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--count", type=int, default=500, help="connections of a flood")
    args = parser.parse_args(argv)
    host, port = args.target.rsplit(":", 1)
    try:
        report = run(
            args.attack, (host, int(port)), bytes.fromhex(args.key), args.seconds, args.count
        )
    except BaseException as error:
        if not interrupted(error):
            raise
        return 130
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
