"""The takeover tree drawn around the key at 0.5, and what its clients were told::

    R 0.5 (root, publishes)
    +-- X 0.47 -- E 0.4 (subscriber)
    +-- C 0.3  -- A 0.2 (subscriber)        and a link X - C, not a tree edge

Packets 0..2 reach everybody; 3 and 4 reach C's branch only (they were still on the R - X
link when it broke), so after R goes, X (the closest node left) lacks what C holds."""

from __future__ import annotations

from corenet import CoreNet, key_at

from overlay.core.config import NodeConfig
from overlay.core.events import Missed, Packet, PublishAcked
from overlay.core.streams import Stream

KEY = key_at(0.5)
CONFIG = NodeConfig()
GRACE = CONFIG.takeover_grace
ACCEPT = CONFIG.accept_timeout
MAX_HTL = CONFIG.max_htl
R, X, E, C, A = b"R", b"X", b"E", b"C", b"A"
LOCATIONS = {R: 0.5, X: 0.47, E: 0.4, C: 0.3, A: 0.2}
UID = 100  # R publishes packet n with uid UID + n
OLD = {n: b"p%d" % n for n in range(5)}  # what R published, by number

Seen = tuple[int, bytes] | Missed


def carried(net: CoreNet, name: bytes, key: bytes = KEY) -> Stream:
    stream = net.stream(name, key)
    assert stream is not None, f"{name!r} does not carry the stream"
    return stream


def seen(net: CoreNet, name: bytes, client: int = 1) -> list[Seen]:
    """What ``client`` at ``name`` was told about packets: (number, data), or Missed."""
    out: list[Seen] = []
    for event in net.received(name, client):
        if isinstance(event, Packet):
            out.append((event.number, event.data))
        elif isinstance(event, Missed):
            out.append(event)
    return out


def acked(net: CoreNet, name: bytes, client: int = 1) -> dict[int, int]:
    """uid -> packet number of each PublishAcked ``client`` at ``name`` got."""
    return {e.uid: e.number for e in net.answers(name, client) if isinstance(e, PublishAcked)}


def tree() -> CoreNet:
    net = CoreNet(seed=5)
    for name, location in LOCATIONS.items():
        net.add(name, location)
    for a, b in ((R, X), (R, C), (X, E), (C, A)):
        net.connect(a, b)
    net.subscribe(E, KEY)
    net.subscribe(A, KEY)
    net.connect(X, C)  # after the joins: a shortcut only the repair uses
    shape = {name: carried(net, name).parent for name in (X, E, C, A)}
    assert shape == {X: R, E: X, C: R, A: C}, "the tree is not as drawn"
    return net


def lose_root(net: CoreNet, order: str) -> None:
    """R's links break (frames in flight on them are lost), in ``order``."""
    if order == "at once":
        net.hold(C)
        net.disconnect(R, X)
        net.disconnect(R, C)
        net.release(X)
        net.release(C)
    elif order == "X first":
        net.disconnect(R, X)
        net.release(X)
        net.disconnect(R, C)
    else:
        net.disconnect(R, C)
        net.disconnect(R, X)
        net.release(X)


def taken_over_by_a_restart() -> tuple[CoreNet, bytes, bytes]:
    """The drawn tree; R's link to X breaks at t=1 while C is slow: X restarts, its search
    ends with nobody closer, and X stays root of its subtree. (R is alive: when X's grace
    ends, X looks again, finds R's tree through C and joins it; see ``merges``.)"""
    net = tree()
    for n in range(3):
        net.publish(R, KEY, OLD[n], uid=UID + n)
    net.advance(1.0)
    net.hold(C)
    net.disconnect(R, X)
    net.advance(1.0 + ACCEPT)
    assert net.nodes[X].stats.roots == 1
    net.advance(1.0 + ACCEPT + CONFIG.heartbeat_interval)  # still inside X's grace
    net.release(C)  # C answers X's old search with DataNotFound: nothing changes
    return net, X, E
