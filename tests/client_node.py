"""A one-node network with its client port on loopback, for the client tests: a NodeHost
with no links is the root of every stream its clients use."""

from __future__ import annotations

import random
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import trio

from overlay.core.config import NodeConfig
from overlay.runtime.client_port import ClientPort, ClientPortConfig
from overlay.runtime.host import NodeHost


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
