"""Many real nodes in one process, on loopback: the building block of testnets and the tests.

Each node is a full ``run_node`` (its own identity, TCP listener for peers, client port,
links with handshakes and encryption); they merely share one trio loop. Nodes start in index
order on port 0 (the kernel picks free ports), and each dials the neighbours of the
topology that started before it, so every edge is dialled from one end only. ``stop`` kills
a node as a crashed process would be (its sockets close, peers notice at once); ``restart``
brings it back with the same identity, location and ports and a new boot id.

``LocalNetwork`` is an async context manager that owns the nursery its nodes run in
(STYLE: no nursery stored to spawn into unless the object owns it); leaving it stops them all.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

import trio

from keyspace.topology import Topology
from overlay.core.config import NodeConfig
from overlay.runtime.config import Address, PeerAddress, RuntimeConfig
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity
from overlay.runtime.service import RunningNode, run_node

LOOPBACK = "127.0.0.1"


@dataclass(slots=True)
class _Slot:
    identity: Identity
    config: RuntimeConfig
    scope: trio.CancelScope | None = None
    running: RunningNode | None = None
    done: trio.Event = field(default_factory=trio.Event)


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
    ) -> None:
        self.topology = topology
        self._core = core or NodeConfig()
        self._runtime = runtime or RuntimeConfig()
        self._network = network
        self._rng = random.Random(seed)
        self._slots: list[_Slot] = []
        self._nursery_manager = trio.open_nursery()
        self._nursery: trio.Nursery | None = None

    async def __aenter__(self) -> LocalNetwork:
        self._nursery = await self._nursery_manager.__aenter__()
        try:
            for i in range(len(self.topology.locations)):
                await self._start_new(i)
        except BaseException as error:
            self._nursery.cancel_scope.cancel()
            await self._nursery_manager.__aexit__(type(error), error, error.__traceback__)
            raise
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        return await self._nursery_manager.__aexit__(kind, error, traceback)

    # --- nodes ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slots)

    def node(self, i: int) -> RunningNode:
        running = self._slots[i].running
        if running is None:
            raise LookupError(f"node {i} is not running")
        return running

    def alive(self, i: int) -> bool:
        return self._slots[i].running is not None

    @property
    def nodes(self) -> Sequence[RunningNode]:
        return [s.running for s in self._slots if s.running is not None]

    async def _start_new(self, i: int) -> None:
        identity = Identity.generate()
        dial = tuple(
            PeerAddress(self.node(j).peer_address, self._slots[j].identity.public)
            for j in self.topology.neighbours[i]
            if j < i
        )
        config = replace(
            self._runtime,
            identity=self._runtime.identity,
            location=self.topology.locations[i],
            network=self._network,
            listen=Address(LOOPBACK, 0),
            client=Address(LOOPBACK, 0),
            connect=dial,
            core=self._core,
        )
        self._slots.append(_Slot(identity, config))
        await self._launch(i)

    async def _launch(self, i: int) -> None:
        assert self._nursery is not None
        slot = self._slots[i]
        slot.done = trio.Event()
        slot.running = await self._nursery.start(self._run, slot)
        # A restart must come back on the same ports: its peers redial those.
        slot.config = replace(
            slot.config, listen=slot.running.peer_address, client=slot.running.client_address
        )

    async def _run(self, slot: _Slot, *, task_status: trio.TaskStatus[RunningNode]) -> None:
        try:
            with trio.CancelScope() as scope:
                slot.scope = scope
                rng = random.Random(self._rng.getrandbits(64))
                await run_node(
                    slot.config, identity=slot.identity, rng=rng, task_status=task_status
                )
        finally:
            slot.running = None
            slot.scope = None
            slot.done.set()

    def set_runtime(self, i: int, **changes: Any) -> None:
        """Change node ``i``'s ``RuntimeConfig`` fields for its next (re)start."""
        slot = self._slots[i]
        slot.config = replace(slot.config, **changes)

    async def stop(self, i: int) -> None:
        """Kill node ``i``: its tasks end and its sockets close, as when a process dies."""
        slot = self._slots[i]
        if slot.scope is not None:
            slot.scope.cancel()
            await slot.done.wait()

    async def restart(self, i: int) -> RunningNode:
        """Start node ``i`` again (after ``stop``): same identity and ports, new boot id."""
        await self.stop(i)
        await self._launch(i)
        return self.node(i)

    async def wait_linked(self) -> None:
        """Return once every running node has a working link (Hello exchanged) to each of
        its running neighbours."""
        for i, slot in enumerate(self._slots):
            if slot.running is None:
                continue
            host = slot.running.host
            want = {
                self._slots[j].identity.public
                for j in self.topology.neighbours[i]
                if self._slots[j].running is not None
            }
            await host.wait_until(_linked_to(host, want))


def _peer_ids(host: NodeHost) -> set[bytes]:
    """The peers whose Hello the core has taken: linked, not just connected."""
    return {peer.id for peer in host.core.peers}


def _linked_to(host: NodeHost, want: set[bytes]) -> Callable[[], bool]:
    return lambda: want <= _peer_ids(host)
