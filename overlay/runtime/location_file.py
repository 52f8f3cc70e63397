"""Where a swapping node stands, kept across restarts: ``<state file>.location``.

A darknet node takes another location each time it swaps (``overlay.core.swaps``), and its
partner takes the one it left. A node that came back at the location its id or its
configuration gives would then stand where its last partner stands: two nodes at one
location, and every swap before undone. So a node that swaps and keeps a state file keeps
its location beside it, and a restart starts from there, as a Freenet node keeps its
location in its own files.

Format: one line, the location as Python writes a float (``repr``: read back exactly). It
is written through a temporary file and a rename, so a reader finds the old location or
the new one, never half; a swap is rare enough (one a ``swap_interval`` at most) that each
is written when it happens. A file that does not hold a location in [0, 1) is a
``LocationFileError`` naming it, and the node does not start: guessing would put it where
another node stands.
"""

from __future__ import annotations

import math
import os
from pathlib import Path


class LocationFileError(ValueError):
    """The location file cannot be used; the message names it and what is wrong."""


class LocationFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def beside(cls, state_file: Path) -> LocationFile:
        """The location file that goes with ``state_file``."""
        return cls(state_file.with_name(state_file.name + ".location"))

    def read(self) -> float | None:
        """The location kept, or None if none was (a node that never swapped)."""
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            raise LocationFileError(f"{self.path}: cannot be read ({error})") from None
        try:
            location = float(text.strip())
        except ValueError:
            location = math.nan
        if not 0.0 <= location < 1.0:  # (NaN too)
            raise LocationFileError(
                f"{self.path}: does not hold a location in [0, 1) (remove it to start at the"
                " location the node's id or configuration gives)"
            )
        return location

    def write(self, location: float) -> None:
        """Keep ``location``; OSError if it cannot be written."""
        temporary = self.path.with_name(self.path.name + ".tmp")
        with open(temporary, "w", encoding="ascii") as file:
            file.write(f"{location!r}\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
