"""The ends of subscribe searches (``overlay.core.subscribing``) built alone, without a
``Node``: a request taken on, refused or routed on; our own search ending here as the root;
a relayed search failing back; a success arriving for a search we no longer run."""

from __future__ import annotations

from core_parts import KEY, KEY2, OWN, TreeParts

from overlay.core.streams import State
from overlay.messages import (
    Accepted,
    DataNotFound,
    RejectedLoop,
    SubscribeRequest,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
    Unsubscribe,
)


def request(uid: int = 5, key: bytes = KEY, best: float = 0.2) -> SubscribeRequest:
    return SubscribeRequest(uid, key, 10, best, None, None)


def test_a_request_for_a_stream_we_carry_ends_here_and_adopts_the_sender() -> None:
    parts = TreeParts()
    parts.meet(b"U", 0.2)
    stream = parts.stream()
    parts.subscribing.on_request(1.0, b"U", request())
    sent = parts.sends()
    assert sent[0][0] == b"U" and isinstance(sent[0][1], SubscribeSucceeded)
    assert list(stream.children) == [b"U"]
    assert parts.searches.routes == {}


def test_our_parent_searching_through_its_subtree_is_refused_as_a_loop() -> None:
    parts = TreeParts()
    parts.meet(b"P", 0.3)
    stream = parts.stream(state=State.JOINED, parent=b"P")
    parts.subscribing.on_request(1.0, b"P", request())
    assert parts.sends() == [(b"P", RejectedLoop(5))]
    assert not stream.children


def test_a_request_for_a_stream_we_lack_is_routed_on_toward_the_key() -> None:
    parts = TreeParts()
    parts.meet(b"U", 0.2)
    parts.meet(b"A", 0.49)
    parts.subscribing.on_request(1.0, b"U", request())
    assert parts.sends() == [
        (b"U", Accepted(5)),
        (b"A", SubscribeRequest(5, KEY, 10, OWN, None, None)),
    ]
    assert parts.searches.routes[5].upstream == b"U"


def test_a_uid_seen_before_is_a_loop_and_one_naming_another_key_is_refused() -> None:
    parts = TreeParts()
    parts.meet(b"U", 0.2)
    parts.meet(b"V", 0.3)
    parts.meet(b"A", 0.49)
    parts.subscribing.on_request(1.0, b"U", request())
    parts.sends()
    parts.subscribing.on_request(1.5, b"V", request(key=KEY2))
    assert parts.sends() == [(b"V", RejectedLoop(5))]
    assert parts.stats.uids_refused == 1
    parts.subscribing.on_request(2.0, b"V", request())
    assert parts.sends() == [(b"V", RejectedLoop(5))]
    assert parts.stats.loops == 2


def test_our_own_search_with_nowhere_to_go_makes_us_the_root() -> None:
    parts = TreeParts()
    stream = parts.stream(state=State.JOINING)
    parts.subscribing.start_own_search(1.0, stream, None, 11)
    assert ("end", 11) in parts.calls
    assert stream.state is State.ROOT
    assert parts.stats.roots == 1
    assert parts.searches.routes == {}


def test_a_relayed_search_that_ends_short_of_the_closest_node_fails_back() -> None:
    parts = TreeParts()
    parts.meet(b"U", 0.2)
    parts.subscribing.on_request(1.0, b"U", request(best=0.49))  # someone closer was seen
    assert parts.sends() == [(b"U", DataNotFound(5, KEY, 9, False))]  # (no progress: htl-1)
    assert parts.stats.not_found == 1
    assert KEY not in parts.streams


def test_a_relayed_search_that_ends_at_the_closest_node_makes_it_the_root() -> None:
    parts = TreeParts()
    parts.meet(b"U", 0.2)
    parts.subscribing.on_request(1.0, b"U", request())
    assert parts.sends()[0] == (b"U", SubscribeSucceededNewRoot(5, KEY))  # (then its look)
    assert parts.streams[KEY].state is State.ROOT
    assert list(parts.streams[KEY].children) == [b"U"]


def test_a_success_for_a_search_we_no_longer_run_is_answered_with_unsubscribe() -> None:
    parts = TreeParts()
    parts.meet(b"A", 0.49)
    parts.subscribing.on_success(1.0, b"A", SubscribeSucceeded(77, KEY, None))
    assert parts.sends() == [(b"A", Unsubscribe(KEY))]
    assert KEY not in parts.streams


def test_a_success_for_our_own_search_joins_the_tree_below_the_sender() -> None:
    parts = TreeParts()
    parts.meet(b"A", 0.49)
    stream = parts.stream(state=State.JOINING)
    parts.subscribing.start_own_search(1.0, stream, None, 12)
    assert parts.sends() == [(b"A", SubscribeRequest(12, KEY, 10, OWN, None, None))]
    parts.subscribing.on_success(1.5, b"A", SubscribeSucceeded(12, KEY, None))
    assert stream.state is State.JOINED and stream.parent == b"A"
    assert parts.searches.routes == {}
