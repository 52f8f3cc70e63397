"""A whole network of real nodes in one process, on loopback: for tests and in-process testnets.

Each node is a full ``run_node`` (its own identity, TCP listener for peers, client port,
links with handshakes and encryption); they merely share one trio loop, hosted by a
``testnet.pool.NodePool``. This module adds the topology: nodes start in index order on
port 0 (the kernel picks free ports), and each dials the neighbours that started before it,
so every edge is dialled from one end only. ``stop`` kills a node as a crashed process would
be (its sockets close, peers notice at once); ``restart`` brings it back with the same
identity, location and ports and a new boot id.

The topology chooses every node's location, and a location a node's id does not give is
taken only from a peer the operator vouches for (``overlay.runtime.vouching``). The network
is one operator's nodes, so every node vouches for all of the network's own ids (its
``trusted`` list): the identities are made before the first node starts, so each knows the
others'. The nodes stay in open mode, so an outside node may still link, at the location its
id gives. A runtime config handed in keeps its own ``trusted`` ids as well.

``LocalNetwork`` is an async context manager; leaving it stops every node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from overlay.runtime.config import Address, PeerAddress, RuntimeConfig
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity
from overlay.runtime.service import RunningNode
from testnet.pool import NodePool

LOOPBACK = "127.0.0.1"


class LocalNetwork:
    """The nodes of ``topology`` (its locations and links), run on loopback in this process."""

    def __init__(
        self,
        topology: Topology,
        *,
        core: NodeConfig | None = None,
        runtime: RuntimeConfig | None = None,
        seed: int = 0,
        network: str = "testnet",
        state_dir: Path | None = None,
    ) -> None:
        """``state_dir``: each node keeps its state file (``overlay.runtime.state_file``)
        there, as ``node-<index>.state``, so a restarted node numbers its streams on as an
        ``overlay node`` does; None: nodes keep nothing on disk."""
        self.topology = topology
        self._state_dir = state_dir
        self._core = core or NodeConfig()
        self._runtime = runtime or RuntimeConfig()
        self._network = network
        self._pool = NodePool(seed=seed)
        self._identities = [Identity.generate() for _ in topology.locations]
        self._trusted = self._runtime.trusted | {i.public for i in self._identities}

    async def __aenter__(self) -> LocalNetwork:
        await self._pool.__aenter__()
        try:
            for i in range(len(self.topology.locations)):
                await self._start_new(i)
        except BaseException as error:
            await self._pool.__aexit__(type(error), error, error.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return await self._pool.__aexit__(kind, error, traceback)

    # --- nodes ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._identities)

    def node(self, i: int) -> RunningNode:
        return self._pool.node(i)

    def alive(self, i: int) -> bool:
        return self._pool.alive(i)

    @property
    def nodes(self) -> Sequence[RunningNode]:
        return [self._pool.node(i) for i in self._pool.indices() if self._pool.alive(i)]

    async def _start_new(self, i: int) -> None:
        identity = self._identities[i]
        dial = tuple(
            PeerAddress(self.node(j).peer_address, self._identities[j].public)
            for j in self.topology.neighbours[i]
            if j < i
        )
        config = replace(
            self._runtime,
            location=self.topology.locations[i],
            trusted=self._trusted,
            network=self._network,
            listen=Address(LOOPBACK, 0),
            client=Address(LOOPBACK, 0),
            connect=dial,
            core=self._core,
        )
        if self._state_dir is not None:
            config = replace(config, keep_state=True, state=self._state_dir / f"node-{i}.state")
        await self._pool.start(i, identity, config)

    def set_runtime(self, i: int, **changes: Any) -> None:
        """Change node ``i``'s ``RuntimeConfig`` fields for its next (re)start."""
        self._pool.reconfigure(i, **changes)

    async def stop(self, i: int) -> None:
        """Kill node ``i``: its tasks end and its sockets close, as when a process dies."""
        await self._pool.kill(i)

    async def restart(self, i: int) -> RunningNode:
        """Start node ``i`` again (after ``stop``): same identity and ports, new boot id."""
        return await self._pool.restart(i)

    async def wait_linked(self) -> None:
        """Return once every running node has a working link (Hello exchanged) to each of
        its running neighbours."""
        for i in self._pool.indices():
            if not self.alive(i):
                continue
            host = self.node(i).host
            want = {
                self._identities[j].public for j in self.topology.neighbours[i] if self.alive(j)
            }
            await host.wait_until(_linked_to(host, want))


def _linked_to(host: NodeHost, want: set[bytes]) -> Callable[[], bool]:
    """The peers whose Hello the core has taken cover ``want``: linked, not just connected."""
    return lambda: want <= {peer.id for peer in host.core.peers}
