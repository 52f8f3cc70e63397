"""``overlay web``: a read-only live view of one node in the browser.

    overlay web --node 127.0.0.1:7702 --open

The page shows where the node and its peers sit on the keyspace ring and, for each stream
the node carries, its part of the tree: its parent, itself and its children, with packet
numbers, asked of the node once a second through its client port. For a whole local
testnet, with its trees and controls, use ``overlay testnet web``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import webbrowser
from typing import Any

import trio

from testnet.arguments import port
from testnet.survey import describe_one
from testnet.web import server as web
from testnet.web.one_node import manifest_of
from tools.node_targets import add_node_argument, node_address
from tools.stopping import Signalled, until_signal


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "web",
        help="a read-only live view of one node in the browser",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_node_argument(p)
    add_serving_arguments(p)
    p.set_defaults(run=run)


def add_serving_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host", default=web.DEFAULT_HOST, help="loopback address to listen on (%(default)s)"
    )
    p.add_argument("--port", type=port, default=web.DEFAULT_PORT, help="port (%(default)s; 0: any)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")


def run(args: argparse.Namespace) -> int:
    web.loopback_only(args.host)
    address = node_address(args)
    description = trio.run(describe_one, address)
    view = web.WebView(manifest_of(address, description), "", one_node=address)
    return serve_view(view, args, f"the node at {address}, read-only")


def serve_view(view: web.WebView, args: argparse.Namespace, what: str) -> int:
    """Serve ``view`` on ``args.host``/``args.port`` until Ctrl-C or SIGTERM; the exit
    status."""

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            serving = functools.partial(web.serve, view, args.host, args.port)
            page = await nursery.start(serving)
            if view.one_node is not None:
                page = page.split("#", 1)[0]  # no actions: no token to hand out
            print(f"{what}, live at {page}", flush=True)
            if view.one_node is None:
                print(
                    "(the link carries the token the page's controls need; Ctrl-C stops "
                    "the view, not the testnet)",
                    flush=True,
                )
            else:
                print("(Ctrl-C stops the view, not the node)", flush=True)
            if args.open:
                webbrowser.open(page)

    done = trio.run(until_signal, serve)
    if isinstance(done, Signalled):
        return done.status
    print("the web view stopped", file=sys.stderr)
    return 0
