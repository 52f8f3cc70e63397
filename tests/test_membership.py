"""Tree membership (``overlay.core.membership``) built alone, without a ``Node``: entering a
tree, a stream's state following the table of ``streams``, a searcher answered and adopted,
and the searches still in flight completed once the node carries the stream."""

from __future__ import annotations

from core_parts import KEY, OWN, TreeParts

from overlay.core.delivery import Member
from overlay.core.effects import Deliver
from overlay.core.events import Subscribed
from overlay.core.routing import Route
from overlay.core.streams import Change, State
from overlay.messages import RejectedLoop, SubscribeSucceeded, SubscribeSucceededNewRoot


def relayed(uid: int = 5, upstream: bytes = b"U") -> Route:
    route = Route(uid, KEY, 0.5, upstream, 10, OWN, True, None, None)
    route.tried.add(upstream)
    return route


def test_a_search_ending_here_makes_a_new_root_that_answers_its_searcher_as_new() -> None:
    parts = TreeParts()
    parts.meet(b"U", 0.2)
    stream = parts.membership.enter_tree(1.0, relayed(), Change.BECAME_ROOT, parent=None)
    assert parts.streams[KEY] is stream
    assert stream.state is State.ROOT and stream.parent is None
    assert parts.stats.roots == 1
    parts.membership.answer(1.0, stream, relayed(), new_root=True)
    assert parts.sends()[0] == (b"U", SubscribeSucceededNewRoot(5, KEY, None))
    assert list(stream.children) == [b"U"]


def test_entering_a_tree_tells_the_local_clients_that_receive() -> None:
    parts = TreeParts()
    stream = parts.membership.new_stream(KEY, State.JOINING, None, None)
    stream.local[7] = Member()
    parts.membership.enter_tree(1.0, relayed(), Change.ATTACHED, parent=b"P")
    assert stream.state is State.JOINED and stream.parent == b"P"
    told = [e for e in parts.out.take() if isinstance(e, Deliver)]
    assert [(e.client, type(e.event)) for e in told] == [(7, Subscribed)]


def test_a_change_follows_the_table_and_a_failed_join_drops_the_stream() -> None:
    parts = TreeParts()
    stream = parts.membership.new_stream(KEY, State.JOINING, None, None)
    stream.join_uid = 9
    parts.membership.change(stream, Change.ATTACHED, b"P")
    assert (stream.state, stream.parent, stream.join_uid) == (State.JOINED, b"P", None)
    parts.membership.change(stream, Change.PARENT_LOST, None)
    assert stream.state is State.RESTARTING
    other = parts.membership.new_stream(KEY, State.JOINING, None, None)
    other.join_uid = 4
    parts.membership.change(other, Change.JOIN_FAILED, None)
    assert KEY not in parts.streams
    assert other.join_uid == 4  # (a failed join keeps its uid)


def test_a_searcher_that_is_our_parent_is_refused_as_a_loop_not_adopted() -> None:
    parts = TreeParts()
    parts.meet(b"P", 0.3)
    stream = parts.stream(state=State.JOINED, parent=b"P")
    parts.membership.answer(1.0, stream, relayed(upstream=b"P"), new_root=False)
    assert parts.sends() == [(b"P", RejectedLoop(5))]
    assert b"P" not in stream.children


def test_a_searcher_whose_link_is_gone_is_not_answered() -> None:
    parts = TreeParts()
    stream = parts.stream()
    parts.membership.answer(1.0, stream, relayed(upstream=b"gone"), new_root=False)
    assert parts.sends() == []
    assert not stream.children


def test_adopting_a_child_answers_its_search_and_unkeeps_an_idle_root() -> None:
    parts = TreeParts()
    parts.meet(b"C", 0.3)
    stream = parts.stream()
    stream.high = 2  # (a root with a history is kept while idle)
    assert parts.keeping.keep(1.0, stream)
    parts.membership.adopt(1.0, stream, b"C", 8, False, None)
    sent = parts.sends()
    assert sent[0][0] == b"C" and isinstance(sent[0][1], SubscribeSucceeded)
    assert sent[0][1].uid == 8
    assert list(stream.children) == [b"C"]
    assert not parts.keeping.kept


def test_entering_a_tree_completes_the_searches_for_it_still_in_flight_here() -> None:
    parts = TreeParts()
    for peer, location in ((b"U", 0.2), (b"V", 0.25), (b"A", 0.49)):
        parts.meet(peer, location)
    parts.searches.start_route(1.0, relayed(5, b"U"))
    parts.searches.start_route(1.0, relayed(6, b"V"))
    assert set(parts.searches.routes) == {5, 6}
    parts.sends()
    own = Route(7, KEY, 0.5, None, 10, OWN, True, None, None)
    parts.membership.enter_tree(2.0, own, Change.BECAME_ROOT, parent=None)
    assert parts.searches.routes == {}
    answered = [(p, type(m), m.uid) for p, m in parts.sends() if hasattr(m, "uid")]
    assert (b"U", SubscribeSucceeded, 5) in answered
    assert (b"V", SubscribeSucceeded, 6) in answered
    assert set(parts.streams[KEY].children) == {b"U", b"V"}
