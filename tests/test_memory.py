"""Memory (``overlay.core.memory``): a node remembers each stream's newest packet number past
the stream and, through its driver's disk, past a restart; a root founded again where it is
remembered numbers on from there instead of from 0."""

from __future__ import annotations

import pytest
from corenet import CoreNet
from kept_streams import KEEP, net_with_history
from nodes import KEY, KEY2

from overlay.core.effects import Remember
from overlay.core.events import Missed, Packet, PublishAcked, Subscribed
from overlay.core.memory import Memory
from overlay.messages import MAX_PACKET, ResubscribeRequest, RootProbe, SubscribeSucceeded


def test_only_a_new_highest_number_is_noted() -> None:
    noted: list[Remember] = []
    memory = Memory(8, noted.append)
    for number in (0, 1, 1, 0, 5, 3):
        memory.saw(KEY, number)
    assert noted == [Remember(KEY, 0), Remember(KEY, 1), Remember(KEY, 5)]
    assert memory.last(KEY) == 5 and memory.last(KEY2) is None


def test_the_least_recently_raised_stream_is_forgotten_first() -> None:
    memory = Memory(2, lambda _: None)
    keys = [bytes([k]) * 32 for k in range(3)]
    memory.saw(keys[0], 1)
    memory.saw(keys[1], 1)
    memory.saw(keys[0], 2)  # raised again: now the newest
    memory.saw(keys[2], 1)
    assert [memory.last(k) for k in keys] == [2, None, 1] and len(memory) == 2


def test_what_a_driver_hands_back_is_checked() -> None:
    restored = {KEY: 7, KEY2: MAX_PACKET, b"x": -1, "text": 3, b"y": True}
    memory = Memory(8, lambda _: None, restored)  # type: ignore[arg-type]
    assert memory.last(KEY) == 7 and len(memory) == 1  # nothing that no root could have given


def test_every_node_on_the_path_notes_the_numbers_before_it_sends_them() -> None:
    net = net_with_history()
    assert net.disks[b"C"] == {KEY: 2} and net.disks[b"B"] == {KEY: 2}
    noted = [e for name, e in net.effects if name == b"C" and isinstance(e, Remember)]
    assert [e.number for e in noted] == [0, 1, 2]


def test_a_stream_forgotten_after_keep_idle_numbers_on() -> None:
    net = net_with_history()
    net.advance(net.now + KEEP + 1)
    assert net.state(b"C", KEY) is None  # the keep ended: the stream's state is gone
    net.publish(b"A", KEY, b"later", client=2, uid=99)
    net.advance(net.now + 30)  # (a takeover's grace, in which A's branch could push up)
    assert net.answers(b"A", 2) == [PublishAcked(KEY, 99, 3)]  # not 0 again


def _restart_all(net: CoreNet, *, wiped: bool = False) -> None:
    """Every holder of the stream dies at once and comes back."""
    for name in (b"A", b"B", b"C"):
        net.restart(name, wiped=wiped)
    net.connect(b"A", b"B")
    net.connect(b"B", b"C")


def test_a_stream_whose_every_holder_restarted_numbers_on_and_a_subscriber_misses_nothing() -> None:
    net = net_with_history()
    _restart_all(net)
    net.subscribe(b"B", KEY, client=5)
    net.publish(b"A", KEY, b"after", client=2, uid=99)
    net.advance(net.now + 30)
    assert net.answers(b"A", 2) == [PublishAcked(KEY, 99, 3)]
    events = net.events[(b"B", 5)]
    assert isinstance(events[0], Subscribed)
    # A subscriber that came after the restart is shown the new packet, not told that the
    # numbers before it (given before it came) were lost.
    shown = [e for e in events[1:] if isinstance(e, (Packet, Missed))]
    assert [(type(e).__name__, e.number if isinstance(e, Packet) else e) for e in shown] == [
        ("Packet", 3)
    ]


def test_a_wiped_network_starts_from_0_again() -> None:
    net = net_with_history()
    _restart_all(net, wiped=True)
    net.publish(b"A", KEY, b"after", client=2, uid=99)
    assert net.answers(b"A", 2) == [PublishAcked(KEY, 99, 0)]  # (what memory is for)


def test_a_remembered_number_with_no_room_after_it_is_not_taken() -> None:
    # A state file edited by hand, or a hostile parent's packet number stored before a
    # restart: numbering must have room to go on, as for any claim (``reported``).
    net = CoreNet(seed=1)
    net.disks[b"C"] = {KEY: MAX_PACKET - 5, KEY2: 41}
    net.add(b"C", 0.48)
    net.publish(b"C", KEY, b"x", uid=1)
    net.publish(b"C", KEY2, b"y", uid=2)
    assert net.answers(b"C") == [PublishAcked(KEY, 1, 0), PublishAcked(KEY2, 2, 42)]


def _shown(net: CoreNet, name: bytes, client: int) -> list[tuple[str, int]]:
    """What a client was shown of the stream: packets and missed ranges, by first number."""
    return [
        (type(e).__name__, e.number if isinstance(e, Packet) else e.first)
        for e in net.events[(name, client)]
        if isinstance(e, (Packet, Missed))
    ]


@pytest.mark.parametrize("own_search", [False, True])
def test_a_fresh_child_of_a_root_with_a_claim_starts_after_it(own_search: bool) -> None:
    # D joins C directly while C holds only its remembered claim (in the grace a peer's
    # search brings, or none after its own): told the claim as C's head, it starts after
    # it, as the nodes on the founding search's path do, and is not told 0..2 were missed.
    net = net_with_history()
    _restart_all(net)
    net.add(b"D", 0.47)
    net.connect(b"D", b"C")
    net.subscribe(b"C" if own_search else b"B", KEY, client=5)
    net.subscribe(b"D", KEY, client=7)
    net.publish(b"A", KEY, b"after", client=2, uid=99)
    net.advance(net.now + 30)
    assert net.answers(b"A", 2) == [PublishAcked(KEY, 99, 3)]
    assert _shown(net, b"D", 7) == [("Packet", 3)]


def test_a_root_founded_again_by_a_peer_looks_after_its_grace_and_then_probes() -> None:
    # A root founded by a peer's search with a claim holds a grace and looks at once as
    # well; were ``look_due`` never cleared, a root with a look due would never send its
    # probes (``probes``): its splits would never be found.
    net = net_with_history()
    net.advance(net.now + KEEP + 1)
    net.publish(b"A", KEY, b"later", client=2, uid=99)
    net.advance(net.now + 200)
    stream = net.stream(b"C", KEY)
    assert stream is not None and not stream.root.look_due and stream.root.recover_until is None
    probes = [m for src, _, m in net.trace if src == b"C" and isinstance(m, RootProbe)]
    assert probes, "the root never probed"


def test_a_root_with_a_claim_that_merges_takes_its_claim_into_the_other_tree() -> None:
    # C remembers 20 and roots the stream alone; X, meanwhile, numbered 0..5 for Y's
    # publisher in a tree of its own. C hands its tree to X (closer to the key) when
    # they link: X must number above 20, or numbers the stream gave before are given
    # again (and C's client, placed after 20, is shown nothing of 6..8).
    net = CoreNet(seed=1)
    net.disks[b"C"] = {KEY: 20}
    net.add(b"C", 0.47)
    net.add(b"X", 0.49)
    net.add(b"Y", 0.2)
    net.connect(b"X", b"Y")
    for n in range(6):
        net.publish(b"Y", KEY, b"y%d" % n, client=1, uid=100 + n)
    net.subscribe(b"C", KEY, client=5)
    net.connect(b"C", b"X")
    net.advance(net.now + 200)
    assert net.roots(KEY) == [b"X"]
    for n in range(3):
        net.publish(b"Y", KEY, b"z%d" % n, client=2, uid=200 + n)
    net.advance(net.now + 30)
    assert [a.number for a in net.answers(b"Y", 2)] == [21, 22, 23]  # type: ignore[attr-defined]
    assert _shown(net, b"C", 5) == [("Packet", 21), ("Packet", 22), ("Packet", 23)]


def test_a_claim_beyond_the_remembered_one_is_the_head_a_fresh_child_is_told() -> None:
    # C roots the stream on its remembered 20, B then resubscribes
    # having seen 30. Once the tail is closed (0..30 missed) and 31 numbered (pending: A
    # has not confirmed it yet), a fresh child must be told 30, not the remembered 20 (it
    # would start inside numbers already announced missed).
    net = CoreNet(seed=1)
    net.disks[b"C"] = {KEY: 20}
    for name, location in ((b"C", 0.5), (b"A", 0.2), (b"B", 0.3), (b"D", 0.1)):
        net.add(name, location)
    net.connect(b"A", b"C")
    net.subscribe(b"A", KEY, client=1)
    net.advance(net.now + 30)
    assert net.stream(b"C", KEY).root.remembered == 20  # type: ignore[union-attr]
    net.connect(b"B", b"C")
    net.inject(b"B", b"C", ResubscribeRequest(2, KEY, 20, 0.3, 0.3, 30))
    net.advance(net.now + 30)
    net.hold(b"A")
    net.publish(b"A", KEY, b"new", client=2, uid=900)
    stream = net.stream(b"C", KEY)
    assert stream is not None and list(stream.root.pending) == [31] and not stream.window
    net.connect(b"D", b"C")
    net.subscribe(b"D", KEY, client=3)
    heads = [m.last_packet for s, d, m in net.sent(SubscribeSucceeded) if (s, d) == (b"C", b"D")]
    assert heads == [30]
    net.release(b"A")
    assert _shown(net, b"D", 3) == [("Packet", 31)]


def test_a_number_a_root_gave_and_never_sent_down_is_not_remembered() -> None:
    # C numbered A's publish 3 and waited for A's confirmation (``confirming``) when it
    # died. Nobody was shown a packet 3. Remembered, 3 came back as a claim that nobody
    # pushed, and S, subscribed throughout, was told 3 was missed before A's retry came
    # as 4 (a real testnet's churn run: a missed range with nothing lost).
    net = CoreNet(seed=1)
    for name, location in ((b"A", 0.1), (b"B", 0.3), (b"C", 0.48), (b"S", 0.2)):
        net.add(name, location)
    for a, b in ((b"A", b"B"), (b"B", b"C"), (b"S", b"B")):
        net.connect(a, b)
    net.subscribe(b"S", KEY, client=5)
    for n in range(3):
        net.publish(b"A", KEY, b"p%d" % n, uid=10 + n)
    net.hold(b"A")
    net.publish(b"A", KEY, b"p3", uid=13)
    root = net.stream(b"C", KEY)
    assert root is not None and list(root.root.pending) == [3]
    assert net.disks[b"C"] == {KEY: 2}  # what went down, not what waits
    net.restart(b"C")
    net.connect(b"B", b"C")
    net.release(b"A")
    net.advance(net.now + 60)
    assert net.answers(b"A")[-1] == PublishAcked(KEY, 13, 3)
    assert _shown(net, b"S", 5) == [("Packet", n) for n in range(4)]
