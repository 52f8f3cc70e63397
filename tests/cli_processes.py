"""Running the ``overlay`` command as a user runs it, for the CLI tests: one command to its
end (``overlay``), and the lines a long-running process writes, waited for with a deadline
(``Lines``)."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

OVERLAY = [sys.executable, "-m", "tools.cli"]
DEADLINE = 20.0  # seconds any one wait may take before the test fails


def overlay(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*OVERLAY, *args], input=stdin, capture_output=True, text=True, timeout=DEADLINE, cwd=cwd
    )


class Lines:
    """The lines a process writes to ``stream``, read on a thread so a test can wait for
    one with a deadline (select() on the pipe would miss lines already buffered)."""

    def __init__(self, stream: IO[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()  # None: the stream ended
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, pattern: str) -> re.Match[str]:
        """The next line matching ``pattern`` (a regex), within the deadline."""
        end = time.monotonic() + DEADLINE
        while (left := end - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self._queue.put(None)
                break
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match
        raise AssertionError(f"no line matching {pattern!r} in {self.seen}")

    def rest(self) -> list[str]:
        """The lines not yet waited for, up to the end of the stream (within the deadline)."""
        lines = []
        while (line := self._queue.get(timeout=DEADLINE)) is not None:
            lines.append(line)
        self._queue.put(None)
        return lines
