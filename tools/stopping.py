"""Ctrl-C and SIGTERM end every command cleanly, with the shell's status for a command ended
by a signal: 128 + the signal's number (130 after SIGINT, 143 after SIGTERM), no traceback.

Two layers. ``until_signal`` is for commands that run trio until done: trio's default turns
Ctrl-C into a KeyboardInterrupt raised wherever the program happens to be (even while a task
is being spawned), which ends in an exception-group traceback, so there the signals are
received as events instead and cancel the work: it unwinds through its own cleanup (nodes
stopped, files closed). Everywhere else (blocking code, or trio code run without it)
``sigterm_as_interrupt`` makes SIGTERM take Ctrl-C's path: a KeyboardInterrupt raised where
Python (or trio, whose own SIGINT handler knows where raising is safe) allows it, so
``finally`` blocks and ``except BaseException`` cleanups (``testnet up`` stopping the
workers it started) run for both signals. ``interrupted_status`` is then the exit status.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

import trio

T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

# SIGTERMs received outside ``until_signal``: a KeyboardInterrupt after one is SIGTERM's.
_received: list[int] = []


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within it, SIGTERM raises KeyboardInterrupt as Ctrl-C does; the handler before is
    restored on leaving (``cli.main`` may run inside another program, a test runner). Off
    the main thread, where no handler can be set, it does nothing.

    It re-raises itself as SIGINT rather than raising from the handler: the SIGINT handler
    in force decides where the KeyboardInterrupt may land (trio's defers it out of its own
    bookkeeping), which a handler raising on its own could not."""

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        _received.append(signum)
        if callable(signal.getsignal(signal.SIGINT)):
            signal.raise_signal(signal.SIGINT)
        else:  # (SIGINT ignored, as in a background job of a script: raise it here)
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    # SIGINT keeps Python's own handler: trio.run installs its careful one only in place of
    # that, and a KeyboardInterrupt with no SIGTERM before it is a Ctrl-C.
    before = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def interrupted_status() -> int:
    """The exit status of a command a KeyboardInterrupt ended: 143 if SIGTERM came first,
    else 130 (Ctrl-C, or a KeyboardInterrupt no signal caused)."""
    return 128 + (signal.SIGTERM if _received else signal.SIGINT)


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
