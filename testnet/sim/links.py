"""The links that exist in a simulated network: its topology's edges, plus those made later.

Each node's row is its topology row as the topology holds it (a tuple, shared, costing
nothing more) until a link is added to it; only then is the row copied into a set of its
own. A network of a million nodes keeps one copy of its 16 million link ends, not two: a
set of 16 ints costs about 700 bytes a node on top of the topology's tuple. A membership
test on a row of a few dozen ints is a short scan.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable


class Links:
    """Per node, the nodes it has a link to (open or not: the simulator keeps which are)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterable[Collection[int]]) -> None:
        self._rows: list[Collection[int]] = list(rows)

    def __getitem__(self, i: int) -> Collection[int]:
        return self._rows[i]

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, a: int, b: int) -> None:
        """The link a-b exists (both ends): a no-op if it did."""
        self._add(a, b)
        self._add(b, a)

    def add_node(self) -> int:
        """A node with no links yet; returns its index."""
        self._rows.append(())
        return len(self._rows) - 1

    def _add(self, a: int, b: int) -> None:
        row = self._rows[a]
        if b in row:
            return
        if not isinstance(row, set):
            row = self._rows[a] = set(row)
        row.add(b)
