"""``Broadcast`` built alone: packets from a parent are stored once, sent to every child, and
a gap goes down as PacketsMissed, never a silent one."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, packet, store

from overlay.core.broadcast import Broadcast
from overlay.core.early_waits import EarlyWaits
from overlay.core.effects import DropPeer
from overlay.core.showing import Showing
from overlay.core.streams import State, Stream
from overlay.core.tokens import Tokens
from overlay.messages import Message, PacketsMissed, SubscribeData


class Setup:
    """A ``Broadcast`` with real marks (``Showing``) and early waits; the root's commit
    point (``Commits``) isolated as fakes."""

    def __init__(self, kit: Kit) -> None:
        part = self.part = Broadcast(kit.stats, kit.memory, kit.out, kit.signatures.packet_ok)
        showing = Showing(kit.config, kit.streams, kit.stats, kit.timers, kit.out, part.pump)
        self.early = EarlyWaits(
            kit.config, kit.streams, kit.stats, kit.timers, Tokens(), part.store, part.missing
        )
        self.stored_at_root, self.release = Calls(), Calls()
        part.attach(
            self.early.release,
            showing.stamp,
            showing.mark_moved,
            self.stored_at_root,
            self.release,
        )


def numbers(sent: list[tuple[bytes, Message]]) -> list[tuple[bytes, int]]:
    """The packets among ``sent``, by peer and number."""
    return [(peer, m.packet) for peer, m in sent if isinstance(m, SubscribeData)]


def member(kit: Kit, *children: bytes) -> Stream:
    stream = kit.stream(State.JOINED, parent=b"P", children=children)
    store(stream, 0)
    return stream


def test_the_next_packet_is_stored_once_and_sent_to_every_child() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C", b"D")
    setup.part.on_data(b"P", packet(1), stream)
    assert numbers(kit.sent()) == [(b"C", 1), (b"D", 1)]
    assert (stream.next_in, stream.high, kit.stats.stored) == (2, 1, 1)
    assert kit.memory.last(KEY) == 1
    setup.part.on_data(b"P", packet(1), stream)
    assert kit.sent() == [] and kit.stats.duplicates == 1


def test_a_number_past_the_expected_one_sends_the_gap_down_missed_first() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    setup.part.on_data(b"P", packet(4), stream)
    sent = kit.sent()
    assert sent[0] == (b"C", PacketsMissed(KEY, 1, 3))
    assert numbers(sent[1:]) == [(b"C", 4)]
    assert kit.stats.gaps == 1 and stream.next_in == 5 and stream.contiguous_from == 4
    assert stream.window.get(2) is None


def test_packets_missed_from_the_parent_pass_down_what_is_not_held() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    setup.part.on_missed(b"P", PacketsMissed(KEY, 0, 3), stream)  # (0 is held)
    assert kit.sent() == [(b"C", PacketsMissed(KEY, 1, 3))]
    assert stream.next_in == 4 and stream.high == 3


def test_a_backwards_packets_missed_drops_the_parent() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    setup.part.on_missed(b"P", PacketsMissed(KEY, 3, 1), stream)
    effects = kit.out.take()
    assert [type(e) for e in effects] == [DropPeer] and stream.next_in == 1


def test_a_root_stores_a_packet_into_its_commit_point() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    setup.part.store(stream, packet(0))
    assert setup.stored_at_root.calls == [(stream, 0)]
    assert [peer for peer, _ in kit.sent()] == [b"C"]
    assert setup.release.calls == []  # (nothing unacknowledged)


def test_a_packet_above_a_gap_asked_of_the_parent_waits_for_the_answer() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    setup.early.expect_fill(0.0, stream, 1, 2)
    setup.part.on_data(b"P", packet(3), stream)
    assert kit.sent() == [] and stream.next_in == 1
    setup.part.on_missed(b"P", PacketsMissed(KEY, 1, 2), stream)  # the parent's answer
    sent = kit.sent()
    assert sent[0] == (b"C", PacketsMissed(KEY, 1, 2))
    assert numbers(sent[1:]) == [(b"C", 3)]
    assert stream.early is None and stream.next_in == 4
