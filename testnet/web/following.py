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
                feed.workers_following += 1
                try:
                    if lost:
                        feed.say("worker", f"worker {worker.index} answers again", None)
                        lost = False
                    await _read_watch(feed, stream)
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


async def _read_watch(feed: Feed, stream: trio.SocketStream) -> None:
    """Apply watch lines until the worker hangs up or falls silent; ValueError on a line
    that is not a watch diff."""
    buffer = b""
    while True:
        with trio.move_on_after(WORKER_SILENT) as silent:
            data = await stream.receive_some(1 << 20)
        if silent.cancelled_caught or not data:
            return
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            answer = json.loads(line)
            watch = answer.get("watch") if isinstance(answer, dict) else None
            feed.broadcast(feed.view.apply(trio.current_time(), watch))
        if len(buffer) > MAX_WATCH_LINE:
            raise ValueError(f"a watch line longer than {MAX_WATCH_LINE} bytes")
