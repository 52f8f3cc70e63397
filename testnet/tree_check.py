"""What is wrong with one stream's tree, from each member's own view of its parent and children.

A pure function over a map ``node -> Member(parent, children, root)``, so that every tool
that sees a tree checks it the same way: ``overlay tree`` (members built from the nodes'
``describe`` answers over the client port) and anything holding core ``Stream`` objects
(the simulator's checker could map its ``Stream``s to ``Member``s the same way). Node names
are any hashable values (node ids, indices); ``label`` turns one into text for messages.

A healthy tree has exactly one root, every member's parent carries the stream and lists the
member among its children, every listed child names its lister as parent, and following
parents from any member ends at the root. Each breach is one ``Problem``:

* ``roots``: no root, or more than one (a split tree: publishers reach only one part);
* ``orphan``: the member's parent does not carry the stream, or did not answer (dead);
* ``disagreement``: the member names P as its parent but P does not list it, or P lists a
  child that names another parent (or does not carry the stream at all);
* ``cycle``: following parents comes back to where it started;
* ``detached``: a member with no parent that is not a root (joining or restarting: fine for a
  moment during repair, wrong once the network is quiet);

and one kind of warning (``warnings``), which leaves the tree whole but is worth a look:

* ``far_root``: the one root is not the node closest to the stream's key among those that
  answered. The spec roots a tree at the closest node routing can find, and a closer node
  that links to the root takes the tree over; greedy routing can still stop at a local
  minimum (a closer node two hops off, or inside the tree), and a peer that lied about its
  location would capture a stream this way. A warning, not a problem: the tree delivers.

``cut_off`` holds every member whose chain of parents does not end at a root, so a view can
highlight the whole subtree a problem cuts off, not just the node at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Generic, TypeVar

N = TypeVar("N", bound=Hashable)

KINDS = ("roots", "orphan", "disagreement", "cycle", "detached")
WARNINGS = ("far_root",)


@dataclass(frozen=True, slots=True)
class Member(Generic[N]):
    """One node's own view of its place in the tree."""

    parent: N | None
    children: tuple[N, ...]
    root: bool


@dataclass(frozen=True, slots=True)
class Problem(Generic[N]):
    kind: str  # one of KINDS
    nodes: tuple[N, ...]  # the nodes at fault, to highlight
    text: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.text}"


@dataclass(slots=True)
class TreeCheck(Generic[N]):
    roots: list[N] = field(default_factory=list)
    depth: dict[N, int] = field(default_factory=dict)  # members that reach a root
    cut_off: set[N] = field(default_factory=set)  # members that do not
    problems: list[Problem[N]] = field(default_factory=list)
    warnings: list[Problem[N]] = field(default_factory=list)  # the tree delivers regardless

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def height(self) -> int:
        return max(self.depth.values(), default=0)


def check_tree(
    members: Mapping[N, Member[N]],
    *,
    unreachable: Set[N] = frozenset(),
    label: Callable[[N], str] = str,
    distances: Mapping[N, float] | None = None,
) -> TreeCheck[N]:
    """Check one stream's tree. ``members`` are the nodes that carry the stream;
    ``unreachable`` the nodes that could not be asked (an orphan's parent among them is
    reported as unreachable, not as not carrying the stream); ``distances``, if given, each
    node's distance to the stream's key, for every node that answered, members or not."""
    check: TreeCheck[N] = TreeCheck()
    problems = check.problems
    check.roots = [n for n, m in members.items() if m.root]
    if members and not check.roots:
        problems.append(Problem("roots", (), "no node is the root"))
    elif len(check.roots) > 1:
        names = ", ".join(label(n) for n in check.roots)
        problems.append(Problem("roots", tuple(check.roots), f"{len(check.roots)} roots ({names})"))
    for n, m in members.items():
        if m.root:
            continue
        if m.parent is None:
            problems.append(Problem("detached", (n,), f"{label(n)} has no parent and no root"))
            continue
        parent = members.get(m.parent)
        if parent is None:
            why = "did not answer" if m.parent in unreachable else "does not carry the stream"
            problems.append(Problem("orphan", (n,), f"{label(n)}'s parent {label(m.parent)} {why}"))
        elif n not in parent.children:
            problems.append(
                Problem(
                    "disagreement",
                    (n, m.parent),
                    f"{label(n)} names {label(m.parent)} as its parent, "
                    f"but {label(m.parent)} does not list it as a child",
                )
            )
    for n, m in members.items():
        for c in m.children:
            child = members.get(c)
            if child is None:
                why = "did not answer" if c in unreachable else "does not carry the stream"
                problems.append(
                    Problem(
                        "disagreement", (n, c), f"{label(n)} lists child {label(c)}, which {why}"
                    )
                )
            elif child.parent != n:
                other = "no parent" if child.parent is None else f"parent {label(child.parent)}"
                problems.append(
                    Problem(
                        "disagreement",
                        (n, c),
                        f"{label(n)} lists {label(c)} as a child, but {label(c)} has {other}",
                    )
                )
    if distances and len(check.roots) == 1:
        _far_root(check.roots[0], distances, label, check.warnings)
    for cycle in _cycles(members):
        path = " -> ".join(label(n) for n in [*cycle, cycle[0]])
        problems.append(Problem("cycle", tuple(cycle), f"parents go round: {path}"))
    _depths(members, check)
    return check


def _far_root(
    root: N, distances: Mapping[N, float], label: Callable[[N], str], warnings: list[Problem[N]]
) -> None:
    """A ``far_root`` warning if a node that answered is closer to the key than ``root``
    (equal distances are no problem: which of two equidistant nodes roots a tree is
    arbitrary to an observer)."""
    mine = distances.get(root)
    if mine is None:
        return
    nearest = min(distances, key=lambda n: (distances[n], label(n)))
    if distances[nearest] < mine:
        warnings.append(
            Problem(
                "far_root",
                (root, nearest),
                f"root {label(root)} is at distance {mine:.6f} from the key, but "
                f"{label(nearest)} is closer ({distances[nearest]:.6f})",
            )
        )


def _cycles(members: Mapping[N, Member[N]]) -> list[list[N]]:
    """Every cycle of parent pointers, each once, starting from its first member met."""
    state: dict[N, int] = {}  # 1: on the current path, 2: done
    cycles: list[list[N]] = []
    for start in members:
        path: list[N] = []
        n: N | None = start
        while n is not None and n in members and n not in state:
            state[n] = 1
            path.append(n)
            member = members[n]
            n = None if member.root else member.parent
        if n is not None and state.get(n) == 1:
            cycles.append(path[path.index(n) :])
        for p in path:
            state[p] = 2
    return cycles


def _depths(members: Mapping[N, Member[N]], check: TreeCheck[N]) -> None:
    """Hops from the root along parent pointers, for members whose chain ends at a root."""
    depth = check.depth
    for start in members:
        path: list[N] = []
        seen: set[N] = set()
        n: N | None = start
        top: int | None = None
        while n is not None and n in members and n not in seen:
            if n in depth:
                top = depth[n]
                break
            if n in check.cut_off:
                break
            member = members[n]
            if member.root:
                depth[n] = top = 0
                break
            seen.add(n)
            path.append(n)
            n = member.parent
        for hops, p in enumerate(reversed(path), start=1):
            if top is None:
                check.cut_off.add(p)
            else:
                depth[p] = top + hops


def summary(problems: Sequence[Problem[N]]) -> dict[str, int]:
    """How many problems (or warnings) of each kind (every kind present, zeros included)."""
    counts = dict.fromkeys(KINDS + WARNINGS, 0)
    for problem in problems:
        counts[problem.kind] += 1
    return counts
