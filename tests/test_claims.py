"""``Claims`` (``overlay.core.claims``) built alone, without a Node (``flowkit``): a
publisher's node keeps the number a root gave its publish, confirms it, and pushes it up to
a parent that has not seen that far."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, publish

from overlay.core.claims import Claims
from overlay.core.local_publishes import LocalPublish
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.streams import State
from overlay.core.witnesses import Witnesses
from overlay.messages import PublishConfirmed, PublishData, PublishNumbered


class Setup:
    def __init__(self, kit: Kit) -> None:
        self.local: dict[int, LocalPublish] = {}
        ok = Calls(result=True)
        witnesses = Witnesses(kit.config, kit.stats, self.local, ok)
        peers = PeerWitnesses(
            kit.config, kit.stats, kit.streams, None, kit.out, witnesses, self.local, ok
        )
        witnesses.unhold = peers.unhold
        self.route = Calls()
        self.part = Claims(
            kit.streams, kit.stats, kit.out, self.local, witnesses, peers, self.route
        )


def test_a_publishers_node_keeps_the_number_as_a_claim_and_confirms_it() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    setup.local[7] = LocalPublish(1, publish(7))
    setup.part.on_numbered(b"P", PublishNumbered(7, KEY, 4))
    assert stream.claims == {7: 4}
    assert kit.sent() == [(b"P", PublishConfirmed(7, KEY, 4))]
    setup.part.push_claims(stream, 2)
    [(to, claim)] = kit.sent()
    assert to == b"P" and isinstance(claim, PublishData)
    assert (claim.packet, claim.pushed, claim.claim) == (4, True, True)
    setup.part.push_claims(stream, 4)  # the parent is past it
    assert kit.sent() == []


def test_a_number_from_a_peer_that_is_not_the_parent_is_ignored() -> None:
    """A PublishNumbered for our own publish counts only from the stream's parent, the
    way the publish went up: from anyone else it is no claim and is not confirmed."""
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    setup.local[7] = LocalPublish(1, publish(7))
    setup.part.on_numbered(b"X", PublishNumbered(7, KEY, 4))
    assert stream.claims == {} and kit.sent() == [] and kit.stats.ignored == 1


def test_a_publishers_node_that_became_root_routes_its_claims_to_its_own_numbering() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.ROOT)
    setup.local[7] = LocalPublish(1, publish(7))
    stream.claims[7] = 4
    setup.part.own_claims(0.0, stream)
    [(now, to, source, claim)] = setup.route.calls
    assert (now, to, source) == (0.0, stream, 1)
    assert (claim.uid, claim.packet, claim.pushed, claim.claim) == (7, 4, True, True)
