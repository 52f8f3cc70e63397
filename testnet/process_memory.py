"""This process's resident memory, as the benchmarks and the simulator report it."""

from __future__ import annotations

import contextlib
import resource
import sys


def memory_now() -> int:
    """Resident memory now, in bytes (0 where ``/proc`` is not there)."""
    return _status_bytes("VmRSS:")


def peak_memory() -> int:
    """Peak resident memory so far, in bytes."""
    peak = _status_bytes("VmHWM:")
    if peak:
        return peak
    # (Without /proc: getrusage's maximum, in kilobytes on Linux and bytes on macOS.)
    most = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return most if sys.platform == "darwin" else most * 1024


def _status_bytes(field: str) -> int:
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii") as status,
    ):
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0
