"""Nodes hosted by one process, started, killed and restarted by index: a testnet worker's core.

``testnet.local.LocalNetwork`` builds a whole network in one process from a topology;
a worker of a multi-process testnet hosts only its share, with identities, locations and
dial lists handed to it by the launcher (some of the peers it dials live in other
processes). ``NodePool`` is that smaller piece: given a node's identity and
``RuntimeConfig``, it runs ``run_node`` in its own cancel scope, so ``kill`` ends that node's
tasks and closes its sockets as a crashed process would (its peers see the links drop at
once), and ``restart`` brings it back with the same identity and ports and a new boot id.

``NodePool`` is an async context manager owning the nursery its nodes run in (STYLE: a
nursery stored on an object only when the object owns it); leaving it stops every node.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

import trio

from overlay.runtime.config import RuntimeConfig
from overlay.runtime.identity import Identity
from overlay.runtime.service import RunningNode, run_node


@dataclass(slots=True)
class _Slot:
    identity: Identity
    config: RuntimeConfig
    scope: trio.CancelScope | None = None
    running: RunningNode | None = None
    done: trio.Event = field(default_factory=trio.Event)


class NodePool:
    """Nodes by index (any ints: a worker uses the testnet's global indices)."""

    def __init__(self, *, seed: int = 0) -> None:
        self._rng = random.Random(seed)
        self._slots: dict[int, _Slot] = {}
        self._nursery_manager = trio.open_nursery()
        self._nursery: trio.Nursery | None = None

    async def __aenter__(self) -> NodePool:
        self._nursery = await self._nursery_manager.__aenter__()
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

    def __contains__(self, index: int) -> bool:
        return index in self._slots

    def indices(self) -> list[int]:
        return sorted(self._slots)

    def alive(self, index: int) -> bool:
        return self._slot(index).running is not None

    def node(self, index: int) -> RunningNode:
        running = self._slot(index).running
        if running is None:
            raise LookupError(f"node {index} is not running")
        return running

    async def start(self, index: int, identity: Identity, config: RuntimeConfig) -> RunningNode:
        """Start a new node; OSError if it cannot listen (a port in use)."""
        if index in self._slots:
            raise LookupError(f"node {index} already exists")
        self._slots[index] = _Slot(identity, config)
        try:
            return await self._launch(index)
        except BaseException:
            del self._slots[index]
            raise

    def reconfigure(self, index: int, **changes: Any) -> None:
        """Change node ``index``'s ``RuntimeConfig`` fields for its next (re)start."""
        slot = self._slot(index)
        slot.config = replace(slot.config, **changes)

    async def kill(self, index: int) -> None:
        """Stop node ``index`` abruptly (idempotent)."""
        slot = self._slot(index)
        if slot.scope is not None:
            slot.scope.cancel()
            await slot.done.wait()

    async def restart(self, index: int) -> RunningNode:
        """Start node ``index`` again (killing it first if it runs): same identity and
        ports, new boot id. OSError if its port was taken meanwhile."""
        await self.kill(index)
        return await self._launch(index)

    def _slot(self, index: int) -> _Slot:
        try:
            return self._slots[index]
        except KeyError:
            raise LookupError(f"node {index} is not hosted here") from None

    async def _launch(self, index: int) -> RunningNode:
        assert self._nursery is not None
        slot = self._slots[index]
        slot.done = trio.Event()
        running: RunningNode = await self._nursery.start(self._run, slot)
        slot.running = running
        # A restart must come back on the same ports: its peers redial those.
        slot.config = replace(
            slot.config, listen=running.peer_address, client=running.client_address
        )
        return running

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
