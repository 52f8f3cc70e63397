"""``Backlog`` built alone: a full root holds new publishes, and lets them go in order."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, publish, store

from overlay.core.backlog import Backlog
from overlay.core.config import NodeConfig
from overlay.core.local_publishes import LocalPublish
from overlay.core.streams import State, Stream
from overlay.messages import PublishError, PublishRejected


def backlog(kit: Kit) -> tuple[Backlog, dict[int, LocalPublish], Calls, Calls]:
    local: dict[int, LocalPublish] = {}
    reply, route = Calls(), Calls()
    return Backlog(kit.config, kit.streams, kit.stats, local, reply, route), local, reply, route


def full_root(kit: Kit) -> Stream:
    stream = kit.stream(State.ROOT, children=(b"C",))
    store(stream, 0, 1)
    stream.root.committed = -1  # nothing committed: the window of 2 is all uncommitted
    return stream


def test_a_full_root_holds_a_new_publish_back() -> None:
    kit = Kit(config=NodeConfig(window_packets=2))
    part, _, _, route = backlog(kit)
    stream = full_root(kit)
    assert part.held_back(stream, b"C", publish(7))
    assert list(stream.root.backlog) == [7]
    assert KEY in part.backlogged and kit.stats.held_back == 1
    assert route.calls == []


def test_room_again_lets_the_backlog_go_in_order_and_a_gone_child_drops_its_own() -> None:
    kit = Kit(config=NodeConfig(window_packets=2))
    part, _, _, route = backlog(kit)
    stream = full_root(kit)
    for uid, source in ((7, b"C"), (8, b"X"), (9, b"C")):
        part.held_back(stream, source, publish(uid))
    stream.root.committed = 1
    part.drain(2.0)
    assert [call[3].uid for call in route.calls] == [7, 9]  # X is no child: nobody to answer
    assert not part.backlogged


def test_past_its_bound_a_publish_is_refused_busy() -> None:
    kit = Kit(config=NodeConfig(window_packets=2, max_queued_publishes=1))
    part, _, reply, _ = backlog(kit)
    stream = full_root(kit)
    part.held_back(stream, b"C", publish(7))
    assert part.held_back(stream, b"C", publish(8))
    assert reply.calls == [(b"C", PublishRejected(8, KEY, PublishError.BUSY))]


def test_dropped_local_publishes_go_back_to_the_front() -> None:
    kit = Kit()
    part, _, _, _ = backlog(kit)
    stream = kit.stream(State.ROOT)
    stream.root.backlog[5] = (1, publish(5))
    part.requeue(stream, [(1, publish(3)), (b"C", publish(4))])
    assert list(stream.root.backlog) == [3, 5]  # a peer's node retries its own
    assert KEY in part.backlogged
