"""Peer witnesses: a publisher's node tells a few direct peers the number it confirms.

Relay witnesses (``witnesses``) close the double fault only where a relay between the
publisher and the root survives the cut. A publisher that is the root's own child has none,
and a relay may die with the island that holds the packet, or be the only one cut off with
it. In both cases the publisher may still have live direct peers that are not its tree
parent, on the new root's side and in its tree when it asks for claims.

So as a publisher's node confirms the number a root gave its own publish (``on_numbered``)
it also sends the publish under that number (``PublishWitness``) to up to
``witness_peers`` live peers other than the stream's parent, the closest to the stream's
location first: they are the likeliest to be, or be near, the next root. Each keeps it as a
*peer witness*: a relay entry (``Relay``, ``peer`` set) from that peer with the number,
which the relay-witness machinery then treats like any other witness: pushed with our
claims on attaching and when a new root asks beyond its head (``Claims.push_claims``),
weighed as that peer's claim if we become root (``Claims.own_claims``; the answer goes
to the peer, which may be dead), ended by the answer that comes back down, expired after
``publish_timeout`` times ``publish_attempts``. A holder that does not carry the stream
only keeps it: no routed claims, so a publisher's death costs no burst of searches.

Invariants. A peer witness never replaces a relay entry of its uid (routing state, or a
witness already) but its own peer's for that publish, renumbered; and a relay entry made
later for its uid replaces it (``enter``: its
number carries over only through the same peer). Never for a publish of our own. On a
signed stream only with a signature over its number: checked on arrival if we know the
stream's signer, and again before it is pushed or weighed (``witness_claims``), so a
forgery never reaches a parent, which would drop us for it.

Bounds. Each peer's witnesses take at most ``max_queued_publishes`` entries and an eighth
of ``witness_bytes`` (its oldest go first), and all peers' together at most half of it
(past that a new one is not kept), within the shared ``witness_bytes``: busy or hostile
peers leave relays the other half for their own witnesses. They do not count against
``max_relayed_publishes``, so a hostile peer cannot make relayed publishes BUSY.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable

from keyspace.location import distance
from keyspace.stream_key import key_is_signed
from overlay.compiled_checks import compile_maker
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.local_publishes import LocalPublish
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.relays import Relay
from overlay.core.stats import NodeStats
from overlay.core.streams import Stream
from overlay.core.witnesses import Witnesses
from overlay.messages import (
    MAX_WIRE_HTL,
    PacketKind,
    PublishData,
    PublishWitness,
)

_publish = compile_maker(PublishData)  # (a witness's claim: one per witness kept)


class PeerWitnesses:
    """The peer witnesses we keep, by peer, in the relay table (``witnesses``), and the
    numbers of our own publishes we tell peers."""

    __slots__ = (
        "by_peer",
        "config",
        "local",
        "peer_bytes",
        "peer_count",
        "peer_retained",
        "peers",
        "send",
        "signature_ok",
        "stats",
        "streams",
        "witnesses",
    )

    def __init__(
        self,
        config: NodeConfig,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        peers: PeerTable | None,
        out: Outbox,
        witnesses: Witnesses,
        local: dict[int, LocalPublish],
        signature_ok: Callable[[Stream, PublishData], bool],
    ) -> None:
        self.config = config
        self.stats = stats
        self.streams = streams
        self.peers = peers  # the node's: whom to tell
        self.send = out.send
        self.witnesses = witnesses
        self.local = local
        self.signature_ok = signature_ok
        self.peer_count = 0  # relay entries that are peer witnesses, all peers together
        self.peer_retained = 0  # their payload bytes, all peers together (half ``witness_bytes``)
        self.by_peer: dict[PeerId, OrderedDict[int, Relay]] = {}  # each peer's, oldest first
        self.peer_bytes: dict[PeerId, int] = {}  # the payload bytes of each peer's

    def tell_peers(self, stream: Stream, message: PublishData, number: int) -> None:
        """We confirm ``number`` for our own publish ``message``: tell up to
        ``witness_peers`` live peers other than our parent, the closest to the stream's
        location first (the likeliest next root or its neighbours)."""
        count, peers = self.config.witness_peers, self.peers
        if count == 0 or peers is None or message.packet not in (None, number):
            return  # (a signed publish's signature covers only the number it names)
        target, parent = stream.target, stream.parent
        chosen = heapq.nsmallest(
            count,
            (p for p in peers if p.id != parent),
            key=lambda p: (distance(target, p.location), p.id),
        )
        witness = PublishWitness(
            message.uid, message.key, number, message.data, message.epoch, message.kind, message.sig
        )
        for peer in chosen:
            self.stats.peer_witnesses_sent += 1
            self.send(peer.id, witness)

    def on_peer_witness(self, now: float, peer: PeerId, message: PublishWitness) -> None:
        """Peer ``peer`` confirmed ``message.packet`` for its publish: keep it as a witness
        claim (see the module docstring for what is refused, and the bounds)."""
        uid, key, size = message.uid, message.key, len(message.data)
        stream = self.streams.get(key)
        claim: PublishData = _publish(
            uid,
            key,
            message.packet,
            stream.target if stream is not None else 0.0,
            MAX_WIRE_HTL,
            message.data,
            message.epoch,
            message.kind,
            message.sig,
            False,
            False,
        )
        budget = self.config.witness_bytes // 8
        self.witnesses.expire_relays(
            now
        )  # (first: an expired entry of that uid must not refuse it)
        old = self.witnesses.relayed.get(uid)
        if old is not None and old.peer and (old.source, old.key) == (peer, key):
            # The root dropped the number it gave before, unsent, and numbered a retry: the
            # newer number stands (as a relay's witness takes the newer confirmation).
            self.witnesses.drop_kept(self.witnesses.relayed.pop(uid))
        if (
            uid in self.witnesses.relayed  # routing state (or a witness already): never replaced
            or uid in self.local  # our own: ours is a claim already
            or (stream is not None and _holds(stream, uid, message.packet))
            or (key_is_signed(key) and message.sig is None)
            or (message.kind is not PacketKind.DATA and message.epoch is None)
            or size > budget
            or (
                stream is not None
                and stream.signer is not None
                and not self.signature_ok(stream, claim)
            )
        ):
            self.stats.ignored += 1
            return
        held = self.by_peer.get(peer)
        while held and (
            len(held) >= self.config.max_queued_publishes
            or self.peer_bytes.get(peer, 0) + size > budget
        ):
            oldest = next(iter(held.values()))  # (its oldest go first: the newest matter)
            self.witnesses.drop_kept(
                self.witnesses.relayed.pop(oldest.uid, oldest)
            )  # (``unhold``: out of held)
        if self.peer_retained + size > self.config.witness_bytes // 2:
            self.stats.ignored += 1  # (the other half is the relays')
            return
        expires = now + self.config.publish_timeout * self.config.publish_attempts
        relay = Relay(
            uid, key, peer, peer, expires, self.witnesses.retain(claim), message.packet, True
        )
        if relay.message is None:
            self.stats.ignored += 1  # (past ``witness_bytes``: keeping it would take a relay's)
            return
        # (Fetched again: ``unhold`` drops a peer's table as it empties it.)
        self.by_peer.setdefault(peer, OrderedDict())[uid] = relay
        self.peer_bytes[peer] = self.peer_bytes.get(peer, 0) + size
        self.peer_count += 1
        self.peer_retained += size
        self.witnesses.relayed[uid] = relay
        self.witnesses.witnessed[uid] = relay
        self.stats.peer_witnesses += 1

    def unhold(self, relay: Relay, size: int) -> None:
        """Peer witness ``relay``, of ``size`` payload bytes, leaves the table (or has been
        weighed): its peer's share is freed. Harmless twice."""
        held = self.by_peer.get(relay.source)
        if held is None or held.get(relay.uid) is not relay:
            return
        del held[relay.uid]
        self.peer_count -= 1
        self.peer_retained -= size
        left = self.peer_bytes.pop(relay.source, 0) - size
        if held:
            self.peer_bytes[relay.source] = left
        else:
            del self.by_peer[relay.source]


def _holds(stream: Stream, uid: int, number: int) -> bool:
    """Whether we hold that publish already (as its root, or a member it reached first): a
    witness of it would only sit on its payload until it expired. (A publisher's closest
    peers include its root, whenever the root is not its parent.)"""
    packet = stream.window.get(number)
    return (packet is not None and packet.uid == uid) or (
        stream.uids is not None and uid in stream.uids
    )
