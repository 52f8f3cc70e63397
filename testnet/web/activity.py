"""Subscribers and publishers that the web view starts on a testnet when asked to.

The page's controls give a person a tree to look at without a second terminal: subscribe
K nodes to a stream, publish to it at a rate. Each subscriber and publisher is a real
client of a node's client port (``overlay.client.aio``), exactly what ``overlay subscribe``
and ``overlay publish`` would be, so what the page shows is what those commands would see.
They live in the web server's process and end with it (or, for publishers, on ``stop``).

Nothing here may take the server down: a node that is killed under a subscriber or a
publisher ends that one client, which is told on the page's log and forgotten.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import trio

from keyspace.stream_key import StreamKey
from overlay.client.aio import open_client
from overlay.client.connection import ClientError
from overlay.client.protocol import ClientProtocolError
from overlay.core.events import Packet
from testnet.web.model import Event, LiveView

# At most this many page-made subscribers, and publishers, at once: each holds a socket of
# the server's 20,000, and a page left open with a key held down must not use them up.
MAX_SUBSCRIBERS = 1000
MAX_PUBLISHERS = 16

# The fastest a page-made publisher goes: the control is for watching, not benchmarking.
MAX_RATE = 1000.0

Say = Callable[[str, str, "str | None"], None]

_ENDED = (ClientError, ClientProtocolError, OSError, trio.BrokenResourceError)


class ActivityError(ValueError):
    """A request the activity refuses; its message names the thing at fault."""


class Activity:
    """The page's subscribers and publishers (see the module notes). ``say(kind, text,
    stream key or None)`` puts a line on every page's log; ``named(events)`` tells every
    page of a stream the page named."""

    def __init__(
        self,
        view: LiveView,
        nursery: trio.Nursery,
        say: Say,
        named: Callable[[list[Event]], None],
        seed: int = 0,
    ) -> None:
        self._view = view
        self._named = named
        self._nursery = nursery
        self._say = say
        self._rng = random.Random(seed)
        self.subscribers: dict[tuple[str, int], int] = {}  # (key, node) -> packets received
        self.published: dict[str, int] = {}  # key -> packets acknowledged
        self._publishers: list[trio.CancelScope] = []

    def stream(self, name: object) -> StreamKey:
        if not isinstance(name, str) or not name:
            raise ActivityError("stream: give a stream name, for example 'demo'")
        try:
            key = StreamKey.parse(name)
        except ValueError as error:
            raise ActivityError(f"stream {name!r}: {error}") from None
        if key.is_signed:
            raise ActivityError(f"stream {name!r}: the page publishes to open streams only")
        self._named(self._view.name(key.key.hex(), name))
        return key

    def subscribe(self, name: object, count: object) -> list[int]:
        """Subscribe ``count`` more alive nodes, chosen at random, to stream ``name``; the
        nodes chosen."""
        stream = self.stream(name)
        count = _whole(count, "count", 1, MAX_SUBSCRIBERS - len(self.subscribers))
        key = stream.key.hex()
        taken = {node for k, node in self.subscribers if k == key}
        free = [i for i, r in self._view.nodes.items() if r["alive"] and i not in taken]
        if len(free) < count:
            raise ActivityError(
                f"count: only {len(free)} alive nodes have no subscriber of {name} yet"
            )
        chosen = sorted(self._rng.sample(free, count))
        for node in chosen:
            self.subscribers[(key, node)] = 0
            self._nursery.start_soon(self._subscriber, stream, node)
        return chosen

    def publish(self, name: object, rate: object, count: object, node: object) -> int:
        """Publish ``count`` packets (0: until ``stop``) to stream ``name`` at ``rate`` a
        second through ``node`` (None: a random alive node); the node used."""
        stream = self.stream(name)
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0:
            raise ActivityError(f"rate: packets a second, more than 0, got {rate!r}")
        if rate > MAX_RATE:
            raise ActivityError(f"rate: at most {MAX_RATE:g} a second from the page, got {rate}")
        count = _whole(count, "count", 0, 10**9)
        if len(self._publishers) >= MAX_PUBLISHERS:
            raise ActivityError(f"at most {MAX_PUBLISHERS} publishers at once: stop some first")
        if node is None:
            alive = [i for i, r in self._view.nodes.items() if r["alive"]]
            if not alive:
                raise ActivityError("no node is alive to publish through")
            node = self._rng.choice(alive)
        chosen = _whole(node, "node", 0, len(self._view.nodes) - 1)
        if not self._view.nodes[chosen]["alive"]:
            raise ActivityError(f"node: node {chosen} is dead")
        scope = trio.CancelScope()
        self._publishers.append(scope)
        self._nursery.start_soon(self._publisher, scope, stream, chosen, float(rate), count)
        return chosen

    def stop(self) -> int:
        """Stop every publisher; how many were running."""
        scopes, self._publishers = self._publishers, []
        for scope in scopes:
            scope.cancel()
        return len(scopes)

    async def _subscriber(self, stream: StreamKey, node: int) -> None:
        key = stream.key.hex()
        address = self._view.manifest.nodes[node].client
        try:
            async with (
                open_client(address, name="overlay web") as client,
                await client.subscribe(stream) as events,
            ):
                async for event in events:
                    if isinstance(event, Packet):
                        self.subscribers[(key, node)] += 1
        except _ENDED as error:
            self._say("client", f"the subscriber on node {node} ended: {error}", key)
        finally:
            self.subscribers.pop((key, node), None)

    async def _publisher(
        self, scope: trio.CancelScope, stream: StreamKey, node: int, rate: float, count: int
    ) -> None:
        key = stream.key.hex()
        address = self._view.manifest.nodes[node].client
        with scope:
            try:
                async with open_client(address, name="overlay web") as client:
                    sent = waiting = 0
                    batch = max(1, int(rate / 10))  # answers collected ten times a second
                    start = trio.current_time()
                    while count == 0 or sent < count:
                        # Paced from the start, not from the last send: time spent waiting
                        # for answers is caught up rather than lowering the rate.
                        await trio.sleep_until(start + sent / rate)
                        client.publish_nowait(stream, b"%d" % sent)
                        sent += 1
                        waiting += 1
                        if waiting >= batch or sent == count:
                            await client.flush()
                            self.published[key] = self.published.get(key, 0) + waiting
                            waiting = 0
                self._say("client", f"the publisher on node {node} sent its {count}", key)
            except _ENDED as error:
                self._say("client", f"the publisher on node {node} ended: {error}", key)
        if scope in self._publishers:
            self._publishers.remove(scope)


def _whole(value: object, name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ActivityError(f"{name}: a whole number from {low} to {high}, got {value!r}")
    return value
