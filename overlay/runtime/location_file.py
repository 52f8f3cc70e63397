"""Where a swapping node stands, kept across restarts: ``<state file>.location``.

A darknet node takes another location each time it swaps (``overlay.core.swaps``), and its
partner takes the one it left. A node that came back at the location its id or its
configuration gives would then stand where another node may stand now: two nodes at one
location, and its swaps undone. So a node that swaps and keeps a state file keeps its
location beside it, and a restart in listed trust starts from there (its peers take any
location from a listed node), as a Freenet node keeps its location in its own files.

Format: one line, the location as Python writes a float (``repr``: read back exactly). It
is written through a temporary file and a rename, so a reader finds the old location or
the new one, never half, after a kill at any point; as for the state file, only a power
cut can lose the last one (nothing is flushed with ``fsync``, which would hold up every
node of a process on a slow disk at each swap). A file that does not hold a location in
[0, 1) is a ``LocationFileError`` naming it, and the node does not start: guessing would
put it where another node stands. When a location cannot be written, the file is removed
(``discard``): a restart then starts at the configured location, not at an older one.
"""

from __future__ import annotations

import contextlib
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
        with open(self._temporary, "w", encoding="ascii") as file:
            file.write(f"{location!r}\n")
        os.replace(self._temporary, self.path)

    def discard(self) -> None:
        """Remove what is kept (a location that could not be written is better unknown
        than old); errors are ignored: this runs when the disk already failed."""
        for path in (self.path, self._temporary):
            with contextlib.suppress(OSError):
                path.unlink()

    @property
    def _temporary(self) -> Path:
        return self.path.with_name(self.path.name + ".tmp")
