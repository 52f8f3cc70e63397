"""The tree-invariant checker: what must hold for every stream once the network is quiet.

For each stream key, over the live nodes that carry it:

* exactly one root;
* every member's parent carries the stream and lists the member as a child (no orphans);
* every listed child carries the stream and names this node as its parent (no dangling
  children);
* following parents from any member ends at the root: no cycles, one tree;
* every node with local subscribers is a member (a subscriber the tree does not reach has
  been lost);
* nothing is half-done: no JOINING or RESTARTING stream, no search still routing.

The checker reads the cores' state and changes nothing, so it can run after every step.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from overlay.core.node import Node
from overlay.core.streams import State, Stream


@dataclass(slots=True)
class TreeShape:
    """One stream's tree as the checker found it."""

    key: bytes
    root: int | None
    members: dict[int, Stream] = field(default_factory=dict)
    depth: dict[int, int] = field(default_factory=dict)  # member -> hops from the root
    violations: list[str] = field(default_factory=list)


def collect(nodes: Sequence[Node], alive: Sequence[bool]) -> dict[bytes, dict[int, Stream]]:
    """key -> {node index: its Stream}, over live nodes, in node order."""
    by_key: dict[bytes, dict[int, Stream]] = {}
    for i, node in enumerate(nodes):
        if alive[i]:
            for key, stream in node.streams.items():
                by_key.setdefault(key, {})[i] = stream
    return by_key


def check_stream(
    key: bytes, members: dict[int, Stream], index: dict[bytes, int], nodes: Sequence[Node]
) -> TreeShape:
    shape = TreeShape(key, None, members)
    bad = shape.violations
    name = key.hex()[:8]
    roots = [i for i, s in members.items() if s.state is State.ROOT]
    half_done = [i for i, s in members.items() if s.state in (State.JOINING, State.RESTARTING)]
    if half_done:
        bad.append(f"stream {name}: nodes {half_done[:5]} still joining or restarting")
    if len(roots) != 1 and members:
        bad.append(f"stream {name}: {len(roots)} roots {roots[:5]} (want exactly one)")
    if roots:
        shape.root = roots[0]
    for i, stream in members.items():
        if stream.parent is not None:
            p = index.get(stream.parent)
            parent = members.get(p) if p is not None else None
            if parent is None or nodes[i].id not in parent.children:
                bad.append(f"stream {name}: node {i} is an orphan of parent {p}")
        for child_id in stream.children:
            c = index.get(child_id)
            child = members.get(c) if c is not None else None
            if child is None or child.parent != nodes[i].id:
                bad.append(f"stream {name}: node {i} lists child {c}, which is not its child")
        if stream.local and stream.state not in (State.JOINED, State.ROOT):
            bad.append(f"stream {name}: node {i} has subscribers but is {stream.state.value}")
    _measure_depths(shape, index)
    unreached = [i for i in members if i not in shape.depth]
    if unreached:
        bad.append(f"stream {name}: nodes {unreached[:5]} do not reach the root (cycle or split)")
    return shape


def _measure_depths(shape: TreeShape, index: dict[bytes, int]) -> None:
    """Breadth-first from the root through the children lists, which also proves the tree
    acyclic: a member reached twice would be a second path."""
    if shape.root is None:
        return
    shape.depth[shape.root] = 0
    frontier = [shape.root]
    while frontier:
        nxt = []
        for i in frontier:
            for child_id in shape.members[i].children:
                c = index.get(child_id)
                if c is None or c not in shape.members:
                    continue
                if c in shape.depth:
                    shape.violations.append(f"node {c} is reached twice: the tree has a cycle")
                    continue
                shape.depth[c] = shape.depth[i] + 1
                nxt.append(c)
        frontier = nxt


def check_all(
    nodes: Sequence[Node], alive: Sequence[bool], index: dict[bytes, int]
) -> dict[bytes, TreeShape]:
    """Check every stream any live node carries; also flag searches still in flight."""
    shapes = {
        key: check_stream(key, members, index, nodes)
        for key, members in collect(nodes, alive).items()
    }
    for i, node in enumerate(nodes):
        if alive[i] and node.routes:
            for route in node.routes.values():
                shape = shapes.get(route.key)
                if shape is not None:
                    shape.violations.append(f"node {i} still routes search {route.uid:x}")
    return shapes


def violations(shapes: Iterable[TreeShape]) -> list[str]:
    return [v for shape in shapes for v in shape.violations]
