"""``overlay keygen``: make a node identity, or the signing key of a signed stream.

A node identity (``overlay keygen node.key``) is the Ed25519 key a node proves itself with
on every link; its public half is the node id that trust lists and ``host:port@id`` peer
entries name. A stream key (``overlay keygen --stream NAME stream.key``) is the same kind of
file, used to sign the packets of the signed stream ``ovl:<public key>/NAME``; whoever holds
it may publish there, and anyone who knows the address may subscribe.

A node id carries work (``--work``, 12 bits by default: about 4,096 tries, under a second):
nodes refuse a peer whose id carries less than their network's ``[peers] identity_work``
unless they vouch for it, which makes placing many ids near one key costly. A stream key
needs none.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from keyspace.id_work import DEFAULT_ID_WORK, MAX_ID_WORK, id_work
from keyspace.stream_key import StreamKey
from overlay.runtime.identity import Identity, IdentityExists, node_id_text


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "keygen",
        help="create a node identity or a signed stream's key",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "path", type=Path, help="file to write (mode 0600; never overwritten without --force)"
    )
    p.add_argument("--stream", metavar="NAME", help="a signed stream's key, for stream NAME")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.add_argument(
        "--work",
        type=int,
        metavar="BITS",
        default=None,
        help=f"bits of work the node id carries (default {DEFAULT_ID_WORK}; 0 to {MAX_ID_WORK})",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.stream is not None and args.work is not None:
        raise ValueError("--work is for node identities; a stream key (--stream) needs none")
    work = DEFAULT_ID_WORK if args.work is None else args.work
    if args.stream is not None:
        work = 0
    if not 0 <= work <= MAX_ID_WORK:
        raise ValueError(f"--work must be in [0, {MAX_ID_WORK}] bits, got {work}")
    identity = Identity.generate(work)
    # The address is computed first: it checks the stream name before anything is written.
    address = None if args.stream is None else StreamKey.signed(identity.public, args.stream)
    try:
        identity.save(args.path, overwrite=args.force)
    except IdentityExists:
        # The library's message names its own parameter; a command-line user needs the flag.
        raise ValueError(
            f"{args.path} already exists; refusing to overwrite it (the key in it would be "
            "lost): pass --force to replace it"
        ) from None
    if address is not None:
        print(f"wrote {args.path}: the signing key of stream {address.address}")
    else:
        work = id_work(identity.public)
        print(f"wrote {args.path}: node id {node_id_text(identity.public)} ({work} bits of work)")
    return 0
