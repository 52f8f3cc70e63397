"""A picture of a stream's tree on the keyspace circle (``overlay tree --png``).

Every node that answered sits on the unit circle at its location (angle 2*pi*location, 0 at
the top, clockwise, as the keyspace is usually drawn); members of the tree are drawn larger,
the stream's key is a marked point just inside the circle, and tree edges are chords from
parent to child. The root is a star, subscribers' nodes are filled blue, nodes at fault red,
and edges that only one side believes in are dashed red; a legend says so on the picture.
Location 0 and the quarters are ticked, so a location can be read off the circle. Drawing on
the circle shows at a glance what routing did: the tree should gather towards the key's
location.

The tree gathers there, so its nodes crowd near the root. Labels are written along the
radius, outwards, where neighbours' labels run side by side instead of across each other,
and a label goes only where no label already drawn is nearer than ``LABEL_GAP`` around the
circle, placed in order of interest: the root, nodes at fault, subscribers' nodes, the other
members. The text view (``overlay tree``) names every node.

matplotlib is an optional extra (``pip install 'overlay[viz]'``); without it ``plot_png``
raises ``VizMissing`` with that instruction, and nothing else in the package needs it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from testnet.tree import Tree


class VizMissing(RuntimeError):
    """matplotlib is not installed; the message says how to install it."""


# Two radial labels of LABEL_FONT points, on a circle about 260 points in radius (the 9-inch
# figure), run side by side when their angles differ by more than a label's height, about
# 1.8 degrees; 0.006 of the circle (2.2 degrees) leaves a little air between them.
LABEL_GAP = 0.006
LABEL_FONT = 7

# Where on the circle the ticks go: location 0 and the quarters.
TICKS = (0.0, 0.25, 0.5, 0.75)


def _point(location: float, radius: float = 1.0) -> tuple[float, float]:
    angle = 2 * math.pi * location
    return radius * math.sin(angle), radius * math.cos(angle)


def _gap(a: float, b: float) -> float:
    """The distance between two locations around the circle."""
    d = abs(a - b) % 1.0
    return min(d, 1.0 - d)


VIZ_MISSING = "--png needs matplotlib: pip install 'overlay[viz]' (or pip install matplotlib)"


def pyplot() -> Any:
    """matplotlib's pyplot, drawing to files only; VizMissing without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed: this only writes files
        import matplotlib.pyplot as plt
    except ImportError:
        raise VizMissing(VIZ_MISSING) from None
    return plt


def plot_png(tree: Tree, path: Path) -> None:
    """Draw ``tree`` into the PNG file ``path``."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 9))
    try:
        draw(ax, tree)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)


def draw(ax: Any, tree: Tree) -> None:
    """Draw ``tree`` on the matplotlib axes ``ax``: the circle and its ticks, the nodes, the
    parent links, the key, their labels and the legend that explains them."""
    at_fault = {n for p in tree.check.problems for n in p.nodes}
    circle = [_point(i / 360) for i in range(361)]
    ax.plot([x for x, _ in circle], [y for _, y in circle], color="0.85", lw=1, zorder=0)
    _ticks(ax)
    others = [loc for n, loc in tree.locations.items() if n not in tree.members]
    if others:
        pts = [_point(loc) for loc in others]
        ax.scatter([x for x, _ in pts], [y for _, y in pts], s=8, color="0.6", zorder=1)
    disputed = False
    for n, m in tree.members.items():
        for c in m.children:
            if c not in tree.members:
                continue
            agreed = tree.members[c].parent == n
            disputed = disputed or not agreed
            (x0, y0), (x1, y1) = _point(m.location), _point(tree.members[c].location)
            ax.annotate(
                "",
                xy=(x1, y1),
                xytext=(x0, y0),
                arrowprops={
                    "arrowstyle": "->",
                    "color": "tab:gray" if agreed else "red",
                    "linestyle": "-" if agreed else "--",
                    "lw": 0.8,
                },
                zorder=2,
            )
    for n, m in tree.members.items():
        x, y = _point(m.location)
        color = "red" if n in at_fault else ("tab:blue" if m.subscribers else "white")
        if m.state == "root":
            ax.scatter([x], [y], s=260, marker="*", color="gold", edgecolors="black", zorder=4)
        else:
            ax.scatter([x], [y], s=40, color=color, edgecolors="black", zorder=3)
    _labels(ax, tree, at_fault)
    kx, ky = _point(tree.location, 0.92)
    ax.scatter([kx], [ky], s=120, marker="^", color="tab:green", zorder=5)
    _legend(ax, tree, bool(others), bool(at_fault), disputed)
    status = "OK" if tree.check.ok else f"{len(tree.check.problems)} problems"
    ax.set_title(
        f"{tree.stream.address}: {len(tree.members)} members, "
        f"{len(tree.subscribers)} subscriber nodes, depth {tree.check.height}, {status}"
    )
    ax.set_aspect("equal")
    ax.set_xlim(-1.3, 1.3)
    ax.set_ylim(-1.3, 1.3)
    ax.axis("off")


def _ticks(ax: Any) -> None:
    """A radial tick and its location, inside the circle, at 0 and each quarter."""
    for location in TICKS:
        (x0, y0), (x1, y1) = _point(location, 0.96), _point(location, 1.04)
        ax.plot([x0, x1], [y0, y1], color="0.4", lw=1.2, zorder=0)
        tx, ty = _point(location, 0.86)
        ax.text(tx, ty, f"{location:g}", color="0.4", fontsize=9, ha="center", va="center")


def _labels(ax: Any, tree: Tree, at_fault: set[bytes]) -> None:
    """Each member's label along its radius, unless a label of more interest is within
    ``LABEL_GAP`` (the module notes say why)."""

    def interest(n: bytes) -> tuple[int, float]:
        m = tree.members[n]
        rank = 0 if m.state == "root" else 1 if n in at_fault else 2 if m.subscribers else 3
        return rank, m.location

    placed: list[float] = []
    for n in sorted(tree.members, key=interest):
        location = tree.members[n].location
        if any(_gap(location, p) < LABEL_GAP for p in placed):
            continue
        placed.append(location)
        # Text reads outwards from just outside the node; on the left half it is turned
        # half a circle so it is never upside down, and then ends at the node.
        degrees = 90 - 360 * location
        left = math.cos(math.radians(degrees)) < 0
        x, y = _point(location, 1.05)
        ax.text(
            x,
            y,
            tree.label(n),
            fontsize=LABEL_FONT,
            rotation=degrees + 180 if left else degrees,
            rotation_mode="anchor",
            ha="right" if left else "left",
            va="center",
        )


def _legend(ax: Any, tree: Tree, others: bool, at_fault: bool, disputed: bool) -> None:
    """What each mark means; kinds of node and edge absent from this tree are left out."""
    from matplotlib.lines import Line2D

    def dot(label: str, **style: Any) -> Line2D:
        return Line2D([], [], linestyle="none", markeredgecolor="black", label=label, **style)

    handles = [
        dot("root", marker="*", markersize=14, markerfacecolor="gold"),
        dot("member", marker="o", markersize=7, markerfacecolor="white"),
        dot("member with subscribers", marker="o", markersize=7, markerfacecolor="tab:blue"),
    ]
    if at_fault:
        handles.append(dot("member at fault", marker="o", markersize=7, markerfacecolor="red"))
    if others:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="none",
                marker="o",
                markersize=3,
                color="0.6",
                label="node not in the tree",
            )
        )
    handles.append(Line2D([], [], color="tab:gray", lw=0.8, label="parent -> child link"))
    if disputed:
        handles.append(
            Line2D([], [], color="red", lw=0.8, linestyle="--", label="link only the parent lists")
        )
    handles.append(
        Line2D(
            [],
            [],
            linestyle="none",
            marker="^",
            markersize=9,
            color="tab:green",
            label=f"stream key @{tree.location:.4f}",
        )
    )
    # Beside the circle, not on it: any corner of the square around it may hold labels.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
