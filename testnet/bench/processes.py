"""The OS processes of a forwarding run, and how each reports to the parent.

Each run starts its roles (the forwarder, then the receivers) in fresh processes of the
``spawn`` start method: a new interpreter each, so nothing of the parent or of an earlier run
carries over. A role is a trio program that takes a ``Report`` and returns its measurements;
``serve_role`` runs it in the child and sends ``(kind, value)`` messages over a one-way pipe:
any number of reports (such as "ready", with the ports to dial), then one "result", or one
"error" with the failure's traceback. The parent reads them with ``Processes.expect``, which
waits on every pipe at once, so whichever process fails first is reported, and a process that
ends early or stays silent past the deadline makes it raise ``BenchError`` instead of hanging
the run. ``Processes.close`` joins each process, terminating or killing what still runs."""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

import trio

Report = Callable[[str, Any], None]


class BenchError(RuntimeError):
    """A run that could not measure what it should (a process failed, a packet went missing)."""


def serve_role(conn: Connection, role: Callable[[Report], Awaitable[dict[str, Any]]]) -> None:
    """Run one role's trio program in this (spawned) process and send its result, or the
    traceback of its failure, to the parent."""
    try:
        result = trio.run(role, lambda kind, value: conn.send((kind, value)))
        conn.send(("result", result))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        sys.exit(1)
    finally:
        conn.close()


class Processes:
    """The child processes of one run and their pipes; ``close`` ends whatever still runs."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._running: dict[str, tuple[BaseProcess, Connection]] = {}
        self._inbox: dict[str, list[tuple[str, Any]]] = {}

    def start(self, name: str, target: Callable[..., None], *args: Any) -> None:
        receiving, sending = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=target, args=(*args, sending), name=f"bench-{name}", daemon=True
        )
        process.start()
        sending.close()
        self._running[name] = (process, receiving)
        self._inbox[name] = []

    def expect(self, name: str, kind: str, timeout: float) -> Any:
        """The next message of ``name``, which must be ``kind``; any process's error raises."""
        deadline = time.monotonic() + timeout
        while not self._inbox[name]:
            open_pipes = [c for p, c in self._running.values() if not c.closed]
            if not any(c is self._running[name][1] for c in open_pipes):
                code = self._running[name][0].exitcode
                raise BenchError(f"the {name} process ended (exit code {code}) before {kind}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchError(f"the {name} process sent no {kind} within {timeout:.0f} s")
            for ready in wait(open_pipes, timeout=min(remaining, 0.5)):
                assert isinstance(ready, Connection)
                sender = next(n for n, (_, c) in self._running.items() if c is ready)
                try:
                    got, value = ready.recv()
                except EOFError:
                    ready.close()
                    continue
                if got == "error":
                    raise BenchError(f"the {sender} process failed:\n{value}")
                self._inbox[sender].append((got, value))
        got, value = self._inbox[name].pop(0)
        if got != kind:
            raise BenchError(f"the {name} process sent {got}, expected {kind}")
        return value

    def close(self) -> None:
        for process, conn in self._running.values():
            process.join(timeout=5.0)
            if process.is_alive():
                process.terminate()
                process.join(timeout=3.0)
            if process.is_alive():
                process.kill()
                process.join()
            conn.close()
        self._running.clear()
