"""A picture of a stream's tree on the keyspace circle (``overlay tree --png``).

Every node that answered sits on the unit circle at its location (angle 2*pi*location, 0 at
the top, clockwise, as the keyspace is usually drawn); members of the tree are drawn larger,
the stream's key is a marked point on the circle, and tree edges are chords from parent to
child. The root is a star, subscribers' nodes are filled blue, nodes at fault red, and edges
that only one side believes in are dashed red. Drawing on the circle shows at a glance what
routing did: the tree should gather towards the key's location.

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


def _point(location: float) -> tuple[float, float]:
    angle = 2 * math.pi * location
    return math.sin(angle), math.cos(angle)


def plot_png(tree: Tree, path: Path) -> None:
    """Draw ``tree`` into the PNG file ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed: this only writes files
        import matplotlib.pyplot as plt
    except ImportError:
        raise VizMissing(
            "--png needs matplotlib: pip install 'overlay[viz]' (or pip install matplotlib)"
        ) from None
    fig, ax = plt.subplots(figsize=(9, 9))
    try:
        _draw(ax, tree)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)


def _draw(ax: Any, tree: Tree) -> None:
    at_fault = {n for p in tree.check.problems for n in p.nodes}
    circle = [_point(i / 360) for i in range(361)]
    ax.plot([x for x, _ in circle], [y for _, y in circle], color="0.85", lw=1, zorder=0)
    others = [loc for n, loc in tree.locations.items() if n not in tree.members]
    if others:
        pts = [_point(loc) for loc in others]
        ax.scatter([x for x, _ in pts], [y for _, y in pts], s=8, color="0.6", zorder=1)
    for n, m in tree.members.items():
        for c in m.children:
            if c not in tree.members:
                continue
            agreed = tree.members[c].parent == n
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
        if len(tree.members) <= 40 or m.state == "root" or m.subscribers or n in at_fault:
            ax.annotate(
                tree.label(n), (x, y), xytext=(6, 6), textcoords="offset points", fontsize=8
            )
    kx, ky = _point(tree.location)
    ax.scatter([kx * 1.08], [ky * 1.08], s=120, marker="v", color="tab:green", zorder=5)
    ax.annotate(
        f"key @{tree.location:.4f}",
        (kx * 1.08, ky * 1.08),
        xytext=(8, 0),
        textcoords="offset points",
        color="tab:green",
    )
    status = "OK" if tree.check.ok else f"{len(tree.check.problems)} problems"
    ax.set_title(
        f"{tree.stream.address}: {len(tree.members)} members, "
        f"{len(tree.subscribers)} subscriber nodes, depth {tree.check.height}, {status}"
    )
    ax.set_aspect("equal")
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.25, 1.25)
    ax.axis("off")
