"""Peer witnesses (``overlay.core.peer_witnesses``): a publisher's node that confirms the
number of its own publish tells it to up to ``witness_peers`` direct peers other than its
parent, the closest to the stream's location first; each keeps it as a witness claim,
pushes it like a relay's witness and weighs it as the publisher's claim should it become
root.

The scene is ``test_publishing``'s tree (root R with children B and E; B with children A,
the publisher, and D), with A also linked to D and E (and F, G where a test adds them): by
distance to the stream, E, D, F, then G. R's numbering is injected while R is held.
"""

from __future__ import annotations

import pytest
from corenet import CoreNet, held
from publish_tree import KEY, packets, place, tree
from signed_streams import DATA, DESCRIPTOR, INTRUDER, SKEY, sign, signed_tree

from overlay.core.config import NodeConfig
from overlay.core.effects import Send
from overlay.core.streams import State
from overlay.messages import (
    MAX_WIRE_HTL,
    PacketKind,
    PastQuery,
    PublishData,
    PublishNumbered,
    PublishSucceeded,
    PublishWitness,
)

GRACE = NodeConfig().takeover_grace


def scene(config: NodeConfig | None = None, extra: bool = False) -> CoreNet:
    net = tree(config=config)
    net.connect(b"A", b"D")
    net.connect(b"A", b"E")
    if extra:
        net.add(b"F", place(KEY, b"F"), config)
        net.add(b"G", (place(KEY, b"A") - 0.05) % 1.0, config)
        net.connect(b"A", b"F")
        net.connect(b"A", b"G")
    return net


def confirmed(net: CoreNet, number: int, data: bytes = b"mine") -> int:
    """A publishes; R (held) numbers it ``number``, and A confirms it."""
    net.hold(b"R")
    uid = net.publish(b"A", KEY, data)
    net.inject(b"R", b"B", PublishNumbered(uid, KEY, number))
    return uid


def told(net: CoreNet) -> list[tuple[bytes, int, int, bytes]]:
    return [(d, m.uid, m.packet, m.data) for s, d, m in net.sent(PublishWitness) if s == b"A"]


def claims(net: CoreNet, name: bytes, key: bytes = KEY) -> list[tuple[int, int | None]]:
    stream = net.stream(name, key)
    assert stream is not None
    return [(m.uid, m.packet) for _, m in net.nodes[name].flow.witnesses.witness_claims(stream)]


def witness(uid: int, number: int, data: bytes = b"w", key: bytes = KEY) -> PublishWitness:
    return PublishWitness(uid, key, number, data, None, PacketKind.DATA, None)


def test_a_publishers_node_tells_its_closest_peers_but_never_its_parent() -> None:
    net = scene(NodeConfig(witness_peers=2), extra=True)
    uid = confirmed(net, 0)
    # B (its parent) is closer than D, F and G: never told; E and D are the closest others.
    assert told(net) == [(b"E", uid, 0, b"mine"), (b"D", uid, 0, b"mine")]
    assert net.nodes[b"A"].stats.peer_witnesses_sent == 2


def test_witness_peers_bounds_how_many_are_told_and_zero_tells_none() -> None:
    net = scene(NodeConfig(witness_peers=3), extra=True)
    confirmed(net, 0)
    assert [d for d, *_ in told(net)] == [b"E", b"D", b"F"]
    net = scene(NodeConfig(witness_peers=0), extra=True)
    confirmed(net, 0)
    assert told(net) == []
    for bad in (-1, 65, True):
        with pytest.raises(ValueError, match="witness_peers"):
            NodeConfig(witness_peers=bad)


def test_a_told_peer_keeps_the_publish_under_its_number_as_a_witness_claim() -> None:
    net = scene()
    uid = confirmed(net, 4)
    relay = net.nodes[b"E"].flow.witnesses.relayed[uid]
    assert (relay.source, relay.number, relay.peer) == (b"A", 4, True)
    assert claims(net, b"E") == [(uid, 4)] and net.nodes[b"E"].stats.peer_witnesses == 1
    assert claims(net, b"A") == []  # (the publisher's node has its own claim)


def test_a_peer_witness_is_pushed_when_a_new_root_asks_beyond_its_head() -> None:
    net = scene()
    uid = confirmed(net, 4)
    net.disconnect(b"A", b"B")  # the publisher's node dies with its claim
    net.disconnect(b"A", b"D")
    net.disconnect(b"A", b"E")
    before = len(net.held[b"R"])
    net.inject(b"R", b"E", PastQuery(KEY, 3, 40, MAX_WIRE_HTL))
    ups = [m for s, _, m in held(net, b"R")[before:] if s == b"E" and isinstance(m, PublishData)]
    assert [(m.uid, m.packet, m.pushed, m.claim, m.data) for m in ups] == [
        (uid, 4, True, True, b"mine")
    ]
    # The answer coming back down ends it, and goes on to the (dead) publisher harmlessly.
    net.inject(b"R", b"E", PublishSucceeded(uid, KEY, 4))
    assert claims(net, b"E") == [] and uid not in net.nodes[b"E"].flow.witnesses.relayed


def test_a_peer_witness_is_pushed_on_attaching_to_a_new_parent() -> None:
    net = scene()
    uid = confirmed(net, 4)
    for other in (b"B", b"D", b"E"):
        net.disconnect(b"A", other)
    net.connect(b"D", b"E")
    net.disconnect(b"B", b"D")  # D attaches under E, and pushes its witness claim there
    d = net.stream(b"D", KEY)
    assert d is not None and d.state is State.JOINED and d.parent == b"E"
    ups = [m for s, r, m in net.sent(PublishData) if (s, r) == (b"D", b"E") and m.claim]
    assert [(m.uid, m.packet) for m in ups] == [(uid, 4)]
    assert net.nodes[b"D"].flow.witnesses.relayed[uid].upstream == b"E"


def test_a_peer_witness_is_weighed_as_the_publishers_claim_by_a_holder_turned_root() -> None:
    # Node 1 of the hand-built double fault in small: the publisher A dies after confirming
    # 0; E, cut off from R, becomes root and must not give 0 to another publish.
    net = scene()
    uid = confirmed(net, 0)
    for other in (b"B", b"D", b"E"):
        net.disconnect(b"A", other)
    net.add(b"G", (place(KEY, b"A") - 0.05) % 1.0)
    net.connect(b"E", b"G")  # (E's search for a new parent asks G, which finds nothing)
    net.disconnect(b"R", b"E")
    e = net.stream(b"E", KEY)
    assert e is not None and e.state is State.ROOT
    net.publish(b"E", KEY, b"other")
    net.advance(net.now + GRACE + 1.0)
    assert packets(net, b"E")[:2] == [(0, b"mine"), (1, b"other")]
    assert net.nodes[b"E"].stats.witness_claims == 1 and claims(net, b"E") == []
    answers = [
        e.message for n, e in net.effects if n == b"E" and isinstance(e, Send) and e.peer == b"A"
    ]
    assert [(m.uid, m.packet) for m in answers if isinstance(m, PublishSucceeded)] == [(uid, 0)]


def test_a_renumbered_publish_replaces_its_peer_witness() -> None:
    # R dropped 4 unsent and numbered the retry 6: A tells its peers again, and the newer
    # number stands (a stale one, pushed, could be taken as the next new number).
    net = scene()
    uid = confirmed(net, 4)
    net.inject(b"R", b"B", PublishNumbered(uid, KEY, 6))
    assert claims(net, b"E") == [(uid, 6)] and net.nodes[b"E"].flow.peer_witnesses.peer_count == 1
    net.inject(b"D", b"E", witness(uid, 9))  # (another peer's word on it: ignored)
    assert claims(net, b"E") == [(uid, 6)]


def test_a_peer_floods_only_its_own_share_and_never_makes_relayed_publishes_busy() -> None:
    net = scene(NodeConfig(max_queued_publishes=2, max_relayed_publishes=1))
    flow = net.nodes[b"B"].flow
    for uid in (100, 101, 102):
        net.inject(b"D", b"B", witness(uid, uid))
    # Its oldest went: the newest matter, should the peer die now.
    assert [u for u, r in flow.witnesses.relayed.items() if r.peer] == [101, 102]
    assert flow.peer_witnesses.peer_count == 2 and flow.peer_witnesses.peer_bytes == {b"D": 2}
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")  # relayed by B: not refused BUSY
    assert uid in flow.witnesses.relayed and not flow.witnesses.relayed[uid].peer
    net.disconnect(b"B", b"D")
    flow.witnesses.expire_relays(net.now + 1e6)
    assert (
        flow.peer_witnesses.peer_count == 0
        and flow.peer_witnesses.by_peer == {}
        and flow.witnesses.retained == 0
    )


def test_a_peers_witness_payloads_stay_within_its_share_of_witness_bytes() -> None:
    net = scene(NodeConfig(witness_bytes=64))  # 8 bytes a peer
    flow = net.nodes[b"B"].flow
    net.inject(b"D", b"B", witness(100, 0, b"12345"))
    net.inject(b"D", b"B", witness(101, 1, b"6789"))  # 9 > 8: the older goes
    net.inject(b"D", b"B", witness(102, 2, b"123456789"))  # over the share: ignored
    assert [u for u, r in flow.witnesses.relayed.items() if r.peer] == [101]
    assert (
        flow.witnesses.retained == 4
        and flow.peer_witnesses.peer_bytes == {b"D": 4}
        and flow.peer_witnesses.peer_count == 1
    )
    assert {p: list(held) for p, held in flow.peer_witnesses.by_peer.items()} == {b"D": [101]}
    flow.witnesses.expire_relays(net.now + 1e6)  # (every share given back)
    assert (
        flow.peer_witnesses.peer_count == 0
        and flow.peer_witnesses.by_peer == {}
        and flow.peer_witnesses.peer_bytes == {}
    )


def test_bad_peer_witnesses_are_ignored_and_disturb_nothing() -> None:
    net = scene()
    flow = net.nodes[b"E"].flow
    net.hold(b"R")
    uid = net.publish(b"D", KEY, b"routed")  # B's relay entry: live routing state
    net.inject(b"A", b"B", witness(uid, 9))
    assert not net.nodes[b"B"].flow.witnesses.relayed[uid].peer
    # An epoch marker without its epoch; a signed stream's publish without a signature.
    net.inject(b"A", b"E", PublishWitness(7, KEY, 0, b"", None, PacketKind.EPOCH_CLOSED, None))
    net.inject(b"A", b"E", PublishWitness(8, SKEY, 0, b"x", None, PacketKind.DATA, None))
    assert 7 not in flow.witnesses.relayed and 8 not in flow.witnesses.relayed
    # A stream E does not carry: kept until expiry, sends nothing.
    other = bytes(31) + b"\x02"
    sent = len(net.effects)
    net.inject(b"A", b"E", witness(9, 3, key=other))
    assert 9 in flow.witnesses.witnessed
    assert not [e for n, e in net.effects[sent:] if n == b"E" and isinstance(e, Send)]


def test_a_signed_peer_witness_under_another_number_than_signed_is_ignored() -> None:
    net = signed_tree()
    net.connect(b"A", b"E")
    good = sign(0, b"genuine")
    net.inject(b"A", b"E", PublishWitness(77, SKEY, 5, b"genuine", None, DATA, good))
    assert 77 not in net.nodes[b"E"].flow.witnesses.relayed
    net.inject(b"A", b"E", PublishWitness(77, SKEY, 0, b"genuine", None, DATA, good))
    assert 77 in net.nodes[b"E"].flow.witnesses.witnessed
    assert net.dropped == []


def test_a_peer_witness_expires_like_a_relay_entry() -> None:
    net = scene()
    uid = confirmed(net, 4)
    for other in (b"B", b"D", b"E"):
        net.disconnect(b"A", other)
    flow, config = net.nodes[b"E"].flow, NodeConfig()
    net.advance(
        net.now + config.publish_timeout * config.publish_attempts + 2 * config.heartbeat_interval
    )
    assert uid not in flow.witnesses.relayed and uid not in flow.witnesses.witnessed
    assert (
        flow.witnesses.retained == 0
        and flow.peer_witnesses.peer_count == 0
        and flow.peer_witnesses.by_peer == {}
    )


def test_a_forged_peer_witness_kept_before_its_holder_knew_the_signer_is_never_pushed() -> None:
    # F does not carry the signed stream when A's forgery comes, so it cannot check it; once
    # F joins (under E) and pushes its claims, the forgery is dropped, not pushed: E would
    # drop F as a forger. The genuine one goes up.
    net = signed_tree()
    net.add(b"F", place(SKEY, b"F"))
    net.connect(b"F", b"A")
    net.connect(b"F", b"E")
    forged = sign(3, b"forged", private=INTRUDER)
    net.inject(b"A", b"F", PublishWitness(70, SKEY, 3, b"forged", None, DATA, forged))
    net.inject(b"A", b"F", PublishWitness(71, SKEY, 4, b"genuine", None, DATA, sign(4, b"genuine")))
    assert {70, 71} <= set(net.nodes[b"F"].flow.witnesses.witnessed)
    net.subscribe(b"F", SKEY, descriptor=DESCRIPTOR)
    ups = [m.uid for s, _, m in net.sent(PublishData) if s == b"F" and m.claim]
    assert ups == [71] and 70 not in net.nodes[b"F"].flow.witnesses.witnessed
    assert net.dropped == []


def test_a_peer_witness_of_a_publish_already_held_is_not_kept() -> None:
    # A publisher's closest peers include its root whenever the root is not its parent, and
    # members the packet reached first: holding the publish, they would only sit on a copy.
    net = scene()
    uid = net.publish(b"A", KEY, b"mine")
    root = net.stream(b"R", KEY)
    assert (0, b"mine") in packets(net, b"E") and root is not None and root.window.get(0)
    for holder, peer in ((b"R", b"B"), (b"E", b"A")):
        flow = net.nodes[holder].flow
        flow.witnesses.expire_relays(
            net.now + 1e6
        )  # (E kept A's witness: it came before the packet)
        net.inject(peer, holder, witness(uid, 0, b"mine"))
        assert uid not in flow.witnesses.relayed and flow.witnesses.retained == 0


def test_peer_witnesses_together_leave_relays_half_of_witness_bytes() -> None:
    # The review: eight peers, each within its own eighth, filled the whole budget, and a
    # relay could then keep no publish to witness (the double fault that relays close).
    config = NodeConfig(witness_bytes=64)
    net = scene(config)
    flow = net.nodes[b"B"].flow
    for i in range(8):
        name = b"P%d" % i
        net.add(name, 0.5 + 0.01 * i, config)
        net.connect(name, b"B")
        net.inject(name, b"B", witness(1000 + i, i, b"x" * 8))
    assert (
        flow.peer_witnesses.peer_count == 4 and flow.witnesses.retained == 32
    )  # the other four: not kept
    net.hold(b"R")
    uid = net.publish(b"A", KEY, b"mine")
    assert flow.witnesses.relayed[uid].message is not None  # B can still witness A's publish


def test_a_peer_witness_weighed_by_its_holder_turned_root_leaves_the_relay_table() -> None:
    # The review: weighed, it stayed in the table for 30 s, counted as a peer witness no
    # more, and took a relayed publish's room.
    net = scene()
    net.add(b"G", (place(KEY, b"A") - 0.05) % 1.0)
    net.connect(b"E", b"G")
    net.inject(b"G", b"E", witness(4242, 0))
    flow = net.nodes[b"E"].flow
    assert flow.peer_witnesses.peer_count == 1
    net.disconnect(b"A", b"E")
    net.disconnect(b"R", b"E")
    e = net.stream(b"E", KEY)
    assert e is not None and e.state is State.ROOT
    net.advance(net.now + GRACE + 1.0)
    assert (
        4242 not in flow.witnesses.relayed
        and flow.peer_witnesses.peer_count == 0
        and flow.witnesses.retained == 0
    )
    assert packets(net, b"E")[:1] == [(0, b"w")]
