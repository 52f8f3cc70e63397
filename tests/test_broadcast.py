"""``Broadcast`` built alone: packets from a parent are stored once, sent to every child, and
a gap goes down as PacketsMissed, never a silent one."""

from __future__ import annotations

from typing import Any

from flowkit import KEY, Calls, Kit, packet, store

from overlay.codec import encode
from overlay.core.broadcast import Broadcast
from overlay.core.config import NodeConfig
from overlay.core.delivery import Member
from overlay.core.early_waits import EarlyWaits
from overlay.core.effects import Deliver, DropPeer, Send
from overlay.core.showing import Showing
from overlay.core.streams import State, Stream
from overlay.core.tokens import Tokens
from overlay.messages import (
    MAX_FRAME,
    MAX_RUN,
    Message,
    PacketKind,
    PacketsMissed,
    SubscribeData,
    SubscribeRun,
)
from overlay.run_packing import run_of, unrun


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
            showing.stamp_run,
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
    assert setup.stored_at_root.calls == [(stream, 0, 0)]
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


# --- runs (``SubscribeRun``) ----------------------------------------------------------------


def marked(number: int, mark: int | None, epoch: int | None = None) -> SubscribeData:
    first = None if epoch is None else 1
    return SubscribeData(KEY, number, b"x", epoch, PacketKind.DATA, None, first, 1000, mark)


def flat(sent: list[tuple[bytes, Message]]) -> list[tuple[bytes, SubscribeData | Message]]:
    """``sent`` with every run as the packets it stands for, one by one."""
    out: list[tuple[bytes, SubscribeData | Message]] = []
    for peer, message in sent:
        if isinstance(message, SubscribeRun):
            out += [(peer, p) for p in unrun(message)]
        else:
            out.append((peer, message))
    return out


def listening(kit: Kit) -> Stream:
    """A member with children C and D and a local client 7 owed packet 1 on."""
    stream = member(kit, b"C", b"D")
    stream.local[7] = Member(cursor=1)
    stream.shown_upto = 0
    return stream


def alone_and_as_a_run(packets: list[SubscribeData], config: NodeConfig) -> tuple[Kit, Kit]:
    """Two members as ``listening`` makes them: one took ``packets`` one by one from its
    parent, the other as one run."""
    one, many = Kit(config=config), Kit(config=config)
    single, together = Setup(one), Setup(many)
    for kit in (one, many):
        listening(kit)
    for p in packets:
        single.part.on_data(b"P", p, one.streams[KEY])
    together.part.on_run(b"P", run_of(packets), many.streams[KEY])
    return one, many


def test_a_run_that_continues_the_stream_is_sent_on_as_that_run_to_every_child() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = listening(kit)
    run = run_of([marked(n, n - 1) for n in (1, 2, 3)])  # (each with the mark before it)
    setup.part.on_run(b"P", run, stream)
    effects = kit.out.take()
    sends = [(e.peer, e.message) for e in effects if isinstance(e, Send)]
    assert sends == [(b"C", run), (b"D", run)] and sends[0][1] is run  # (its frame is reused)
    assert (stream.next_in, stream.high, kit.stats.stored) == (4, 3, 3)
    assert [stream.window.get(n) for n in (1, 2, 3)] == unrun(run)
    assert kit.memory.last(KEY) == 3 and stream.shown_upto == 2
    shown = [e.event.number for e in effects if isinstance(e, Deliver)]  # type: ignore[union-attr]
    assert shown == [1, 2]  # up to the mark the run brought


def test_a_run_does_what_its_packets_would_one_by_one() -> None:
    # Packets 1..4, the parent's mark rising on the way, into a member whose own mark is 0:
    # the children get the same packets with the same marks, the client the same events.
    packets = [marked(1, None), marked(2, 1), marked(3, 1), marked(4, 3)]
    one, many = alone_and_as_a_run(packets, NodeConfig())
    a, b = one.out.take(), many.out.take()

    def events(effects: list[Any]) -> list[Any]:
        return [e.event for e in effects if isinstance(e, Deliver)]

    def by_child(effects: list[Any]) -> dict[bytes, list[Any]]:
        sent = [(e.peer, e.message) for e in effects if isinstance(e, Send)]
        return {c: [m for p, m in flat(sent) if p == c] for c in (b"C", b"D")}

    assert events(a) == events(b) and events(a)
    assert by_child(a) == by_child(b) and len(by_child(b)[b"C"]) == 4
    s, t = one.streams[KEY], many.streams[KEY]
    assert (s.next_in, s.high, s.shown_upto) == (t.next_in, t.high, t.shown_upto) == (5, 4, 3)
    assert [s.window.get(n) for n in range(5)] == [t.window.get(n) for n in range(5)]
    assert one.stats.stored == many.stats.stored == 4


def test_a_run_past_a_gap_sends_the_gap_down_missed_first() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    setup.part.on_run(b"P", run_of([packet(3), packet(4)]), stream)
    sent = kit.sent()
    assert sent[0] == (b"C", PacketsMissed(KEY, 1, 2))
    assert numbers(flat(sent)[1:]) == [(b"C", 3), (b"C", 4)]
    assert stream.next_in == 5 and kit.stats.gaps == 1


def test_a_malformed_packet_in_a_run_drops_the_parent_and_nothing_after_it_is_taken() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    bad = SubscribeData(KEY, 2, b"x", 5, PacketKind.DATA, None, None)  # epoch, no first
    setup.part.on_run(b"P", run_of([packet(1), bad, packet(3)]), stream)
    effects = kit.out.take()
    assert [type(e) for e in effects if isinstance(e, DropPeer)] == [DropPeer]
    assert stream.next_in == 2 and stream.window.get(3) is None


def test_a_run_of_packets_already_held_is_counted_as_duplicates() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    store(stream, 1, 2)
    setup.part.on_run(b"P", run_of([packet(1), packet(2)]), stream)
    assert kit.sent() == [] and kit.stats.duplicates == 2 and stream.next_in == 3


def test_a_run_past_the_window_shows_each_packet_before_it_could_be_evicted() -> None:
    # A window of 4 and a local client owed everything from 1: a run of 12 whose marks rise
    # as it goes. One by one the client is shown 1..11 as they come; one pass would fill the
    # window to twice its bound with packets it still owes and then evict some unshown.
    packets = [marked(n, n - 1) for n in range(1, 13)]
    one, many = alone_and_as_a_run(packets, NodeConfig(window_packets=4))
    shown = [e.event for e in one.delivered()]
    assert shown == [e.event for e in many.delivered()]
    assert [e.number for e in shown] == list(range(1, 12))  # type: ignore[union-attr]


def test_a_run_whose_marks_change_on_the_way_is_sent_on_within_frames() -> None:
    # The parent's packets carry no mark and ours is 0: each is sent on carrying 0, a few
    # bytes more than it came with, so the run is cut again to fit a frame.
    kit = Kit()
    setup = Setup(kit)
    stream = member(kit, b"C")
    stream.shown_upto = 0
    packets = [marked(n, None) for n in range(1, MAX_RUN + 1)]
    incoming = run_of(packets)
    assert len(encode(incoming)) <= MAX_FRAME
    setup.part.on_run(b"P", incoming, stream)
    runs = [m for _, m in kit.sent()]
    assert len(runs) > 1 and all(len(encode(m)) <= MAX_FRAME for m in runs)
    forwarded = [p for _, p in flat([(b"C", m) for m in runs])]
    assert [p.packet for p in forwarded] == list(range(1, MAX_RUN + 1))  # type: ignore[union-attr]
    assert all(p.mark == 0 for p in forwarded)  # type: ignore[union-attr]


def test_a_run_within_twice_the_window_is_taken_in_one_pass_and_shows_the_same() -> None:
    # A window of 8 and a client owed everything from 1: a run of 10 fits in twice the
    # bound, where nothing owed is evicted, so it goes on whole and the client is shown
    # what it would be one by one.
    packets = [marked(n, n - 1) for n in range(1, 11)]
    one, many = alone_and_as_a_run(packets, NodeConfig(window_packets=8))
    shown = [e.event for e in one.delivered()]
    effects = many.out.take()
    assert shown == [e.event for e in effects if isinstance(e, Deliver)]
    assert [e.number for e in shown] == list(range(1, 10))  # type: ignore[union-attr]
    runs = [e.message for e in effects if isinstance(e, Send) and e.peer == b"C"]
    assert len(runs) == 1 and isinstance(runs[0], SubscribeRun)
