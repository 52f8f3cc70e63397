"""Which nodes a tool asks: one node's client port, a testnet's manifest, or addresses.

``overlay publish`` and ``overlay subscribe`` talk to one node: ``--node ADDR``, else the
environment variable ``OVERLAY_NODE`` (as ``NATS_URL`` is for nats: set it once per shell),
else 127.0.0.1:7702. An address needs its port.

``overlay tree`` and ``overlay stats`` take ``--manifest PATH`` (a testnet folder or its
``manifest.json``; default ``./testnet-data``) or ``--nodes ADDR ...`` (client ports of any
nodes, e.g. ones started by hand with ``overlay node``). With a manifest, nodes are shown by
their testnet index (``node 17``); with addresses, by address.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from overlay.client.connection import parse_address
from overlay.client.protocol import DEFAULT_CLIENT_PORT
from testnet.manifest import DEFAULT_DIR, read_manifest

# The node a command talks to when --node is not given: this variable's value, else the
# client port an ``overlay node`` with no configuration listens on.
NODE_VARIABLE = "OVERLAY_NODE"
DEFAULT_NODE = f"127.0.0.1:{DEFAULT_CLIENT_PORT}"


def add_node_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--node",
        metavar="ADDR",
        help=f"the node's client port, host:port (default: ${NODE_VARIABLE}, else {DEFAULT_NODE})",
    )


def node_address(args: argparse.Namespace) -> str:
    """The node to talk to (see the module notes). A bad ``OVERLAY_NODE`` is a ValueError
    that names the variable: the user never typed it on this command line."""
    if args.node is not None:
        return checked(str(args.node), "--node")
    value = os.environ.get(NODE_VARIABLE, "").strip()
    if not value:
        return DEFAULT_NODE
    return checked(value, f"{NODE_VARIABLE}={value!r}")


def checked(address: str, where: str) -> str:
    """``address`` if it is host:port; else a ValueError naming ``where`` (the option or
    variable it came from). The port is required, as in the Spark sink's ``node``: a bare
    host would silently mean the default client port, and a node started on another port
    would then look unreachable."""
    try:
        parse_address(address, default_port=None)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return address


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
            checked(address, "--nodes")  # the user's error, said before any I/O
        return Targets(list(args.nodes), [None] * len(args.nodes))
    manifest = read_manifest(args.manifest or DEFAULT_DIR)
    return Targets([n.client for n in manifest.nodes], [n.index for n in manifest.nodes])
