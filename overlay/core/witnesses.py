"""Witnesses: a relay that passed a publish's confirmation up claims it for its publisher.

A publisher's node keeps a claim on the number a root gave its publish and pushes it to
whichever root takes the tree over (``confirming``). If that node dies just after a cut,
before its claim reaches the new root, nobody on its side of the cut knows the number: the
new root gives it to another publish, or refuses the next claim after it, while the side
cut off holds the old packet under it. The new root may even be the very relay that
carried the dead publisher's confirmations up, if it kept only routing state.

So a relay that passes a ``PublishConfirmed`` up from the child its publish came through
keeps that publish, with its number, as a *witness claim* in its relay entry (``Relay``)
until the answer comes back down (``PacketFlow.on_answer`` forgets the entry) or the entry
expires. Until then it pushes the claim like the publisher's node pushes its own
(``Claims.push_claims``), pointing the entry at the parent it pushed to, so the new
root's answer goes on down the way the publish came; and a relay that becomes root weighs
it as if that child had pushed it (``Claims.own_claims``, ``Takeover.on_claim``).

Invariants. A witness is kept only for a number the root told us along a relay still in
the tree (``on_confirmed``: the confirmation came from the relay entry's source), and for
a publish that named its number (every signed one) only under that number, which its
signature covers. Never for a local publish of ours (that one is a claim of our own),
never while we hold the packet under that number (it goes up as the packet,
``push_up``), and never once we hold its publish under another (the root dropped ours
and numbered a retry that came another way). The root weighs a witness exactly as it
weighs a publisher's claim: taken only as its next new number, so a stale witness is at
worst refused, never taken over a packet the tree holds.

A publisher's node also tells a few direct peers the number it confirms, and each keeps it
in a relay entry of its own (``peer_witnesses``): the machinery here pushes, weighs, ends
and expires those witnesses like a relay's (for a publisher that was the root's own child,
or whose relay died too).

Bounds. An entry keeps its publish for at most ``publish_timeout`` times
``publish_attempts`` (pruned as entries are added and every heartbeat round), and all of
them together at most ``witness_bytes`` of payload; a busy refusal of a pushed witness
keeps it, any other answer ends it.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.local_publishes import LocalPublish
from overlay.core.relays import Relay as Relay
from overlay.core.stats import NodeStats
from overlay.core.streams import Stream
from overlay.messages import (
    MAX_WIRE_HTL,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishRejected,
)


def _unwired(relay: Relay, size: int) -> None:
    raise AssertionError("Witnesses.unhold is wired by its owner after construction")


class Witnesses:
    """The relay table: whom each answer goes back to, and the witness claims it keeps."""

    __slots__ = (
        "config",
        "local",
        "relayed",
        "retained",
        "signature_ok",
        "stats",
        "unhold",
        "witnessed",
    )

    def __init__(
        self,
        config: NodeConfig,
        stats: NodeStats,
        local: dict[int, LocalPublish],
        signature_ok: Callable[[Stream, PublishData], bool],
    ) -> None:
        self.config = config
        self.stats = stats
        self.local = local
        self.signature_ok = signature_ok
        self.relayed: OrderedDict[int, Relay] = OrderedDict()
        self.witnessed: dict[int, Relay] = {}  # relay entries with a number
        self.retained = 0  # payload bytes the relay entries keep
        # A peer witness leaves its peer's share (``PeerWitnesses.unhold``; wired after
        # construction, as that component uses this table).
        self.unhold: Callable[[Relay, int], None] = _unwired

    def retain(self, message: PublishData) -> PublishData | None:
        """The publish a new relay entry keeps, should its confirmation pass through us, or
        None past ``witness_bytes``: a child that floods publishes its root never answers
        must not make us hold ``max_relayed_publishes`` payloads (a GiB at 64 KiB)."""
        size = len(message.data)
        if self.retained + size > self.config.witness_bytes:
            return None
        self.retained += size
        return message

    def drop_kept(self, relay: Relay) -> None:
        """``relay`` leaves the table (answered, expired or replaced): its publish and its
        witness too. Every way out comes here, so no sweep of ``witnessed`` is needed."""
        if relay.message is not None:
            self.retained -= len(relay.message.data)
            if relay.peer:
                self.unhold(relay, len(relay.message.data))  # (``peer_witnesses``)
            relay.message = None
        if self.witnessed.get(relay.uid) is relay:
            del self.witnessed[relay.uid]

    def witness(self, peer: PeerId, message: PublishConfirmed) -> None:
        """We pass ``message`` up from child ``peer``: if its publish came up through us
        from that child (and we kept it), keep its number as a witness claim."""
        relay = self.relayed.get(message.uid)
        if (
            relay is not None
            and relay.message is not None
            and relay.key == message.key
            and relay.source == peer
            and relay.message.packet in (None, message.packet)
        ):
            # (A publish that named its number, as every signed one does, is witnessed only
            # under it: a child could confirm another, and the signature would not cover
            # the claim we push, or the packet we would take as root.)
            relay.number = message.packet
            self.witnessed[message.uid] = relay
            self.stats.witnesses += 1

    def enter(self, relay: Relay) -> None:
        """``relay`` (its ``message`` not yet kept) is the entry of its uid from now on. A
        retry of a publish replaces its entry: through the same child, the number we
        witnessed for it still stands (its publisher's node keeps its claim)."""
        assert relay.message is not None
        uid = relay.uid
        old = self.relayed.pop(uid, None)
        if old is not None:
            self.drop_kept(old)
        relay.message = self.retain(relay.message)
        self.relayed[uid] = relay
        if (
            old is not None
            and old.number is not None
            and relay.message is not None
            and relay.message.packet in (None, old.number)
            and (old.key, old.source) == (relay.key, relay.source)
        ):
            relay.number = old.number
            self.witnessed[uid] = relay

    def expire_relays(self, now: float) -> None:
        """Forget the relay entries whose time is up (the oldest first: each lasts as long),
        their kept publishes and witnesses with them. As a relay adds one, and every
        heartbeat round, so a node that relays no more lets their payloads go too. Only
        the expired front is touched: this runs for every publish relayed."""
        relayed = self.relayed
        while relayed:
            uid, oldest = next(iter(relayed.items()))
            if oldest.expires > now:
                break
            self.drop_kept(relayed.pop(uid))

    def keeps_witness(self, relay: Relay, answer: Any) -> bool:
        """Whether ``relay`` outlives ``answer``, which we pass on down: a witness outlives a
        busy or not-carried refusal of its push (a parent still settling), or nothing would
        claim a dead publisher's number again."""
        return (
            relay.number is not None
            and isinstance(answer, PublishRejected)
            and answer.reason in (PublishError.BUSY, PublishError.NOT_CARRIED)
        )

    def witness_claims(self, stream: Stream) -> list[tuple[Relay, PublishData]]:
        """Our witness claims on ``stream`` as pushed (``PublishData.claim``), in number
        order, each with its relay entry (one that left the table took its witness with it,
        ``drop_kept``): those whose packet we do not hold, and whose publish is not one of
        our own (``Claims.live_claims``)."""
        claims = []
        held: set[int | None] | None = None  # the uids of the packets we hold
        for uid, relay in list(self.witnessed.items()):
            number, message = relay.number, relay.message
            if (
                relay.key != stream.key
                or number is None
                or message is None
                or uid in self.local
                or stream.window.get(number) is not None
            ):
                continue
            if held is None:
                held = {p.uid for p in stream.window.packets.values()}
            claim = dataclasses.replace(
                message, packet=number, htl=MAX_WIRE_HTL, pushed=True, claim=True
            )
            if (
                uid in held
                or (stream.uids is not None and uid in stream.uids)
                or (
                    relay.peer
                    and stream.signer is not None
                    and not self.signature_ok(stream, claim)
                )
            ):
                # Stored under another number: the root dropped ours unsent and numbered a
                # retry that came another way. The witness is stale. (Or a peer witness we
                # could not check on arrival, not carrying the stream: a forgery.)
                del self.witnessed[uid]
                continue
            claims.append((relay, claim))
        claims.sort(key=lambda item: item[1].packet or 0)
        return claims
