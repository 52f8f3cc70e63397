"""Memory (``overlay.core.memory``): a node remembers each stream's newest packet number past
the stream and, through its driver's disk, past a restart; a root founded again where it is
remembered numbers on from there instead of from 0."""

from __future__ import annotations

from corenet import CoreNet
from test_keeping import KEEP, net_with_history
from test_node import KEY, KEY2

from overlay.core.effects import Remember
from overlay.core.events import Missed, Packet, PublishAcked, Subscribed
from overlay.core.memory import Memory
from overlay.messages import MAX_PACKET


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
