"""Which nodes a tool asks: a testnet's manifest, or addresses given on the command line.

``overlay tree`` and ``overlay stats`` take ``--manifest PATH`` (a testnet folder or its
``manifest.json``; default ``./testnet-data``) or ``--nodes ADDR ...`` (client ports of any
nodes, e.g. ones started by hand with ``overlay node``). With a manifest, nodes are shown by
their testnet index (``node 17``); with addresses, by address.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from overlay.client.connection import parse_address
from testnet.manifest import DEFAULT_DIR, read_manifest


@dataclass(frozen=True, slots=True)
class Targets:
    addresses: list[str]
    indices: list[int | None]


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--manifest",
        type=Path,
        help=f"a testnet folder or its manifest.json (default ./{DEFAULT_DIR})",
    )
    group.add_argument(
        "--nodes", nargs="+", metavar="ADDR", help="client addresses (host:port) of the nodes"
    )


def targets(args: argparse.Namespace) -> Targets:
    """The nodes to ask; ValueError (one line, exit 2) for a bad address or no testnet."""
    if args.nodes:
        for address in args.nodes:
            parse_address(address)  # a bad address is the user's error, said before any I/O
        return Targets(list(args.nodes), [None] * len(args.nodes))
    manifest = read_manifest(args.manifest or DEFAULT_DIR)
    return Targets([n.client for n in manifest.nodes], [n.index for n in manifest.nodes])
