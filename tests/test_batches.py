"""A local client's batch of publishes (``overlay.core.batches``): at the root, numbered as
one range in one pass and sent down as runs; anywhere else, or when a publish of it is a
case of its own, each publish goes its own way. Either way a batch means what its
publishes would, one after another. The tree (``publish_tree``): root R with children B
and E; B with children A and D; subscribers at A, D and E."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from corenet import CoreNet
from hypothesis import given, settings
from hypothesis import strategies as st
from publish_tree import KEY, SUBSCRIBERS, packets, place, tree

from overlay import codec
from overlay.core.batches import batch_of
from overlay.core.config import NodeConfig
from overlay.core.events import BatchAcked, PublishAcked, PublishFailed
from overlay.core.pace import INITIAL_WINDOW
from overlay.messages import (
    MAX_PAYLOAD,
    MAX_U64,
    PublishData,
    PublishError,
    SubscribeData,
    SubscribeRun,
)

GRACE = NodeConfig().takeover_grace


def settled() -> CoreNet:
    """The tree, quiet."""
    net = tree()
    net.advance(net.now + GRACE + 1)
    return net


def acked(net: CoreNet, name: bytes) -> list[tuple[int, int]]:
    """Each acknowledged uid with its number, in order (a batch's one event, expanded)."""
    pairs: list[tuple[int, int]] = []
    for event in net.answers(name):
        if isinstance(event, BatchAcked):
            pairs.extend(event.numbers)
        elif isinstance(event, PublishAcked):
            pairs.append((event.uid, event.number))
    return pairs


def test_a_batch_at_the_root_is_one_range_sent_down_as_runs() -> None:
    net = settled()
    start = len(net.trace)
    net.publish_batch(b"R", KEY, [(10 + i, b"p%d" % i) for i in range(5)])
    assert net.nodes[b"R"].stats.batches == 1
    data = [
        (a, b, type(m)) for a, b, m in net.trace[start:] if type(m) in (SubscribeRun, SubscribeData)
    ]
    links = [(b"R", b"B"), (b"R", b"E"), (b"B", b"A"), (b"B", b"D")]
    assert sorted(data) == sorted((a, b, SubscribeRun) for a, b in links)
    (answer,) = net.answers(b"R")  # one answer for the whole batch
    assert isinstance(answer, BatchAcked)
    numbers = [n for _, n in acked(net, b"R")]
    assert [u for u, _ in acked(net, b"R")] == [10, 11, 12, 13, 14]
    assert numbers == list(range(numbers[0], numbers[0] + 5))
    for name in SUBSCRIBERS:
        assert packets(net, name) == [(n, b"p%d" % i) for i, n in enumerate(numbers)]


def test_a_batch_is_acknowledged_once_its_last_packet_is_committed() -> None:
    net = settled()
    net.hold(b"B")
    net.hold(b"E")
    net.publish_batch(b"R", KEY, [(1, b"a"), (2, b"b")])
    assert acked(net, b"R") == []  # only the root holds them yet
    net.release(b"B")
    net.release(b"E")
    assert [u for u, _ in acked(net, b"R")] == [1, 2]


def test_a_retried_uid_in_a_batch_gets_its_first_number() -> None:
    net = settled()
    net.publish_batch(b"R", KEY, [(1, b"a"), (2, b"b")])
    first = dict(acked(net, b"R"))
    net.publish_batch(b"R", KEY, [(2, b"b"), (3, b"c")])  # (a retry of 2, and a new one)
    answers = acked(net, b"R")[2:]
    assert answers == [(2, first[2]), (3, first[2] + 1)]
    assert net.nodes[b"R"].stats.batches == 1  # the second went publish by publish
    for name in SUBSCRIBERS:
        assert [n for n, _ in packets(net, name)] == [first[1], first[2], first[2] + 1]


def test_a_batch_at_a_member_goes_up_publish_by_publish() -> None:
    net = settled()
    start = len(net.trace)
    net.publish_batch(b"A", KEY, [(7, b"x"), (8, b"y"), (9, b"z")])
    ups = [m.uid for a, _, m in net.trace[start:] if a == b"A" and isinstance(m, PublishData)]
    assert ups == [7, 8, 9]
    assert [u for u, _ in acked(net, b"A")] == [7, 8, 9]
    assert net.nodes[b"R"].stats.batches == 0
    assert [d for _, d in packets(net, b"E")] == [b"x", b"y", b"z"]


def test_a_batch_the_roots_window_has_no_room_for_goes_publish_by_publish() -> None:
    # A window of 4: six new packets uncommitted at once would push some out of a member's
    # window before it may show them, so the root holds publishes back (``backlog``) as it
    # would hold them sent one by one.
    net = tree(config=NodeConfig(window_packets=4))
    net.publish_batch(b"R", KEY, [(i, b"p%d" % i) for i in range(1, 7)])
    assert net.nodes[b"R"].stats.batches == 0
    assert net.nodes[b"R"].stats.held_back > 0
    assert [u for u, _ in acked(net, b"R")] == [1, 2, 3, 4, 5, 6]
    for name in SUBSCRIBERS:
        assert [d for _, d in packets(net, name)] == [b"p%d" % i for i in range(1, 7)]


def test_a_bad_publish_in_a_batch_is_refused_alone() -> None:
    net = settled()
    net.publish_batch(b"R", KEY, [(1, b"ok"), (2**64, b"bad uid"), (3, b"fine")])
    failed = [e for e in net.answers(b"R") if isinstance(e, PublishFailed)]
    assert [(e.uid, e.error) for e in failed] == [(2**64, PublishError.INVALID)]
    assert [u for u, _ in acked(net, b"R")] == [1, 3]


@pytest.mark.parametrize("items", [[], [b"not a pair"], [(1, b"a", 2)], b"bytes"])
def test_a_batch_that_is_not_a_list_of_pairs_is_a_callers_error(items: object) -> None:
    net = settled()
    with pytest.raises(ValueError, match="a batch is a non-empty sequence of"):
        net.publish_batch(b"R", KEY, items)  # type: ignore[arg-type]


class Pair(NamedTuple):
    uid: int
    data: bytes


_ITEMS = st.tuples(
    st.sampled_from([0, 1, 7, MAX_U64, MAX_U64 + 1, -1, True, 2.0]),
    st.sampled_from([b"", b"x", bytes(MAX_PAYLOAD), bytes(MAX_PAYLOAD + 1), "text"]),
).map(lambda pair: pair if pair[0] != 7 else Pair(*pair))  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(st.lists(_ITEMS, min_size=1, max_size=6))
def test_a_batch_is_plain_exactly_when_every_item_is_a_pair_of_valid_uid_and_payload(
    items: list[tuple[int, bytes]],
) -> None:
    """A batch is numbered in one pass only if each of its publishes could be: a tuple of
    a uid in 0..2**64-1 (not a bool) and bytes of at most MAX_PAYLOAD; a tuple subclass
    goes publish by publish, which means the same."""
    batch = batch_of(items)
    plain = all(
        type(item) is tuple
        and type(item[0]) is int
        and 0 <= item[0] <= MAX_U64
        and type(item[1]) is bytes
        and len(item[1]) <= MAX_PAYLOAD
        for item in items
    )
    assert batch.plain == plain
    assert batch.uids == ([uid for uid, _ in items] if plain else [])
    assert batch.size == (sum(len(data) for _, data in items) if plain else 0)


def test_a_uid_of_a_batch_published_again_before_its_commit_is_answered_once() -> None:
    # The batch's acknowledgements wait for its commit; meanwhile its client publishes its
    # first uid again, and client 2 its last: each joins the batch, as a publish in flight
    # is joined, and gets its answer once, with the batch's.
    net = settled()
    net.hold(b"B")
    net.hold(b"E")
    net.publish_batch(b"R", KEY, [(1, b"a"), (2, b"b"), (3, b"c")])
    assert net.nodes[b"R"].busy()  # (answers are owed)
    net.publish(b"R", KEY, b"a", uid=1)
    net.publish(b"R", KEY, b"c", uid=3, client=2)
    assert acked(net, b"R") == []
    net.release(b"B")
    net.release(b"E")
    numbers = dict(acked(net, b"R"))
    assert [u for u, _ in acked(net, b"R")] == [1, 2, 3]
    assert [(e.uid, e.number) for e in net.answers(b"R", client=2)] == [(3, numbers[3])]  # type: ignore[attr-defined]
    assert not net.nodes[b"R"].flow.publishes.batched


def test_a_batch_goes_after_single_publishes_still_waiting_for_credit() -> None:
    # A credit of one publish: the single ones queue for it, and a batch after them is
    # numbered after them, as its publishes would be.
    net = tree(config=NodeConfig(publish_credit_packets=1))
    net.hold(b"B")
    for uid in (1, 2, 3):
        net.publish(b"R", KEY, b"s%d" % uid, uid=uid)
    net.publish_batch(b"R", KEY, [(10, b"b10"), (11, b"b11")])
    net.release(b"B")
    assert [d for _, d in packets(net, b"A")] == [b"s1", b"s2", b"s3", b"b10", b"b11"]
    assert [u for u, _ in acked(net, b"R")] == [1, 2, 3, 10, 11]


def test_a_batch_without_room_waits_whole_and_later_publishes_wait_behind_it() -> None:
    # A window of 8 and the children not answering yet: a batch of 6 fills it but for 2,
    # so the next batch of 6 waits for the commit, whole, and a single publish made after
    # it waits behind it. Once the children hold the first, both go, in the order made.
    net = tree(config=NodeConfig(window_packets=8))
    net.hold(b"B")
    net.hold(b"E")
    net.publish_batch(b"R", KEY, [(i, b"a%d" % i) for i in range(1, 7)])
    net.publish_batch(b"R", KEY, [(i, b"b%d" % i) for i in range(7, 13)])
    net.publish(b"R", KEY, b"single", uid=13)
    root = net.nodes[b"R"]
    assert root.stats.batches == 1 and root.clients.waiting and root.busy()
    net.release(b"B")
    net.release(b"E")
    assert root.stats.batches == 2 and not root.clients.waiting
    expected = [b"a%d" % i for i in range(1, 7)] + [b"b%d" % i for i in range(7, 13)]
    for name in SUBSCRIBERS:
        assert [d for _, d in packets(net, name)] == [*expected, b"single"]
    assert [u for u, _ in acked(net, b"R")] == list(range(1, 14))


def test_a_roots_batches_time_its_pace_as_a_members_answers_do() -> None:
    """R numbers a batch of a window's worth (32) while its children hold nothing yet; they
    take 0.5 s. The batch's acknowledgement is a round of answers for R's pace: its base
    is that delay, and the window R tells its publishers grows from it (``pace``)."""
    net = settled()
    root = net.nodes[b"R"]
    assert root.publish_window(KEY) == INITIAL_WINDOW
    net.hold(b"B")
    net.hold(b"E")
    sent = net.now
    net.publish_batch(b"R", KEY, [(100 + i, b"p") for i in range(INITIAL_WINDOW)])
    net.advance(sent + 0.5)
    net.release(b"B")
    net.release(b"E")
    assert len(acked(net, b"R")) == INITIAL_WINDOW
    pace = root.publishing(KEY)
    assert pace is not None and pace["base"] == pytest.approx(0.5)
    assert root.publish_window(KEY) == 2 * INITIAL_WINDOW


def test_a_roots_batch_leaves_no_run_noted_as_checked_behind() -> None:
    # A root notes the runs of a batch as checked only when it sends them, and each note
    # is used up by that run's encoding: none is left to hold a batch's payload.
    net = settled()
    before = set(codec._checked_runs)
    net.publish_batch(b"R", KEY, [(30 + i, b"q%d" % i) for i in range(5)])
    assert net.nodes[b"R"].stats.batches == 1
    assert set(codec._checked_runs) <= before
    alone = CoreNet(seed=4)
    alone.add(b"R", place(KEY, b"R"))
    alone.subscribe(b"R", KEY)
    alone.advance(alone.now + GRACE + 1)
    alone.publish_batch(b"R", KEY, [(1, b"x"), (2, b"y")])
    assert alone.nodes[b"R"].stats.batches == 1  # (numbered, with no child to send to)
    assert set(codec._checked_runs) <= before
