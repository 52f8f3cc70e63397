"""The ``overlay`` command: one console script, one subcommand per job.

Each subcommand lives in its own module under ``tools/`` and registers itself with
``add_parser``; this module only assembles them and turns every error a user can meet into
one line on stderr, never a stack trace, with an exit status that says whose it is:

* 0: all is well.
* 1: the command ran and the world said no: no node answers at the address, an answer did
  not come in time, the network refused, or a check failed (``overlay tree`` found two
  roots). Running it again later may succeed.
* 2: the command as given cannot run: a bad option or address, a missing or damaged file
  (config, key, state), a port already in use. The command line or a file must change.
* 130 or 143: ended by Ctrl-C (SIGINT) or SIGTERM (128 + the signal's number).

A reader that goes away (``overlay subscribe demo | head``) ends the command quietly, and
standard output is line-buffered, so a pipe gets each line as it is printed.
"""

from __future__ import annotations

import argparse
import errno
import importlib.metadata
import io
import logging
import os
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from overlay.client import ClientError
from tools import (
    keygen_cmd,
    node_cmd,
    publish_cmd,
    stats_cmd,
    subscribe_cmd,
    testnet_cmd,
    tree_cmd,
    web_cmd,
)
from tools.stopping import interrupted_status, sigterm_as_interrupt

# Errors that are the user's to fix: shown as one line, exit 2.
USAGE_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ClientError)
# Of those, the ones where the command ran and the network said no: exit 1. Checked before
# OSError (a NodeUnreachable is one; a port in use is the user's, exit 2), after ValueError
# (a malformed address, BadNodeAddress, is a NodeUnreachable too).
RUNTIME_FAILURES: tuple[type[BaseException], ...] = (ClientError, ConnectionError, TimeoutError)
USAGE_STATUS = 2
RUNTIME_STATUS = 1

Command = Callable[[argparse.Namespace], int]


class PlainHelpParser(argparse.ArgumentParser):
    """A parser whose help drops the reStructuredText literal marks: the commands'
    descriptions are their modules' docstrings, written for readers of the code, and a
    terminal would show the marks raw. Subcommands' parsers are of the parent's class, so
    every ``--help`` is plain."""

    def format_help(self) -> str:
        return super().format_help().replace("``", "")


def build_parser() -> argparse.ArgumentParser:
    parser = PlainHelpParser(
        prog="overlay",
        description="A Freenet-style routed subscription tree overlay: run nodes, publish "
        "and subscribe to keyed streams, inspect trees.",
        epilog="exit status: 0 all is well; 1 the command ran but the network said no (no "
        "node at the address, no answer in time, a refusal) or a check failed; 2 a usage "
        "error (a bad option, address or file, a port in use); 130 or 143 after Ctrl-C or "
        "SIGTERM. $OVERLAY_NODE: the default --node of publish and subscribe.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)"
    )
    parser.add_argument("--version", action="version", version=f"overlay {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        module.add_parser(commands)
    return parser


_COMMANDS = [
    keygen_cmd,
    node_cmd,
    publish_cmd,
    subscribe_cmd,
    testnet_cmd,
    tree_cmd,
    stats_cmd,
    web_cmd,
]


def version() -> str:
    """The installed package's version; from a checkout that is not installed, the one
    pyproject.toml declares."""
    try:
        return importlib.metadata.version("overlay")
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            return str(tomllib.loads(pyproject.read_text())["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # No command is a usage error (status 2, as argparse gives any other), but the
        # whole help, with its command list, says more than a bare usage line.
        parser.print_help(sys.stderr)
        return 2
    level = (logging.WARNING, logging.INFO, logging.DEBUG)[min(args.verbose, 2)]
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # A pipe gets each line as it is printed (``| tee``, CI logs), not a block at the end.
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    with sigterm_as_interrupt():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The command's exit status; every error a user can meet as one line (module notes)."""
    run: Command = args.run
    try:
        return run(args)
    except BaseException as error:
        # (trio wraps what a task raised in exception groups: the one error inside counts)
        alone = _alone(error)
        if isinstance(alone, KeyboardInterrupt):
            return interrupted_status()
        if isinstance(alone, BrokenPipeError):
            # The reader went away (``overlay stats | head``): nothing is wrong, stop
            # quietly, and keep Python from complaining about the closed stdout at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        if not isinstance(alone, ValueError) and (
            isinstance(alone, RUNTIME_FAILURES)
            or (
                isinstance(alone, OSError)
                and alone.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH)
            )
        ):
            print(f"overlay {args.command}: {alone}", file=sys.stderr)
            return RUNTIME_STATUS
        if isinstance(alone, USAGE_ERRORS):
            print(f"overlay {args.command}: {alone}", file=sys.stderr)
            return USAGE_STATUS
        raise  # a bug: its traceback is wanted


def _alone(error: BaseException) -> BaseException:
    """The one exception ``error`` is, or holds alone however deeply grouped; else itself.
    Several KeyboardInterrupts (one per task a Ctrl-C reached) count as one."""
    if not isinstance(error, BaseExceptionGroup):
        return error
    leaves = list(_leaves(error))
    if all(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        return leaves[0]
    return leaves[0] if len(leaves) == 1 else error


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


if __name__ == "__main__":
    sys.exit(main())
