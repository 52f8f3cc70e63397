"""Commits (``overlay.core.commits``): a root shows its own clients a packet, and tells a
local publisher, or a child whose publish it is (its node's own, or one it relayed up),
that it is acknowledged, only once two children hold it too (one, if it has only one).

The scene: N (0.45) is root of KEY with local client 1, subscribed and publishing; U (0.2)
is its only child. Some tests add V (0.3), or use a root without local clients.
"""

from __future__ import annotations

from commit_roots import KEY, U, V, adopt, bare_root, own_publish, root
from corenet import CoreNet, key_at
from flowkit import Calls, Kit, store
from nodes import make, meet, sends

from overlay.core.commits import Commits
from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect
from overlay.core.events import Packet, PublishAcked
from overlay.core.node import Node
from overlay.core.streams import State, Stream
from overlay.messages import (
    Held,
    HeldQuery,
    PacketKind,
    PublishSucceeded,
    SubscribeData,
    SubscribeSucceeded,
    Unsubscribe,
)


def seen(effects: list[Effect]) -> list[object]:
    """What client 1 was told: packet numbers and acknowledgements."""
    out: list[object] = []
    for effect in effects:
        if isinstance(effect, Deliver) and isinstance(effect.event, Packet):
            out.append(effect.event.number)
        elif isinstance(effect, Deliver) and isinstance(effect.event, PublishAcked):
            out.append(("acked", effect.event.number))
    return out


def test_the_root_shows_its_clients_a_packet_once_a_child_holds_it() -> None:
    node = root()
    effects = node.publish(1.0, KEY, 1, 100, b"p0")
    assert sends(effects)[-1] == (U, HeldQuery(KEY, 0))
    assert seen(effects) == []  # only N holds packet 0: were N to die now, it never was
    assert seen(node.receive(1.1, U, Held(KEY, 0))) == [0, ("acked", 0)]


def test_one_question_at_a_time_and_the_answer_asks_about_the_newest() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    effects = node.publish(1.0, KEY, 1, 101, b"p1")
    assert [m for _, m in sends(effects) if isinstance(m, HeldQuery)] == []  # 0 still asked
    effects = node.receive(1.1, U, Held(KEY, 0))
    assert seen(effects) == [0, ("acked", 0)]
    assert (U, HeldQuery(KEY, 1)) in sends(effects)
    assert seen(node.receive(1.2, U, Held(KEY, 1))) == [1, ("acked", 1)]


def test_a_root_without_children_has_nobody_to_wait_for() -> None:
    node = root(child=False)
    assert seen(node.publish(1.0, KEY, 1, 100, b"p0")) == [0, ("acked", 0)]


def test_losing_the_last_child_shows_what_the_root_holds() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    assert seen(node.link_down(1.1, U)) == [0, ("acked", 0)]


def test_a_child_that_never_answers_delays_the_root_by_confirm_timeout_at_most() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0)
    node.publish(1.0, KEY, 1, 100, b"p0")
    effects: list[Effect] = []
    now = 1.0
    while not seen(effects):
        now += 1.0
        assert now < 10.0, "the root waits for ever"
        effects = node.handle_timer(now)
    assert seen(effects) == [0, ("acked", 0)] and 3.0 <= now - 1.0 <= 5.0
    assert node.stats.commit_timeouts == 1


def time_out(node: Node, since: float) -> float:
    """Run heartbeat rounds (1 s) until the root gives its question up; the time then."""
    now = since
    while node.stats.commit_timeouts == 0:
        now += 1.0
        assert now < since + 10.0, "the root waits for ever"
        node.handle_timer(now)
    return now


def test_a_child_that_never_answers_is_not_waited_for_again() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0)
    node.publish(1.0, KEY, 1, 100, b"p0")
    now = time_out(node, 1.0)
    # A child that heartbeats but never answers would otherwise hold back every packet.
    assert seen(node.publish(now, KEY, 1, 101, b"p1")) == [1, ("acked", 1)]
    assert seen(node.publish(now, KEY, 1, 102, b"p2")) == [2, ("acked", 2)]
    assert node.stats.commit_timeouts == 1


def test_beside_a_silent_child_the_root_waits_for_the_other_one_only() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0)
    adopt(node, V, 0.3, 60)
    node.publish(1.0, KEY, 1, 100, b"p0")
    node.receive(1.1, V, Held(KEY, 0))  # U never answers
    now = time_out(node, 1.0)
    effects = node.publish(now, KEY, 1, 101, b"p1")
    assert (U, HeldQuery(KEY, 1)) in sends(effects)  # still asked: its answer would count
    assert seen(effects) == []  # V does not hold packet 1 yet
    assert seen(node.receive(now + 0.1, V, Held(KEY, 1))) == [1, ("acked", 1)]


def test_a_publishing_child_beside_a_silent_one_is_answered_at_once() -> None:
    node = bare_root(
        (U, 0.2), (V, 0.3), heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0
    )
    node.receive(1.0, U, own_publish(200, b"p0"))
    node.receive(1.1, U, Held(KEY, 0))  # V never answers
    now = time_out(node, 1.0)
    effects = node.receive(now, U, own_publish(201, b"p1"))
    assert answers(effects, U) == [PublishSucceeded(201, KEY, 1)]  # nobody else to wait for


def test_a_silent_child_that_answers_again_is_waited_for_again() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0)
    node.publish(1.0, KEY, 1, 100, b"p0")
    now = time_out(node, 1.0)
    effects = node.publish(now, KEY, 1, 101, b"p1")
    assert seen(effects) == [1, ("acked", 1)]  # nobody waited for...
    assert (U, HeldQuery(KEY, 1)) in sends(effects)  # ...but U is still asked
    node.receive(now + 0.1, U, Held(KEY, 1))  # it was slow once: it counts again
    effects = node.publish(now + 0.2, KEY, 1, 102, b"p2")
    assert seen(effects) == [] and (U, HeldQuery(KEY, 2)) in sends(effects)
    assert seen(node.receive(now + 0.3, U, Held(KEY, 2))) == [2, ("acked", 2)]


def test_a_silent_child_that_leaves_and_is_adopted_again_is_waited_for() -> None:
    node = root(heartbeat_interval=1.0, dead_after=1e6, confirm_timeout=3.0)
    node.publish(1.0, KEY, 1, 100, b"p0")
    now = time_out(node, 1.0)
    node.receive(now, U, Unsubscribe(KEY))
    adopt(node, U, 0.2, 61)
    effects = node.publish(now, KEY, 1, 101, b"p1")
    assert (U, HeldQuery(KEY, 1)) in sends(effects) and seen(effects) == []
    assert seen(node.receive(now + 0.1, U, Held(KEY, 1))) == [1, ("acked", 1)]


def test_held_from_a_peer_that_is_not_a_child_changes_nothing() -> None:
    node = root()
    node.publish(1.0, KEY, 1, 100, b"p0")
    meet(node, b"X", 0.3)
    assert seen(node.receive(1.1, b"X", Held(KEY, 0))) == []
    assert seen(node.receive(1.1, b"X", Held(key_at(0.7), 0))) == []
    assert node.stats.ignored >= 2


def test_a_child_answers_with_everything_it_processed_and_only_its_parent() -> None:
    node = make(0.3)
    meet(node, b"P", 0.45)
    meet(node, b"X", 0.2)
    node.subscribe(0.0, KEY, 1)
    node.receive(0.0, b"P", SubscribeSucceeded(node.streams[KEY].join_uid or 0, KEY, None))
    for n in range(3):
        data = SubscribeData(KEY, n, b"p", None, PacketKind.DATA, None, None, n)
        node.receive(0.1, b"P", data)
    assert sends(node.receive(0.2, b"P", HeldQuery(KEY, 1))) == [(b"P", Held(KEY, 2))]
    assert sends(node.receive(0.2, b"X", HeldQuery(KEY, 1))) == []


def answers(effects: list[Effect], to: bytes) -> list[object]:
    return [m for peer, m in sends(effects) if peer == to and isinstance(m, PublishSucceeded)]


def test_with_two_children_the_root_waits_until_both_hold_a_packet() -> None:
    node = root()
    adopt(node, V, 0.3, 60)
    effects = node.publish(1.0, KEY, 1, 100, b"p0")
    assert (U, HeldQuery(KEY, 0)) in sends(effects) and (V, HeldQuery(KEY, 0)) in sends(effects)
    assert node.stats.held_queries == 2  # one question, to each child
    assert seen(node.receive(1.1, U, Held(KEY, 0))) == []  # N and U only: both may die
    assert seen(node.receive(1.2, V, Held(KEY, 0))) == [0, ("acked", 0)]


def test_a_childs_own_publish_is_answered_once_another_child_holds_it() -> None:
    node = bare_root((U, 0.2), (V, 0.3))
    effects = node.receive(1.0, U, own_publish(200, b"p0"))
    assert answers(effects, U) == []  # N and U hold packet 0, nobody else
    assert (V, HeldQuery(KEY, 0)) in sends(effects)
    assert answers(node.receive(1.1, U, Held(KEY, 0)), U) == []  # U itself does not count
    effects = node.receive(1.2, V, Held(KEY, 0))
    assert answers(effects, U) == [PublishSucceeded(200, KEY, 0)]


def test_a_publish_that_climbed_through_a_relay_is_answered_once_another_child_holds_it() -> None:
    # U and the publisher's node below it hold packet 0 too, but one branch can be cut off
    # whole: if the root dies with it, the rest of the tree could give the same number to
    # another publish, so only a copy in another child's branch makes it safe to answer.
    node = bare_root((U, 0.2), (V, 0.3))
    effects = node.receive(1.0, U, own_publish(200, b"p0", hops=2))
    assert answers(effects, U) == []
    assert (V, HeldQuery(KEY, 0)) in sends(effects)
    assert answers(node.receive(1.1, U, Held(KEY, 0)), U) == []  # U's branch does not count
    assert answers(node.receive(1.2, V, Held(KEY, 0)), U) == [PublishSucceeded(200, KEY, 0)]


def test_a_question_goes_to_three_children_and_two_of_them_commit() -> None:
    # Asking every child cost a root with many a HeldQuery and a Held per child for nearly
    # every packet, once every publish waited for a second branch.
    kids = [(bytes([ord("a") + i]), 0.2 + i / 100) for i in range(6)]
    node = bare_root(*kids)
    effects = node.receive(1.0, kids[0][0], own_publish(200, b"p0", hops=2))
    asked = [peer for peer, m in sends(effects) if isinstance(m, HeldQuery)]
    assert len(asked) == 3 and node.stats.held_queries == 3
    assert asked[0] == kids[0][0]  # the publisher's branch is among them
    assert answers(node.receive(1.1, asked[0], Held(KEY, 0)), kids[0][0]) == []
    effects = node.receive(1.2, asked[1], Held(KEY, 0))
    assert answers(effects, kids[0][0]) == [PublishSucceeded(200, KEY, 0)]


def test_when_asked_children_go_the_question_goes_to_others() -> None:
    # Otherwise the publisher's branch alone would count as enough, with three children
    # never asked (or, with none of the asked left, nobody would ask until the timeout).
    kids = [(bytes([ord("a") + i]), 0.2 + i / 100) for i in range(6)]
    node = bare_root(*kids)
    effects = node.receive(1.0, kids[0][0], own_publish(200, b"p0", hops=2))
    first = [peer for peer, m in sends(effects) if isinstance(m, HeldQuery)]
    node.link_down(1.1, first[1])
    effects = node.link_down(1.1, first[2])
    again = [peer for peer, m in sends(effects) if isinstance(m, HeldQuery)]
    assert len(again) == 3 and first[1] not in again and first[2] not in again
    assert answers(node.receive(1.2, kids[0][0], Held(KEY, 0)), kids[0][0]) == []
    other = next(peer for peer in again if peer != kids[0][0])
    effects = node.receive(1.3, other, Held(KEY, 0))
    assert answers(effects, kids[0][0]) == [PublishSucceeded(200, KEY, 0)]


def test_the_only_childs_own_publish_is_answered_at_once() -> None:
    node = bare_root((U, 0.2))
    assert answers(node.receive(1.0, U, own_publish(200, b"p0")), U) == [
        PublishSucceeded(200, KEY, 0)
    ]


def test_a_waiting_answer_goes_out_when_the_other_child_dies() -> None:
    node = bare_root((U, 0.2), (V, 0.3))
    node.receive(1.0, U, own_publish(200, b"p0"))
    assert answers(node.link_down(2.0, V), U) == [PublishSucceeded(200, KEY, 0)]


def test_a_retry_while_the_answer_waits_is_answered_once() -> None:
    node = bare_root((U, 0.2), (V, 0.3))
    node.receive(1.0, U, own_publish(200, b"p0"))
    assert answers(node.receive(1.5, U, own_publish(200, b"p0")), U) == []
    node.receive(1.6, U, Held(KEY, 0))
    assert answers(node.receive(1.7, V, Held(KEY, 0)), U) == [PublishSucceeded(200, KEY, 0)]


def test_a_child_adopted_after_the_question_counts_from_the_next_one() -> None:
    node = bare_root((U, 0.2), (V, 0.3))
    node.receive(1.0, U, own_publish(200, b"p0"))
    adopt(node, b"W", 0.25, 70)  # never asked about packet 0
    node.receive(1.1, U, Held(KEY, 0))
    assert answers(node.receive(1.2, V, Held(KEY, 0)), U) == [PublishSucceeded(200, KEY, 0)]
    effects = node.receive(1.3, U, own_publish(201, b"p1"))
    assert (b"W", HeldQuery(KEY, 1)) in sends(effects)


def test_over_real_cores_the_publisher_hears_of_its_packet_only_once_another_child_holds_it() -> (
    None
):
    """R (0.48) roots the tree; P (0.3) publishes and S (0.2) subscribes, both R's children."""
    net = CoreNet(seed=1)
    for name, location in ((b"R", 0.48), (b"P", 0.3), (b"S", 0.2)):
        net.add(name, location)
    net.connect(b"R", b"P")
    net.connect(b"R", b"S")
    net.subscribe(b"R", KEY, client=9)  # R roots the tree; its client leaves below
    net.subscribe(b"S", KEY)
    net.subscribe(b"P", KEY)
    net.unsubscribe(b"R", KEY, client=9)
    assert net.roots(KEY) == [b"R"] and set(net.stream(b"R", KEY).children) == {b"P", b"S"}
    net.hold(b"S")  # S is slow: it holds nothing yet
    net.publish(b"P", KEY, b"p0", uid=7)
    assert net.answers(b"P") == []  # R and P hold packet 0, nobody else
    net.release(b"S")
    assert net.answers(b"P") == [PublishAcked(KEY, 7, 0)]
    assert [e.number for e in net.received(b"S") if isinstance(e, Packet)] == [0]


def test_a_child_whose_catch_up_is_held_back_is_not_waited_for() -> None:
    node = root()
    adopt(node, V, 0.3, 60)
    node.streams[KEY].catching_up = {V}  # refills: nothing live goes to V for now
    effects = node.publish(1.0, KEY, 1, 100, b"p0")
    assert [peer for peer, m in sends(effects) if isinstance(m, HeldQuery)] == [U]
    assert seen(node.receive(1.1, U, Held(KEY, 0))) == [0, ("acked", 0)]


# --- Commits built alone: a root's commit point moves with what its children hold ----------


def commits(kit: Kit) -> tuple[Commits, Calls, Calls, Calls]:
    answer_local, reply, pump = Calls(), Calls(), Calls()
    part = Commits(kit.config, kit.streams, kit.stats, kit.out, answer_local, reply, pump, Calls())
    return part, answer_local, reply, pump


def stream_root(kit: Kit, children: tuple[bytes, ...]) -> Stream:
    stream = kit.stream(State.ROOT, children=children)
    store(stream, 0)
    return stream


def test_a_stored_packet_is_asked_about_and_committed_once_two_children_hold_it() -> None:
    kit = Kit()
    part, _, _, pump = commits(kit)
    stream = stream_root(kit, (b"A", b"B", b"C"))
    part.stored_at_root(stream, 0, 0)
    assert kit.sent() == [(c, HeldQuery(KEY, 0)) for c in (b"A", b"B", b"C")]
    assert stream.root.committed == -1
    part.on_held(b"A", Held(KEY, 0))
    assert stream.root.committed == -1 and pump.calls == []
    part.on_held(b"B", Held(KEY, 0))
    assert stream.root.committed == 0 and pump.calls == [(stream,)]


def test_a_local_publishers_ack_waits_for_the_commit() -> None:
    kit = Kit()
    part, answer_local, reply, _ = commits(kit)
    stream = stream_root(kit, (b"A", b"B"))
    part.stored_at_root(stream, 0, 0)
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
    stream = stream_root(kit, ())
    part.stored_at_root(stream, 0, 0)
    assert kit.sent() == [] and stream.root.committed is None


def test_an_unanswered_question_is_given_up_after_confirm_timeout() -> None:
    kit = Kit(config=NodeConfig(confirm_timeout=2.0, heartbeat_interval=1.0))
    part, _, _, _ = commits(kit)
    stream = stream_root(kit, (b"A", b"B"))
    part.stored_at_root(stream, 0, 0)
    for _ in range(3):
        part.overdue()
    assert kit.stats.commit_timeouts == 1
    assert stream.root.silent == {b"A", b"B"} and stream.root.committed is None
