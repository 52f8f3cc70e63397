"""The connected peers of one node, and the greedy choice among them.

A peer is known once its ``Hello`` arrived: from then on we know its location, which routing
needs, and its boot id, which tells a restart from a reconnect.
"""

from __future__ import annotations

from collections.abc import Container, Iterator
from dataclasses import dataclass

from keyspace.location import distance
from overlay.core.effects import PeerId


@dataclass(slots=True)
class Peer:
    id: PeerId
    location: float
    boot_id: int


class PeerTable:
    """Connected peers by id, in the order they connected (iteration is deterministic)."""

    def __init__(self) -> None:
        self._peers: dict[PeerId, Peer] = {}

    def add(self, peer_id: PeerId, location: float, boot_id: int) -> Peer | None:
        """Record a peer's Hello; returns the previous record if the peer was known."""
        previous = self._peers.get(peer_id)
        self._peers[peer_id] = Peer(peer_id, location, boot_id)
        return previous

    def remove(self, peer_id: PeerId) -> Peer | None:
        return self._peers.pop(peer_id, None)

    def get(self, peer_id: PeerId) -> Peer | None:
        return self._peers.get(peer_id)

    def __contains__(self, peer_id: object) -> bool:
        return peer_id in self._peers

    def __len__(self) -> int:
        return len(self._peers)

    def __iter__(self) -> Iterator[Peer]:
        return iter(self._peers.values())

    def closest(self, target: float, exclude: Container[PeerId]) -> Peer | None:
        """The peer closest to ``target`` that is not in ``exclude``; ties go to the lower id.

        A linear scan: a node has tens of peers, and a scan beats keeping one sorted order
        per key being routed.
        """
        best: Peer | None = None
        best_rank: tuple[float, bytes] = (2.0, b"")
        for peer in self._peers.values():
            if peer.id in exclude:
                continue
            rank = (distance(target, peer.location), peer.id)
            if rank < best_rank:
                best, best_rank = peer, rank
        return best
