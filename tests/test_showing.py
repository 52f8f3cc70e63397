"""Showing (``overlay.core.showing``): a member shows its local clients a packet, or a gap,
only once the root says it has committed that far, passed down the tree: on the packets
(``SubscribeData.mark``), or in a ``Committed`` when none took it down.

Single-node tests use ``joined_node`` (N in KEY's tree: parent P, child C, spare peer Q,
client 1 subscribed) and the roots of ``test_commits`` (N root with child U, and client 1).

The tests at the end build ``Showing`` alone, without a Node (``flowkit``): the marks a root stamps
and tells, and a member's from its parent.
"""

from __future__ import annotations

import dataclasses

import cbor2
import pytest
from commit_roots import U, V, adopt, bare_root, notices, own_publish, packets_to, root
from corenet import CoreNet, key_at
from flowkit import Calls, Kit, packet, store
from hypothesis import given, settings
from hypothesis import strategies as st
from nodes import joined_node, meet, proto, sends

from overlay.codec import DecodeError, decode, encode
from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect, Send
from overlay.core.events import Missed, Packet
from overlay.core.showing import MARK_TIMER, REPEATS, Showing
from overlay.core.streams import State
from overlay.messages import (
    MAX_PACKET,
    Committed,
    DataNotFound,
    FillRequest,
    Held,
    HeldQuery,
    Message,
    PacketKind,
    PacketsMissed,
    RestartConfirmed,
    SubscribeData,
    SubscribeRequest,
    SubscribeRun,
    SubscribeSucceeded,
    Unsubscribe,
)

KEY = key_at(0.5)
P, C, Q = b"P", b"C", b"Q"  # (as in ``joined_node``)


def data(number: int) -> SubscribeData:
    return SubscribeData(KEY, number, b"p%d" % number, None, PacketKind.DATA, None, None, number)


def shown(effects: list[Effect]) -> list[object]:
    """What client 1 was shown: packet numbers, and gaps as (first, last)."""
    out: list[object] = []
    for effect in effects:
        if isinstance(effect, Deliver) and isinstance(effect.event, Packet):
            out.append(effect.event.number)
        elif isinstance(effect, Deliver) and isinstance(effect.event, Missed):
            out.append((effect.event.first, effect.event.last))
    return out


# --- a member ----------------------------------------------------------------------------------


def test_a_member_shows_a_packet_only_once_the_root_says_it_is_committed() -> None:
    # Shown earlier, a packet held only by the root and one relay could be lost with both,
    # and the rest of the tree could give its number to another publish.
    node = joined_node()
    effects = node.receive(0.1, P, data(0))
    assert sends(effects) == [(C, data(0))] and shown(effects) == []
    effects = node.receive(0.2, P, Committed(KEY, 0))
    assert shown(effects) == [0]
    assert notices(effects) == [(C, 0)]  # passed on: C's clients wait for it too


def test_a_member_with_no_mark_shows_nothing() -> None:
    node = joined_node()
    for n in range(3):
        assert shown(node.receive(0.1, P, data(n))) == []
    assert shown(node.receive(0.2, P, Committed(KEY, 1))) == [0, 1]
    assert shown(node.receive(0.3, P, Committed(KEY, 2))) == [2]


def test_a_gap_is_shown_only_as_far_as_the_mark() -> None:
    # A number past the mark may yet be given to a packet, were the tree to lose what it
    # holds there and number it again: it is not called missed before it is committed.
    node = joined_node()
    node.receive(0.1, P, data(0))
    node.receive(0.1, P, Committed(KEY, 0))
    effects = node.receive(0.2, P, data(4))
    assert (C, PacketsMissed(KEY, 1, 3)) in sends(effects) and shown(effects) == []
    assert shown(node.receive(0.3, P, Committed(KEY, 2))) == [(1, 2)]
    assert shown(node.receive(0.4, P, Committed(KEY, 4))) == [(3, 3), 4]


def test_a_mark_never_passes_what_the_member_has_processed() -> None:
    node = joined_node()
    node.receive(0.1, P, data(0))
    effects = node.receive(0.2, P, Committed(KEY, 5))
    assert shown(effects) == [0] and notices(effects) == [(C, 0)]
    assert node.streams[KEY].shown_upto == 0
    assert shown(node.receive(0.3, P, data(1))) == []  # 1 came after the notice: not covered


def fill_asks(effects: list[Effect]) -> list[tuple[bytes, int, int]]:
    return [(peer, m.first, m.last) for peer, m in sends(effects) if isinstance(m, FillRequest)]


def test_a_member_asks_its_parent_for_what_lies_below_the_parents_mark() -> None:
    # Over a FIFO link a mark comes after the packets it covers: a parent's mark past what
    # we processed means it will never send us those numbers by itself (it entered the
    # tree past them). Not asking, a child below a relay that entered holding nothing
    # would meet the next packet as a gap and tell its subscriber that acknowledged packets
    # were missed.
    node = joined_node()
    assert fill_asks(node.receive(0.1, P, data(0))) == []
    assert fill_asks(node.receive(0.15, P, Committed(KEY, 0))) == []  # nothing below it
    effects = node.receive(0.2, P, Committed(KEY, 5))
    assert fill_asks(effects) == [(P, 1, 5)]
    assert notices(effects) == [(C, 0)]  # the mark passed on is still only what we hold
    assert fill_asks(node.receive(0.3, P, Committed(KEY, 5))) == []  # (a repeat: asked)
    assert fill_asks(node.receive(0.4, P, Committed(KEY, 7))) == [(P, 6, 7)]  # only the rest
    for n in range(1, 8):  # the parent's answer, in order: no gap, shown to the mark
        effects = node.receive(0.5, P, data(n))
        assert [(peer, m.packet) for peer, m in sends(effects)] == [(C, n)]  # (no gap)
    assert shown(node.receive(0.6, P, Committed(KEY, 7))) == list(range(1, 8))
    effects = node.receive(0.7, P, data(8))
    assert [(peer, m.packet) for peer, m in sends(effects)] == [(C, 8)]


def test_a_member_that_takes_a_parent_asks_it_afresh_for_what_lies_below_its_mark() -> None:
    node = joined_node()
    stream = node.streams[KEY]
    node.receive(0.1, P, data(0))
    assert fill_asks(node.receive(0.2, P, Committed(KEY, 5))) == [(P, 1, 5)]
    node.flow.settle(stream)  # (as on taking a parent: ``joining.attached``)
    assert stream.asked_below is None
    assert fill_asks(node.receive(0.3, P, Committed(KEY, 5))) == [(P, 1, 5)]


def test_a_member_asks_again_once_an_unanswered_ask_may_have_been_lost() -> None:
    node = joined_node()
    node.receive(0.1, P, data(0))
    assert fill_asks(node.receive(0.2, P, Committed(KEY, 5))) == [(P, 1, 5)]
    later = 0.2 + node.config.fill_timeout
    assert fill_asks(node.receive(later - 0.01, P, Committed(KEY, 5))) == []
    assert fill_asks(node.receive(later, P, Committed(KEY, 5))) == [(P, 1, 5)]


def test_an_older_notice_is_ignored_and_a_repeat_passed_on() -> None:
    node = joined_node()
    for n in range(4):
        node.receive(0.1, P, data(n))
    assert notices(node.receive(0.2, P, Committed(KEY, 3))) == [(C, 3)]
    effects = node.receive(0.3, P, Committed(KEY, 2))
    assert proto(effects) == [] and node.streams[KEY].shown_upto == 3
    # The root repeats its mark: C may have lost the first notice.
    effects = node.receive(0.4, P, Committed(KEY, 3))
    assert notices(effects) == [(C, 3)] and shown(effects) == []


def test_a_notice_from_anyone_but_the_parent_is_refused() -> None:
    node = joined_node()
    node.receive(0.1, P, data(0))
    effects = node.receive(0.2, Q, Committed(KEY, 0))
    assert sends(effects) == [(Q, Unsubscribe(KEY))] and shown(effects) == []
    assert node.streams[KEY].shown_upto is None


def test_a_member_that_takes_a_parent_keeps_no_mark_past_what_it_holds() -> None:
    node = joined_node()
    stream = node.streams[KEY]
    node.receive(0.1, P, data(0))
    node.receive(0.1, P, data(1))
    stream.shown_upto = 5  # (a mark past its head: never so, but the new tree may differ)
    node.flow.settle(stream)
    assert stream.shown_upto == 1
    stream.next_in = None  # holding nothing, it waits for its new parent's mark
    node.flow.settle(stream)
    assert stream.shown_upto is None


def test_a_member_that_becomes_root_shows_what_it_holds_and_tells_its_children() -> None:
    # A new root numbers above everything its subtree has seen: what it holds stays.
    node = joined_node()
    for n in range(3):
        node.receive(0.1, P, data(n))
    node.receive(0.2, P, Committed(KEY, 0))
    node.link_down(1.0, P)
    stream = node.streams[KEY]
    effects = node.receive(1.1, C, RestartConfirmed(stream.restart_uid or 0, KEY, 2))
    [(peer, search)] = sends(effects)
    effects = node.receive(1.2, peer, DataNotFound(search.uid, KEY, 0))  # type: ignore[attr-defined]
    assert stream.state is State.ROOT
    assert shown(effects) == [1, 2] and notices(effects) == [(C, 2)]


# --- the root ----------------------------------------------------------------------------------


def test_the_root_tells_its_children_when_its_commit_moves() -> None:
    node = root()
    effects = node.publish(1.0, KEY, 1, 100, b"p0")
    assert notices(effects) == []  # only N holds packet 0
    effects = node.receive(1.1, U, Held(KEY, 0))
    assert notices(effects) == [(U, 0)]
    assert notices(node.receive(1.2, U, Held(KEY, 0))) == []  # it did not move


def test_a_root_without_clients_of_its_own_still_waits_for_its_children() -> None:
    # It used to commit at once, with nobody local to shield: now its members' clients are
    # shown only what it commits, so it asks, and tells them when it may.
    node = bare_root((U, 0.2), (V, 0.3))
    effects = node.receive(1.0, U, own_publish(200, b"p0"))
    assert (U, HeldQuery(KEY, 0)) in sends(effects) and notices(effects) == []
    node.receive(1.1, U, Held(KEY, 0))
    assert notices(node.receive(1.2, V, Held(KEY, 0))) == [(U, 0), (V, 0)]


def test_a_root_with_children_that_never_answer_tells_them_after_the_timeout() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0)
    node.publish(1.0, KEY, 1, 100, b"p0")
    now, told = 1.0, []
    while not told:
        now += 1.0
        assert now < 10.0, "the members wait for ever"
        told = notices(node.handle_timer(now))
    assert told == [(U, 0)] and node.stats.commit_timeouts == 1


def test_the_root_repeats_its_mark_for_a_few_heartbeat_rounds_lest_a_notice_was_lost() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6)
    node.publish(1.0, KEY, 1, 100, b"p0")
    node.receive(1.1, U, Held(KEY, 0))
    repeats = [notices(node.handle_timer(1.0 + r)) for r in range(1, REPEATS + 3)]
    assert repeats == [[(U, 0)]] * REPEATS + [[], []]


def test_a_child_adopted_is_told_the_mark_after_its_catch_up() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    node.receive(1.1, U, Held(KEY, 0))
    meet(node, V, 0.3, boot_id=60)
    effects = node.receive(1.2, V, SubscribeRequest(60, KEY, 5, 0.3, -1))
    assert [m for peer, m in sends(effects) if peer == V] == [
        SubscribeSucceeded(60, KEY, 0),
        node.streams[KEY].window.get(0),
        Committed(KEY, 0),
    ]


def test_a_root_with_nothing_committed_tells_a_new_child_nothing() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")  # asked, not answered: nothing committed
    adopt(node, V, 0.3, 60)
    assert node.streams[KEY].shown_upto is None


# --- over real cores -----------------------------------------------------------------------------

R, S = b"R", b"S"


def three(mark_delay: float = 0.0, **config: object) -> CoreNet:
    """R (0.48) roots the tree; P (0.3) publishes and subscribes, S (0.2) subscribes, both
    R's children; R has no client of its own."""
    net = CoreNet(seed=1, config=NodeConfig(**config), mark_delay=mark_delay)  # type: ignore[arg-type]
    for name, location in ((R, 0.48), (P, 0.3), (S, 0.2)):
        net.add(name, location)
    net.connect(R, P)
    net.connect(R, S)
    net.subscribe(R, KEY, client=9)  # R roots the tree; its client leaves below
    net.subscribe(S, KEY)
    net.subscribe(P, KEY)
    net.unsubscribe(R, KEY, client=9)
    assert net.roots(KEY) == [R] and set(net.stream(R, KEY).children) == {P, S}
    return net


def numbers(net: CoreNet, name: bytes) -> list[int]:
    return [e.number for e in net.received(name) if isinstance(e, Packet)]


def test_over_real_cores_a_subscriber_below_the_root_waits_for_a_second_branch() -> None:
    net = three()
    net.hold(S)  # S is slow: only R and P hold P's packet
    net.publish(P, KEY, b"p0", uid=7)
    assert numbers(net, P) == []
    net.release(S)
    assert numbers(net, P) == numbers(net, S) == [0]


def test_over_real_cores_a_lost_notice_is_mended_by_the_roots_next_round() -> None:
    net = three(heartbeat_interval=1.0, dead_after=3.0)
    lost: list[Effect] = []
    apply = net._apply

    def lossy(name: bytes, effects: list[Effect]) -> None:
        for effect in effects:
            sent = (effect.peer, type(effect.message)) if isinstance(effect, Send) else None
            if sent == (S, Committed) and not lost:
                lost.append(effect)
        apply(name, [effect for effect in effects if all(effect is not x for x in lost)])

    net._apply = lossy  # type: ignore[method-assign]
    net.publish(P, KEY, b"p0", uid=7)
    assert lost and numbers(net, P) == [0] and numbers(net, S) == []
    net.advance(net.now + 1.0)
    assert numbers(net, S) == [0]


# --- the mark rides the packets ----------------------------------------------------------------


def marked(number: int, mark: int | None) -> SubscribeData:
    return dataclasses.replace(data(number), mark=mark)


def test_a_mark_on_a_packet_lets_a_member_show_what_came_before() -> None:
    node = joined_node()
    assert shown(node.receive(0.1, P, marked(0, None))) == []
    effects = node.receive(0.2, P, marked(1, 0))
    assert shown(effects) == [0] and node.streams[KEY].shown_upto == 0
    assert packets_to(effects, C) == [(1, 0)] and notices(effects) == []  # the packet tells C
    assert shown(node.receive(0.3, P, marked(2, 2))) == [1, 2]  # (a mark may cover its packet)


def test_a_member_forwards_the_very_packet_when_it_carries_the_members_mark() -> None:
    # (A relay forwards the object it decoded: the codec hands back its frame unencoded.)
    node = joined_node()
    node.receive(0.1, P, marked(0, None))
    packet = marked(1, 0)
    [(peer, sent)] = sends(node.receive(0.2, P, packet))
    assert peer == C and sent is packet


def test_a_member_stamps_its_own_mark_on_a_packet_that_carries_less() -> None:
    node = joined_node()
    for n in range(3):
        node.receive(0.1, P, marked(n, None))
    node.receive(0.2, P, Committed(KEY, 2))
    effects = node.receive(0.3, P, marked(3, 1))  # (an older mark: never lowers ours)
    assert packets_to(effects, C) == [(3, 2)] and node.streams[KEY].shown_upto == 2


def test_a_mark_on_a_packet_never_passes_the_packet() -> None:
    # Over a FIFO link the mark comes with its packet, so it covers at most what came
    # before and the packet itself: a later one is not covered, whatever it says.
    node = joined_node()
    effects = node.receive(0.1, P, marked(0, 5))
    assert shown(effects) == [0] and packets_to(effects, C) == [(0, 0)]


def test_the_root_stamps_what_it_committed_on_every_packet_it_sends() -> None:
    node = root()
    assert packets_to(node.publish(1.0, KEY, 1, 100, b"p0"), U) == [(0, None)]
    node.receive(1.001, U, Held(KEY, 0))
    # Packet 1 is stamped 0: the root does not know yet whether it will wait for packet 1.
    assert packets_to(node.publish(1.002, KEY, 1, 101, b"p1"), U) == [(1, 0)]


def test_the_root_stamps_every_packet_of_a_batch_with_what_it_committed_before_it() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    node.receive(1.001, U, Held(KEY, 0))
    effects = node.publish_batch(1.002, KEY, 1, [(101, b"p1"), (102, b"p2"), (103, b"p3")])
    [run] = [m for peer, m in sends(effects) if peer == U and type(m) is SubscribeRun]
    assert run.first == 1
    assert [item[-1] for item in run.packets] == [0, 0, 0]  # (each item's mark: 0)
    assert node.streams[KEY].shown_upto == 0


def test_over_real_cores_a_notice_lost_after_a_burst_is_mended_in_a_quiet_round() -> None:
    net = three(mark_delay=0.01, heartbeat_interval=1.0, dead_after=3.0)
    dropped: list[Message] = []
    apply = net._apply

    def lossy(name: bytes, effects: list[Effect]) -> None:
        keep = []
        for effect in effects:
            if (
                isinstance(effect, Send)
                and type(effect.message) is Committed
                and effect.peer == S
                and not dropped
            ):
                dropped.append(effect.message)
                continue
            keep.append(effect)
        apply(name, keep)

    net._apply = lossy  # type: ignore[method-assign]
    for n in range(3):
        net.publish(P, KEY, b"p%d" % n, uid=10 + n)
    assert numbers(net, S) == [0, 1]  # packets 1 and 2 carried 0 and 1; 2 waits for a notice
    net.advance(net.now + 0.02)
    assert dropped == [Committed(KEY, 2)] and numbers(net, P) == [0, 1, 2]
    assert numbers(net, S) == [0, 1]  # its notice was lost
    net.advance(net.now + 3.0)
    assert numbers(net, S) == [0, 1, 2]


def test_a_garbage_mark_is_refused_by_the_codec() -> None:
    frame = cbor2.loads(encode(marked(3, 2)))
    for garbage in (-1, MAX_PACKET + 1, "2", 2.0, True, b"\x02", [2]):
        frame[-1] = garbage
        with pytest.raises(DecodeError, match=r"SubscribeData\.mark"):
            decode(cbor2.dumps(frame))
    frame[-1] = None
    assert decode(cbor2.dumps(frame)) == marked(3, None)
    with pytest.raises(DecodeError, match="needs 9 fields"):
        decode(cbor2.dumps(frame[:-1]))  # (the frame from before marks: every node sends it)


# --- packets not shown yet stay in the window ------------------------------------------------


def test_a_member_keeps_packets_its_client_is_owed_past_the_window_until_shown() -> None:
    # The mark trails what a member received by what was in flight from the root: a fast
    # publisher makes that more than a window (the forwarding bench: its child's client
    # was told packets were missed that the tree had delivered).
    node = joined_node()
    node.streams[KEY].window.max_packets = 4
    for n in range(8):
        node.receive(0.1, P, marked(n, None))
    assert shown(node.receive(0.2, P, Committed(KEY, 7))) == list(range(8))
    node.receive(0.3, P, marked(8, 7))
    assert len(node.streams[KEY].window) == 4  # all shown: back within the bound


def test_a_member_keeps_at_most_twice_its_window_for_its_clients() -> None:
    node = joined_node()
    node.streams[KEY].window.max_packets = 4
    for n in range(10):
        node.receive(0.1, P, marked(n, None))
    assert len(node.streams[KEY].window) == 8
    assert shown(node.receive(0.2, P, Committed(KEY, 9))) == [(0, 1), *range(2, 10)]


def test_a_relay_without_clients_keeps_only_its_window() -> None:
    node = joined_node()
    node.unsubscribe(0.05, KEY, 1)
    node.streams[KEY].window.max_packets = 4
    for n in range(8):
        node.receive(0.1, P, marked(n, None))
    assert len(node.streams[KEY].window) == 4


def test_over_real_cores_a_burst_longer_than_the_window_reaches_a_member_whole() -> None:
    # The forwarding bench: 2048 packets in flight, windows of 1024. In small: the root
    # numbers 24 packets before its child has processed any, windows of 16.
    net = CoreNet(seed=1, config=NodeConfig(window_packets=16))
    net.add(R, 0.5)
    net.add(S, 0.9)
    net.connect(R, S)
    net.subscribe(S, KEY)
    for n in range(24):
        net._apply(R, net.nodes[R].publish(net.now, KEY, 7, 100 + n, b"p%d" % n))
    net.run()
    assert numbers(net, S) == list(range(24))
    assert not [e for e in net.received(S) if isinstance(e, Missed)]


# --- ``Showing`` built alone ----------------------------------------------------------------------


def showing(kit: Kit) -> tuple[Showing, Calls]:
    pump = Calls()
    return Showing(kit.config, kit.streams, kit.stats, kit.timers, kit.out, pump), pump


def test_a_root_stamps_its_mark_from_before_the_packet() -> None:
    kit = Kit()
    part, _ = showing(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    store(stream, 0, 1, 2)
    stamped = part.stamp(stream, packet(3))
    assert stamped.mark == 2  # everything processed: no bound applies
    assert stream.shown_upto == 2
    assert KEY in part.marks_sent and stream.root.mark_carried


def test_a_moved_mark_no_packet_took_down_is_told_once_the_event_is_done() -> None:
    kit = Kit()
    part, _ = showing(kit)
    stream = kit.stream(State.ROOT, children=(b"C", b"D"))
    store(stream, 0, 1)
    part.mark_moved(stream)
    assert KEY in part.marks_due
    part.tell_marks(5.0)
    assert kit.sent() == [(b"C", Committed(KEY, 1)), (b"D", Committed(KEY, 1))]
    assert not part.marks_due and kit.stats.commit_notices == 2


def test_a_member_shows_up_to_its_parents_mark_and_passes_it_on() -> None:
    kit = Kit()
    part, pump = showing(kit)
    stream = kit.stream(State.JOINED, parent=b"P", children=(b"C",))
    store(stream, 0, 1, 2, 3)
    part.on_committed(1.0, Committed(KEY, 2), stream)
    assert stream.shown_upto == 2
    assert pump.calls == [(stream,)]
    assert kit.sent() == [(b"C", Committed(KEY, 2))]


def test_a_member_never_takes_a_mark_past_what_it_processed() -> None:
    kit = Kit()
    part, _ = showing(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    store(stream, 0)
    stamped = part.stamp(stream, dataclasses.replace(packet(1), mark=7))
    assert stream.shown_upto == 1 and stamped.mark == 1


def test_it_registers_the_mark_timer_it_arms() -> None:
    kit = Kit()
    showing(kit)
    with pytest.raises(ValueError):
        kit.timers.on(MARK_TIMER, lambda now, uid, attempt: None)


_MARKS = st.one_of(st.none(), st.integers(0, 12))


@settings(max_examples=300, deadline=None)
@given(ours=_MARKS, first=st.integers(0, 6), marks=st.lists(_MARKS, min_size=1, max_size=6))
def test_a_members_run_is_stamped_as_its_packets_would_be_one_by_one(
    ours: int | None, first: int, marks: list[int | None]
) -> None:
    """A member stamps a run from its parent (``stamp_run``) exactly as each packet in turn:
    the same packets out, with the same marks, and the member's mark after them the same."""
    one_kit, run_kit = Kit(), Kit()
    showings = [showing(kit)[0] for kit in (one_kit, run_kit)]
    streams = [kit.stream(State.JOINED, parent=P) for kit in (one_kit, run_kit)]
    for stream in streams:
        stream.shown_upto = ours
    packets = [dataclasses.replace(packet(first + i), mark=mark) for i, mark in enumerate(marks)]
    one_by_one = [showings[0].stamp(streams[0], p) for p in packets]
    assert showings[1].stamp_run(streams[1], packets) == one_by_one
    assert streams[1].shown_upto == streams[0].shown_upto
