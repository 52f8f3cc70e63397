"""Claims: the number a root gave a publish, kept on the publisher's side of any cut.

A confirming root (``overlay.core.confirming``) tells a publisher's node the number it gave
its publish (``PublishNumbered``, back the way the publish came) before it sends the packet
down. That node keeps it as a *claim* (``Stream.claims``), answers ``PublishConfirmed``,
and tells a few direct peers (``peer_witnesses``); relays that carried the confirmation up
keep it too (``witnesses``). From then on, were the root lost, the claim goes up to
whichever root takes the tree over: on attaching under a new parent (``Joining``), and
when a root asks beyond its head (``Gathering``). A publisher's node that becomes root
itself weighs its claims as a child's pushed claims (``own_claims``, ``Takeover.on_claim``).
So both sides of a cut agree on every number a root may have sent down.

``Claims`` is a component of ``PacketFlow`` (``overlay.core.publishing``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from overlay.core.effects import PeerId
from overlay.core.local_publishes import LocalPublish
from overlay.core.outbox import Outbox
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, State, Stream
from overlay.core.witnesses import Relay, Witnesses
from overlay.messages import MAX_WIRE_HTL, PublishConfirmed, PublishData, PublishNumbered


class Claims:
    """A publisher's node's claims on the numbers its publishes got, and the numbers on
    their way down to it (see the notes)."""

    __slots__ = ("local", "peer_witnesses", "route", "send", "stats", "streams", "witnesses")

    def __init__(
        self,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        out: Outbox,
        local: dict[int, LocalPublish],
        witnesses: Witnesses,
        peer_witnesses: PeerWitnesses,
        route: Callable[[float, Stream, Source, PublishData], None],
    ) -> None:
        self.streams = streams
        self.stats = stats
        self.send = out.send
        self.local = local
        self.witnesses = witnesses
        self.peer_witnesses = peer_witnesses
        self.route = route

    def on_numbered(self, peer: PeerId, message: PublishNumbered) -> None:
        """The root numbered a publish: pass that on toward its publisher, or, at the
        publisher's node, keep the claim and confirm it."""
        entry = self.local.get(message.uid)
        stream = self.streams.get(message.key)
        if entry is not None and stream is not None and stream.parent == peer:
            # Ours (checked first: our own publish may also have come back to us through a
            # detached ancestor's queue, and been relayed up again).
            stream.claims[message.uid] = message.packet
            self.send(peer, PublishConfirmed(message.uid, message.key, message.packet))
            self.peer_witnesses.tell_peers(
                stream, entry.message, message.packet
            )  # (``peer_witnesses``)
            return
        relay = self.witnesses.relayed.get(message.uid)
        if (
            relay is not None
            and relay.upstream == peer
            and relay.key == message.key
            and stream is not None
            and stream.state is State.JOINED
            and stream.parent == peer
            and relay.source in stream.children
        ):
            # Only along a relay still in the tree, the way ``on_confirmed`` comes back up.
            # A relay entry outlives the tree it was made in (a node that left the stream or
            # became root keeps it until its next relay prunes it), and stale entries can
            # close a cycle that the number would go round for ever, each node forwarding it
            # by its own entry.
            self.send(relay.source, message)  # the entry stays for the answer to follow
            return
        self.stats.ignored += 1

    def push_claims(self, stream: Stream, after: int | None, last: int | None = None) -> None:
        """Push up, to our parent, the claims of our publishes numbered beyond ``after`` (up
        to ``last``): an earlier root numbered them and may have sent them down. We push
        on attaching under a new parent (beyond its head), and when a root that took our
        tree over asks for what lies beyond its head (``Gathering.on_past_query``): our
        parent may never change while a root above us does, and a claim that never
        reached the new root lets it give the number to another publish (a partition cuts
        the root off just after it sent packets down; the ancestor that takes the tree
        over knows only the numbers before them, and would number the retries in another
        order). A claim on a packet we hold goes up as that packet (``push_up``). Our
        witness claims go with ours, in number order (``witnesses``)."""
        parent = stream.parent
        if parent is None:
            return
        for relay, claim in self.all_claims(stream):
            number = claim.packet
            assert number is not None
            if (after is not None and number <= after) or (last is not None and number > last):
                continue
            if relay is not None:
                # A witness claim (``witnesses``): the root's answer comes back from this
                # parent, and goes on down to the child the publish came from.
                relay.upstream = parent
                self.stats.witness_claims += 1
            self.stats.pushed_up += 1
            self.send(parent, claim)

    def own_claims(self, now: float, stream: Stream) -> None:
        """We became root holding claims of our own publishes: an earlier root numbered
        them, we confirmed, and it may have sent them down. They go to our own numbering as
        a child's pushed claims would (``Takeover.on_claim``: in a grace they wait for its
        end, then are taken in number order as the next new numbers, or refused), never
        numbered afresh as plain retries: the earlier root may have sent the number down
        on the far side of a cut, and we must not give it to another publish.
        Our witness claims with them, in number order (``witnesses``): a new root that had
        carried a dead publisher's confirmations up would otherwise refuse the claims after
        its numbers."""
        for relay, claim in self.all_claims(stream):
            if relay is not None:
                # A witness claim (``witnesses``): weighed as if the child it came through
                # had pushed it, so the answer goes down to that child; it is ours no more.
                relay.number = None
                self.witnesses.drop_kept(relay)  # (its entry stays, for answers on their way)
                if relay.peer and self.witnesses.relayed.get(relay.uid) is relay:
                    # (Not a peer's: its answers go to the peer from us now, and kept it
                    # would take a relayed publish's room, ``_relay``, uncounted.)
                    del self.witnesses.relayed[relay.uid]
                self.stats.witness_claims += 1
                self.route(now, stream, relay.source, claim)
                continue
            entry = self.local.get(claim.uid)  # (an earlier one's answer may settle others)
            if entry is not None:
                self.route(now, stream, entry.client, claim)

    def live_claims(self, stream: Stream) -> list[PublishData]:
        """Our claims as pushed (``PublishData.claim``), in number order: those whose
        publish is still ours to answer and whose packet we do not hold (that one goes up
        as the packet, ``push_up``)."""
        claims = []
        for uid, number in sorted(stream.claims.items(), key=lambda item: item[1]):
            entry = self.local.get(uid)
            if entry is None or stream.window.get(number) is not None:
                continue  # (a claim leaves with its publish: ``PacketFlow``)
            claims.append(
                dataclasses.replace(
                    entry.message, packet=number, htl=MAX_WIRE_HTL, pushed=True, claim=True
                )
            )
        return claims

    def renew_claim(self, now: float, stream: Stream, message: PublishData) -> None:
        """Our own root refused our claim (``own_claims``): as at a publisher's node whose
        claim a root refused (``PacketFlow.on_answer``), the number is not ours, and the
        publish is numbered afresh; its client sees only the final acknowledgement."""
        entry = self.local.get(message.uid)
        if entry is None:
            return
        if stream.claims.get(message.uid) == message.packet:
            del stream.claims[message.uid]
            self.stats.claims_renewed += 1
        self.route(now, stream, entry.client, entry.message)

    def all_claims(self, stream: Stream) -> list[tuple[Relay | None, PublishData]]:
        """Our own claims (with None) and our witness claims, in number order; a witness on
        a number or uid one of our own claims has is left out (ours says it already)."""
        own = self.live_claims(stream)
        numbers = {claim.packet for claim in own}
        uids = {claim.uid for claim in own}
        claims: list[tuple[Relay | None, PublishData]] = [(None, claim) for claim in own]
        for relay, claim in self.witnesses.witness_claims(stream):
            if claim.packet not in numbers and claim.uid not in uids:
                numbers.add(claim.packet)
                claims.append((relay, claim))
        claims.sort(key=lambda item: item[1].packet or 0)
        return claims
