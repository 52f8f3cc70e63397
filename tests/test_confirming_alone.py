"""``Confirming`` built alone: numbers a root holds for its publisher's node, and claims."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, publish

from overlay.core.config import NodeConfig
from overlay.core.confirming import Confirming
from overlay.core.local_publishes import LocalPublish
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.streams import State
from overlay.core.witnesses import Witnesses
from overlay.messages import PublishConfirmed, PublishData, PublishNumbered, PublishSucceeded


class Setup:
    def __init__(self, kit: Kit) -> None:
        self.local: dict[int, LocalPublish] = {}
        ok = Calls(result=True)
        self.witnesses = Witnesses(kit.config, kit.stats, self.local, ok)
        peers = PeerWitnesses(
            kit.config, kit.stats, kit.streams, None, kit.out, self.witnesses, self.local, ok
        )
        self.witnesses.unhold = peers.unhold
        self.requeue, self.store_new, self.reply_root, self.route = (
            Calls(),
            Calls(),
            Calls(),
            Calls(),
        )
        self.part = Confirming(
            kit.config,
            kit.streams,
            kit.stats,
            kit.out,
            self.local,
            self.witnesses,
            peers,
            self.requeue,
            self.store_new,
            self.reply_root,
            self.route,
        )


def test_a_peers_publish_is_held_pending_until_its_node_confirms() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    message = publish(7)
    assert setup.part.number_new(stream, b"C", message, 0) == PublishNumbered(7, KEY, 0)
    assert list(stream.pending) == [0] and setup.store_new.calls == []
    setup.part.on_confirmed(b"C", PublishConfirmed(7, KEY, 0))
    assert setup.store_new.calls == [(stream, message, 0)]
    assert setup.reply_root.calls == [(stream, b"C", message, PublishSucceeded(7, KEY, 0))]
    assert not stream.pending and kit.stats.confirmed == 1


def test_a_local_publish_with_nothing_pending_goes_down_at_once() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    answer = setup.part.number_new(stream, 1, publish(7), 0)
    assert answer == PublishSucceeded(7, KEY, 0) and len(setup.store_new.calls) == 1


def test_an_unconfirmed_number_is_dropped_after_confirm_timeout_and_local_ones_requeued() -> None:
    kit = Kit(config=NodeConfig(confirm_timeout=1.0, heartbeat_interval=1.0))
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    setup.part.number_new(stream, b"C", publish(7), 0)
    setup.part.number_new(stream, 1, publish(8), 1)
    setup.part.confirm_overdue()
    assert stream.pending
    setup.part.confirm_overdue()
    assert not stream.pending and kit.stats.unconfirmed == 2
    [(_, dropped)] = setup.requeue.calls
    assert [(source, m.uid) for source, m in dropped] == [(b"C", 7), (1, 8)]


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
