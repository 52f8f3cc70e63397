"""Work carried by a node id: what makes landing a node near a chosen key cost something.

A node's location follows from its id (``location.location_from_id``), and the node closest
to a stream key's location becomes that stream's root. Ids are Ed25519 public keys, which
anyone can make by the thousand a second, so without a cost an attacker generates ids until
one lands next to the key it wants (identity grinding), and takes the stream's tree.

An id carries ``id_work`` bits of work: the number of leading zero bits of
``SHA-256(DOMAIN + id)``. That hash is independent of the id's location, so each id that
carries ``k`` bits costs about ``2**k`` key generations whoever makes it, and an attacker who
needs a given location pays that for every candidate: grinding costs ``2**k`` times as much.
An honest node pays it once, when its identity is made. A node refuses an unvouched peer
whose id carries less work than its network asks for (``overlay.runtime.vouching``).

Checking costs one SHA-256 of 32 bytes: nothing, unlike the work.
"""

from __future__ import annotations

import hashlib

DOMAIN = b"overlay/node-id-work/v1\x00"
# The default a network asks of each node id: about 4,096 key generations, well under a
# second here, once per identity; it multiplies the cost of grinding a location by the same.
DEFAULT_ID_WORK = 12
# More than this would take an honest node days to make; a config asking more is a mistake.
MAX_ID_WORK = 32


def id_work(node_id: bytes) -> int:
    """The bits of work ``node_id`` carries: leading zero bits of SHA-256(DOMAIN + id)."""
    digest = int.from_bytes(hashlib.sha256(DOMAIN + node_id).digest(), "big")
    return 256 - digest.bit_length()
