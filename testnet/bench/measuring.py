"""What a forwarding run measures, and how its two processes agree on "delivered to all".

The forwarder times the measured span with a ``Meter``: wall clock (``perf_counter``) and the
process's own CPU seconds (``getrusage``: user plus system), optionally under cProfile, whose
table is cut to the ``PROFILE_TOP`` functions by own time and the project's by cumulative
time, with the time spent waiting in epoll left out of the ranking and reported as idle.

Flow control and the end of the clock both rest on one number: packets that *every* child
has received. The receiver process sends it (``report_progress``), whenever it grows, on a
separate loopback control connection as 8-byte big-endian counts; the forwarder reads only
the latest whole count (``Credit``). Counts only grow, so a report that is late or merged
with the next one is harmless. The receivers' sinks wake the reporter through ``Progress``
(one wake-up per batch of arrivals, not one per packet); it reports until the forwarder closes
the control connection, and returns its own process's wall and CPU time over that span.
"""

from __future__ import annotations

import cProfile
import pstats
import resource
import struct
import time
from collections.abc import Callable
from typing import Any

import trio

# A credit report on the control connection: one 8-byte big-endian count.
_COUNT = struct.Struct(">Q")
# Functions listed in each ranking of a profile: enough to see where the time goes, few
# enough to read at a glance.
PROFILE_TOP = 10


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """Wall and CPU time of this process over the measured span, optionally under cProfile."""

    def __init__(self, profile: bool) -> None:
        self._profiler = cProfile.Profile() if profile else None
        self._wall = 0.0
        self._cpu = 0.0

    def start(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = _cpu_seconds()
        if self._profiler is not None:
            self._profiler.enable()

    def stop(self) -> dict[str, Any]:
        if self._profiler is not None:
            self._profiler.disable()
        measured: dict[str, Any] = {
            "elapsed": time.perf_counter() - self._wall,
            "cpu": _cpu_seconds() - self._cpu,
        }
        if self._profiler is not None:
            measured["profile"] = _top_functions(self._profiler, PROFILE_TOP)
        return measured


# Time the profiled process spent waiting for the network, not working: left out of the
# ranking (cProfile's clock is wall time) and reported as idle instead.
_IDLE = "<method 'poll' of 'select.epoll' objects>"


def _top_functions(profiler: cProfile.Profile, count: int) -> dict[str, Any]:
    """The ``count`` functions with most own time, and the ``count`` of this project with
    most cumulative time (where the own time is spent from), idle time left out."""
    stats = pstats.Stats(profiler)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    table = stats.stats  # type: ignore[attr-defined]
    idle = sum(entry[2] for place, entry in table.items() if place[2] == _IDLE)
    busy = sum(entry[2] for entry in table.values()) - idle or 1.0
    rows = [(_where(place), entry) for place, entry in table.items() if place[2] != _IDLE]

    def listed(chosen: list[tuple[str, tuple[int, int, float, float, Any]]]) -> list[Any]:
        return [
            {
                "function": where,
                "calls": calls,
                "tottime": tottime,
                "share": tottime / busy,
                "cumtime": cumtime,
                "cumshare": cumtime / busy,
            }
            for where, (_, calls, tottime, cumtime, _) in chosen
        ]

    own = sorted(rows, key=lambda row: row[1][2], reverse=True)[:count]
    ours = [row for row in rows if row[0].startswith("overlay/")]
    cumulative = sorted(ours, key=lambda row: row[1][3], reverse=True)[:count]
    return {"busy": busy, "idle": idle, "own": listed(own), "cumulative": listed(cumulative)}


def _where(place: tuple[str, int, str]) -> str:
    path, line, name = place
    if path == "~":
        return name  # a built-in
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = path.split("/work/main/", 1)[-1]
    return f"{path}:{line}({name})"


class Credit:
    """The forwarder's view of the receivers: packets every child has received."""

    def __init__(self) -> None:
        self.delivered = 0
        self._changed = trio.Event()

    async def follow(self, control: trio.abc.ReceiveStream) -> None:
        buffer = b""
        while data := await control.receive_some(4096):
            buffer += data
            whole = len(buffer) - len(buffer) % _COUNT.size
            if whole:
                (self.delivered,) = _COUNT.unpack_from(buffer, whole - _COUNT.size)
                buffer = buffer[whole:]
                self._changed.set()
                self._changed = trio.Event()

    async def changed(self) -> None:
        await self._changed.wait()

    async def reach(self, count: int) -> None:
        while self.delivered < count:
            await self.changed()


class Progress:
    """Wakes the receivers' reporter after packets arrived (one wake-up per batch)."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def note(self) -> None:
        self._event.set()

    async def wait(self) -> None:
        await self._event.wait()
        self._event = trio.Event()


async def report_progress(
    control: trio.SocketStream, delivered: Callable[[], int], progress: Progress
) -> dict[str, float]:
    """Send ``delivered()`` to the forwarder whenever it grows, until the forwarder closes
    the control connection; return this process's wall and CPU time over that span."""
    wall, cpu = time.perf_counter(), _cpu_seconds()
    async with trio.open_nursery() as nursery:

        async def until_closed() -> None:
            try:
                while await control.receive_some(64):
                    pass
            except trio.BrokenResourceError:
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(until_closed)
        sent = 0
        try:
            while True:
                await progress.wait()
                count = delivered()
                if count > sent:
                    sent = count
                    await control.send_all(_COUNT.pack(count))
        except trio.BrokenResourceError:
            nursery.cancel_scope.cancel()
    return {"elapsed": time.perf_counter() - wall, "cpu": _cpu_seconds() - cpu}
