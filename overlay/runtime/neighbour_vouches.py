"""Which neighbours a peer may announce: those that signed their word for it.

Theory of operation. Friend-of-a-friend routing (``overlay.core.peers``) ranks a peer by
the closest location it reaches, its own or one of its neighbours', as its ``Neighbours``
announcement lists them. Taken as said, that list would let any peer claim a neighbour on
any key and draw every search for it, though its own location is bound to its id
(``overlay.runtime.vouching``). So each announced neighbour is bound the same way:

* Each side's ``Hello`` carries a *vouch*: its identity's signature over ``LABEL``, the
  network tag, its own id and the id of the peer it says it to. The receiver checks it (one
  Ed25519 verify a link) and keeps it for as long as the link lasts.
* An announcement lists, beside each neighbour's location, that neighbour's id and its vouch
  for the announcer. A receiver takes a location only if its id gives that location, the id
  carries the network's identity work, and the vouch verifies for the pair (neighbour,
  sender). So a neighbour the sender cannot show costs it what grinding an identity there,
  and linking it itself, would cost.
* A vouch that does not verify is a lie, since an honest node checked every vouch it
  forwards: the link closes as a fault. An entry without a vouch, at a location its id
  does not give (a neighbour the sender's operator placed by hand) or with too little work
  is dropped without fault: an honest node of another trust domain sends such entries.
* A peer the operator vouches for (``[peers] trusted``) is taken at its word, as for its
  own Hello.

Cost, bounded per link whatever the peer sends:

* an entry that fails the cheap checks (location, work) costs no verify;
* a receiver remembers up to ``REMEMBERED`` entries it verified from each sender, so an
  announcement repeated, or alternated with another, costs lookups;
* beyond that, a sender gets ``VERIFY_BUDGET`` verifies a minute (refilled continuously):
  entries past it are dropped without fault, to be taken from a later announcement;
* a Hello repeating the vouch already checked costs a comparison (a signature is
  deterministic), and an announcement from a peer that has not said Hello is not judged:
  the core cuts such a peer off.

What a vouch does not bind is time: it stays valid after its link closes, so a peer that
was once linked to a node may go on announcing it. That node is real and sits where its id
says, but the announcer draws searches meant for it as its honest neighbours do, and may
drop them (the search then backtracks). Binding a vouch to a period would end that, at the
cost of re-vouching every link each period.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field

from keyspace.ed25519 import verify
from keyspace.id_work import id_work
from keyspace.location import location_from_id
from overlay.core.peers import Peer
from overlay.messages import MAX_NEIGHBOURS, NODE_ID_SIZE, Hello, Neighbours
from overlay.runtime.identity import Identity, node_id_text

# Starts every signed statement, so that a vouch means nothing in any other protocol.
LABEL = b"overlay neighbour vouch v1\x00"
# Verified entries remembered per sender: two full announcements.
REMEMBERED = 2 * MAX_NEIGHBOURS
# Verifies a sender may cost us a minute, beyond what we remember: an honest peer's
# neighbours change a few at a time, and a full new announcement takes one minute's budget.
VERIFY_BUDGET = 2 * MAX_NEIGHBOURS
BUDGET_PERIOD = 60.0


def statement(network: bytes, signer: bytes, peer: bytes) -> bytes:
    """What ``signer`` signs to vouch that it is linked to ``peer``."""
    return LABEL + bytes([len(network)]) + network + signer + peer


def vouch(identity: Identity, network: bytes, peer: bytes) -> bytes:
    """``identity``'s vouch that it is linked to ``peer``."""
    return identity.sign(statement(network, identity.public, peer))


@dataclass(slots=True)
class _Sender:
    """What one linked peer's announcements cost us so far."""

    budget: float  # verifies it may still cost
    at: float  # when ``budget`` was last refilled
    verified: dict[bytes, None] = field(default_factory=dict)  # oldest first


class NeighbourVouches:
    """One node's vouches: the ones it signs, the ones its peers gave it, and the check of
    the ones its peers show (module notes). ``trusted``: the peers taken at their word;
    ``work``: the identity work an unvouched neighbour's id must carry; ``clock``: seconds,
    monotonic (the verify budget's)."""

    def __init__(
        self,
        identity: Identity,
        network: bytes,
        work: int,
        trusted: Container[bytes],
        clock: Callable[[], float],
    ) -> None:
        self._identity = identity
        self._network = network
        self._work = work
        self._trusted = trusted
        self._clock = clock
        self._given: dict[bytes, bytes] = {}  # linked peer -> its vouch for us
        self._senders: dict[bytes, _Sender] = {}

    def hello(self, peer: bytes, message: Hello) -> Hello:
        """``message`` to ``peer``, with our vouch for it."""
        return dataclasses.replace(message, vouch=vouch(self._identity, self._network, peer))

    def announcement(self, message: Neighbours, peers: Iterable[Peer]) -> Neighbours:
        """``message`` with each listed neighbour's vouch for us, where we hold one."""
        given = self._given
        # One id per location: one that vouched for us, if two peers share the location.
        by_location: dict[float, bytes] = {}
        for peer in peers:
            if peer.id in given or peer.location not in by_location:
                by_location[peer.location] = peer.id
        vouches = []
        for location in message.locations:
            neighbour = by_location.get(location, b"")
            signature = given.get(neighbour)
            vouches.append(b"" if signature is None else neighbour + signature)
        if not any(vouches):
            return message
        return dataclasses.replace(message, vouches=tuple(vouches))

    def heard_hello(self, peer: bytes, message: Hello) -> str | None:
        """Keep ``peer``'s vouch for us; why its Hello is refused, for the log, if the
        vouch does not verify. A Hello without one is taken: we cannot show the peer."""
        signature = message.vouch
        if signature is not None and signature == self._given.get(peer):
            return None  # checked already (a signature is deterministic)
        self._given.pop(peer, None)
        if signature is None:
            return None
        own = self._identity.public
        if not verify(peer, signature, statement(self._network, peer, own)):
            return "its Hello carries a vouch for this link that does not verify"
        self._given[peer] = signature
        return None

    def heard_neighbours(self, sender: bytes, message: Neighbours) -> Neighbours | str:
        """The part of ``sender``'s announcement we take (module notes), or why the link is
        cut off, for the log."""
        if sender in self._trusted:
            return message
        locations, vouches = message.locations, message.vouches
        if vouches and len(vouches) != len(locations):
            return f"its Neighbours lists {len(locations)} locations and {len(vouches)} vouches"
        now = self._clock()
        state = self._senders.get(sender)
        if state is None:
            state = self._senders[sender] = _Sender(VERIFY_BUDGET, now)
        else:
            refill = (now - state.at) * VERIFY_BUDGET / BUDGET_PERIOD
            state.budget = min(VERIFY_BUDGET, state.budget + refill)
            state.at = now
        verified = state.verified
        taken = []
        own = self._identity.public
        for location, entry in zip(locations, vouches, strict=False):
            if not entry:
                continue
            neighbour, signature = entry[:NODE_ID_SIZE], entry[NODE_ID_SIZE:]
            # The cheap checks every time: a verified entry proves the link, not the
            # location it is listed at.
            if neighbour == own or location_from_id(neighbour) != location:
                continue
            if entry in verified:
                taken.append(location)
                continue
            if neighbour not in self._trusted and id_work(neighbour) < self._work:
                continue
            if state.budget < 1:
                continue
            state.budget -= 1
            if not verify(neighbour, signature, statement(self._network, neighbour, sender)):
                return (
                    f"its Neighbours shows a vouch of {node_id_text(neighbour)} that does not "
                    f"verify"
                )
            verified[entry] = None
            if len(verified) > REMEMBERED:
                del verified[next(iter(verified))]
            taken.append(location)
        return Neighbours(tuple(taken))

    def forget(self, peer: bytes) -> None:
        """``peer``'s link is gone: its vouch and what it showed us go with it."""
        self._given.pop(peer, None)
        self._senders.pop(peer, None)
