"""Window: bounded packets, holes and floor; mark_missing, replay and the lookups readers use."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.core.packet_map import PacketMap
from overlay.core.window import NOTHING_OWED, Missing, Window
from overlay.messages import MAX_PACKET, PacketKind, SubscribeData

KEY = b"k" * 32
NONE_HELD = 2**64  # what next_held answers when no packet is held at or above a number


def packet(number: int, size: int = 1) -> SubscribeData:
    return SubscribeData(KEY, number, bytes([number % 251]) * size, None, PacketKind.DATA, None)


def filled(numbers: list[int], max_packets: int = 100, max_bytes: int = 10_000) -> Window:
    window = Window(max_packets, max_bytes)
    for number in numbers:
        assert window.accepts(number)
        window.add(packet(number))
    return window


def replayed(window: Window, start: int, end: int) -> list[int | Missing]:
    """Replay as packet numbers and missing ranges, for compact comparisons."""
    return [
        item.packet if isinstance(item, SubscribeData) else item
        for item in window.replay(start, end)
    ]


def check_invariants(window: Window) -> None:
    numbers = list(window.packets)
    holes = list(window.holes.items())
    assert len(window) == len(numbers) <= window.max_packets
    assert len(holes) <= window.max_packets
    assert window.bytes == sum(len(p.data) for p in window.packets.values())
    assert window.bytes <= window.max_bytes or len(window) == 1
    assert all(number >= window.floor for number in numbers)
    assert all(window.floor <= first <= last for first, last in holes)
    assert all(a_last < b_first for (_, a_last), (b_first, _) in pairwise(holes))
    for first, last in holes:
        assert not list(window.packets.irange(first, last)), f"hole {first}..{last} holds packets"


def test_empty_window() -> None:
    window = Window(4, 100)
    assert len(window) == 0
    assert window.get(0) is None
    assert window.accepts(0)
    assert window.next_held(0) == NONE_HELD
    assert window.missing_until(0) is None
    assert replayed(window, 0, 4) == [(0, 4)]
    assert (window.floor, window.bytes, window.evicted) == (0, 0, 0)


def test_add_holds_and_counts_bytes() -> None:
    window = Window(10, 100)
    window.add(packet(3, size=5))
    window.add(packet(4, size=7))
    assert window.get(3) == packet(3, size=5)
    assert window.bytes == 12
    assert not window.accepts(3)
    assert window.accepts(5)
    assert window.accepts(2)  # not below the floor, not held: it may still arrive
    check_invariants(window)


def test_eviction_by_packet_count_drops_the_oldest_and_raises_the_floor() -> None:
    window = filled(list(range(6)), max_packets=3)
    assert list(window.packets) == [3, 4, 5]
    assert window.floor == 3
    assert window.evicted == 3
    assert window.bytes == 3
    assert not window.accepts(2)  # evicted: never accepted again
    assert window.accepts(6)
    check_invariants(window)


def test_eviction_by_bytes() -> None:
    window = Window(100, 10)
    for number in range(3):
        window.add(packet(number, size=4))
    assert list(window.packets) == [1, 2]
    assert (window.bytes, window.floor, window.evicted) == (8, 1, 1)
    check_invariants(window)


def test_newest_packet_is_kept_even_when_it_alone_exceeds_max_bytes() -> None:
    window = Window(100, 5)
    window.add(packet(0, size=3))
    window.add(packet(1, size=50))
    assert list(window.packets) == [1]
    assert window.bytes == 50
    assert window.floor == 1
    window.add(packet(2, size=1))  # the big one is now the oldest and goes
    assert list(window.packets) == [2]
    assert (window.bytes, window.floor, window.evicted) == (1, 2, 2)


def test_a_late_older_packet_is_the_one_evicted() -> None:
    window = filled([5], max_packets=1)
    window.add(packet(3))
    assert list(window.packets) == [5]
    assert window.floor == 4
    assert not window.accepts(3)


def test_floor_raising_trims_holes_below_it() -> None:
    window = filled([0, 3, 9], max_packets=3)
    assert window.mark_missing(1, 2) == [(1, 2)]
    assert window.mark_missing(4, 8) == [(4, 8)]
    window.add(packet(10))  # evicts 0: floor 1, both holes still at or above it
    assert window.floor == 1
    assert dict(window.holes) == {1: 2, 4: 8}
    window.add(packet(11))  # evicts 3: floor 4, the hole 1..2 is gone
    assert window.floor == 4
    assert dict(window.holes) == {4: 8}
    assert window.missing_until(1) is None
    assert not window.accepts(1)
    check_invariants(window)


def test_mark_missing_records_a_hole() -> None:
    window = Window(10, 100)
    assert window.mark_missing(2, 5) == [(2, 5)]
    for number in range(2, 6):
        assert window.missing_until(number) == 5
        assert not window.accepts(number)
    assert window.missing_until(1) is None
    assert window.missing_until(6) is None
    assert window.accepts(1)
    assert window.accepts(6)


def test_mark_missing_reports_only_what_is_new() -> None:
    window = filled([3, 7])
    assert window.mark_missing(10, 12) == [(10, 12)]
    assert window.mark_missing(0, 15) == [(0, 2), (4, 6), (8, 9), (13, 15)]
    assert window.mark_missing(0, 15) == []  # all held or missing already
    assert list(window.packets) == [3, 7]  # held packets are untouched
    check_invariants(window)


def test_mark_missing_starting_inside_a_hole() -> None:
    window = Window(10, 100)
    window.mark_missing(5, 10)
    assert window.mark_missing(7, 14) == [(11, 14)]
    assert window.mark_missing(0, 7) == [(0, 4)]
    check_invariants(window)


def test_mark_missing_below_the_floor_is_ignored() -> None:
    window = filled([0, 1, 2, 3, 4, 5], max_packets=2)
    assert window.floor == 4
    assert window.mark_missing(0, 3) == []
    assert window.mark_missing(1, 8) == [(6, 8)]
    assert not window.holes.keys() & set(range(4))
    check_invariants(window)


def test_mark_missing_of_an_empty_range() -> None:
    window = Window(10, 100)
    assert window.mark_missing(5, 4) == []
    assert not window.holes


class CountingPackets(PacketMap):
    """Counts membership tests: mark_missing must not step through a range one by one."""

    def __init__(self, packets: PacketMap) -> None:
        super().__init__()
        for number, packet in packets.items():
            self[number] = packet
        self.lookups = 0

    def __contains__(self, number: object) -> bool:
        self.lookups += 1
        assert self.lookups < 10_000, "mark_missing walks a huge range number by number"
        return super().__contains__(number)


def test_a_huge_hostile_range_is_marked_in_steps_of_known_numbers() -> None:
    window = filled([10, 20, 2**40])
    window.mark_missing(30, 40)
    window.packets = CountingPackets(window.packets)
    wide = window.mark_missing(0, 2**62)
    assert wide == [(0, 9), (11, 19), (21, 29), (41, 2**40 - 1), (2**40 + 1, 2**62)]
    assert window.missing_until(2**61) == 2**62
    assert window.mark_missing(0, MAX_PACKET) == [(2**62 + 1, MAX_PACKET)]
    assert window.packets.lookups < 100
    check_invariants(window)


def test_holes_stay_bounded_however_many_ranges_a_parent_reports() -> None:
    # Every other number reported missing makes as many separate holes as reports; the
    # window's memory must still be bounded by its configuration, not by that traffic.
    window = filled([0, 1], max_packets=4)
    for number in range(2, 400, 2):
        assert window.mark_missing(number, number) == [(number, number)]
        check_invariants(window)
        assert len(window.holes) <= window.max_packets
    for number in range(2, 400, 2):  # every one is still known missing, none accepted
        assert not window.accepts(number)
    assert [item for item in replayed(window, 0, 398) if isinstance(item, int)] == []


def test_replay_walks_packets_and_reports_everything_else_missing() -> None:
    window = filled([2, 3, 6])
    window.mark_missing(4, 4)
    assert replayed(window, 0, 9) == [(0, 1), 2, 3, (4, 5), 6, (7, 9)]
    assert replayed(window, 3, 3) == [3]
    assert replayed(window, 4, 4) == [(4, 4)]
    assert replayed(window, 5, 4) == []


def test_replay_reports_evicted_numbers_as_missing() -> None:
    window = filled(list(range(8)), max_packets=3)
    assert replayed(window, 0, 9) == [(0, 4), 5, 6, 7, (8, 9)]
    assert replayed(window, 1, 3) == [(1, 3)]
    assert replayed(window, 4, 6) == [(4, 4), 5, 6]


def test_next_held_and_missing_until_at_the_edges() -> None:
    window = filled([5, 9])
    window.mark_missing(6, 7)
    assert [window.next_held(n) for n in (0, 5, 6, 9, 10)] == [5, 5, 9, 9, NONE_HELD]
    assert [window.missing_until(n) for n in (5, 6, 7, 8)] == [None, 7, 7, None]


# --- against a model ----------------------------------------------------------------------------

NUMBERS = st.integers(0, 40)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), NUMBERS, st.integers(0, 6)),
        st.tuples(st.just("miss"), NUMBERS, NUMBERS),
    ),
    max_size=40,
)


class Model:
    """The window's specification, written as plainly as possible over small numbers."""

    def __init__(self, max_packets: int, max_bytes: int) -> None:
        self.max_packets, self.max_bytes = max_packets, max_bytes
        self.held: dict[int, int] = {}  # number -> payload size
        self.holes: list[Missing] = []
        self.floor = self.evicted = 0

    def missing(self, number: int) -> bool:
        return any(a <= number <= b for a, b in self.holes)

    def accepts(self, number: int) -> bool:
        return number >= self.floor and number not in self.held and not self.missing(number)

    def forget_below(self, floor: int) -> None:
        for number in [n for n in self.held if n < floor]:
            del self.held[number]
            self.evicted += 1
        self.floor = max(self.floor, floor)
        self.holes = [(max(a, self.floor), b) for a, b in self.holes if b >= self.floor]

    def add(self, number: int, size: int) -> None:
        self.held[number] = size
        while len(self.held) > 1 and (
            len(self.held) > self.max_packets or sum(self.held.values()) > self.max_bytes
        ):
            self.forget_below(min(self.held) + 1)

    def mark_missing(self, first: int, last: int) -> list[Missing]:
        fresh = [n for n in range(max(first, self.floor), last + 1) if self.accepts(n)]
        runs: list[Missing] = []
        for number in fresh:
            if runs and runs[-1][1] == number - 1:
                runs[-1] = (runs[-1][0], number)
            else:
                runs.append((number, number))
        self.holes = sorted(self.holes + runs)
        while len(self.holes) > self.max_packets:
            self.forget_below(self.holes[0][1] + 1)
        return runs


@settings(max_examples=400, deadline=None)
@given(max_packets=st.integers(1, 6), max_bytes=st.integers(0, 20), ops=OPS)
def test_window_matches_its_model(
    max_packets: int, max_bytes: int, ops: list[tuple[str, int, int]]
) -> None:
    window, model = Window(max_packets, max_bytes), Model(max_packets, max_bytes)
    for op, a, b in ops:
        if op == "add":
            assert window.accepts(a) == model.accepts(a)
            if model.accepts(a):
                newest = max([a, *model.held])
                window.add(packet(a, size=b))
                model.add(a, b)
                assert window.get(newest) is not None, "the newest packet must be kept"
        else:
            assert window.mark_missing(a, b) == model.mark_missing(a, b)
        check_invariants(window)
        assert {n: len(p.data) for n, p in window.packets.items()} == model.held
        assert list(window.holes.items()) == model.holes
        assert (window.floor, window.evicted) == (model.floor, model.evicted)
    for number in range(45):
        assert window.accepts(number) == model.accepts(number)
        assert (window.missing_until(number) is not None) == model.missing(number)
        later = [n for n in model.held if n >= number]
        assert window.next_held(number) == (min(later) if later else NONE_HELD)


@settings(max_examples=300, deadline=None)
@given(
    held=st.sets(st.integers(0, 30), max_size=12),
    missing=st.lists(st.tuples(NUMBERS, NUMBERS), max_size=4),
    max_packets=st.integers(1, 12),
    start=NUMBERS,
    end=NUMBERS,
)
def test_replay_covers_every_number_exactly_once_in_order(
    held: set[int], missing: list[Missing], max_packets: int, start: int, end: int
) -> None:
    window = filled(sorted(held), max_packets=max_packets)
    for first, last in missing:
        window.mark_missing(first, last)
    expected = start
    for item in window.replay(start, end):
        if isinstance(item, SubscribeData):
            assert item.packet == expected
            assert window.get(expected) is item
            expected += 1
        else:
            first, last = item
            assert first == expected <= last <= end
            assert not any(window.get(n) for n in range(first, last + 1)), "a held one skipped"
            expected = last + 1
    assert expected == max(start, end + 1)


def test_reopen_forgets_the_newest_holes_up_to_a_number() -> None:
    window = Window(100, 10**6)
    for first, last in ((2, 3), (6, 6), (9, 12)):
        window.mark_missing(first, last)
    # The newest ``limit`` holes at or below 10, the last one cut at 10.
    assert window.reopen(10, 2) == [(6, 6), (9, 10)]
    assert dict(window.holes) == {2: 3, 11: 12}
    assert window.accepts(6) and window.accepts(10) and not window.accepts(11)
    assert window.reopen(1, 8) == []
    assert window.reopen(20, 8) == [(2, 3), (11, 12)]
    assert not window.holes


@settings(max_examples=200, deadline=None)
@given(
    held=st.lists(st.integers(0, 40), max_size=30, unique=True),
    holes=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), max_size=3),
    run=st.lists(st.integers(1, 300), min_size=1, max_size=30),
    max_packets=st.integers(1, 12),
    max_bytes=st.integers(1, 2_000),
    keep_from=st.sampled_from([0, 20, 45, 2**64]),
)
def test_a_run_added_at_once_leaves_the_window_as_adding_each_would(
    held: list[int],
    holes: list[tuple[int, int]],
    run: list[int],
    max_packets: int,
    max_bytes: int,
    keep_from: int,
) -> None:
    # ``run``: the sizes of consecutive packets from past everything held on.
    windows = []
    for at_once in (False, True):
        window = Window(max_packets, max_bytes)
        for number in sorted(held):
            window.add(packet(number, 50))
        for first, length in holes:
            window.mark_missing(first, first + length)
        window.keep_from = keep_from
        start = max([*held, *(a + n for a, n in holes), 0]) + 1
        packets = [packet(start + i, size) for i, size in enumerate(run)]
        if at_once:
            window.add_run(packets)
        else:
            for p in packets:
                window.add(p)
        if keep_from == NOTHING_OWED:  # (packets owed may take up to twice the bounds)
            check_invariants(window)
        windows.append(window)
    one, other = windows
    assert list(one.packets.items()) == list(other.packets.items())
    assert list(one.holes.items()) == list(other.holes.items())
    assert (one.floor, one.bytes, one.evicted) == (other.floor, other.bytes, other.evicted)


def evicted_one_at_a_time(
    numbers: list[int], sizes: list[int], max_packets: int, max_bytes: int, keep_from: int
) -> tuple[list[int], int]:
    """The rule ``Window.add`` states, applied after each packet by itself: the oldest goes
    while the window is past a bound, unless a client is owed it and the window is within
    twice its bounds. The numbers left, and the bytes they hold."""
    held: list[tuple[int, int]] = []
    for number, size in zip(numbers, sizes, strict=True):
        held.append((number, size))
        while len(held) > 1 and (len(held) > max_packets or sum(s for _, s in held) > max_bytes):
            total = sum(s for _, s in held)
            if held[0][0] >= keep_from and len(held) <= 2 * max_packets and total <= 2 * max_bytes:
                break
            held.pop(0)
    return [n for n, _ in held], sum(s for _, s in held)


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=60),
    max_packets=st.integers(1, 10),
    max_bytes=st.integers(1, 3_000),
    keep_from=st.integers(0, 70) | st.just(NOTHING_OWED),
    run=st.booleans(),
)
def test_eviction_is_the_one_at_a_time_rule(
    sizes: list[int], max_packets: int, max_bytes: int, keep_from: int, run: bool
) -> None:
    # Packets 0, 1, ... of these sizes, added one by one or as one run: the window keeps
    # exactly what the rule, applied after each packet, keeps (a run may keep more owed
    # packets, never fewer, as it is checked once: compared one by one only).
    window = Window(max_packets, max_bytes)
    window.keep_from = keep_from
    numbers = list(range(len(sizes)))
    packets = [packet(n, size) for n, size in zip(numbers, sizes, strict=True)]
    if run:
        window.add_run(packets)
    else:
        for p in packets:
            window.add(p)
    if run and keep_from != NOTHING_OWED:
        return  # (checked against one by one in the test above)
    kept, held = evicted_one_at_a_time(numbers, sizes, max_packets, max_bytes, keep_from)
    assert list(window.packets) == kept
    assert window.bytes == held and window.evicted == len(sizes) - len(kept)
    assert window.floor == (kept[0] if len(kept) < len(sizes) else 0)


@settings(max_examples=300, deadline=None)
@given(
    held=st.lists(st.integers(0, 30), max_size=8, unique=True),
    hole=st.one_of(st.none(), st.tuples(st.integers(0, 30), st.integers(0, 4))),
    first=st.integers(0, 34),
    count=st.integers(1, 5),
)
def test_a_run_is_accepted_in_one_look_only_if_each_of_its_numbers_is(
    held: list[int], hole: tuple[int, int] | None, first: int, count: int
) -> None:
    """``accepts_run`` never says yes to a run with a number ``accepts`` refuses (held, in
    a hole, below the floor), and says yes past everything held when there is no hole."""
    window = filled(sorted(held), max_packets=5)
    if hole is not None:
        window.mark_missing(hole[0], hole[0] + hole[1])
    numbers = range(first, first + count)
    if window.accepts_run(first, count):
        assert all(window.accepts(n) for n in numbers)
    past_all = not window.packets or first > max(window.packets)
    if not window.holes and past_all and first >= window.floor:
        assert window.accepts_run(first, count)
