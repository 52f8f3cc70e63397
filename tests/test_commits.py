"""Commits (``overlay.core.commits``): a root shows its own clients a packet, and tells a
local publisher it is acknowledged, only once a child holds it too.

The scene: N (0.45) is root of KEY with local client 1, subscribed and publishing; U (0.2)
is its only child.
"""

from __future__ import annotations

from corenet import key_at
from test_node import make, meet, sends

from overlay.core.effects import Deliver, Effect
from overlay.core.events import Packet, PublishAcked
from overlay.core.node import Node
from overlay.messages import (
    Held,
    HeldQuery,
    PacketKind,
    SubscribeData,
    SubscribeRequest,
    SubscribeSucceeded,
)

KEY = key_at(0.5)
U = b"U"


def root(child: bool = True, **config: object) -> Node:
    node = make(**config)
    node.subscribe(0.0, KEY, 1)
    if child:
        meet(node, U, 0.2)
        node.receive(0.0, U, SubscribeRequest(9, KEY, 5, 0.2, None))
        assert list(node.streams[KEY].children) == [U]
    return node


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
