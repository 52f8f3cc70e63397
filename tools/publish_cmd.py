"""``overlay publish STREAM [DATA ...]``: publish to a stream through a local node.

Each DATA argument is one packet; with none, each line of standard input is one (its line
ending removed), so ``tail -f log | overlay publish logs`` streams a file. Publishes are
pipelined (many in flight, each acknowledged by the stream's root) and the command prints
the packet number the root gave each one, in order, once acknowledged. A signed stream
(``ovl:<public key>/<name>``) needs ``--key`` with the file ``overlay keygen --stream``
wrote; an open stream is named ``ovl:open/<name>`` or just ``<name>``.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from keyspace.stream_key import StreamKey
from overlay.client import Client, SignedStream, StreamLike
from tools.node_targets import add_node_argument, node_address


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "publish",
        help="publish packets to a stream",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("stream", help="stream address (ovl:open/NAME, ovl:KEY/NAME, or NAME)")
    p.add_argument("data", nargs="*", help="packets to publish (default: lines of stdin)")
    add_node_argument(p)
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per line: {"packet": N, "epoch": E or null}; with --epoch, '
        'a last {"epoch": E, "closed_at": N}',
    )
    p.add_argument("--key", type=Path, help="signing key file of a signed stream")
    p.add_argument("--epoch", type=int, help="publish into this epoch, then close it")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for answers")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    stream: StreamLike = args.stream
    if not args.timeout > 0:  # (0 would make the socket non-blocking: no wait at all)
        raise ValueError(f"--timeout must be more than 0 seconds, got {args.timeout}")
    if args.key is not None:
        stream = SignedStream.load(args.key, args.stream)
    elif StreamKey.parse(args.stream).is_signed:
        raise ValueError(
            f"{args.stream} is a signed stream: publishing needs its key file "
            "(--key FILE, as written by `overlay keygen --stream NAME FILE`)"
        )
    if args.epoch is not None and args.epoch < 0:
        raise ValueError(f"--epoch must not be negative, got {args.epoch}")
    payloads = (arg.encode() for arg in args.data) if args.data else _lines(sys.stdin.fileno())
    node = node_address(args)

    def show(numbers: Iterable[int]) -> None:
        for number in numbers:
            print(json.dumps({"packet": number, "epoch": args.epoch}) if args.json else number)

    with Client(node, timeout=args.timeout, name="overlay publish") as client:
        uids: list[int] = []
        for data in payloads:
            if data is not None:
                uids.append(client.publish_nowait(stream, data, epoch=args.epoch))
            # Print as we go: every 256 publishes of a long input, and whenever the input
            # pauses (``tail -f log | overlay publish``), so each line's number shows as
            # soon as it is known rather than at the end of the input.
            if len(uids) >= 256 or (data is None and uids):
                show(client.wait(uid) for uid in uids)
                uids.clear()
        show(client.wait(uid) for uid in uids)
        if args.epoch is not None:
            marker = client.close_epoch(stream, args.epoch)
            if args.json:
                print(json.dumps({"epoch": args.epoch, "closed_at": marker}))
            else:
                print(f"closed epoch {args.epoch} at packet {marker}", file=sys.stderr)
    return 0


def _lines(fd: int) -> Iterator[bytes | None]:
    """Each line read from ``fd`` (its line ending removed), and None each time the input
    has nothing more ready: read from the descriptor, not a buffered file, so that "ready"
    is the kernel's answer and no line waits unseen in a buffer."""
    rest = b""
    while chunk := os.read(fd, 65536):
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r")
        if not select.select([fd], [], [], 0)[0]:
            yield None
    if rest:
        yield rest.rstrip(b"\r")
