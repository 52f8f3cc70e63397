"""Which location a node takes from a peer's Hello: the one the peer's id gives, unless the
operator vouches for the peer.

Theory of operation. Routing believes locations: searches go to the peer closest to a key,
and the node closest to a key's location becomes its stream's root, which numbers and
broadcasts every packet. A peer free to claim any location could sit on any key it chose
and take over that stream's tree. So a node's location follows from its identity
(``keyspace.location.location_from_id`` of the node id, which the link handshake
authenticated), and a Hello that claims any other location is refused: the link closes with
a warning naming the peer and both locations.

The exception is a peer the operator vouches for by listing its id in ``[peers] trusted``:
an operator's own nodes (a testnet, a trust graph whose locations were chosen by hand or by
location swapping) may sit where their operator put them. In ``trust = "listed"`` mode every
linked peer is listed, so every claim is taken; in open mode, only the listed peers' are.

The comparison is exact, and that is sound: ``location_from_id`` is deterministic, and a
Hello carries its location as a CBOR float64, which carries a Python float bit for bit, so
an honest peer's claim equals the receiver's own derivation exactly.

Ids cost work. An attacker may generate identities until one derives a location near the
key it wants (identity grinding). So an unvouched peer's id must also carry the network's
``identity_work`` bits (``keyspace.id_work``), or its Hello is refused: each bit doubles
the cost of every candidate. It raises the cost of grinding, it does not rule it out
(README, "Known limits").
"""

from __future__ import annotations

from collections.abc import Container

from keyspace.id_work import id_work
from keyspace.location import location_from_id


def location_refusal(peer: bytes, claimed: float, vouched: Container[bytes]) -> str | None:
    """Why ``peer``'s Hello claiming ``claimed`` is refused, for the log; None if the claim
    is taken (it is the location ``peer``'s id gives, or ``peer`` is in ``vouched``)."""
    if peer in vouched:
        return None
    derived = location_from_id(peer)
    if claimed == derived:
        return None
    return (
        f"its Hello claims location {claimed!r}, but its node id gives {derived!r}, and its id "
        f"is not in [peers] trusted (only a peer the operator vouches for may sit elsewhere)"
    )


def work_refusal(peer: bytes, required: int, vouched: Container[bytes]) -> str | None:
    """Why ``peer``'s Hello is refused for an id that carries too little work, for the log;
    None if it carries ``required`` bits or ``peer`` is in ``vouched``."""
    if peer in vouched:
        return None
    carried = id_work(peer)
    if carried >= required:
        return None
    return (
        f"its node id carries {carried} bits of work and this node asks {required}"
        " ([peers] identity_work; overlay keygen --work makes such an id)"
    )
