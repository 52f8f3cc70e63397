"""A window's packet map answers every query exactly as a sorted map would, under any mix of
appends, fills below the head, evictions of the oldest and compactions: driven side by side
with ``sortedcontainers.SortedDict``."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sortedcontainers import SortedDict

from overlay.core.packet_map import PacketMap
from overlay.messages import PacketKind, SubscribeData


def packet(number: int) -> SubscribeData:
    return SubscribeData(bytes(32), number, b"%d" % number, None, PacketKind.DATA, None)


def same(ours: PacketMap, theirs: SortedDict) -> None:
    assert len(ours) == len(theirs) and bool(ours) == bool(theirs)
    assert list(ours) == list(theirs)
    assert ours.items() == list(theirs.items())
    assert ours.values() == list(theirs.values())
    if theirs:
        assert ours.first() == theirs.keys()[0]
        assert ours.peekitem(0) == theirs.peekitem(0)
        assert ours.peekitem(-1) == theirs.peekitem(-1)
        assert ours.peekitem(len(theirs) // 2) == theirs.peekitem(len(theirs) // 2)
    low = theirs.keys()[0] - 2 if theirs else 0
    high = theirs.keys()[-1] + 2 if theirs else 3
    for n in range(low, high + 1):
        assert (n in ours) == (n in theirs)
        assert ours.get(n) == theirs.get(n)
        assert ours.bisect_left(n) == theirs.bisect_left(n)
        assert ours.bisect_right(n) == theirs.bisect_right(n)
        assert list(ours.irange(n, n + 3)) == list(theirs.irange(n, n + 3))
        for top in (n - 1, n, n + 2, high + 5):
            assert ours.run_from(n, top) == consecutive(theirs, n, top)


def consecutive(theirs: SortedDict, low: int, high: int) -> list[SubscribeData]:
    """The packets held from ``low`` up to ``high``, until the first number missing."""
    run = []
    while low <= high and low in theirs:
        run.append(theirs[low])
        low += 1
    return run


# One step: ("append", gap), ("put", n), ("pop", _): the oldest out; ("pops", k): the k
# oldest at once; ("run", k): k consecutive numbers past the head at once
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("put"), st.integers(0, 300)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("pops"), st.integers(0, 80)),
        st.tuples(st.just("run"), st.integers(1, 80)),
    ),
    max_size=400,
)


@settings(max_examples=150, deadline=None)
@given(steps)
def test_any_sequence_of_changes_leaves_it_equal_to_a_sorted_map(
    changes: list[tuple[str, int]],
) -> None:
    ours, theirs = PacketMap(), SortedDict()
    head = 0
    for what, value in changes:
        if what == "append":
            head += value
            ours[head] = theirs[head] = packet(head)
        elif what == "put":
            ours[value] = theirs[value] = packet(value)
            head = max(head, value)
        elif what == "pop" and theirs:
            assert ours.pop_first() == theirs.popitem(0)
        elif what == "pops":
            count = min(value, len(theirs))
            assert ours.pop_firsts(value) == [theirs.popitem(0)[1] for _ in range(count)]
        elif what == "run":
            run = [packet(head + 1 + i) for i in range(value)]
            ours.extend(run)
            for p in run:
                theirs[p.packet] = p
            head += value
        same(ours, theirs)


def test_a_window_that_slides_far_stays_small_and_ordered() -> None:
    ours = PacketMap()
    for n in range(100_000):
        ours[n] = packet(n)
        if len(ours) > 100:
            assert ours.pop_first()[0] == n - 100
    assert list(ours) == list(range(99_900, 100_000))
    assert len(ours._numbers) <= 2 * 100 + 64  # (compacted as it went)


def test_out_of_range_indices_raise_as_a_sorted_map_does() -> None:
    ours = PacketMap()
    with pytest.raises(IndexError):
        ours.peekitem(0)
    with pytest.raises(IndexError):
        ours.first()
    with pytest.raises(IndexError):
        ours.pop_first()
    ours[5] = packet(5)
    ours.pop_first()
    ours[7] = packet(7)
    with pytest.raises(IndexError):
        ours.peekitem(1)
    with pytest.raises(IndexError):
        ours.peekitem(-2)
    assert ours.peekitem(-1)[0] == 7


def test_walking_it_while_it_changes_sees_the_numbers_it_started_with() -> None:
    ours = PacketMap()
    for n in range(10):
        ours[n] = packet(n)
    seen = []
    for n in ours.irange(2, 8):
        seen.append(n)
        ours.pop_first()
        ours[100 + n] = packet(100 + n)
    assert seen == [2, 3, 4, 5, 6, 7, 8]
    while ours:
        ours.pop_first()
    assert list(ours) == [] and not ours.items()
