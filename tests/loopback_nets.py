"""Real nodes over loopback TCP for the runtime tests: the fast timers they run with, a line
of nodes (``chain``), a local client that records what its node delivers (``Inbox``,
``join``), and publishing through a node's host (``publish_all``)."""

from __future__ import annotations

from collections.abc import Callable

from keyspace.stream_key import StreamKey
from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from overlay.core.events import ClientEvent, Packet, PublishAcked, PublishFailed, Subscribed
from overlay.messages import RETRYABLE
from overlay.runtime.host import NodeHost
from overlay.runtime.service import RunningNode

FAST = NodeConfig(
    heartbeat_interval=0.2,
    dead_after=0.6,
    accept_timeout=1.0,
    request_timeout=3.0,
    confirm_timeout=1.0,
    takeover_grace=0.3,
    announce_delay=0.05,
    publish_timeout=1.0,
    publish_attempts=20,
)
KEY = StreamKey.open("runtime-test").key
LIMIT = 30.0  # seconds of real time any one test may take before it fails


class Inbox:
    """A local client of one node: records what the node delivers to it."""

    def __init__(self) -> None:
        self.events: list[ClientEvent] = []

    def deliver(self, event: ClientEvent) -> None:
        self.events.append(event)

    def numbers(self) -> list[int]:
        return [e.number for e in self.events if isinstance(e, Packet)]

    def acked(self) -> dict[int, int]:
        return {e.uid: e.number for e in self.events if isinstance(e, PublishAcked)}

    def has(self, count: int) -> Callable[[], bool]:
        """A predicate for ``wait_until``: at least ``count`` packets arrived."""
        return lambda: len(self.numbers()) >= count


def chain(n: int) -> Topology:
    locations = tuple((i + 0.5) / n for i in range(n))
    neighbours = tuple(tuple(j for j in (i - 1, i + 1) if 0 <= j < n) for i in range(n))
    return Topology(locations, neighbours)


async def join(node: RunningNode, key: bytes = KEY) -> Inbox:
    inbox = Inbox()
    host = node.host
    client = host.add_client(inbox)
    host.subscribe(client, key)
    await host.wait_until(lambda: any(isinstance(e, Subscribed) for e in inbox.events))
    return inbox


async def publish_all(host: NodeHost, count: int, key: bytes = KEY, start: int = 0) -> Inbox:
    """Publish ``count`` packets and wait for every acknowledgement, resending (same uid)
    any that fail for a reason that may pass, as a careful client does."""
    publisher = Inbox()
    client = host.add_client(publisher)
    uids = range(1_000 + start, 1_000 + start + count)
    for uid in uids:
        host.publish(client, key, uid, b"packet %d" % uid)

    def settled() -> bool:
        failed = [e for e in publisher.events if isinstance(e, PublishFailed)]
        for event in failed:
            assert event.error in RETRYABLE, event
            publisher.events.remove(event)
            host.publish(client, key, event.uid, b"packet %d" % event.uid)
        return set(uids) <= set(publisher.acked())

    await host.wait_until(settled)
    return publisher


def _key_near(location: float) -> bytes:
    """An open stream key whose location is within 1% of ``location``."""
    for i in range(100_000):
        stream = StreamKey.open(f"near-{location}-{i}")
        if abs(stream.location - location) < 0.01:
            return stream.key
    raise AssertionError("no key found")
