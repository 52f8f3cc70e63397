"""``overlay node``: run one node in the foreground until Ctrl-C or SIGTERM.

With no ``--config`` it starts with every default (identity ``node.key`` in the current
folder, created if missing, and its state file ``node.state`` beside it; peers on
0.0.0.0:7701; clients on 127.0.0.1:7702; no peers to dial). The flags override the
config file, so a quick second node needs no file at all (its state file is b.state)::

    overlay node --identity b.key --listen 127.0.0.1:7711 --client 127.0.0.1:7712 \\
        --connect 127.0.0.1:7701

Ctrl-C (SIGINT) or SIGTERM stops it cleanly: its links close and its state file is
closed, with no traceback. The exit status follows the shell's convention for a command
ended by a signal, 128 + the signal's number: 130 after SIGINT, 143 after SIGTERM.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
from pathlib import Path
from typing import Any

import trio

from overlay.runtime.collector import tune_for_nodes
from overlay.runtime.config import RuntimeConfig, load_config, parse_address, parse_peer
from overlay.runtime.service import RunningNode, run_node


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "node",
        help="run a node",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", type=Path, help="TOML config file (see the README)")
    p.add_argument("--identity", type=Path, help="identity file (created if missing)")
    p.add_argument(
        "--state",
        help="state file: each stream's numbering, kept across restarts (default: the "
        'identity\'s name with .state; "" keeps none)',
    )
    p.add_argument("--listen", help="host:port for peers")
    p.add_argument("--client", help="host:port for local clients")
    p.add_argument("--location", type=float, help="location in [0, 1)")
    p.add_argument("--network", help="network name; nodes link only within one")
    p.add_argument(
        "--connect", action="append", default=[], metavar="HOST:PORT[@ID]", help="a peer to dial"
    )
    p.set_defaults(run=run)


def configure(args: argparse.Namespace) -> RuntimeConfig:
    config = load_config(args.config)
    changes: dict[str, Any] = {}
    if args.identity is not None:
        changes["identity"] = args.identity
    if args.state is not None:
        changes["keep_state"] = bool(args.state)
        changes["state"] = Path(args.state) if args.state else None
    if args.listen is not None:
        changes["listen"] = parse_address(args.listen, default_host="0.0.0.0")
    if args.client is not None:
        changes["client"] = parse_address(args.client, default_host="127.0.0.1")
    if args.location is not None:
        if not 0.0 <= args.location < 1.0:
            raise ValueError(f"--location must be in [0, 1), got {args.location}")
        changes["location"] = args.location
    if args.network is not None:
        changes["network"] = args.network
    if args.connect:
        changes["connect"] = config.connect + tuple(parse_peer(p) for p in args.connect)
    return dataclasses.replace(config, **changes)


def run(args: argparse.Namespace) -> int:
    config = configure(args)

    started = False
    stopped_by: int | None = None

    async def stop_on_signal(
        cancel_scope: trio.CancelScope,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        # The signals are received as ordinary events, so stopping is a cancellation: it
        # unwinds through run_node's shutdown path (links closed, state file closed) instead
        # of a KeyboardInterrupt raised wherever the node happened to be.
        nonlocal stopped_by
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()  # (listening before the node starts: no signal slips by)
            async for signum in signals:
                stopped_by = signum
                cancel_scope.cancel()
                return

    async def main() -> None:
        nonlocal started
        async with trio.open_nursery() as nursery:
            await nursery.start(stop_on_signal, nursery.cancel_scope)
            node: RunningNode = await nursery.start(run_node, config)
            started = True
            print(
                f"node {node.node_id}\n"
                f"  location {node.host.core.location:.6f}\n"
                f"  peers    {node.peer_address}\n"
                f"  clients  {node.client_address}",
                flush=True,
            )

    tune_for_nodes()
    try:
        trio.run(main)
    except BaseExceptionGroup as group:
        # A node that cannot start (a damaged state file, a port in use) fails inside the
        # nursery, which wraps the error: unwrapped, it is one clear line like any other.
        alone = None if started else _alone(group)
        if alone is None:
            raise  # (a failure once running is a bug: its traceback is wanted)
        raise alone from None
    # The shell's convention for a command ended by a signal: 128 + its number.
    return 0 if stopped_by is None else 128 + stopped_by


def _alone(group: BaseExceptionGroup[BaseException]) -> Exception | None:
    """The one ordinary exception ``group`` holds, however deeply nested, if that is all."""
    inner = group.exceptions
    if len(inner) != 1:
        return None
    if isinstance(inner[0], BaseExceptionGroup):
        return _alone(inner[0])
    return inner[0] if isinstance(inner[0], Exception) else None
