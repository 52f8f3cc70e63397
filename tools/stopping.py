"""Ctrl-C and SIGTERM as a cancellation, for commands that run trio until done.

Trio's default turns Ctrl-C into a KeyboardInterrupt raised wherever the program happens to
be (even while a task is being spawned), which ends in an exception-group traceback. Here
the signals are received as events instead and cancel the work: it unwinds through its own
cleanup (nodes stopped, files closed) and the command exits with the shell's status for a
command ended by a signal, 128 + the signal's number (130 after SIGINT, 143 after SIGTERM).
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True, slots=True)
class Signalled:
    """The work was cancelled by ``signum``."""

    signum: int

    @property
    def status(self) -> int:
        return 128 + self.signum


async def until_signal(function: Callable[..., Awaitable[T]], *args: Any) -> T | Signalled:
    """``function(*args)``'s result, or Signalled if SIGINT or SIGTERM cancelled it first."""
    done: list[T] = []
    stopped: list[int] = []

    async def watch(
        cancel_scope: trio.CancelScope,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
            task_status.started()  # (listening before the work starts: no signal slips by)
            async for signum in signals:
                stopped.append(signum)
                cancel_scope.cancel()
                return

    async with trio.open_nursery() as nursery:
        await nursery.start(watch, nursery.cancel_scope)
        done.append(await function(*args))
        nursery.cancel_scope.cancel()
    return done[0] if done else Signalled(stopped[0])
