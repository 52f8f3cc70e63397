"""The publishing tree of the core tests, on a CoreNet around any key: root R with children B
and E; B with children A and D; F a late joiner linked to B. Also what a client got
(``packets``), what a node holds (``window``), and a PublishData as a child would send it."""

from __future__ import annotations

import dataclasses
from typing import Any

from corenet import CoreNet, key_at

from keyspace.location import key_location
from overlay.core.config import NodeConfig
from overlay.core.events import Packet
from overlay.messages import MAX_WIRE_HTL, PacketKind, PublishData

KEY = key_at(0.5)
TIMEOUT = NodeConfig().publish_timeout
SUBSCRIBERS = (b"A", b"D", b"E")
# Each node's place relative to the key: R is the closest, so it becomes the root; B is on
# the way to it from A, D and the late joiner F.
OFFSETS = {b"R": -0.01, b"E": -0.05, b"B": -0.2, b"D": -0.3, b"F": -0.35, b"A": -0.4}


def place(key: bytes, name: bytes) -> float:
    return (key_location(key) + OFFSETS[name]) % 1.0


def tree(
    key: bytes = KEY, config: NodeConfig | None = None, also: bytes | None = None, **options: Any
) -> CoreNet:
    """``key``'s tree: root R with children B and E; B with children A and D. Client 1
    subscribes at A, D and E with ``options``; client 2 at the same nodes to ``also``."""
    net = CoreNet(seed=3, config=config)
    for name in (b"R", b"B", b"A", b"D", b"E"):
        net.add(name, place(key, name))
    for a, b in ((b"R", b"B"), (b"B", b"A"), (b"B", b"D"), (b"R", b"E")):
        net.connect(a, b)
    for name in SUBSCRIBERS:
        net.subscribe(name, key, **options)
        if also is not None:
            net.subscribe(name, also, client=2)
    root, relay = net.stream(b"R", key), net.stream(b"B", key)
    assert root is not None and list(root.children) == [b"B", b"E"], "the tree is not as drawn"
    assert relay is not None and list(relay.children) == [b"A", b"D"]
    return net


def add_f(net: CoreNet, key: bytes = KEY, config: NodeConfig | None = None) -> None:
    """Node F, linked to B only (so it joins the tree under B)."""
    net.add(b"F", place(key, b"F"), config)
    net.connect(b"F", b"B")


def packets(
    net: CoreNet, name: bytes, client: int = 1, key: bytes = KEY
) -> list[tuple[int, bytes]]:
    """(number, data) of each Packet ``client`` at ``name`` got for ``key``, in order."""
    return [
        (e.number, e.data)
        for e in net.received(name, client)
        if isinstance(e, Packet) and e.key == key
    ]


def window(net: CoreNet, name: bytes, key: bytes = KEY) -> list[int]:
    stream = net.stream(name, key)
    assert stream is not None
    return list(stream.window.packets)


def publish_data(uid: int, key: bytes = KEY, **fields: Any) -> PublishData:
    """A PublishData as a child would send it, with ``fields`` changed."""
    base = PublishData(uid, key, None, 0.1, MAX_WIRE_HTL, b"z", None, PacketKind.DATA, None)
    return dataclasses.replace(base, **fields)
