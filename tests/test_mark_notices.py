"""When a root's moved commit mark goes down in a standalone ``Committed`` notice, and when
a packet takes it down instead (``overlay.core.showing``, ``overlay.core.packet_pace``).

A mark that moved waits for the root's next packet to carry it: ``mark_delay`` (10 ms) after
the last packet, or ``mark_patience`` (30 ms) on a steady stream, one whose root sends
packets down at least twice in that time. The root scenes are ``commit_roots``' (N root of
KEY with child U, which answers each ``HeldQuery`` with a ``Held``); ``PacketPace`` is also
built alone.
"""

from __future__ import annotations

import math

import pytest
from commit_roots import KEY, U, notices, packets_to, root
from corenet import key_at
from hypothesis import given
from hypothesis import strategies as st
from nodes import make, meet

from overlay.core.config import NodeConfig
from overlay.core.effects import SetTimer
from overlay.core.node import Node
from overlay.core.packet_pace import PacketPace, longest_gap
from overlay.core.showing import REPEATS
from overlay.messages import Held, SubscribeRequest

# --- the mark rides the packets, or waits ``mark_delay`` ------------------------------------


def test_under_steady_load_the_packets_carry_every_mark_and_no_notice_goes() -> None:
    # 200 packets a second, each answered 2 ms after it went: the next packet, 5 ms on,
    # takes the mark down, before ``mark_delay`` (10 ms) has passed since the last one did.
    node = root()
    told: list[tuple[bytes, int]] = []
    carried: list[tuple[int, int | None]] = []
    for n in range(40):
        at = 1.0 + n * 0.005
        told += notices(node.handle_timer(at))
        effects = node.publish(at, KEY, 1, 100 + n, b"p%d" % n)
        carried += packets_to(effects, U)
        told += notices(effects)
        told += notices(node.receive(at + 0.002, U, Held(KEY, n)))
    assert told == []
    assert carried[1:] == [(n, n - 1) for n in range(1, 40)]
    assert node.stats.commit_notices == 0


def test_a_notice_goes_once_no_packet_took_the_mark_down_for_mark_delay() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    effects = node.receive(1.002, U, Held(KEY, 0))
    assert notices(effects) == [] and KEY in node.flow.showing.marks_due  # a packet may take it
    assert SetTimer(1.01) in effects
    assert notices(node.handle_timer(1.009)) == []
    assert notices(node.handle_timer(1.01)) == [(U, 0)] and not node.flow.showing.marks_due


def test_a_notice_goes_at_once_on_a_stream_quiet_for_mark_delay() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    assert notices(node.receive(1.05, U, Held(KEY, 0))) == [(U, 0)]  # (a slow child)


def test_a_deferred_notice_is_dropped_when_a_packet_takes_the_mark_down() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    node.receive(1.002, U, Held(KEY, 0))
    assert packets_to(node.publish(1.005, KEY, 1, 101, b"p1"), U) == [(1, 0)]
    assert not node.flow.showing.marks_due
    assert notices(node.handle_timer(1.01)) == []
    assert node.stats.commit_notices == 0


def test_at_most_one_notice_per_mark_delay() -> None:
    # The commit moves twice within 10 ms, with no packet in between: one notice at once,
    # the second mark once 10 ms have passed since.
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    node.publish(1.0, KEY, 1, 101, b"p1")
    assert notices(node.receive(1.1, U, Held(KEY, 0))) == [(U, 0)]
    assert notices(node.receive(1.105, U, Held(KEY, 1))) == []
    assert notices(node.handle_timer(1.11)) == [(U, 1)]


def test_no_repeat_while_packets_carry_the_mark_then_a_few_once_quiet() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6)
    told: list[tuple[bytes, int]] = []
    for n in range(600):  # 200 a second for 3 s, over three heartbeat rounds
        at = 1.5 + n * 0.005
        told += notices(node.handle_timer(at))
        node.publish(at, KEY, 1, 100 + n, b"p%d" % n)
        told += notices(node.receive(at + 0.002, U, Held(KEY, n)))
    assert told == []
    # Quiet: the last mark goes in a notice (after the round due at 4.5, run at 4.6, in which
    # packets still carried it), and the next rounds repeat it a few times.
    assert notices(node.handle_timer(4.6)) == [(U, 599)]
    repeats = [notices(node.handle_timer(5.6 + r)) for r in range(REPEATS + 1)]
    assert repeats == [[(U, 599)]] * REPEATS + [[]]


# --- a steady stream waits ``mark_patience`` ------------------------------------------------


def publish_every(node: Node, every: float, count: int) -> list[tuple[bytes, int]]:
    """The root publishes packets 0 to ``count - 1``, ``every`` seconds apart from 1.0, each
    held by U 2 ms after it went down; the notices it sent meanwhile."""
    told: list[tuple[bytes, int]] = []
    for n in range(count):
        at = 1.0 + n * every
        told += notices(node.handle_timer(at))
        told += notices(node.publish(at, KEY, 1, 100 + n, b"p%d" % n))
        told += notices(node.receive(at + 0.002, U, Held(KEY, n)))
    return told


def test_on_a_steady_stream_a_gap_past_mark_delay_sends_no_notice() -> None:
    # 167 packets a second, then one gap of 20 ms, past ``mark_delay`` (10 ms) but within
    # ``mark_patience`` (30 ms): the next packet takes the mark down.
    node = root()
    told = publish_every(node, 0.006, 20)
    last = 1.0 + 19 * 0.006
    assert notices(node.handle_timer(last + 0.02)) == []
    effects = node.publish(last + 0.02, KEY, 1, 120, b"p20")
    assert packets_to(effects, U) == [(20, 19)]
    assert told + notices(effects) == [] and node.stats.commit_notices == 0


def test_a_steady_stream_that_falls_quiet_is_told_its_mark_after_mark_patience() -> None:
    node = root()
    assert publish_every(node, 0.006, 19) == []
    last = 1.0 + 19 * 0.006
    node.publish(last, KEY, 1, 119, b"p19")
    assert notices(node.receive(last + 0.002, U, Held(KEY, 19))) == []
    assert notices(node.handle_timer(last + 0.029)) == []
    assert notices(node.handle_timer(last + 0.03)) == [(U, 19)]


def run_events(node: Node, events: list[tuple[float, str, int]], end: float) -> list[float]:
    """Drive ``node`` through ``events`` (at a time: "publish" packet n, or "held" U holds up
    to n), firing its due timers every half millisecond as a driver would, up to ``end``;
    the times its notices went."""
    told: list[float] = []
    queue = sorted(events)
    at = 1.0
    while at <= end:
        while queue and queue[0][0] <= at:
            when, what, n = queue.pop(0)
            if what == "publish":
                effects = node.publish(when, KEY, 1, 100 + n, b"p%d" % n)
            else:
                effects = node.receive(when, U, Held(KEY, n))
            told += [when] * len(notices(effects))
        told += [at] * len(notices(node.handle_timer(at)))
        at = round(at + 0.0005, 6)
    return told


def test_a_sparse_stream_is_told_each_mark_as_soon_as_it_moves() -> None:
    # 20 packets a second: the next packet is 50 ms off, past ``mark_delay`` (10 ms), so
    # waiting for it would only delay each delivery. Once three gaps show that pace, each
    # mark goes in a notice the moment its packet is held; before, it waits ``mark_delay``.
    events = [(1.0 + n * 0.05, "publish", n) for n in range(10)]
    events += [(1.0 + n * 0.05 + 0.002, "held", n) for n in range(10)]
    told = run_events(root(), events, 1.6)
    waited = [1.0 + n * 0.05 + 0.01 for n in range(3)]
    at_once = [1.0 + n * 0.05 + 0.002 for n in range(3, 10)]
    assert told == pytest.approx(waited + at_once)


def test_packets_in_pairs_are_not_sparse_and_the_second_takes_the_mark_down() -> None:
    # Two packets 3 ms apart every 100 ms (two publishers, or a loaded root): the mean gap
    # is long, but the first packet's mark waits for the second, which carries it. One
    # notice a pair, as with every mark waiting ``mark_delay``, not two.
    events: list[tuple[float, str, int]] = []
    for k in range(10):
        at = 1.0 + k * 0.1
        events += [(at, "publish", 2 * k), (at + 0.001, "held", 2 * k)]
        events += [(at + 0.003, "publish", 2 * k + 1), (at + 0.004, "held", 2 * k + 1)]
    told = run_events(root(), events, 2.1)
    assert told == pytest.approx([1.0 + k * 0.1 + 0.013 for k in range(10)])


def test_a_sparse_streams_notices_still_come_at_most_one_a_mark_delay() -> None:
    # Its commit moves twice with no packet between (the answers for a burst published in
    # one event): the first move is told at once, the second ``mark_delay`` after it.
    events = [(1.0 + n * 0.05, "publish", n) for n in range(4)]
    events += [(1.0 + n * 0.05 + 0.002, "held", n) for n in range(4)]
    node = root()
    run_events(node, events, 1.19)
    node.publish_batch(1.2, KEY, 1, [(104, b"p4"), (105, b"p5")])
    assert notices(node.receive(1.202, U, Held(KEY, 4))) == [(U, 4)]
    assert notices(node.receive(1.205, U, Held(KEY, 5))) == []
    assert notices(node.handle_timer(1.2115)) == []
    assert notices(node.handle_timer(1.212)) == [(U, 5)]
    # A packet goes down 5 ms after a notice, and is held at once: its mark still waits
    # until ``mark_delay`` has passed since that notice.
    node.publish_batch(1.24, KEY, 1, [(106, b"p6"), (107, b"p7")])
    assert notices(node.receive(1.275, U, Held(KEY, 6))) == [(U, 6)]  # (a slow answer)
    assert packets_to(node.publish(1.28, KEY, 1, 108, b"p8"), U) == [(8, 6)]
    assert notices(node.receive(1.281, U, Held(KEY, 8))) == []
    assert notices(node.handle_timer(1.2845)) == []
    assert notices(node.handle_timer(1.285)) == [(U, 8)]


def test_after_a_pause_a_stream_waits_mark_delay_until_its_pace_shows_again() -> None:
    node = root()
    publish_every(node, 0.006, 20)
    assert notices(node.handle_timer(2.0)) == [(U, 19)]
    node.publish(3.0, KEY, 1, 120, b"p20")
    assert notices(node.receive(3.002, U, Held(KEY, 20))) == []
    assert notices(node.handle_timer(3.01)) == [(U, 20)]


def test_with_mark_patience_0_a_steady_stream_waits_mark_delay() -> None:
    node = root(mark_patience=0.0)
    assert publish_every(node, 0.006, 20) == []
    last = 1.0 + 19 * 0.006
    assert notices(node.handle_timer(last + 0.01)) == [(U, 19)]


def test_two_streams_of_one_root_each_wait_their_own_delay() -> None:
    # The root has one mark timer for all its streams: a steady stream's mark, due 30 ms
    # after its last packet, must not hold back a slow stream's, due 10 ms after its own
    # packet; nor the slow one's bring the steady one's forward.
    other = key_at(0.4)
    node = make()
    node.subscribe(0.0, KEY, 1)
    node.subscribe(0.0, other, 1)
    meet(node, U, 0.2)
    node.receive(0.0, U, SubscribeRequest(9, KEY, 5, 0.2, None))
    node.receive(0.0, U, SubscribeRequest(19, other, 5, 0.2, None))
    assert all(node.streams[key].children == {U: None} for key in (KEY, other))
    assert publish_every(node, 0.005, 20) == []
    last = 1.0 + 19 * 0.005
    # The timer an earlier packet armed fires: the steady stream's mark waits on, 30 ms.
    armed = node.flow.showing.mark_timer
    assert armed == pytest.approx(last + 0.005)
    effects = node.handle_timer(armed)
    assert notices(effects) == [] and SetTimer(last + 0.03) in effects
    node.publish(last + 0.006, other, 1, 500, b"q0")
    assert SetTimer(last + 0.016) in node.receive(last + 0.008, U, Held(other, 0))
    first_told: dict[int, float] = {}
    for step in range(17, 80):  # every half millisecond, as a driver fires due timers
        at = last + step * 0.0005
        for _, upto in notices(node.handle_timer(at)):
            first_told.setdefault(upto, at - last)
    assert first_told == {0: pytest.approx(0.016), 19: pytest.approx(0.03)}


@pytest.mark.parametrize("field", ["mark_delay", "mark_patience"])
@pytest.mark.parametrize("value", [math.inf, math.nan, -0.001])
def test_a_marks_wait_must_be_a_finite_time(field: str, value: float) -> None:
    # A timer armed at infinity would never tell a quiet stream its last mark.
    with pytest.raises(ValueError, match=f"{field} must be a finite time"):
        NodeConfig(**{field: value})  # type: ignore[arg-type]


# --- ``PacketPace`` built alone ------------------------------------------------------------


def sent_every(every: float, count: int, patience: float = 0.03, start: float = 0.0) -> PacketPace:
    pace = PacketPace()
    for i in range(count):
        pace.went_down(start + i * every, patience)
    return pace


def test_a_new_stream_is_not_steady_and_learns_a_steady_pace_within_ten_packets() -> None:
    assert not PacketPace().steady(0.03)
    assert not sent_every(0.005, 8).steady(0.03)
    assert sent_every(0.005, 10).steady(0.03)


def test_one_pause_ends_a_steady_pace_at_once() -> None:
    pace = sent_every(0.005, 50)
    assert pace.wait(0.01, 0.03) == 0.03
    pace.went_down(10.0, 0.03)
    assert not pace.steady(0.03) and pace.wait(0.01, 0.03) == 0.01


def test_a_stream_slower_than_two_gaps_in_mark_patience_never_turns_steady() -> None:
    assert not sent_every(0.016, 1000).steady(0.03)
    assert sent_every(0.014, 1000).steady(0.03)


def test_the_wait_is_never_less_than_mark_delay() -> None:
    assert sent_every(0.002, 100).wait(0.05, 0.03) == 0.05


def test_a_stream_is_sparse_once_its_last_three_gaps_are_each_three_mark_delays() -> None:
    assert not PacketPace().sparse(0.01)
    assert not sent_every(0.05, 3).sparse(0.01)  # (two gaps seen)
    assert sent_every(0.05, 4).sparse(0.01)
    assert sent_every(0.031, 200).sparse(0.01)
    assert not sent_every(0.029, 200).sparse(0.01)
    pace = sent_every(0.05, 20)
    pace.went_down(pace.last + 0.005, 0.03)  # type: ignore[operator]
    assert not pace.sparse(0.01)  # a short gap: the next packet may come soon
    for _ in range(2):
        pace.went_down(pace.last + 0.05, 0.03)  # type: ignore[operator]
        assert not pace.sparse(0.01)
    pace.went_down(pace.last + 0.05, 0.03)  # type: ignore[operator]
    assert pace.sparse(0.01)
    assert sent_every(0.5, 4).sparse(0.1)  # (whatever ``mark_delay`` is)


@given(st.floats(min_value=0.0, max_value=60.0), st.floats(min_value=0.0, max_value=3600.0))
def test_whatever_mark_patience_a_new_stream_is_slow_and_one_pause_ends_a_steady_pace(
    patience: float, pause: float
) -> None:
    assert not PacketPace().steady(patience)
    pace = sent_every(0.002, 2000, patience)
    pace.went_down(pace.last + max(pause, longest_gap(patience)), patience)  # type: ignore[operator]
    assert not pace.steady(patience)


@given(
    st.lists(st.floats(min_value=-1.0, max_value=10.0, allow_nan=False), max_size=60),
    st.floats(min_value=0.0, max_value=1.0),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_the_gap_stays_within_its_bounds_and_the_wait_is_one_of_the_two(
    steps: list[float], delay: float, patience: float
) -> None:
    # Times from a driver only rise; a step back (a clock's fault) must not break the rule.
    pace, now = PacketPace(), 0.0
    for step in steps:
        now += step
        pace.went_down(now, patience)
        assert pace.gap is not None and 0.0 <= pace.gap <= longest_gap(patience)
        assert pace.wait(delay, patience) in (delay, max(delay, patience))
        assert len(pace.recent) <= 3
