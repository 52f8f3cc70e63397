"""``Commits`` built alone: a root's commit point moves with what its children hold."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, store

from overlay.core.commits import Commits
from overlay.core.config import NodeConfig
from overlay.core.streams import State, Stream
from overlay.messages import Held, HeldQuery, PublishSucceeded


def commits(kit: Kit) -> tuple[Commits, Calls, Calls, Calls]:
    answer_local, reply, pump = Calls(), Calls(), Calls()
    part = Commits(kit.config, kit.streams, kit.stats, kit.out, answer_local, reply, pump, Calls())
    return part, answer_local, reply, pump


def root(kit: Kit, children: tuple[bytes, ...]) -> Stream:
    stream = kit.stream(State.ROOT, children=children)
    store(stream, 0)
    return stream


def test_a_stored_packet_is_asked_about_and_committed_once_two_children_hold_it() -> None:
    kit = Kit()
    part, _, _, pump = commits(kit)
    stream = root(kit, (b"A", b"B", b"C"))
    part.stored_at_root(stream, 0)
    assert kit.sent() == [(c, HeldQuery(KEY, 0)) for c in (b"A", b"B", b"C")]
    assert stream.root.committed == -1
    part.on_held(b"A", Held(KEY, 0))
    assert stream.root.committed == -1 and pump.calls == []
    part.on_held(b"B", Held(KEY, 0))
    assert stream.root.committed == 0 and pump.calls == [(stream,)]


def test_a_local_publishers_ack_waits_for_the_commit() -> None:
    kit = Kit()
    part, answer_local, reply, _ = commits(kit)
    stream = root(kit, (b"A", b"B"))
    part.stored_at_root(stream, 0)
    acked = PublishSucceeded(5, KEY, 0)
    part.ack_local(stream, 1, acked)
    assert answer_local.calls == [] and stream.root.unacked_low == 0
    part.on_held(b"A", Held(KEY, 0))
    part.on_held(b"B", Held(KEY, 0))
    part.release(stream)  # (the flow's ``pump`` does, after the commit moved)
    assert reply.calls == [(1, acked)] and not stream.root.unacked


def test_a_root_with_nobody_to_wait_for_commits_at_once() -> None:
    kit = Kit()
    part, _, _, _ = commits(kit)
    stream = root(kit, ())
    part.stored_at_root(stream, 0)
    assert kit.sent() == [] and stream.root.committed is None


def test_an_unanswered_question_is_given_up_after_confirm_timeout() -> None:
    kit = Kit(config=NodeConfig(confirm_timeout=2.0, heartbeat_interval=1.0))
    part, _, _, _ = commits(kit)
    stream = root(kit, (b"A", b"B"))
    part.stored_at_root(stream, 0)
    for _ in range(3):
        part.overdue()
    assert kit.stats.commit_timeouts == 1
    assert stream.root.silent == {b"A", b"B"} and stream.root.committed is None
