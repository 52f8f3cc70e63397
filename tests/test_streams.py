"""The stream state table: every listed transition, and everything else is a local bug."""

from __future__ import annotations

import itertools

import pytest
from core_parts import KEY, TreeParts

from overlay.core.delivery import Member
from overlay.core.streams import (
    CARRYING,
    TRANSITIONS,
    Change,
    RootState,
    State,
    Stream,
    next_state,
)
from overlay.errors import LocalProtocolError

# The whole table, written out independently of the module: changing a rule must fail here.
EXPECTED: dict[tuple[State | None, Change], State | None] = {
    (None, Change.ATTACHED): State.JOINED,
    (State.JOINING, Change.ATTACHED): State.JOINED,
    (None, Change.BECAME_ROOT): State.ROOT,
    (State.JOINING, Change.BECAME_ROOT): State.ROOT,
    (State.JOINING, Change.JOIN_FAILED): None,
    (State.JOINED, Change.PARENT_LOST): State.RESTARTING,
    (State.JOINED, Change.REPARENTED): State.JOINED,
    (State.RESTARTING, Change.ATTACHED): State.JOINED,
    (State.RESTARTING, Change.BECAME_ROOT): State.ROOT,
    (State.ROOT, Change.CLOSER_NODE): State.RESTARTING,
    (State.ROOT, Change.MERGED): State.JOINED,
}

ALL_PAIRS = list(itertools.product([None, *State], Change))
INVALID = [pair for pair in ALL_PAIRS if pair not in EXPECTED]


def test_table_is_exactly_the_expected_one() -> None:
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize(("before", "change"), list(EXPECTED))
def test_listed_transition(before: State | None, change: Change) -> None:
    assert next_state(before, change) is EXPECTED[(before, change)]


@pytest.mark.parametrize(("before", "change"), INVALID)
def test_unlisted_transition_is_a_local_error(before: State | None, change: Change) -> None:
    with pytest.raises(LocalProtocolError) as info:
        next_state(before, change)
    # The error carries the state it was raised in (STYLE 5).
    assert str(before) in str(info.value)
    assert change.value in str(info.value)


def test_some_transitions_are_invalid() -> None:
    # A root cannot lose a parent, a joined node cannot become root without restarting...
    assert (State.ROOT, Change.PARENT_LOST) in INVALID
    assert (State.JOINED, Change.BECAME_ROOT) in INVALID
    assert (None, Change.PARENT_LOST) in INVALID
    assert len(INVALID) == len(ALL_PAIRS) - len(EXPECTED)


def test_carrying_states() -> None:
    assert frozenset({State.JOINED, State.ROOT, State.RESTARTING}) == CARRYING
    assert Stream(bytes(32), 0.0, State.JOINING).carried is False
    for state in CARRYING:
        assert Stream(bytes(32), 0.0, state).carried is True


def test_idle_means_no_children_and_no_local_clients() -> None:
    stream = Stream(bytes(32), 0.0, State.ROOT)
    seen = [stream.idle]
    stream.children[b"c"] = None
    seen.append(stream.idle)
    del stream.children[b"c"]
    stream.local[1] = Member()
    seen.append(stream.idle)
    assert seen == [True, False, False]


def test_the_roots_fields_live_in_its_root_record_not_on_the_stream() -> None:
    stream, other = Stream(bytes(32), 0.0, State.ROOT), Stream(bytes(32), 0.0, State.JOINED)
    assert isinstance(stream.root, RootState) and stream.root is not other.root
    assert stream.root.pending == {} and stream.root.committed is None
    assert stream.root.recover_until is None and stream.root.kept is None
    stream.root.holds[b"C"] = 3
    assert other.root.holds == {}  # (no record shared between streams)
    for name in ("pending", "backlog", "recover_until", "looking", "kept", "mark_rounds"):
        with pytest.raises(AttributeError):
            getattr(stream, name)


def test_a_root_that_restarts_and_is_root_again_keeps_its_record_as_it_left_it() -> None:
    # (``CLOSER_NODE`` then ``BECAME_ROOT``: its probe backoff and mark rounds go on.)
    parts = TreeParts()
    stream = parts.stream()
    record = stream.root
    record.probe_misses, record.probed_at, record.mark_rounds, record.told_at = 2, 4.0, 3, 5.0
    parts.membership.change(stream, Change.CLOSER_NODE, None)
    assert stream.state is State.RESTARTING and stream.root is record
    parts.membership.change(stream, Change.BECAME_ROOT, None)
    assert stream.state is State.ROOT and stream.root is record
    assert (record.probe_misses, record.probed_at, record.mark_rounds, record.told_at) == (
        2,
        4.0,
        3,
        5.0,
    )


def test_a_root_that_merges_keeps_its_record_and_leaving_root_commits_what_it_held() -> None:
    parts = TreeParts()
    stream = parts.stream()
    stream.root.committed, stream.root.asked, stream.root.trailed_at = 1, 2, 7.0
    stream.root.holds[b"C"] = 1
    parts.membership.change(stream, Change.MERGED, b"P")
    assert stream.state is State.JOINED and stream.parent == b"P"
    # Read in the new state (``children_changed``): a member waits for no holds.
    assert stream.root.committed is None and stream.root.asked is None
    assert stream.root.holds == {} and stream.root.trailed_at == 7.0
    assert parts.streams[KEY] is stream
