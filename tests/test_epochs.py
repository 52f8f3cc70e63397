"""Frontier: open and done epochs, the root's refusals, and the bounds on what it remembers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.core.epochs import Frontier, malformed, plain_run
from overlay.messages import PacketKind, PublishError, SubscribeData

KEY = b"k" * 32
DATA, CLOSED, ABORTED = PacketKind.DATA, PacketKind.EPOCH_CLOSED, PacketKind.EPOCH_ABORTED


def packet(
    number: int, epoch: int | None, kind: PacketKind = DATA, first: int | None = None
) -> SubscribeData:
    if epoch is not None and first is None:
        first = number
    return SubscribeData(KEY, number, b"x", epoch, kind, None, first)


def test_a_fresh_frontier() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    assert frontier.open == {}
    assert frontier.last_closed is None
    assert frontier.starts() == ()
    assert not frontier.is_done(0)
    assert frontier.refusal(None, DATA) is None
    assert frontier.refusal(0, DATA) is None
    assert frontier.refusal(0, CLOSED) is None


def test_markers_need_an_epoch() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    assert frontier.refusal(None, CLOSED) is PublishError.BAD_MARKER
    assert frontier.refusal(None, ABORTED) is PublishError.BAD_MARKER


def test_first_of_is_where_the_epoch_began() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    assert frontier.first_of(None, 3) is None
    assert frontier.first_of(7, 3) == 3  # a new epoch begins with this packet
    frontier.observe(packet(3, 7))
    assert frontier.first_of(7, 9) == 3
    assert frontier.first_of(8, 9) == 9


def test_observe_opens_an_epoch_at_its_first_packet() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.observe(packet(12, 1, first=10))  # a node that joined mid-epoch
    frontier.observe(packet(13, 1, first=10))
    assert frontier.open == {1: 10}
    assert frontier.starts() == ((1, 10),)
    frontier.observe(packet(14, 2, first=None))  # no epoch_first: the packet itself
    assert frontier.open == {1: 10, 2: 14}


def test_packets_without_epoch_change_nothing() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.observe(packet(0, None))
    assert frontier.open == {}
    assert frontier.last_closed is None


def test_closing_an_epoch_makes_it_done() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.observe(packet(0, 5))
    frontier.observe(packet(1, 5, CLOSED, first=0))
    assert frontier.open == {}
    assert frontier.last_closed == 5
    assert frontier.is_done(5)
    for kind in (DATA, CLOSED, ABORTED):
        assert frontier.refusal(5, kind) is PublishError.EPOCH_DONE
    frontier.observe(packet(2, 5, first=2))  # a late packet does not reopen it
    assert frontier.open == {}


def test_aborting_an_epoch_makes_it_done_but_not_closed() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.observe(packet(0, 5))
    frontier.observe(packet(1, 5, ABORTED, first=0))
    assert frontier.open == {}
    assert frontier.last_closed is None
    assert frontier.refusal(5, DATA) is PublishError.EPOCH_DONE


def test_last_closed_only_moves_forward() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.observe(packet(0, 5, CLOSED))
    frontier.observe(packet(1, 3, CLOSED))
    assert frontier.last_closed == 5
    assert frontier.is_done(3)


def test_the_root_refuses_to_open_more_than_max_open() -> None:
    frontier = Frontier(max_open=2, max_done=4)
    frontier.observe(packet(0, 1))
    frontier.observe(packet(1, 2))
    assert frontier.refusal(3, DATA) is PublishError.TOO_MANY_EPOCHS
    assert frontier.refusal(1, DATA) is None  # open ones may go on
    assert frontier.refusal(2, CLOSED) is None
    assert frontier.refusal(2, ABORTED) is None
    frontier.observe(packet(2, 2, CLOSED, first=1))
    assert frontier.refusal(3, DATA) is None


def test_a_marker_for_an_unopened_epoch_opens_nothing_so_is_not_too_many() -> None:
    # Closing (or aborting) an epoch that never had data leaves it done, not open: it cannot
    # exceed the bound on open epochs, so a full frontier must not refuse it as if it did.
    frontier = Frontier(max_open=1, max_done=4)
    frontier.observe(packet(0, 1))
    assert frontier.refusal(2, DATA) is PublishError.TOO_MANY_EPOCHS
    assert frontier.refusal(2, CLOSED) is None
    assert frontier.refusal(2, ABORTED) is None
    frontier.observe(packet(1, 2, CLOSED))
    assert frontier.open == {1: 0}
    assert frontier.is_done(2)


def test_other_nodes_forget_the_oldest_open_epoch() -> None:
    frontier = Frontier(max_open=2, max_done=4)
    frontier.observe(packet(0, 9))  # the oldest by first packet, not by epoch number
    frontier.observe(packet(1, 2))
    frontier.observe(packet(2, 5))
    assert frontier.open == {2: 1, 5: 2}
    assert not frontier.is_done(9)  # forgotten as open, not made done


def test_done_epochs_are_bounded_and_forgotten_ones_stay_done() -> None:
    frontier = Frontier(max_open=4, max_done=2)
    for number, epoch in enumerate((1, 2, 3)):
        frontier.observe(packet(number, epoch, CLOSED))
    assert len(frontier._done) == 2
    assert 1 not in frontier._done
    assert frontier.is_done(1)  # older than every remembered one: done
    assert frontier.is_done(0)
    assert not frontier.is_done(4)
    assert frontier.refusal(1, DATA) is PublishError.EPOCH_DONE
    frontier.observe(packet(3, 1))  # a forgotten epoch cannot be reopened
    assert 1 not in frontier.open


def test_a_long_open_epoch_outlives_forgotten_later_ones() -> None:
    frontier = Frontier(max_open=4, max_done=1)
    frontier.observe(packet(0, 1))
    for number, epoch in enumerate((2, 3, 4), start=1):
        frontier.observe(packet(number, epoch, CLOSED))
    assert frontier.is_done(3)  # forgotten
    assert not frontier.is_done(1)  # still open, though older than a forgotten one
    assert frontier.refusal(1, DATA) is None
    frontier.observe(packet(5, 1))
    assert frontier.open == {1: 0}
    frontier.observe(packet(6, 1, CLOSED, first=0))
    assert frontier.is_done(1)
    assert frontier.open == {}


def test_starts_lists_open_epochs_oldest_first() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.observe(packet(5, 1))
    frontier.observe(packet(6, 7, first=2))
    frontier.observe(packet(7, 3))
    assert frontier.starts() == ((7, 2), (1, 5), (3, 7))


def test_learn_adopts_a_newer_last_closed_only() -> None:
    frontier = Frontier(max_open=4, max_done=4)
    frontier.learn(5, ())
    assert frontier.last_closed == 5
    frontier.learn(3, ())
    frontier.learn(None, ())
    assert frontier.last_closed == 5


def test_learn_adds_open_epochs_within_bounds() -> None:
    frontier = Frontier(max_open=2, max_done=4)
    frontier.observe(packet(0, 1, CLOSED))
    frontier.observe(packet(4, 2, first=3))
    frontier.learn(None, ((1, 0), (2, 99), (6, 5), (7, 6)))
    assert frontier.open == {2: 3, 6: 5}  # 1 is done, 2 kept its own first, 7 has no room


# --- properties -----------------------------------------------------------------------------

EPOCHS = st.integers(0, 12)
KINDS = st.sampled_from(PacketKind)


@settings(max_examples=300, deadline=None)
@given(
    max_open=st.integers(1, 4),
    max_done=st.integers(1, 4),
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("observe"), EPOCHS, KINDS, st.integers(0, 3)),
            st.tuples(st.just("learn"), EPOCHS, KINDS, st.integers(0, 3)),
        ),
        max_size=40,
    ),
)
def test_any_node_stays_bounded_and_done_stays_done(
    max_open: int, max_done: int, steps: list[tuple[str, int, PacketKind, int]]
) -> None:
    frontier = Frontier(max_open, max_done)
    done: set[int] = set()
    for number, (op, epoch, kind, back) in enumerate(steps):
        if op == "observe":
            frontier.observe(packet(number, epoch, kind, first=max(0, number - back)))
            if kind is not DATA:
                done.add(epoch)
        else:
            frontier.learn(epoch if kind is CLOSED else None, ((epoch, number),))
        assert len(frontier.open) <= max_open
        assert len(frontier._done) <= max_done
        assert all(frontier.is_done(e) for e in done), "a done epoch came back"
        assert not done & frontier.open.keys()


@settings(max_examples=300, deadline=None)
@given(
    max_open=st.integers(1, 4),
    max_done=st.integers(1, 4),
    publishes=st.lists(st.tuples(st.one_of(st.none(), EPOCHS), KINDS), max_size=60),
)
def test_the_root_orders_only_what_atomic_subscribers_can_still_see(
    max_open: int, max_done: int, publishes: list[tuple[int | None, PacketKind]]
) -> None:
    # The publisher numbers epochs upward (a new one is one past the newest ordered) and
    # sometimes writes to an old one: a done one must be refused for good, remembered or not.
    frontier = Frontier(max_open, max_done)
    done: set[int] = set()
    began: dict[int, int] = {}  # open epoch -> number of its first ordered packet
    used: list[int] = []  # epochs ordered so far: used[i] == i
    number = 0
    for pick, kind in publishes:
        epoch = None if pick is None else min(pick, len(used))
        refusal = frontier.refusal(epoch, kind)
        if epoch is None:
            assert refusal is (None if kind is DATA else PublishError.BAD_MARKER)
            continue
        if epoch in done:
            assert refusal is PublishError.EPOCH_DONE
        elif kind is DATA and epoch not in began and len(began) >= max_open:
            assert refusal is PublishError.TOO_MANY_EPOCHS
        else:
            assert refusal is None
        if refusal is not None:
            continue
        first = frontier.first_of(epoch, number)
        assert first == began.get(epoch, number)
        frontier.observe(packet(number, epoch, kind, first=first))
        if epoch == len(used):
            used.append(epoch)
        if kind is DATA:
            began.setdefault(epoch, number)
        else:
            began.pop(epoch, None)
            done.add(epoch)
        assert frontier.open == began
        number += 1


def test_an_epoch_closed_before_a_node_joined_cannot_be_reopened_there() -> None:
    # A node that learned "last closed: 7" from its parent, and later became root, must not
    # let a retried publish reopen epoch 7 (atomic clients were handed it already).
    frontier = Frontier(max_open=4, max_done=4)
    frontier.learn(7, ((9, 40),))
    assert frontier.refusal(7, PacketKind.DATA) is PublishError.EPOCH_DONE
    assert frontier.refusal(5, PacketKind.DATA) is PublishError.EPOCH_DONE
    assert frontier.refusal(9, PacketKind.DATA) is None  # still open
    assert frontier.refusal(8, PacketKind.DATA) is None  # newer than the last closed: new


_FIELDS = st.tuples(
    st.one_of(st.none(), st.integers(0, 3)),
    st.sampled_from(list(PacketKind)),
    st.one_of(st.none(), st.integers(0, 12)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_FIELDS, min_size=1, max_size=5))
def test_a_run_passes_in_one_look_only_if_no_packet_of_it_is_malformed(
    fields: list[tuple[int | None, PacketKind, int | None]],
) -> None:
    """``plain_run``: plain data outside epochs, which no parent can send malformed; and
    following it as one run (``observe_run``) leaves the frontier as packet by packet."""
    packets = [
        SubscribeData(b"k" * 32, 10 + i, b"x", epoch, kind, None, epoch_first)
        for i, (epoch, kind, epoch_first) in enumerate(fields)
    ]
    if plain_run(packets):
        assert all(malformed(p) is None for p in packets)
    plain = all(e is None and k is PacketKind.DATA and f is None for e, k, f in fields)
    assert plain_run(packets) == plain
    one_by_one, as_run = Frontier(4, 8), Frontier(4, 8)
    for p in packets:
        one_by_one.observe(p)
    as_run.observe_run(packets)
    assert (as_run.open, as_run.starts(), as_run.last_closed) == (
        one_by_one.open,
        one_by_one.starts(),
        one_by_one.last_closed,
    )
