"""Confirming (``overlay.core.confirming``): a root with ``confirm_publishes`` (the default)
sends a packet down only once the node of its publisher has confirmed the number it was
given.

The scene is ``test_publishing``'s tree: root R with children B and E; B with children A
and D; client 1 subscribed at A, D and E. A publishes; ``net.hold`` parks what is sent to a
node, as a slow or cut-off link would.

The tests at the end build ``Confirming`` alone, without a Node (``flowkit``): numbers a root holds
for its publisher's node (its claims: ``test_claims``).
"""

from __future__ import annotations

from corenet import CoreNet
from flowkit import Calls, Kit, publish
from publish_tree import KEY, packets, tree

from overlay.core.config import NodeConfig
from overlay.core.confirming import Confirming
from overlay.core.events import PublishAcked, PublishFailed
from overlay.core.local_publishes import LocalPublish
from overlay.core.streams import State, Stream, next_number
from overlay.core.tokens import Tokens
from overlay.core.witnesses import Witnesses
from overlay.messages import (
    PacketKind,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    SubscribeData,
    SubscribeRequest,
    Unsubscribe,
)

BEAT = NodeConfig().heartbeat_interval
CONFIRMING = NodeConfig(confirm_publishes=True)


def numbered(net: CoreNet) -> list[int]:
    """The numbers the root R gave in PublishNumbered, in order."""
    return [m.packet for s, _, m in net.sent(PublishNumbered) if s == b"R"]  # type: ignore[attr-defined]


def data(net: CoreNet, name: bytes) -> list[bytes]:
    return [payload for _, payload in packets(net, name)]


def test_a_packet_goes_down_only_after_its_publishers_node_confirms_its_number() -> None:
    net = tree()  # confirmation is on by default
    net.hold(b"A")  # what the root says back does not reach A yet
    net.publish(b"A", KEY, b"p0")
    assert numbered(net) == [0]
    assert net.stream(b"R", KEY).root.pending  # type: ignore[union-attr]
    # Nobody has packet 0: were R cut off from A now, A's side could give 0 to another
    # publish, and nobody would have been shown this one under it.
    assert net.sent(SubscribeData) == []
    assert data(net, b"D") == [] and data(net, b"E") == []
    net.release(b"A")
    assert [(s, d) for s, d, _ in net.sent(PublishConfirmed)] == [(b"A", b"B"), (b"B", b"R")]
    assert data(net, b"D") == [b"p0"] and data(net, b"E") == [b"p0"]
    assert net.answers(b"A") == [PublishAcked(KEY, 1, 0)]
    assert net.stream(b"A", KEY).claims == {}  # type: ignore[union-attr]


def test_with_confirmation_off_a_packet_goes_down_as_soon_as_it_is_numbered() -> None:
    net = tree(config=NodeConfig(confirm_publishes=False))
    net.hold(b"A")
    net.publish(b"A", KEY, b"p0")
    assert numbered(net) == []
    assert data(net, b"D") == [b"p0"] and data(net, b"E") == [b"p0"]


def test_a_pending_packet_is_given_up_at_once_when_the_child_it_came_through_goes() -> None:
    # The confirmation could only come back through B: waiting ``confirm_timeout`` for it
    # would only stall what is numbered after it. R gives 0 up with E's 1 behind it; A's
    # node may hold 0 as a claim, which a new root on its side would take as 0, so R shows
    # nothing under either while no publisher shows up. E's retry reaching R shows one: both
    # go down under the numbers their nodes were told.
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"via B")
    net.publish(b"E", KEY, b"via E")
    assert numbered(net) == [0, 1]
    net.disconnect(b"R", b"B")
    root = net.nodes[b"R"]
    stream = root.streams[KEY]
    assert root.stats.set_aside == 2 and list(stream.root.set_aside) == [0, 1]
    assert not stream.root.pending and data(net, b"E") == []
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)
    assert data(net, b"E") == [b"via B", b"via E"]
    assert numbered(net) == [0, 1] and root.stats.resolved == 2  # (no number given twice)


def test_an_unconfirmed_packet_given_up_keeps_its_number_and_goes_down_before_the_next() -> None:
    # A's number 0 is never confirmed within ``confirm_timeout``: R gives it up and shows
    # nothing under it while no publisher shows up (it may be cut off from them all). D's
    # publish shows one: 0 goes down, unconfirmed, before D's, which is 1; 0 is given to
    # no other publish, since A's node may hold it as a claim.
    net = tree(
        config=NodeConfig(confirm_publishes=True, confirm_timeout=BEAT, publish_timeout=10 * BEAT)
    )
    net.hold(b"A")
    net.publish(b"A", KEY, b"unheard")
    net.advance(net.now + 3 * BEAT)  # A's publish timer has not fired yet
    root = net.nodes[b"R"]
    stream = root.streams[KEY]
    assert root.stats.set_aside == 1 and list(stream.root.set_aside) == [0]
    assert data(net, b"E") == []
    net.publish(b"D", KEY, b"next")
    assert numbered(net) == [0, 1]
    assert data(net, b"E") == [b"unheard", b"next"]


def test_confirmed_packets_go_down_in_number_order() -> None:
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"first")  # numbered 0, A does not hear of it yet
    net.publish(b"D", KEY, b"second")  # numbered 1 and confirmed at once
    assert numbered(net) == [0, 1]
    assert net.sent(SubscribeData) == []  # 1 waits for 0
    net.release(b"A")
    assert data(net, b"E") == [b"first", b"second"]
    assert data(net, b"D") == [b"first", b"second"]


def test_a_claim_pushed_up_to_the_root_that_holds_it_pending_is_no_news() -> None:
    # D's publish is numbered 1 and confirmed, and waits behind A's 0. D pushes its claim
    # up (it attached to a new parent, say, or a push was sent again): R gave 1 to that
    # very publish, so it neither holds numbering for a grace nor drops what is pending.
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"first")
    uid = net.publish(b"D", KEY, b"second")
    assert numbered(net) == [0, 1]
    pushed = PublishData(uid, KEY, 1, 0.3, 20, b"second", None, PacketKind.DATA, None, pushed=True)
    net.inject(b"B", b"R", pushed)
    root = net.stream(b"R", KEY)
    assert (
        root is not None and root.root.recover_until is None and sorted(root.root.pending) == [0, 1]
    )
    net.release(b"A")
    assert data(net, b"E") == [b"first", b"second"]
    assert net.answers(b"D") == [PublishAcked(KEY, uid, 1)]


def test_a_retry_while_pending_is_told_the_same_number() -> None:
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"p0", uid=7)
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)  # A sends it again
    assert numbered(net) == [0, 0]
    net.release(b"A")  # two numberings, two confirmations: one packet, one answer
    assert data(net, b"E") == [b"p0"]
    assert net.answers(b"A") == [PublishAcked(KEY, 7, 0)]
    assert net.nodes[b"R"].stats.published == 1


def test_a_local_publish_at_the_root_waits_behind_a_pending_one() -> None:
    net = tree(config=CONFIRMING)
    net.subscribe(b"R", KEY, client=2)
    net.hold(b"A")
    net.publish(b"A", KEY, b"from A")
    net.publish(b"R", KEY, b"from R", client=2)  # needs no confirmation, but comes after 0
    assert net.answers(b"R", client=2) == [] and data(net, b"E") == []
    net.release(b"A")
    assert data(net, b"E") == [b"from A", b"from R"]
    assert net.answers(b"R", client=2) == [PublishAcked(KEY, 2, 1)]


def test_a_packet_pushed_up_under_a_pending_number_takes_it() -> None:
    # Another root numbered this packet and sent it down (two sides of a cut): it is a
    # delivered packet, while the pending one was shown to nobody.
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"pending")
    pushed = PublishData(99, KEY, 0, 0.0, 9, b"pushed", None, PacketKind.DATA, None, pushed=True)
    net.inject(b"E", b"R", pushed)
    assert net.nodes[b"R"].stats.unconfirmed == 1
    net.release(b"A")  # its confirmation comes too late and changes nothing
    assert data(net, b"D") == [b"pushed"] and data(net, b"E") == [b"pushed"]
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)  # A publishes it again
    assert numbered(net) == [0, 1]
    assert packets(net, b"D") == [(0, b"pushed"), (1, b"pending")]
    assert net.answers(b"A") == [PublishAcked(KEY, 1, 1)]


def test_a_publishers_node_that_reattaches_pushes_its_claim_up() -> None:
    # R numbered A's publish 5 and A confirmed; then A lost its parent. Were R to send 5
    # down on its side of a cut, the root A's side finds must give 5 to this publish too.
    net = tree(config=CONFIRMING)
    net.hold(b"R")  # R hears nothing more: the numbering below stands in for it
    uid = net.publish(b"A", KEY, b"p5")
    net.inject(b"B", b"A", PublishNumbered(uid, KEY, 5))
    assert net.stream(b"A", KEY).claims == {uid: 5}  # type: ignore[union-attr]
    net.connect(b"A", b"D")
    net.disconnect(b"A", b"B")  # A resubscribes, through D
    assert net.stream(b"A", KEY).parent == b"D"  # type: ignore[union-attr]
    ups = [m for s, d, m in net.sent(PublishData) if (s, d) == (b"A", b"D")]
    # Marked as a claim: R may have dropped 5 unsent (``Takeover.on_claim``).
    assert [(m.uid, m.packet, m.pushed, m.claim, m.data) for m in ups] == [
        (uid, 5, True, True, b"p5")
    ]


def test_a_packet_pushed_above_pending_ones_is_taken_and_they_are_numbered_afresh() -> None:
    # A push naming the number after the pending one: numbered by another root, whose tree
    # has joined R's (a merge, a handoff), so that tree had 0 and 1. R holds numbering, as
    # after a takeover, drops what is pending (shown to nobody) and takes the push under
    # its own number. Packet 0 it never gets; A's publish, retried, is numbered after 1.
    # (R's grace asks its subtree for the numbers past its head, and A pushes its claim on
    # 0: a number the other tree had, so R refuses it, and A publishes afresh.)
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"pending")  # 0, unconfirmed
    pushed = PublishData(99, KEY, 1, 0.0, 9, b"pushed", None, PacketKind.DATA, None, pushed=True)
    net.inject(b"E", b"R", pushed)
    root = net.nodes[b"R"]
    assert root.streams[KEY].root.recover_until is not None  # numbering held
    net.release(b"A")  # its confirmation of 0 changes nothing
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)  # A publishes it again
    assert root.stats.unconfirmed == 1 and root.stats.claims_refused == 1
    assert [m.packet for _, _, m in net.sent(PublishCollision)] == [0, 0]  # R -> B -> A
    assert (b"R", b"E", PublishSucceeded(99, KEY, 1)) in net.sent(PublishSucceeded)
    assert packets(net, b"D") == [(1, b"pushed"), (2, b"pending")]
    assert net.answers(b"A") == [PublishAcked(KEY, 1, 2)]


def test_a_pending_number_the_tree_turns_out_to_have_is_dropped_not_sent() -> None:
    # While A's packet waits as 0, a member comes in having seen up to 3 (a split that
    # heals): the tree had 0 already, with other content. Sent down on A's confirmation,
    # it would be a second packet 0; it is dropped, and A's retry numbered above 3.
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"late")
    net.inject(b"E", b"R", SubscribeRequest(77, KEY, 9, 0.9, 3, None))
    root = net.nodes[b"R"]
    assert root.streams[KEY].high == 3
    net.release(b"A")
    assert root.stats.unconfirmed == 1 and data(net, b"D") == []
    net.advance(net.now + 3 * NodeConfig().publish_timeout)
    assert net.answers(b"A")[0].number > 3  # type: ignore[attr-defined]


def test_a_child_flooding_unconfirmed_publishes_is_told_busy() -> None:
    net = tree(config=NodeConfig(confirm_publishes=True, max_queued_publishes=3))
    net.hold(b"A")
    for n in range(4):
        net.publish(b"A", KEY, b"p%d" % n)
    assert numbered(net) == [0, 1, 2]  # the fourth is refused, not held
    assert net.nodes[b"R"].stats.publish_rejected == 1
    [(_, _, refused)] = net.sent(PublishRejected)
    assert refused == PublishRejected(4, KEY, PublishError.BUSY)
    net.release(b"A")  # the three go down; A's node tries the fourth again, as for any BUSY
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)
    assert [e.number for e in net.answers(b"A")] == [0, 1, 2, 3]  # type: ignore[attr-defined]


def claimed(net: CoreNet, client: int = 1) -> tuple[int, Stream]:
    """A's publish, numbered 5 by a root whose confirmation R never sees: A's claim."""
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"p5", client=client)
    net.inject(b"B", b"A", PublishNumbered(uid, KEY, 5))
    stream = net.stream(b"A", KEY)
    assert stream is not None and stream.claims == {uid: 5}
    return uid, stream


def test_a_publish_given_up_takes_its_claim_with_it() -> None:
    # Left behind, the claim would be pushed up to a later root as if 5 were still this
    # publish's number.
    net = tree(config=NodeConfig(confirm_publishes=True, publish_attempts=1))
    _, stream = claimed(net)
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)
    [failed] = net.answers(b"A")
    assert isinstance(failed, PublishFailed) and stream.claims == {}


def test_a_publish_given_up_and_sent_again_takes_its_claim_back() -> None:
    # The timeout says nothing of number 5: a root, perhaps one cut off with it, may hold
    # the packet under it and acknowledge the retry with it. The claim must go up with the
    # retry, or the publisher's side may announce 5 missed while a root that was cut off
    # acknowledges the retry with it after the heal.
    net = tree(config=NodeConfig(confirm_publishes=True, publish_attempts=1))
    uid, stream = claimed(net)
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)
    assert stream.claims == {}
    net.publish(b"A", KEY, b"another")  # another uid takes nothing
    assert stream.claims == {}
    net.publish(b"A", KEY, b"p5", uid=uid)
    assert stream.claims == {uid: 5}


def test_a_publish_whose_client_went_keeps_its_claim_for_a_client_that_retries_it() -> None:
    net = tree()
    uid, stream = claimed(net, client=2)
    net.remove_client(b"A", client=2)
    assert stream.claims == {}
    net.publish(b"A", KEY, b"p5", client=3, uid=uid)  # it reconnected as another client
    assert stream.claims == {uid: 5}


def test_a_relay_passes_a_number_down_only_to_a_child_it_still_has() -> None:
    # A relay entry outlives the tree it was made in; stale entries can close a cycle of
    # relays that would pass a number round for ever, each by its entry.
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"p0")  # B relays it: from A, up to R
    net.inject(b"A", b"B", Unsubscribe(KEY))  # A is no longer B's child
    net.release(b"R")
    assert [(s, d) for s, d, _ in net.sent(PublishNumbered)] == [(b"R", b"B")]
    assert net.stream(b"A", KEY).claims == {}  # type: ignore[union-attr]
    assert uid not in [m.uid for _, _, m in net.sent(PublishConfirmed)]  # type: ignore[attr-defined]


def test_a_local_retry_is_not_acknowledged_under_a_number_dropped_while_it_waited() -> None:
    # R's own publish waits as 1 behind A's unconfirmed 0; then a claim shows the tree had
    # up to 3. The retry of R's publish confirms it, the flush drops both (their numbers
    # were the tree's already), and the retry must not be told 1: it is numbered afresh.
    net = tree(config=CONFIRMING)
    net.subscribe(b"R", KEY, client=2)
    net.hold(b"A")
    net.publish(b"A", KEY, b"from A")
    net.publish(b"R", KEY, b"from R", client=2)
    assert numbered(net) == [0]  # R's own needs no PublishNumbered, but waits as 1
    net.inject(b"E", b"R", SubscribeRequest(77, KEY, 9, 0.9, 3, None))
    net.advance(net.now + NodeConfig().publish_timeout + 0.01)  # R's publish is retried
    net.release(b"A")  # (A's confirmation of 0 comes too late and changes nothing)
    net.advance(net.now + 2 * NodeConfig().publish_timeout)
    answers = net.answers(b"R", client=2)
    assert len(answers) == 1 and isinstance(answers[0], PublishAcked)
    assert answers[0].number > 3


def test_data_of_an_epoch_older_than_one_a_pending_marker_closes_is_refused() -> None:
    # Publishers number epochs upward, so once epoch 2 is closed an epoch 1 that is not
    # open is an old one (``Frontier.is_done``). With the marker pending, epoch 1's data was
    # numbered after it; sent down, the frontier passed it over and an atomic subscriber
    # would be handed epoch 1 empty.
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"", epoch=2, kind=PacketKind.EPOCH_CLOSED)  # 0, pending
    net.publish(b"D", KEY, b"late", epoch=1)
    assert numbered(net) == [0]
    [failed] = net.answers(b"D")
    assert isinstance(failed, PublishFailed) and failed.error is PublishError.EPOCH_DONE
    net.release(b"A")
    sent = [m for _, _, m in net.sent(SubscribeData) if isinstance(m, SubscribeData)]
    assert sent and {(m.packet, m.epoch) for m in sent} == {(0, 2)}


def test_a_pending_abort_does_not_make_older_epochs_done() -> None:
    # Only a close moves the frontier's last closed epoch (``Frontier.observe``): an abort
    # of epoch 2 leaves epoch 1 open to new data, pending or not.
    net = tree(config=CONFIRMING)
    net.hold(b"A")
    net.publish(b"A", KEY, b"", epoch=2, kind=PacketKind.EPOCH_ABORTED)  # 0, pending
    net.publish(b"D", KEY, b"later", epoch=1)
    assert numbered(net) == [0, 1]
    net.release(b"A")
    assert net.answers(b"D") == [PublishAcked(KEY, 2, 1)]


def test_a_push_sent_again_after_it_was_taken_leaves_pending_publishes_alone() -> None:
    # A member's push, taken as 0, is sent again (its answer was slow: ``resend_pushes``)
    # while A's publish waits as 1. The same uid under the same number is no other root's
    # numbering: nothing pending is dropped, and 1 goes down once A confirms.
    net = tree(config=CONFIRMING)
    pushed = PublishData(99, KEY, 0, 0.0, 9, b"pushed", None, PacketKind.DATA, None, pushed=True)
    net.inject(b"E", b"R", pushed)
    net.hold(b"A")
    net.publish(b"A", KEY, b"waits")
    assert numbered(net) == [1]
    net.inject(b"E", b"R", pushed)
    root = net.nodes[b"R"]
    assert root.stats.unconfirmed == 0 and list(root.streams[KEY].root.pending) == [1]
    net.release(b"A")
    assert packets(net, b"D") == [(0, b"pushed"), (1, b"waits")]
    assert net.answers(b"A") == [PublishAcked(KEY, 1, 1)]
    answers = [m for s, d, m in net.sent(PublishSucceeded) if (s, d) == (b"R", b"E")]
    assert answers == [PublishSucceeded(99, KEY, 0)] * 2


# --- ``Confirming`` built alone -------------------------------------------------------------------


class Setup:
    def __init__(self, kit: Kit) -> None:
        local: dict[int, LocalPublish] = {}
        self.witnesses = Witnesses(kit.config, kit.stats, local, Calls(result=True))
        self.requeue, self.store_new, self.reply_root = Calls(), Calls(), Calls()
        self.part = Confirming(
            kit.config,
            kit.streams,
            kit.stats,
            kit.out,
            self.witnesses,
            self.requeue,
            self.store_new,
            self.reply_root,
            kit.timers,
            Tokens(),
        )


def test_a_peers_publish_is_held_pending_until_its_node_confirms() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    message = publish(7)
    assert setup.part.number_new(0.0, stream, b"C", message, 0) == PublishNumbered(7, KEY, 0)
    assert list(stream.root.pending) == [0] and setup.store_new.calls == []
    setup.part.on_confirmed(0.1, b"C", PublishConfirmed(7, KEY, 0))
    assert setup.store_new.calls == [(stream, message, 0)]
    assert setup.reply_root.calls == [(stream, b"C", message, PublishSucceeded(7, KEY, 0))]
    assert not stream.root.pending and kit.stats.confirmed == 1


def test_a_local_publish_with_nothing_pending_goes_down_at_once() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    answer = setup.part.number_new(0.0, stream, 1, publish(7), 0)
    assert answer == PublishSucceeded(7, KEY, 0) and len(setup.store_new.calls) == 1


def test_a_number_given_up_after_confirm_timeout_goes_down_with_a_local_one_behind_it() -> None:
    # C's 7 is numbered 0 and never confirmed; local client 1's 8 waits behind it as 1.
    # Past ``confirm_timeout`` the root gives 0 up with 1; a local publish among them is a
    # publisher on this side already, so both go down at once, in order, 0 unconfirmed.
    kit = Kit(config=NodeConfig(confirm_timeout=1.0, heartbeat_interval=1.0))
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    setup.part.number_new(0.0, stream, b"C", publish(7), 0)
    setup.part.number_new(0.0, stream, 1, publish(8), 1)
    setup.part.confirm_overdue()
    assert stream.root.pending
    setup.part.confirm_overdue()
    assert not stream.root.pending and not stream.root.set_aside
    assert [(m.uid, n) for _, m, n in setup.store_new.calls] == [(7, 0), (8, 1)]
    assert setup.requeue.calls == [] and kit.stats.released_unconfirmed == 2


def test_a_lone_number_given_up_is_set_aside_until_a_publish_shows_up() -> None:
    # C's 7 is numbered 0 and never confirmed, with nothing behind it. Past
    # ``confirm_timeout`` the root gives it up: nothing goes down (this root may be cut off
    # from every publisher), and the next number stays 1. ``resolve`` (a publish reached
    # it) sends 0 down, unconfirmed.
    kit = Kit(config=NodeConfig(confirm_timeout=1.0, heartbeat_interval=1.0))
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    setup.part.number_new(0.0, stream, b"C", publish(7), 0)
    setup.part.confirm_overdue()
    setup.part.confirm_overdue()
    assert list(stream.root.set_aside) == [0] and setup.store_new.calls == []
    assert next_number(stream) == 1 and kit.stats.set_aside == 1
    setup.part.resolve(stream)
    assert [(m.uid, n) for _, m, n in setup.store_new.calls] == [(7, 0)]
    assert not stream.root.set_aside and kit.stats.resolved == 1
