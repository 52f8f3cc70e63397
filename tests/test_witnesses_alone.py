"""``Witnesses`` and ``PeerWitnesses`` built alone: the relay table and its witness claims."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, publish

from overlay.core.config import NodeConfig
from overlay.core.local_publishes import LocalPublish
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.peers import PeerTable
from overlay.core.relays import Relay
from overlay.core.streams import State
from overlay.core.witnesses import Witnesses
from overlay.messages import PublishConfirmed, PublishWitness


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
