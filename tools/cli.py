"""The ``overlay`` command: one console script, one subcommand per job.

Each subcommand lives in its own module under ``tools/`` and registers itself with
``add_parser``; this module only assembles them and turns the errors users cause (a bad
address, an unreachable node, a bad stream address, a missing key file, a bad config) into
one line on stderr and exit status 2, never a stack trace. Exit status 1 means the job ran
and found a problem (e.g. ``overlay tree`` found two roots); 0 means all is well.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
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
)

# Errors that are the user's to fix: shown as one line, exit 2.
USAGE_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ClientError)

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="overlay",
        description="A Freenet-style routed subscription tree overlay: run nodes, publish "
        "and subscribe to keyed streams, inspect trees.",
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
    run: Command = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``overlay stats | head``): nothing is wrong, stop quietly,
        # and keep Python from complaining about the closed stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except USAGE_ERRORS as error:
        print(f"overlay {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
