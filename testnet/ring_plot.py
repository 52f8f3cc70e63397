"""A picture of a graph's links on the keyspace circle, before and after its nodes moved
(``overlay testnet routing --png``).

Each panel puts every node on the unit circle at its location (angle 2*pi*location, 0 at
the top, clockwise, as ``overlay tree --png`` draws it) and every link as a chord. Greedy
routing works when most links are short and a few are long (Kleinberg's 1/d law): short
chords hug the circle, and the middle stays light. A darknet at its random starting
locations is a dark tangle of long chords; as its nodes swap, the tangle thins into the
rim. The caption under each panel gives the measures of ``testnet.routing``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from keyspace.topology import Topology
from testnet.tree_plot import VIZ_MISSING, _point, pyplot


def png_problem(path: Path) -> str | None:
    """Why a PNG cannot be written to ``path`` (no matplotlib, no such folder), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return VIZ_MISSING
    if not path.parent.is_dir():
        return f"--png {path}: no directory {path.parent}"
    return None


def plot_rings(panels: list[tuple[str, Topology]], path: Path) -> None:
    """Draw each (caption, graph) of ``panels`` side by side into the PNG file ``path``
    (VizMissing without matplotlib)."""
    plt = pyplot()
    from matplotlib.collections import LineCollection

    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 6.6), squeeze=False)
    try:
        for ax, (caption, topology) in zip(axes[0], panels, strict=True):
            _ring(ax, topology, caption, LineCollection)
        figure.savefig(path, dpi=100, bbox_inches="tight")
    finally:
        plt.close(figure)


def _ring(ax: Any, topology: Topology, caption: str, lines: Any) -> None:
    points = [_point(location) for location in topology.locations]
    chords = [(points[i], points[j]) for i, j in topology.edges()]
    # Faint chords, so that where many cross the picture darkens: the tangle is the point.
    alpha = min(0.6, max(0.06, 150.0 / max(len(chords), 1)))
    ax.add_collection(lines(chords, colors="tab:blue", linewidths=0.6, alpha=alpha))
    ax.scatter([x for x, _ in points], [y for _, y in points], s=6, color="black", zorder=3)
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(caption, fontsize=10)
