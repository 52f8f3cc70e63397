"""``Gathering`` built alone: a root's questions down, and a member's answer to one."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, store

from overlay.core.gathering import Gathering
from overlay.core.streams import State
from overlay.messages import MAX_WIRE_HTL, PastQuery


def gathering(kit: Kit) -> tuple[Gathering, Calls, Calls]:
    push_one, push_claims = Calls(), Calls()
    return Gathering(kit.config, kit.stats, kit.out, push_one, push_claims), push_one, push_claims


def test_spans_asked_are_merged_and_go_to_every_child() -> None:
    kit = Kit()
    part, _, _ = gathering(kit)
    stream = kit.stream(State.ROOT, children=(b"A", b"B"))
    part.ask_spans(stream, [(5, 6), (1, 2), (3, 4)])
    assert kit.sent() == [
        (b"A", PastQuery(KEY, 1, 6, MAX_WIRE_HTL)),
        (b"B", PastQuery(KEY, 1, 6, MAX_WIRE_HTL)),
    ]


def test_a_root_in_its_grace_asks_for_its_holes_and_the_window_beyond() -> None:
    kit = Kit()
    part, _, _ = gathering(kit)
    stream = kit.stream(State.ROOT, children=(b"A",))
    store(stream, 0, 3)  # 1 and 2 never came
    part.ask_down(stream)
    spans = [(m.first, m.last) for _, m in kit.sent()]
    assert spans[0] == (1, 2) and spans[-1] == (4, 3 + kit.config.window_packets)


def test_a_member_pushes_what_it_holds_and_asks_its_children_for_the_rest() -> None:
    kit = Kit()
    part, push_one, push_claims = gathering(kit)
    stream = kit.stream(State.JOINED, parent=b"P", children=(b"C",))
    store(stream, 0, 2)
    part.on_past_query(stream, PastQuery(KEY, 0, 4, 3))
    assert push_one.calls == [(stream, b"P", 0), (stream, b"P", 2)]
    assert push_claims.calls == [(stream, 2, 4)]
    assert kit.sent() == [(b"C", PastQuery(KEY, 1, 1, 2)), (b"C", PastQuery(KEY, 3, 4, 2))]
