"""Keeping (``overlay.core.keeping``): a root whose last member left keeps the stream for
``keep_idle`` seconds, so numbering, retried publishes and catch-up go on where they were;
then it drops it. A member that comes meanwhile ends the keep, a kept stream gives up its
place to a new one, and a root with nothing numbered keeps nothing."""

from __future__ import annotations

from core_parts import Parts
from corenet import CoreNet
from kept_streams import KEEP, net_with_history
from nodes import KEY, KEY2

from overlay.core.config import NodeConfig
from overlay.core.events import Packet, PublishAcked
from overlay.core.streams import State


def test_the_root_keeps_an_idle_stream_and_the_relays_leave() -> None:
    net = net_with_history()
    assert net.state(b"A", KEY) is None and net.state(b"B", KEY) is None
    kept = net.stream(b"C", KEY)
    assert kept is not None and kept.state is State.ROOT and kept.root.kept is not None
    assert not kept.children and not kept.local
    net.advance(net.now + 5)  # (the links' first announcements)
    assert not net.nodes[b"C"].busy()  # a steady state, not work pending
    assert net.stream(b"C", KEY) is kept


def test_the_next_publisher_goes_on_from_the_next_number() -> None:
    net = net_with_history()
    net.publish(b"A", KEY, b"later", client=2, uid=99)
    assert net.answers(b"A", 2) == [PublishAcked(KEY, 99, 3)]  # not 0 again
    assert net.stream(b"C", KEY).root.kept is None  # type: ignore[union-attr]


def test_a_retried_publish_is_acknowledged_with_its_first_number() -> None:
    net = net_with_history()
    net.publish(b"A", KEY, b"p1", client=2, uid=11)  # a Spark task retried
    assert net.answers(b"A", 2) == [PublishAcked(KEY, 11, 1)]
    assert net.stream(b"C", KEY).high == 2  # type: ignore[union-attr]  # not stored again


def test_a_late_subscriber_catches_up_from_the_kept_window() -> None:
    net = net_with_history()
    net.subscribe(b"A", KEY, client=3, last_seen=-1)
    got = [(e.number, e.data) for e in net.received(b"A", 3) if isinstance(e, Packet)]
    assert got == [(0, b"p0"), (1, b"p1"), (2, b"p2")]


def test_the_keep_ends_after_keep_idle() -> None:
    net = net_with_history()
    start = net.now
    net.advance(start + KEEP - 1)
    assert net.state(b"C", KEY) is State.ROOT  # its probes and looks did not end it early
    net.advance(start + KEEP)
    assert net.state(b"C", KEY) is None and not net.nodes[b"C"].keeping.kept


def test_a_member_that_comes_and_goes_starts_a_fresh_keep() -> None:
    net = net_with_history()
    start = net.now
    net.advance(start + KEEP / 2)
    net.subscribe(b"A", KEY, client=4)
    assert net.stream(b"C", KEY).root.kept is None  # type: ignore[union-attr]
    net.advance(start + KEEP * 0.9)
    net.unsubscribe(b"A", KEY, client=4)
    left = net.now
    net.advance(start + KEEP + 1)  # the first keep's end: no longer counts
    assert net.state(b"C", KEY) is State.ROOT
    net.advance(left + KEEP)
    assert net.state(b"C", KEY) is None


def test_a_kept_stream_gives_its_place_to_a_new_one() -> None:
    net = CoreNet(seed=1, config=NodeConfig(keep_idle=KEEP, max_streams=1))
    net.add(b"C", 0.48)
    net.publish(b"C", KEY, b"x", uid=1)
    net.remove_client(b"C", 1)
    assert net.stream(b"C", KEY).root.kept is not None  # type: ignore[union-attr]
    net.subscribe(b"C", KEY2, client=2)
    assert net.state(b"C", KEY2) is State.ROOT and net.state(b"C", KEY) is None


def test_a_full_node_still_refuses_a_stream_when_nothing_is_kept() -> None:
    net = CoreNet(seed=1, config=NodeConfig(keep_idle=KEEP, max_streams=1))
    net.add(b"C", 0.48)
    net.subscribe(b"C", KEY, client=1)
    net.subscribe(b"C", KEY2, client=2)
    assert net.state(b"C", KEY2) is None and net.state(b"C", KEY) is State.ROOT


def test_keep_idle_zero_drops_the_stream_at_once() -> None:
    net = net_with_history(keep_idle=0.0)
    assert all(net.state(n, KEY) is None for n in net.nodes)


def test_a_root_that_numbered_nothing_keeps_nothing() -> None:
    net = CoreNet(seed=1, config=NodeConfig(keep_idle=KEEP))
    net.add(b"A", 0.1)
    net.add(b"C", 0.48)
    net.connect(b"A", b"C")
    net.subscribe(b"A", KEY)
    net.unsubscribe(b"A", KEY)
    assert net.state(b"C", KEY) is None


# --- the component alone ------------------------------------------------------------------


def test_a_root_with_a_history_is_kept_until_its_timer_then_forgotten() -> None:
    parts = Parts(keep_idle=KEEP)
    stream = parts.stream(KEY)
    stream.high = 2
    assert parts.keeping.keep(1.0, stream)
    assert parts.keeping.kept == {stream.root.kept: KEY} and parts.timers.earliest() == 1.0 + KEEP
    assert parts.keeping.keep(50.0, stream)  # already kept: its first deadline holds
    assert len(parts.timers) == 1
    parts.run(1.0 + KEEP)
    assert parts.streams == {} and parts.keeping.kept == {} and stream.root.kept is None


def test_only_a_root_with_something_numbered_is_kept() -> None:
    parts = Parts(keep_idle=KEEP)
    assert not parts.keeping.keep(1.0, parts.stream(KEY))  # nothing numbered
    joined = parts.stream(KEY2, State.JOINED, parent=b"P")
    joined.high = 2
    assert not parts.keeping.keep(1.0, joined)
    assert parts.keeping.kept == {} and len(parts.timers) == 0


def test_a_stream_unkept_or_busy_again_outlives_its_keep_timer() -> None:
    parts = Parts(keep_idle=KEEP)
    first, second = parts.stream(KEY), parts.stream(KEY2)
    first.high = second.high = 0
    parts.keeping.keep(1.0, first)
    parts.keeping.keep(2.0, second)
    assert parts.keeping.oldest_idle() is first
    parts.keeping.unkeep(first)
    assert first.root.kept is None and parts.keeping.oldest_idle() is second
    second.children[b"C"] = None  # a member came, the keep not yet ended
    assert parts.keeping.oldest_idle() is None
    parts.run(2.0 + KEEP)
    assert parts.streams == {KEY: first, KEY2: second}
