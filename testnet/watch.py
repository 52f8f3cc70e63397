"""What a worker's nodes look like now, and what changed since a watcher last looked.

``overlay testnet web`` shows a live testnet without asking each node over its client port:
it opens one ``watch`` connection to each worker's control port (``testnet.control``), and
the worker pushes its own nodes' state as it changes, read from the nodes in its own memory.
``PoolWatch`` is one watcher's view: ``look()`` reads every hosted node and returns what
differs from what this watcher was last given, so a watcher that reads slowly simply gets
coarser steps (each look is a diff against what it was sent, never a queue of all the
steps between).

What a look carries, as plain JSON values:

* ``nodes``: one record per node whose topology changed (alive or not, location, peers,
  and for each stream it carries: state, parent, number of children). Peers and parents
  are named by the first 8 bytes of their node id in hex (``short_id``): the worker knows
  only its own nodes' indices, the watcher maps ids to indices from the manifest.
* ``highs``: for each node, each stream's highest packet number, where it changed. It is
  kept apart from the topology because it moves with every packet: a publishing stream
  changes it on every member at every look.

A look costs each node a pass over its peers and streams, and builds a record only for a
node whose topology changed; ``python -m testnet.bench.web_view`` measures what watching
costs a testnet's workers.
"""

from __future__ import annotations

from typing import Any

from overlay.core.node import Node
from testnet.pool import NodePool

# How often a watched worker looks at its nodes: fast enough that a kill and the repair it
# sets off show as they happen, slow enough to cost the worker nothing it would notice.
WATCH_INTERVAL = 0.25

Topology = tuple[Any, ...]


def short_id(node_id: bytes) -> str:
    """A node id as watchers see it: its first 8 bytes, in hex (unique among a testnet's
    nodes but for a 2^-64 chance per pair; a clash only mislabels a drawing)."""
    return node_id[:8].hex()


class PoolWatch:
    """One watcher's view of a ``NodePool``: what it was last sent, node by node."""

    def __init__(self, pool: NodePool) -> None:
        self._pool = pool
        self._topology: dict[int, Topology] = {}
        self._highs: dict[int, dict[bytes, int]] = {}

    def look(self) -> dict[str, Any]:
        """Every change since the previous look (the first look: everything)."""
        nodes: list[dict[str, Any]] = []
        highs: dict[str, dict[str, int]] = {}
        for index in self._pool.indices():
            core = self._pool.node(index).host.core if self._pool.alive(index) else None
            # The raw values are compared first and a record (hex ids, sorted peers) is made
            # only for a node that changed: most nodes change in few looks.
            topology = _topology(core)
            if self._topology.get(index) != topology:
                self._topology[index] = topology
                nodes.append(_record(index, core))
            node_highs = _highs(core)
            before = self._highs.get(index, {})
            if node_highs != before:
                self._highs[index] = node_highs
                changed = {k.hex(): h for k, h in node_highs.items() if before.get(k) != h}
                if changed:
                    highs[str(index)] = changed
        return {"nodes": nodes, "highs": highs}


def _topology(core: Node | None) -> Topology:
    if core is None:
        return ("dead",)
    return (
        core.location,
        tuple(peer.id for peer in core.peers),
        tuple((s.key, s.state, s.parent, len(s.children)) for s in core.streams.values()),
    )


def _highs(core: Node | None) -> dict[bytes, int]:
    if core is None:
        return {}
    return {s.key: s.high for s in core.streams.values() if s.high is not None}


def _record(index: int, core: Node | None) -> dict[str, Any]:
    if core is None:
        return {"node": index, "alive": False}
    return {
        "node": index,
        "alive": True,
        "id": short_id(core.id),
        "location": core.location,
        "peers": sorted(short_id(peer.id) for peer in core.peers),
        "streams": {
            s.key.hex(): {
                "state": s.state.value,
                "parent": None if s.parent is None else short_id(s.parent),
                "children": len(s.children),
            }
            for s in core.streams.values()
        },
    }
