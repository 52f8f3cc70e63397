"""Witness claims (``overlay.core.witnesses``): a relay that passes a publish's
``PublishConfirmed`` up keeps the publish under its number until the answer comes back
down, pushes it up like the publisher's node pushes its own claim, and weighs it as that
child's claim if it takes the tree over itself.

The scene is ``test_publishing``'s tree: root R with children B and E; B (the relay) with
children A (the publisher) and D; client 1 subscribed at A, D and E. R's numbering is
injected by hand while what is sent to R is held, as a root cut off just after would.

The tests at the end build ``Witnesses`` and ``PeerWitnesses`` alone, without a Node (``flowkit``):
the relay table and its witness claims.
"""

from __future__ import annotations

from corenet import CoreNet, held
from flowkit import Calls, Kit, publish
from publish_tree import KEY, packets, tree
from signed_streams import DATA, SKEY, sign, signed_tree

from overlay.core.config import NodeConfig
from overlay.core.effects import Send
from overlay.core.events import PublishAcked
from overlay.core.local_publishes import LocalPublish
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.peers import PeerTable
from overlay.core.relays import Relay
from overlay.core.streams import State
from overlay.core.witnesses import Witnesses
from overlay.messages import (
    MAX_WIRE_HTL,
    PacketKind,
    PastQuery,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    PublishWitness,
    SubscribeData,
)

GRACE = NodeConfig().takeover_grace


def witnessed(number: int) -> tuple[CoreNet, int]:
    """A publishes through B; R (held) numbers it ``number``, and A confirms through B."""
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    net.inject(b"R", b"B", PublishNumbered(uid, KEY, number))
    return net, uid


def alone(net: CoreNet) -> None:
    """A dies with its claim, and R is cut off from the rest: B takes the tree over."""
    net.disconnect(b"B", b"A")
    net.disconnect(b"R", b"B")
    net.disconnect(b"R", b"E")


def claims(net: CoreNet, name: bytes) -> list[tuple[int, int | None, bool, bool, bytes]]:
    stream = net.stream(name, KEY)
    assert stream is not None
    flow = net.nodes[name].flow
    return [
        (m.uid, m.packet, m.pushed, m.claim, m.data)
        for _, m in flow.witnesses.witness_claims(stream)
    ]


def test_a_relay_keeps_a_confirmed_publish_as_a_witness_until_its_answer_comes_down() -> None:
    net, uid = witnessed(0)
    assert claims(net, b"B") == [(uid, 0, True, True, b"mine")]
    assert net.nodes[b"B"].stats.witnesses == 1 and net.nodes[b"A"].stats.witnesses == 0
    assert claims(net, b"A") == []  # (the publisher's node has its own claim)
    net.inject(b"R", b"B", PublishSucceeded(uid, KEY, 0))
    assert claims(net, b"B") == [] and uid not in net.nodes[b"B"].flow.witnesses.witnessed


def test_a_relay_keeps_no_witness_for_a_number_that_came_another_way() -> None:
    # Only a confirmation from the child the publish came through: from D, it is not
    # that relay entry's (its number never went down along it).
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    net.inject(b"D", b"B", PublishConfirmed(uid, KEY, 0))
    assert claims(net, b"B") == []


def test_a_relay_keeps_payloads_only_within_witness_bytes_and_counts_them_back() -> None:
    # A child flooding publishes its root never answers must not make a relay hold every
    # payload: past ``witness_bytes`` the publish is passed up unkept, and so no witness.
    net = tree(config=NodeConfig(witness_bytes=4))
    net.hold(b"R")
    flow = net.nodes[b"B"].flow
    small = net.publish(b"A", KEY, b"1234")
    big = net.publish(b"A", KEY, b"5")
    assert flow.witnesses.retained == 4
    assert (
        flow.witnesses.relayed[small].message is not None
        and flow.witnesses.relayed[big].message is None
    )
    for uid, number in ((small, 0), (big, 1)):
        net.inject(b"R", b"B", PublishNumbered(uid, KEY, number))
    assert [(uid, packet) for uid, packet, *_ in claims(net, b"B")] == [(small, 0)]
    net.inject(b"R", b"B", PublishSucceeded(small, KEY, 0))
    assert flow.witnesses.retained == 0 and small not in flow.witnesses.relayed


def test_a_relay_whose_publisher_died_pushes_its_witness_when_asked_beyond_its_head() -> None:
    net, uid = witnessed(4)
    net.disconnect(b"B", b"A")  # the publisher's node dies with its claim
    before = len(net.held[b"R"])
    net.inject(b"R", b"B", PastQuery(KEY, 0, 2, MAX_WIRE_HTL))  # not in the span: nothing
    net.inject(b"R", b"B", PastQuery(KEY, 3, 40, MAX_WIRE_HTL))
    ups = [m for _, _, m in held(net, b"R")[before:] if isinstance(m, PublishData)]
    assert [(m.uid, m.packet, m.pushed, m.claim, m.data) for m in ups] == [
        (uid, 4, True, True, b"mine")
    ]
    assert net.nodes[b"B"].stats.witness_claims == 1
    # The root's answer forgets it, and would go on down to A.
    net.inject(b"R", b"B", PublishCollision(uid, KEY, 4, 0))
    assert claims(net, b"B") == []


def test_a_relay_that_attaches_to_a_new_parent_pushes_its_witness_and_hears_back_there() -> None:
    # B loses R and attaches under E (linked now): it pushes its witness claim to E, as a
    # publisher's node pushes its own on attaching, and the answer comes back from E, not
    # from R, the parent its relay entry named before.
    net, uid = witnessed(4)
    net.connect(b"B", b"E")
    net.disconnect(b"B", b"A")
    net.disconnect(b"R", b"B")
    b = net.stream(b"B", KEY)
    assert b is not None and b.state is State.JOINED and b.parent == b"E"
    ups = [m for s, d, m in net.sent(PublishData) if (s, d) == (b"B", b"E")]
    assert [(m.uid, m.packet, m.claim) for m in ups] == [(uid, 4, True)]
    assert net.nodes[b"B"].flow.witnesses.relayed[uid].upstream == b"E"
    net.inject(b"E", b"B", PublishSucceeded(uid, KEY, 4))
    assert claims(net, b"B") == [] and uid not in net.nodes[b"B"].flow.witnesses.relayed


def test_a_relay_that_takes_the_tree_over_weighs_its_witness_claim() -> None:
    # The chaos scenario of ``test_sim_chaos_witnesses`` in small. R numbered A's publish 0, A
    # confirmed through B, and R may have sent it down; A dies, then R is cut off. B takes the tree
    # over, and D publishes meanwhile: without the witness, B gave 0 to D's publish, which R's side
    # could have been shown as A's.
    net, uid = witnessed(0)
    alone(net)
    b = net.stream(b"B", KEY)
    assert b is not None and b.state is State.ROOT and b.root.recover_until is not None
    net.publish(b"D", KEY, b"other")
    net.advance(net.now + GRACE + 1.0)
    assert packets(net, b"D")[:2] == [(0, b"mine"), (1, b"other")]
    assert [(n, p.uid) for n, p in b.window.packets.items()][:1] == [(0, uid)]
    relay = net.nodes[b"B"]
    assert relay.stats.claims_refused == 0 and claims(net, b"B") == []
    assert relay.stats.witness_claims == 1


def test_a_witness_claim_a_relay_turned_root_refuses_goes_down_to_its_child() -> None:
    # Beyond its next number, refused as a publisher's claim would be, and the collision
    # goes to the child the publish came through (here dead: nothing else comes of it).
    net, uid = witnessed(5)
    alone(net)
    net.advance(net.now + GRACE + 1.0)
    assert net.nodes[b"B"].stats.claims_refused == 1 and claims(net, b"B") == []
    down = [
        e.message
        for name, e in net.effects
        if name == b"B" and isinstance(e, Send) and e.peer == b"A"
        if isinstance(e.message, PublishCollision)
    ]
    assert [(m.uid, m.packet) for m in down] == [(uid, 5)]


def test_a_publishers_node_ignores_a_second_refusal_of_a_claim_it_renewed() -> None:
    # Its own claim and a relay's witness of it can both be refused: the second collision
    # is no news to its client, whose publish went up afresh after the first.
    net = tree()
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    net.inject(b"B", b"A", PublishNumbered(uid, KEY, 7))
    net.inject(b"B", b"A", PublishCollision(uid, KEY, 7, 0))
    net.inject(b"B", b"A", PublishCollision(uid, KEY, 7, 0))
    assert net.nodes[b"A"].stats.claims_renewed == 1
    assert net.answers(b"A") == []
    net.release(b"R")
    assert net.answers(b"A") == [PublishAcked(KEY, uid, 0)]


def test_a_confirmation_of_another_number_than_a_signed_publish_names_is_no_witness() -> None:
    # A child replays a genuinely signed packet as a publish and "confirms" another number:
    # kept, the relay would push a claim its signature does not cover (its parent drops it
    # as a forger), or take the forgery as root. A publish that names its number is
    # witnessed only under it.
    net = signed_tree()
    net.hold(b"R")
    sig = sign(0, b"genuine")
    net.inject(b"A", b"B", PublishData(77, SKEY, 0, 0.0, 10, b"genuine", None, DATA, sig))
    net.inject(b"A", b"B", PublishConfirmed(77, SKEY, 5))
    assert 77 not in net.nodes[b"B"].flow.witnesses.witnessed
    net.inject(b"A", b"B", PublishConfirmed(77, SKEY, 0))
    assert 77 in net.nodes[b"B"].flow.witnesses.witnessed


def test_a_busy_refusal_of_a_pushed_witness_keeps_it_for_the_next_question() -> None:
    # A parent still settling refuses the push BUSY: the refusal goes on down, and the
    # witness stays, or nobody would claim a dead publisher's number again.
    net, uid = witnessed(4)
    net.disconnect(b"B", b"A")
    net.inject(b"R", b"B", PastQuery(KEY, 3, 40, MAX_WIRE_HTL))
    net.inject(b"R", b"B", PublishRejected(uid, KEY, int(PublishError.BUSY)))
    assert [c[:2] for c in claims(net, b"B")] == [(uid, 4)]


def test_a_relay_that_relays_no_more_lets_expired_payloads_go_on_a_heartbeat() -> None:
    net, uid = witnessed(4)
    net.disconnect(b"B", b"A")  # (no retry renews the entry)
    flow = net.nodes[b"B"].flow
    assert flow.witnesses.retained == len(b"mine")
    config = NodeConfig()
    net.advance(
        net.now + config.publish_timeout * config.publish_attempts + 2 * config.heartbeat_interval
    )
    assert (
        flow.witnesses.retained == 0
        and uid not in flow.witnesses.relayed
        and uid not in flow.witnesses.witnessed
    )


def test_a_witness_on_a_publish_held_under_another_number_is_stale() -> None:
    # The root dropped 4 unsent and numbered the publisher's retry, which came another
    # way, 0: what we hold says so, and the witness on 4 is not pushed.
    net, uid = witnessed(4)
    net.inject(b"R", b"B", SubscribeData(KEY, 0, b"mine", None, PacketKind.DATA, None, None, uid))
    assert claims(net, b"B") == [] and uid not in net.nodes[b"B"].flow.witnesses.witnessed


# --- ``Witnesses`` and ``PeerWitnesses`` built alone ----------------------------------------------


def parts(
    kit: Kit, peers: PeerTable | None = None
) -> tuple[Witnesses, PeerWitnesses, dict[int, LocalPublish]]:
    local: dict[int, LocalPublish] = {}
    ok = Calls(result=True)
    witnesses = Witnesses(kit.config, kit.stats, local, ok)
    peer = PeerWitnesses(kit.config, kit.stats, kit.streams, peers, kit.out, witnesses, local, ok)
    witnesses.unhold = peer.unhold
    return witnesses, peer, local


def relay(uid: int, expires: float = 10.0, data: bytes = b"abc") -> Relay:
    return Relay(uid, KEY, b"C", b"P", expires, publish(uid, data=data))


def test_a_relay_that_passes_a_confirmation_up_keeps_it_as_a_witness_claim() -> None:
    kit = Kit()
    witnesses, _, _ = parts(kit)
    witnesses.enter(relay(7))
    witnesses.witness(b"C", PublishConfirmed(7, KEY, 4))
    assert witnesses.witnessed[7].number == 4 and kit.stats.witnesses == 1
    stream = kit.stream(State.JOINED, parent=b"P")
    [(entry, claim)] = witnesses.witness_claims(stream)
    assert entry.uid == 7 and (claim.packet, claim.pushed, claim.claim) == (4, True, True)


def test_only_the_child_the_publish_came_through_is_witnessed() -> None:
    kit = Kit()
    witnesses, _, _ = parts(kit)
    witnesses.enter(relay(7))
    witnesses.witness(b"D", PublishConfirmed(7, KEY, 4))
    assert 7 not in witnesses.witnessed


def test_kept_payloads_are_bounded_and_freed_as_entries_expire() -> None:
    kit = Kit(config=NodeConfig(witness_bytes=5))
    witnesses, _, _ = parts(kit)
    witnesses.enter(relay(1, expires=1.0, data=b"abc"))
    witnesses.enter(relay(2, expires=2.0, data=b"abc"))
    assert witnesses.retained == 3 and witnesses.relayed[2].message is None
    witnesses.expire_relays(1.5)
    assert list(witnesses.relayed) == [2] and witnesses.retained == 0


def test_a_peer_witness_is_kept_per_peer_and_freed_with_its_entry() -> None:
    kit = Kit()
    witnesses, peer, _ = parts(kit)
    message = PublishWitness(9, KEY, 3, b"abcd", None, publish(9).kind, None)
    peer.on_peer_witness(0.0, b"Q", message)
    assert witnesses.relayed[9].peer and witnesses.witnessed[9].number == 3
    assert peer.peer_count == 1 and peer.peer_bytes == {b"Q": 4}
    witnesses.drop_kept(witnesses.relayed.pop(9))
    assert peer.peer_count == 0 and peer.by_peer == {} and witnesses.retained == 0


def test_no_peer_witness_for_a_publish_of_our_own() -> None:
    kit = Kit()
    _, peer, local = parts(kit)
    local[9] = LocalPublish(1, publish(9))
    peer.on_peer_witness(0.0, b"Q", PublishWitness(9, KEY, 3, b"x", None, publish(9).kind, None))
    assert peer.peer_count == 0 and kit.stats.ignored == 1


def test_a_publisher_tells_its_closest_peers_but_not_its_parent() -> None:
    kit = Kit(config=NodeConfig(witness_peers=2))
    peers = PeerTable()
    for name, location in ((b"P", 0.5), (b"A", 0.1), (b"B", 0.9), (b"C", 0.6)):
        peers.add(name, location, 1, 0.0)
    _, peer, _ = parts(kit, peers)
    stream = kit.stream(State.JOINED, parent=b"P")
    peer.tell_peers(stream, publish(9), 3)
    told = [to for to, message in kit.sent() if isinstance(message, PublishWitness)]
    assert len(told) == 2 and b"P" not in told
