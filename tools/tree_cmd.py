"""``overlay tree STREAM``: ask every node for its view of a stream and show the tree.

    overlay tree ovl:open/demo                      # the testnet in ./testnet-data
    overlay tree ovl:open/demo --manifest DIR --json
    overlay tree demo --nodes 127.0.0.1:7702 127.0.0.1:7712 --dot > tree.dot
    overlay tree demo --png tree.png                # needs the viz extra (matplotlib)

The terminal view shows the root, each node's children, location and distance to the key,
and its local subscribers (``*``); what is wrong (two roots, a cycle, an orphan, a child and
parent that disagree) is listed at the end and marked ``!``. Exit status: 0 for a healthy
tree, 1 if anything is wrong (or some nodes did not answer, other than testnet nodes that
``overlay testnet kill`` took down), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import trio

from keyspace.stream_key import StreamKey
from testnet import launcher
from testnet.manifest import DEFAULT_DIR, read_manifest
from testnet.survey import survey
from testnet.tree import Tree, assemble
from testnet.tree_plot import VizMissing, plot_png
from testnet.tree_view import render_dot, render_json, render_text
from tools.node_targets import Targets, add_target_arguments, targets
from tools.stopping import Signalled, until_signal


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "tree",
        help="show a stream's tree and what is wrong with it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("stream", help="the stream: an ovl: address or an open stream's name")
    add_target_arguments(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON for scripts")
    out.add_argument("--dot", action="store_true", help="Graphviz dot (pipe to `dot -Tsvg`)")
    out.add_argument("--png", type=Path, metavar="FILE", help="a picture on the keyspace circle")
    p.set_defaults(run=run)


async def gather(stream: StreamKey, nodes: Targets) -> Tree:
    """Ask every node and assemble the stream's tree."""
    answers = await survey(nodes.addresses, stream.address, indices=nodes.indices)
    return assemble(stream, answers)


def run(args: argparse.Namespace) -> int:
    stream = StreamKey.parse(args.stream)
    nodes = targets(args)
    gathered = trio.run(until_signal, gather, stream, nodes)
    if isinstance(gathered, Signalled):
        return gathered.status
    tree: Tree = gathered
    if args.json:
        print(render_json(tree))
    elif args.dot:
        print(render_dot(tree))
    elif args.png:
        try:
            plot_png(tree, args.png)
        except VizMissing as error:
            print(f"overlay tree: {error}", file=sys.stderr)
            return 2
        print(
            f"wrote {args.png}: {len(tree.members)} members, "
            f"{'OK' if tree.check.ok else f'{len(tree.check.problems)} problems'}"
        )
    else:
        print(render_text(tree))
    killed = _killed(args, tree)
    for index in sorted(killed):
        print(f"overlay tree: node {index} is down (killed)", file=sys.stderr)
    silent = [a for a in tree.unreachable if a.index not in killed]
    for answer in silent[:5]:
        print(f"overlay tree: {answer.label} did not answer: {answer.error}", file=sys.stderr)
    if len(silent) > 5:
        print(f"overlay tree: ... and {len(silent) - 5} more", file=sys.stderr)
    return 0 if tree.check.ok and not silent else 1


def _killed(args: argparse.Namespace, tree: Tree) -> set[int]:
    """The testnet nodes that did not answer because ``overlay testnet kill`` took them
    down (their workers say so): not the tree's fault, so no error. Asked only when some
    testnet node was silent; nodes given by address are never excused."""
    if args.nodes or not tree.unreachable:
        return set()
    manifest = read_manifest(args.manifest or DEFAULT_DIR)
    silent = {a.index for a in tree.unreachable if a.index is not None}
    return silent & launcher.killed_nodes(manifest)
