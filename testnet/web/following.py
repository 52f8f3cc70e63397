"""Following a testnet's workers: one ``watch`` connection each (``testnet.control``), its
lines applied to the view as they come, for as long as the web view runs.

A worker that cannot be reached, stops talking for ``WORKER_SILENT`` seconds or sends a
line that is not a watch diff is let go and asked again every ``RETRY`` seconds; meanwhile
its nodes show dead, which the page says in one line (the nodes may well be alive: it is
the worker that does not answer). Nothing a worker sends can end the view: a bad line
costs a warning, rate-limited, and a new connection.
"""

from __future__ import annotations

import json
from typing import Protocol

import trio

from testnet.control import WATCH_QUIET
from testnet.manifest import WorkerEntry
from testnet.web.model import Event, LiveView

# A worker silent this long (it sends a line every WATCH_QUIET seconds) is wedged or gone.
WORKER_SILENT = 3 * WATCH_QUIET

# How soon to ask a worker again after losing it.
RETRY = 1.0

# A line can be long (a worker's first look at 250 nodes is about 200 KB), but not endless.
MAX_WATCH_LINE = 64 << 20


class Feed(Protocol):
    """Where a follower reports: the view it updates and the pages it tells."""

    view: LiveView
    workers_following: int

    def broadcast(self, events: list[Event]) -> None: ...

    def say(self, kind: str, text: str, stream: str | None) -> None:
        """A line on every page's log."""

    def warn(self, text: str) -> None:
        """A WARNING line in the view's own log, within its budget."""


async def follow_worker(feed: Feed, worker: WorkerEntry) -> None:
    """Keep ``feed.view`` current from ``worker`` until cancelled (see the module notes)."""
    host, _, port = worker.control.rpartition(":")
    lost = False
    while True:
        try:
            async with await trio.open_tcp_stream(host, int(port)) as stream:
                await stream.send_all(b'{"op": "watch"}\n')
                lines = _Lines(stream)
                # Answering is sending a watch line: a stopped worker's kernel still
                # accepts connections.
                if await _apply_next(feed, lines):
                    feed.workers_following += 1
                    try:
                        if lost:
                            feed.say("worker", f"worker {worker.index} answers again", None)
                            lost = False
                        while await _apply_next(feed, lines):
                            pass
                    finally:
                        feed.workers_following -= 1
        except (OSError, trio.BrokenResourceError):
            pass
        except (ValueError, RecursionError) as error:
            feed.warn(f"worker {worker.index} at {worker.control} sent a bad watch line: {error}")
        if not lost:
            lost = True
            first, last = worker.nodes
            feed.broadcast(feed.view.mark_dead(trio.current_time(), range(first, last)))
            feed.say(
                "worker",
                f"worker {worker.index} does not answer: its nodes {first} to {last - 1} are"
                " shown dead until it does",
                None,
            )
        await trio.sleep(RETRY)


async def _apply_next(feed: Feed, lines: _Lines) -> bool:
    """Apply the worker's next watch line; False if it hung up or fell silent first.
    ValueError for a line that is not a watch diff."""
    line = await lines.next()
    if line is None:
        return False
    answer = json.loads(line)
    watch = answer.get("watch") if isinstance(answer, dict) else None
    feed.broadcast(feed.view.apply(trio.current_time(), watch))
    return True


class _Lines:
    """A worker's watch lines, one at a time."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self._buffer = b""
        self._ready: list[bytes] = []

    async def next(self) -> bytes | None:
        """The next line; None when the worker hangs up or is silent ``WORKER_SILENT``."""
        while not self._ready:
            with trio.move_on_after(WORKER_SILENT) as silent:
                data = await self._stream.receive_some(1 << 20)
            if silent.cancelled_caught or not data:
                return None
            *lines, self._buffer = (self._buffer + data).split(b"\n")
            self._ready.extend(lines)
            if len(self._buffer) > MAX_WATCH_LINE:
                raise ValueError(f"a watch line longer than {MAX_WATCH_LINE} bytes")
        return self._ready.pop(0)
