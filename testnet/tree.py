"""One stream's tree, assembled from every node's own answer to ``describe``.

No node knows the tree; each knows its parent, its children and its local subscribers. This
module joins those views (``assemble``) into a ``Tree``: the members with their location and
distance to the stream's key, the depth of each below the root, and what is wrong
(``testnet.tree_check``). Nodes are named by their node id (bytes, as the peers name each
other); ``Tree.label`` shows a testnet index (``node 17``) when a manifest gave one, else a
short id. A member's parent or child that no node answered for is shown by its short id.

The assembled tree is plain data, so the views (``testnet.tree_view`` for text, JSON and
Graphviz, ``testnet.tree_plot`` for the picture) only read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from keyspace.location import distance
from keyspace.stream_key import StreamKey
from testnet.survey import Answer
from testnet.tree_check import Member, TreeCheck, check_tree


@dataclass(frozen=True, slots=True)
class TreeNode:
    """A member of the tree: one node's view of the stream."""

    id: bytes
    location: float
    distance: float  # to the stream's key location
    state: str  # joining, joined, root, restarting
    parent: bytes | None
    children: tuple[bytes, ...]
    subscribers: int  # local clients subscribed on this node
    high: int | None  # the highest packet number it holds
    window: int  # packets in its catch-up window
    kept: bool = False  # a root nobody is in any more, keeping the stream (``keeping``)


@dataclass(slots=True)
class Tree:
    stream: StreamKey
    members: dict[bytes, TreeNode]
    check: TreeCheck[bytes]
    labels: dict[bytes, str] = field(default_factory=dict)  # id -> "node 17" / address
    locations: dict[bytes, float] = field(default_factory=dict)  # every node that answered
    unreachable: list[Answer] = field(default_factory=list)

    @property
    def location(self) -> float:
        return self.stream.location

    def label(self, node: bytes) -> str:
        return self.labels.get(node) or short_id(node)

    def children(self, node: bytes) -> list[bytes]:
        """The members whose parent is ``node`` and that ``node`` lists, by location."""
        listed = self.members[node].children if node in self.members else ()
        return sorted(
            (c for c in listed if c in self.members and self.members[c].parent == node),
            key=lambda c: self.members[c].location,
        )

    @property
    def subscribers(self) -> list[bytes]:
        return [n for n, m in self.members.items() if m.subscribers]


def short_id(node: bytes) -> str:
    return node.hex()[:8]


def assemble(stream: StreamKey, answers: Sequence[Answer]) -> Tree:
    """Join every node's answer into the tree of ``stream`` and check it."""
    key = stream.key
    members: dict[bytes, TreeNode] = {}
    labels: dict[bytes, str] = {}
    locations: dict[bytes, float] = {}
    for answer in answers:
        description = answer.description
        if description is None:
            continue
        node = bytes(description["id"])
        labels[node] = answer.label
        locations[node] = float(description["location"])
        for view in description.get("streams", ()):
            if bytes(view["key"]) == key:
                members[node] = _member(node, locations[node], view, stream.location)
    unreachable = [a for a in answers if a.description is None]
    tree_members = {n: Member(m.parent, m.children, m.state == "root") for n, m in members.items()}
    # An unreachable node's id is unknown (it did not answer), so a parent or child that is
    # neither a member nor any answering node is taken as unreachable when some node was.
    unknown = {
        other
        for m in members.values()
        for other in (m.parent, *m.children)
        if other is not None and other not in locations
    }
    check = check_tree(
        tree_members,
        unreachable=unknown if unreachable else frozenset(),
        label=lambda n: labels.get(n) or short_id(n),
        distances={n: distance(loc, stream.location) for n, loc in locations.items()},
    )
    return Tree(stream, members, check, labels, locations, unreachable)


def _member(node: bytes, location: float, view: dict[str, Any], target: float) -> TreeNode:
    parent = view.get("parent")
    high = view.get("high")
    return TreeNode(
        id=node,
        location=location,
        distance=distance(location, target),
        state=str(view["state"]),
        parent=None if parent is None else bytes(parent),
        children=tuple(bytes(c) for c in view.get("children", ())),
        subscribers=int(view.get("clients", 0)),
        high=None if high is None else int(high),
        window=int(view.get("window", 0)),
        kept=bool(view.get("kept", False)),
    )
