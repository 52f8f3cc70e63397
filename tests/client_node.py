"""A one-node network with its client port on loopback, for the client tests: a NodeHost
with no links is the root of every stream its clients use. ``network_in_thread``: whole
nodes (peer port, client port, links) for tests that need a peer port or several nodes."""

from __future__ import annotations

import random
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import trio

from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from overlay.runtime.client_port import ClientPort, ClientPortConfig
from overlay.runtime.host import NodeHost
from overlay.runtime.service import RunningNode
from testnet.local import LocalNetwork

WAIT = 60.0  # seconds a node thread may take to start or stop: only a broken test waits


class SilentHost:
    """A stand-in for a ``NodeHost`` behind a client session, for tests that drive the
    session by hand: it answers no publish by itself (the test delivers the answers),
    records the uids published, and tells the publish ``window`` the test sets."""

    node_id = b"N" * 32
    budget = None  # no node-wide queue bound

    def __init__(self) -> None:
        self.published: list[int] = []
        self.window = 8  # (``publish_window``)

    def refusals(self, reason: object, who: str, detail: str) -> None:
        pass

    def add_client(self, sink: object, flush: object = None) -> int:
        return 1

    def remove_client(self, client: int) -> None:
        pass

    def publish(self, client: int, key: bytes, uid: int, data: bytes, **fields: object) -> None:
        self.published.append(uid)

    def publish_batch(self, client: int, key: bytes, items: list[tuple[int, bytes]]) -> None:
        self.published.extend(uid for uid, _ in items)

    def publish_window(self, key: bytes) -> int:
        return self.window


@asynccontextmanager
async def running_node(
    config: ClientPortConfig | None = None, core: NodeConfig | None = None
) -> AsyncIterator[tuple[ClientPort, str]]:
    """A node serving its client port on 127.0.0.1:<free port>; yields (port, "host:port")."""
    host = NodeHost(bytes(range(32)), 0.5, config=core, rng=random.Random(1))
    port = ClientPort(host, config)
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        listeners = await nursery.start(port.serve, ("127.0.0.1", 0))
        number = listeners[0].socket.getsockname()[1]
        yield port, f"127.0.0.1:{number}"
        nursery.cancel_scope.cancel()


@contextmanager
def node_in_thread(
    config: ClientPortConfig | None = None, core: NodeConfig | None = None
) -> Iterator[tuple[ClientPort, str]]:
    """The same node, run by its own ``trio.run`` in a background thread (for the blocking
    client); stopped and joined on exit."""
    ready = threading.Event()
    found: dict[str, object] = {}

    async def serve() -> None:
        async with running_node(config, core) as (port, address):
            found.update(port=port, address=address, token=trio.lowlevel.current_trio_token())
            stop = trio.Event()
            found["stop"] = stop
            ready.set()
            await stop.wait()

    def main() -> None:
        try:
            trio.run(serve)
        except BaseException as exc:  # reported by the test thread
            found["error"] = exc
            ready.set()

    thread = threading.Thread(target=main, name="node", daemon=True)
    thread.start()
    try:
        assert ready.wait(30), "the node thread did not start"
        if "error" in found:
            raise AssertionError("the node thread failed") from found["error"]  # type: ignore[misc]
        port, address = found["port"], found["address"]
        assert isinstance(port, ClientPort) and isinstance(address, str)
        yield port, address
    finally:
        stop = found.get("stop")
        if isinstance(stop, trio.Event):
            token = found["token"]
            assert isinstance(token, trio.lowlevel.TrioToken)
            trio.from_thread.run_sync(stop.set, trio_token=token)
        thread.join(30)
        assert not thread.is_alive(), "the node thread did not stop"
        if "error" in found:
            raise AssertionError("the node thread failed") from found["error"]  # type: ignore[misc]


@contextmanager
def network_in_thread(size: int) -> Iterator[list[RunningNode]]:
    """``size`` real nodes in a chain (``LocalNetwork``), run by their own trio.run in a
    background thread; yields them (read only their addresses from this thread)."""
    ready = threading.Event()
    found: dict[str, Any] = {}

    async def serve() -> None:
        locations = tuple((i + 0.5) / size for i in range(size))
        chain = tuple(tuple(j for j in (i - 1, i + 1) if 0 <= j < size) for i in range(size))
        async with LocalNetwork(Topology(locations, chain)) as network:
            await network.wait_linked()
            found["nodes"] = list(network.nodes)
            found["token"] = trio.lowlevel.current_trio_token()
            found["stop"] = stop = trio.Event()
            ready.set()
            await stop.wait()

    def main() -> None:
        try:
            trio.run(serve)
        except BaseException as error:
            found["error"] = error
            ready.set()

    thread = threading.Thread(target=main, name="network", daemon=True)
    thread.start()
    try:
        assert ready.wait(WAIT) and "error" not in found, found.get("error")
        yield found["nodes"]
    finally:
        if "stop" in found:
            trio.from_thread.run_sync(found["stop"].set, trio_token=found["token"])
        thread.join(WAIT)
