"""One interface to a testnet, wherever its nodes run: in this process or in workers.

The demo and the chaos run need the same few things of a testnet: how many nodes, each
one's client address and location, whether it is alive, and a way to kill and restart it.
``InProcess`` provides them over a ``LocalNetwork`` (the demo's own testnet, the tests'),
``Launched`` over a testnet started by ``overlay testnet up`` (its manifest and its workers'
control ports). Clients always go through the nodes' real client ports in both cases, so
what is measured is what a script would see.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Protocol

from keyspace.topology import small_world
from overlay.core.config import NodeConfig
from overlay.runtime.config import RuntimeConfig
from testnet.control import ControlError, call_async
from testnet.launcher import DEFAULT_DEGREE, LOOPBACK_CORE, LOOPBACK_RUNTIME, LaunchError
from testnet.local import LocalNetwork
from testnet.manifest import Manifest


class TestnetHandle(Protocol):
    def __len__(self) -> int: ...

    def client(self, i: int) -> str:
        """Node ``i``'s client address (host:port), alive or not."""

    def location(self, i: int) -> float: ...

    def alive(self, i: int) -> bool: ...

    async def kill(self, i: int) -> None: ...

    async def restart(self, i: int) -> None: ...


class InProcess:
    """A ``LocalNetwork`` in this trio loop."""

    def __init__(self, net: LocalNetwork) -> None:
        self.net = net
        self._clients = [str(n.client_address) for n in net.nodes]

    def __len__(self) -> int:
        return len(self.net)

    def client(self, i: int) -> str:
        return self._clients[i]

    def location(self, i: int) -> float:
        return self.net.topology.locations[i]

    def alive(self, i: int) -> bool:
        return self.net.alive(i)

    async def kill(self, i: int) -> None:
        await self.net.stop(i)

    async def restart(self, i: int) -> None:
        await self.net.restart(i)


@asynccontextmanager
async def local_testnet(
    nodes: int,
    *,
    seed: int = 0,
    degree: int = DEFAULT_DEGREE,
    core: NodeConfig = LOOPBACK_CORE,
    keep_state: bool = False,
) -> AsyncIterator[InProcess]:
    """Start ``nodes`` real nodes in this process and yield once all are linked. With
    ``keep_state`` each keeps a state file, in a temporary folder removed at the end, so a
    node restarted meanwhile numbers its streams on, as an ``overlay node`` would. Off by
    default: with it, the churn run (``tests/test_churn.py``) still reports, once in a
    while, a missed range in which nothing was lost (a root restarted within half a
    second; not yet traced)."""
    topology = small_world(nodes, degree, random.Random(seed))
    runtime = RuntimeConfig(**LOOPBACK_RUNTIME)
    with contextlib.ExitStack() as stack:
        state_dir = None
        if keep_state:
            state_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="testnet-")))
        async with LocalNetwork(
            topology, core=core, runtime=runtime, seed=seed, state_dir=state_dir
        ) as net:
            await net.wait_linked()
            yield InProcess(net)


class Launched:
    """A testnet started by ``overlay testnet up``, reached through its manifest."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        self._dead: set[int] = set()

    def __len__(self) -> int:
        return len(self.manifest.nodes)

    def client(self, i: int) -> str:
        return self.manifest.nodes[i].client

    def location(self, i: int) -> float:
        return self.manifest.nodes[i].location

    def alive(self, i: int) -> bool:
        return i not in self._dead

    async def refresh(self) -> None:
        """Learn which nodes are dead (killed by ``overlay testnet kill`` before we began)."""
        self._dead.clear()
        for worker in self.manifest.workers:
            try:
                self._dead.update((await call_async(worker.control, "status"))["dead"])
            except ControlError as error:
                raise LaunchError(f"worker {worker.index}: {error}") from None

    async def kill(self, i: int) -> None:
        await self._control(i, "kill")
        self._dead.add(i)

    async def restart(self, i: int) -> None:
        await self._control(i, "restart")
        self._dead.discard(i)

    async def _control(self, i: int, op: str) -> None:
        worker = self.manifest.worker_of(i)
        try:
            await call_async(worker.control, op, node=i)
        except ControlError as error:
            raise LaunchError(f"{op} node {i}: {error}") from None
