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
import shlex
from collections.abc import Callable
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from overlay.client.aio import Client, open_client
from overlay.client.connection import ClientError
from overlay.client.protocol import ClientProtocolError
from overlay.core.events import Packet
from testnet.control import call_async
from testnet.manifest import DEFAULT_DIR
from testnet.web.model import Event, LiveView

# At most this many page-made subscribers, and publishers, at once: each holds a socket of
# the server's 20,000, and a page left open with a key held down must not use them up.
MAX_SUBSCRIBERS = 1000
MAX_PUBLISHERS = 16

# The fastest a page-made publisher goes: the control is for watching, not benchmarking.
# The slowest: one packet in 100 s (slower is no stream to watch).
MAX_RATE = 1000.0
MIN_RATE = 0.01

# Publishes a page-made publisher may have unanswered: a second at the fastest rate.
IN_FLIGHT = 1000

ACTIONS = ("kill", "restart", "subscribe", "publish", "stop")

Say = Callable[[str, str, "str | None"], None]

_ENDED = (ClientError, ClientProtocolError, OSError, trio.BrokenResourceError)


class ActivityError(ValueError):
    """A request the activity refuses; its message names the thing at fault."""


class Activity:
    """What the page's controls do: kill and restart nodes through their workers, and run
    subscribers and publishers (see the module notes). ``say(kind, text, stream key or
    None)`` puts a line on every page's log; ``named(events)`` tells every page of a stream
    the page named."""

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

    async def act(self, action: str, request: dict[str, Any], directory: str) -> dict[str, Any]:
        """Do what the page asked (``action``, with the fields of ``request``) on the
        testnet launched in ``directory``; the answer for the page, with the command line
        that would do the same. ActivityError for a bad request, ControlError when a
        worker refuses."""
        where = "" if directory == str(DEFAULT_DIR) else f" --dir {shlex.quote(directory)}"
        if action in ("kill", "restart"):
            nodes = self._view.manifest.nodes
            node = _whole(request.get("node"), "node", 0, len(nodes) - 1)
            await call_async(self._view.manifest.worker_of(node).control, action, node=node)
            self._say(action, f"node {node}: {action} asked from the page", None)
            return {"ok": True, "command": f"overlay testnet {action} {node}{where}"}
        if action == "subscribe":
            name = request.get("stream")
            chosen = self.subscribe(name, request.get("count", 1))
            key = self.stream(name).key.hex()
            self._say(
                "client",
                f"{len(chosen)} subscribers of '{name}' started on nodes {_some(chosen)}",
                key,
            )
            commands = [
                f"overlay subscribe {shlex.quote(str(name))} --node $(overlay testnet client"
                f" {n}{where}) &"
                for n in chosen
            ]
            return {"ok": True, "nodes": chosen, "command": "\n".join(commands)}
        if action == "publish":
            name, rate = request.get("stream"), request.get("rate", 10)
            node = self.publish(name, rate, request.get("count", 0), request.get("node"))
            self._say(
                "client",
                f"publishing to '{name}' at {rate}/s through node {node}",
                self.stream(name).key.hex(),
            )
            command = (
                f"while sleep {1 / float(rate):.3g}; do date; done | overlay publish "
                f"{shlex.quote(str(name))} --node $(overlay testnet client {node}{where})"
            )
            return {"ok": True, "node": node, "command": command}
        if action == "stop":
            stopped = self.stop()
            self._say("client", f"{stopped} publishers stopped from the page", None)
            return {"ok": True, "stopped": stopped, "command": "(Ctrl-C the publishers)"}
        raise ActivityError(f"no such action: {action} ({', '.join(ACTIONS)})")

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
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate >= MIN_RATE:
            raise ActivityError(f"rate: packets a second, at least {MIN_RATE}, got {rate!r}")
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
                    # Answers are taken by a task of their own: waiting for them in the
                    # pacing loop would hold the next publish for a round trip. At most
                    # ``IN_FLIGHT`` wait, then the pacing waits too.
                    sent, answered = trio.open_memory_channel[int](IN_FLIGHT)
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._answers, client, answered, key)
                        async with sent:
                            start = trio.current_time()
                            number = 0
                            while count == 0 or number < count:
                                # Paced from the start, not from the last send: a slow
                                # moment is caught up rather than lowering the rate.
                                await trio.sleep_until(start + number / rate)
                                await sent.send(client.publish_nowait(stream, b"%d" % number))
                                number += 1
                self._say("client", f"the publisher on node {node} sent its {count}", key)
            except* _ENDED as ended:  # (raised by the pacing loop or by the answers' task)
                error = ended.exceptions[0]
                self._say("client", f"the publisher on node {node} ended: {error}", key)
        if scope in self._publishers:
            self._publishers.remove(scope)

    async def _answers(
        self, client: Client, uids: trio.MemoryReceiveChannel[int], key: str
    ) -> None:
        async with uids:
            async for uid in uids:
                await client.wait(uid)
                self.published[key] = self.published.get(key, 0) + 1


def _some(nodes: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, nodes[:limit]))
    return shown + (f" (+{len(nodes) - limit})" if len(nodes) > limit else "")


def _whole(value: object, name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ActivityError(f"{name}: a whole number from {low} to {high}, got {value!r}")
    return value
