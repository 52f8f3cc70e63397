"""pump: in-order, exactly-once delivery to one client, with atomic epochs delivered whole."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.core.delivery import Member, as_event, pump
from overlay.core.events import ClientEvent, Epoch, EpochAborted, EpochSkipped, Missed, Packet
from overlay.core.window import Window
from overlay.messages import PacketKind, SubscribeData

KEY = b"k" * 32
DATA, CLOSED, ABORTED = PacketKind.DATA, PacketKind.EPOCH_CLOSED, PacketKind.EPOCH_ABORTED


def data(number: int, epoch: int | None = None, first: int | None = None) -> SubscribeData:
    if epoch is not None and first is None:
        first = number
    return SubscribeData(KEY, number, b"d%d" % number, epoch, DATA, None, first)


def marker(number: int, epoch: int, first: int, kind: PacketKind = CLOSED) -> SubscribeData:
    return SubscribeData(KEY, number, b"", epoch, kind, None, first)


def window_of(*packets: SubscribeData, max_packets: int = 100) -> Window:
    window = Window(max_packets, 10**6)
    for packet in packets:
        window.add(packet)
    return window


def plain(cursor: int) -> Member:
    return Member(cursor=cursor, since=cursor)


def atomic(cursor: int, since: int | None = None) -> Member:
    return Member(atomic=True, cursor=cursor, since=cursor if since is None else since)


def test_nothing_for_a_member_without_cursor_or_that_only_publishes() -> None:
    window = window_of(data(0))
    waiting, publisher = Member(), Member(receives=False, cursor=0)
    assert pump(KEY, waiting, window, 0) == []
    assert pump(KEY, publisher, window, 0) == []
    assert (waiting.cursor, publisher.cursor) == (None, 0)


def test_held_packets_in_order_then_wait_for_the_next() -> None:
    window = window_of(data(0), data(1), data(3))
    member = plain(0)
    assert pump(KEY, member, window, 0) == [as_event(data(0)), as_event(data(1))]
    assert member.cursor == 2
    assert pump(KEY, member, window, 0) == []  # 2 may still arrive: wait, deliver nothing again
    window.add(data(2))
    assert pump(KEY, member, window, 0) == [as_event(data(2)), as_event(data(3))]
    assert member.cursor == 4


def test_a_hole_is_one_missed_event() -> None:
    window = window_of(data(0), data(4))
    window.mark_missing(1, 3)
    member = plain(0)
    events = pump(KEY, member, window, 0)
    assert events == [as_event(data(0)), Missed(KEY, 1, 3), as_event(data(4))]
    assert member.since == 4


def test_nothing_past_until_is_delivered_nor_called_missed() -> None:
    # ``until`` is what the root committed (``overlay.core.showing``): a number past it may
    # yet be given to a packet, were the tree to lose what it holds and number it again.
    window = window_of(data(0), data(5))
    window.mark_missing(1, 4)
    member = plain(0)
    assert pump(KEY, member, window, 0, until=2) == [as_event(data(0)), Missed(KEY, 1, 2)]
    assert (member.cursor, member.since) == (3, 3)
    assert pump(KEY, member, window, 0, until=5) == [Missed(KEY, 3, 4), as_event(data(5))]
    evicted = window_of(*(data(n) for n in range(6)), max_packets=2)
    member = plain(0)
    assert pump(KEY, member, evicted, 0, until=1) == [Missed(KEY, 0, 1)]
    assert pump(KEY, member, evicted, 0, until=5) == [
        Missed(KEY, 2, 3),
        as_event(data(4)),
        as_event(data(5)),
    ]


def test_evicted_packets_are_missed() -> None:
    window = window_of(*(data(n) for n in range(6)), max_packets=2)
    member = plain(1)
    assert pump(KEY, member, window, 0) == [
        Missed(KEY, 1, 3),
        as_event(data(4)),
        as_event(data(5)),
    ]
    assert member.since == 4


def test_what_came_before_the_node_joined_is_missed() -> None:
    window = window_of(data(4), data(10))
    member = plain(0)
    assert pump(KEY, member, window, contiguous_from=10) == [
        Missed(KEY, 0, 3),
        as_event(data(4)),
        Missed(KEY, 5, 9),
        as_event(data(10)),
    ]


def test_a_cursor_past_the_stream_waits() -> None:
    member = plain(7)
    assert pump(KEY, member, window_of(data(0)), 0) == []
    assert member.cursor == 7


def test_plain_members_get_markers_as_packets() -> None:
    window = window_of(data(0, 1), marker(1, 1, 0))
    events = pump(KEY, plain(0), window, 0)
    assert events == [as_event(data(0, 1)), as_event(marker(1, 1, 0))]
    assert isinstance(events[1], Packet)
    assert events[1].kind is CLOSED


def test_an_epoch_is_held_back_then_delivered_whole_at_its_marker() -> None:
    stream = [data(0, 1), data(1), data(2, 2), data(3, 1, 0), marker(4, 1, 0)]
    window = window_of(*stream[:4])
    member = atomic(0)
    assert pump(KEY, member, window, 0) == [as_event(data(1))]  # no epoch: as it comes
    window.add(stream[4])
    whole = (as_event(stream[0]), as_event(stream[3]))
    assert pump(KEY, member, window, 0) == [Epoch(KEY, 1, whole, closed_at=4)]
    assert pump(KEY, member, window, 0) == []
    assert member.cursor == 5


def test_an_empty_epoch_is_delivered_empty() -> None:
    assert pump(KEY, atomic(0), window_of(marker(0, 3, 0)), 0) == [Epoch(KEY, 3, (), 0)]


def test_an_aborted_epoch_delivers_nothing_of_it() -> None:
    window = window_of(data(0, 1), data(1), data(2, 1, 0), marker(3, 1, 0, ABORTED), data(4))
    events = pump(KEY, atomic(0), window, 0)
    assert events == [as_event(data(1)), EpochAborted(KEY, 1), as_event(data(4))]


def test_an_epoch_begun_before_the_member_joined_is_skipped() -> None:
    window = window_of(data(0, 1), data(1, 1, 0), marker(2, 1, 0))
    events = pump(KEY, atomic(1), window, 0)
    assert events == [EpochSkipped(KEY, 1, "the epoch began before this subscriber joined")]


def test_an_epoch_begun_before_the_node_saw_the_stream_is_skipped() -> None:
    # The epoch began at 2, which this node never held (it joined at 3): torn here.
    window = window_of(data(3, 1, 2), data(4, 1, 2), marker(5, 1, 2))
    assert pump(KEY, atomic(3, since=0), window, contiguous_from=3) == [
        EpochSkipped(KEY, 1, "this node did not see the whole epoch")
    ]


def test_a_whole_epoch_is_delivered_even_if_the_node_lost_packets_after_it() -> None:
    # A hole after the epoch (numbers 4..5) says nothing about the epoch itself.
    window = window_of(data(0, 1), data(1, 1, 0), marker(2, 1, 0), data(3), data(6))
    window.mark_missing(4, 5)
    events = pump(KEY, atomic(0), window, contiguous_from=6)
    assert events[0] == Epoch(KEY, 1, (as_event(data(0, 1)), as_event(data(1, 1, 0))), 2)


def test_an_epoch_from_exactly_where_member_and_node_began_is_whole() -> None:
    stream = [data(3, 1), data(4, 1, 3), marker(5, 1, 3)]
    whole = Epoch(KEY, 1, (as_event(stream[0]), as_event(stream[1])), 5)
    assert pump(KEY, atomic(3), window_of(*stream), contiguous_from=3) == [whole]
    # A fresh member placed at the head after the epoch began still gets it whole.
    assert pump(KEY, atomic(5, since=0), window_of(*stream), contiguous_from=3) == [whole]
    # And so does one whose epoch begins exactly at the window's floor.
    window = window_of(data(2), *stream, max_packets=3)
    assert window.floor == 3
    assert pump(KEY, atomic(3), window, contiguous_from=2) == [whole]


def test_an_epoch_partly_evicted_after_the_cursor_passed_it_is_skipped() -> None:
    window = window_of(data(0, 1), data(1, 1, 0), max_packets=2)
    member = atomic(0)
    assert pump(KEY, member, window, 0) == []  # both held back
    window.add(data(2))  # evicts packet 0 of the epoch
    window.add(marker(3, 1, 0))
    assert pump(KEY, member, window, 0) == [
        as_event(data(2)),
        EpochSkipped(KEY, 1, "part of the epoch left the node's window"),
    ]


def test_an_epoch_with_a_hole_in_it_is_skipped() -> None:
    window = window_of(data(0, 1), data(2, 1, 0), marker(3, 1, 0))
    window.mark_missing(1, 1)
    events = pump(KEY, atomic(0), window, 0)
    assert [type(event) for event in events] == [Missed, EpochSkipped]


# --- random streams, arrival orders and pump times against what must be delivered -------------


@st.composite
def sources(draw: st.DrawFn) -> list[SubscribeData]:
    """A stream as a root orders it: plain data, and epochs opened, written, closed, aborted."""
    stream: list[SubscribeData] = []
    open_epochs: dict[int, int] = {}  # epoch -> its first packet
    for number in range(draw(st.integers(1, 24))):
        action = draw(st.sampled_from(("plain", "new", "data", "close", "abort")))
        if action == "plain":
            stream.append(data(number))
            continue
        if action == "new" or not open_epochs:
            epoch, first = len(stream) + 100, number  # unused, and distinct per number
        else:
            epoch = draw(st.sampled_from(sorted(open_epochs)))
            first = open_epochs[epoch]
        if action in ("new", "data"):
            open_epochs.setdefault(epoch, first)
            stream.append(data(number, epoch, first))
        else:
            open_epochs.pop(epoch, None)
            stream.append(marker(number, epoch, first, CLOSED if action == "close" else ABORTED))
    return stream


def walk(
    events: list[ClientEvent],
    source: list[SubscribeData],
    start: int,
    is_atomic: bool,
    may_miss: Callable[[int], bool],
) -> dict[int, ClientEvent]:
    """Check events are in order, once each, never torn; return each epoch's outcome."""
    markers = {p.epoch: p for p in source if p.kind is not DATA}
    outcomes: dict[int, ClientEvent] = {}
    position = start  # the next number not yet accounted for
    for event in events:
        if isinstance(event, Missed):
            first, last = event.first, event.last
            assert all(may_miss(n) for n in range(first, last + 1)), f"{event} was deliverable"
        elif isinstance(event, Packet):
            first = last = event.number
            assert event == as_event(source[event.number])
            assert not is_atomic or event.epoch is None, "atomic members get epochs whole"
        else:
            assert is_atomic and isinstance(event, Epoch | EpochSkipped | EpochAborted)
            assert event.epoch not in outcomes, f"epoch {event.epoch} delivered twice"
            outcomes[event.epoch] = event
            first = last = markers[event.epoch].packet
            kind = EPOCH_OUTCOMES[type(event)]
            assert markers[event.epoch].kind is kind
            if isinstance(event, Epoch):
                epoch = event.epoch
                whole = [p for p in source if p.epoch == epoch and p.kind is DATA]
                assert event.packets == tuple(map(as_event, whole)), "a torn epoch"
                assert event.closed_at == first
        assert position <= first <= last, f"{event} out of order or twice"
        skipped = source[position:first] if is_atomic else []
        assert len(skipped) == first - position, f"{position}..{first - 1} skipped in silence"
        assert all(p.epoch is not None and p.kind is DATA for p in skipped)
        position = last + 1
    rest = source[position:]
    assert not rest or (is_atomic and all(p.epoch is not None and p.kind is DATA for p in rest))
    return outcomes


EPOCH_OUTCOMES = {Epoch: CLOSED, EpochSkipped: CLOSED, EpochAborted: ABORTED}


def expected_outcome(source: list[SubscribeData], lost: set[int], since: int, m: int) -> type:
    """What an atomic member must get for the marker at ``m`` when nothing was evicted."""
    closing = source[m]
    if closing.kind is ABORTED:
        return EpochAborted
    assert closing.epoch_first is not None
    whole = closing.epoch_first >= since and not lost & set(range(closing.epoch_first, m + 1))
    return Epoch if whole else EpochSkipped


def check_outcomes(
    outcomes: dict[int, ClientEvent],
    source: list[SubscribeData],
    lost: set[int],
    start: int,
    since: int,
) -> None:
    """With nothing evicted: every marker from ``start`` on that came has its outcome."""
    for closing in source[start:]:
        if closing.kind is not DATA and closing.packet not in lost:
            assert closing.epoch is not None
            outcome = outcomes.get(closing.epoch)
            expected = expected_outcome(source, lost, since, closing.packet)
            assert type(outcome) is expected, f"epoch {closing.epoch}: {outcome}"


@settings(max_examples=400, deadline=None)
@given(source=sources(), draw=st.data())
def test_any_arrival_order_and_pump_times(source: list[SubscribeData], draw: st.DataObject) -> None:
    n = len(source)
    order = draw.draw(st.permutations(range(n)), label="order")
    lost = draw.draw(st.sets(st.integers(0, n - 1)), label="lost")
    pumps = draw.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="pumps")
    start = draw.draw(st.integers(0, n), label="start")
    window = Window(draw.draw(st.integers(1, 40), label="max_packets"), 10**6)
    members = {plain(start): list[ClientEvent](), atomic(start): list[ClientEvent]()}
    for number, pump_now in zip(order, pumps, strict=True):
        if number in lost:
            window.mark_missing(number, number)
        elif window.accepts(number):
            window.add(source[number])
        for member, events in members.items():
            if pump_now:
                events += pump(KEY, member, window, 0)
    for member, events in members.items():
        events += pump(KEY, member, window, 0)
        assert member.cursor == n, "everything is known: nothing may be left waiting"
        assert pump(KEY, member, window, 0) == []
        outcomes = walk(
            events, source, start, member.atomic, lambda m: m in lost or m < window.floor
        )
        if window.floor == 0:  # nothing left the window: everything that came is delivered
            if member.atomic:
                check_outcomes(outcomes, source, lost, start, start)
            else:
                got = {e.number for e in events if isinstance(e, Packet)}
                assert got == set(range(start, n)) - lost


@settings(max_examples=400, deadline=None)
@given(source=sources(), draw=st.data())
def test_in_order_arrival_as_a_node_sees_it(
    source: list[SubscribeData], draw: st.DataObject
) -> None:
    # The node's driver: packets come in order, a gap before one is marked missing, and
    # contiguous_from is where the node began, moved past every gap (see publishing.py).
    n = len(source)
    lost = draw.draw(st.sets(st.integers(0, n - 1)), label="lost")
    start = draw.draw(st.integers(0, n), label="start")  # resubscribers' first owed number
    join = draw.draw(st.integers(0, n), label="join")  # when a fresh atomic client arrives
    window = Window(draw.draw(st.integers(1, 40), label="max_packets"), 10**6)
    resubscribed = {plain(start): list[ClientEvent](), atomic(start): list[ClientEvent]()}
    fresh, fresh_events, fresh_start = Member(atomic=True), list[ClientEvent](), 0
    next_in: int | None = None
    contiguous: int | None = None
    for number in range(n + 1):
        if number == join:
            fresh.cursor = fresh_start = next_in or 0
        if number == n:  # the parent says the rest is missed
            if (next_in or 0) < n:
                window.mark_missing(next_in or 0, n - 1)
                contiguous = n
        elif number not in lost:
            if next_in is not None and number > next_in:
                window.mark_missing(next_in, number - 1)
                contiguous = number
            assert window.accepts(number)
            window.add(source[number])
            next_in = number + 1
            contiguous = number if contiguous is None else contiguous
        for member, events in [*resubscribed.items(), (fresh, fresh_events)]:
            events += pump(KEY, member, window, contiguous)
    begun = min(set(range(n)) - lost, default=n)  # what came before it never reached the node

    def gone(number: int) -> bool:
        return number in lost or number < begun or number < window.floor

    for member, events in resubscribed.items():
        outcomes = walk(events, source, start, member.atomic, gone)
        assert member.cursor == n
        if window.floor == 0 and member.atomic:
            check_outcomes(outcomes, source, lost, start, start)
        elif window.floor == 0:
            got = {e.number for e in events if isinstance(e, Packet)}
            assert got == set(range(start, n)) - lost
    outcomes = walk(fresh_events, source, fresh_start, True, gone)
    assert fresh.cursor == n
    if window.floor == 0:
        check_outcomes(outcomes, source, lost, fresh_start, 0)
