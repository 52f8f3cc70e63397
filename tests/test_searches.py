"""The route table (``overlay.core.searches``) built alone, without a ``Node``: a search is
forwarded to the closest untried peer, backtracks on a failure or a silent hop, and one of
our own with no peer to go to waits for one; the tables by key and by peer follow it."""

from __future__ import annotations

from core_parts import KEY, KEY2, OWN, Parts

from overlay.core.routing import Route
from overlay.messages import (
    Accepted,
    DataNotFound,
    RejectedLoop,
    SubscribeRequest,
)


def relayed(uid: int = 5, key: bytes = KEY, upstream: bytes = b"U") -> Route:
    route = Route(uid, key, 0.5, upstream, 10, 0.3, False, None, None)
    route.tried.add(upstream)
    return route


def own(parts: Parts, uid: int = 6, key: bytes = KEY) -> Route:
    parts.stream(key)
    return Route(uid, key, 0.5, None, 10, OWN, True, None, None)


def test_a_relayed_search_is_accepted_then_sent_to_the_closest_untried_peer() -> None:
    parts = Parts()
    for peer, location in ((b"U", 0.2), (b"A", 0.49), (b"B", 0.4)):
        parts.meet(peer, location)
    parts.searches.start_route(1.0, relayed())
    assert parts.sends() == [
        (b"U", Accepted(5)),
        (b"A", SubscribeRequest(5, KEY, 10, 0.3, None, None)),
    ]
    assert parts.searches.by_key == {KEY: {5: None}}
    assert parts.searches.by_peer == {(b"U", KEY): 1}
    assert parts.timers.earliest() == 1.0 + parts.config.accept_timeout


def test_a_failure_backtracks_and_the_last_one_ends_the_route() -> None:
    parts = Parts()
    for peer, location in ((b"U", 0.2), (b"A", 0.49), (b"B", 0.4)):
        parts.meet(peer, location)
    parts.searches.start_route(1.0, relayed())
    parts.sends()
    parts.searches.on_failure(1.1, b"B", RejectedLoop(5))  # not the peer it waits on
    assert parts.sends() == []
    parts.searches.on_failure(1.2, b"A", DataNotFound(5, KEY, 3))
    assert parts.sends() == [(b"B", SubscribeRequest(5, KEY, 3, 0.3, None, None))]
    parts.searches.on_failure(1.3, b"B", RejectedLoop(5))
    assert parts.calls == [("end", 5)]
    assert parts.searches.routes == {} and parts.searches.by_peer == {}
    assert parts.searches.by_key == {}


def test_a_silent_hop_times_out_only_at_its_deadline() -> None:
    parts = Parts()
    for peer, location in ((b"U", 0.2), (b"A", 0.49), (b"B", 0.4)):
        parts.meet(peer, location)
    parts.searches.start_route(1.0, relayed())
    parts.sends()
    parts.searches.on_accepted(1.1, b"A", 5)  # the long deadline applies
    parts.run(1.0 + parts.config.accept_timeout)
    assert parts.sends() == [] and parts.stats.timeouts == 0
    parts.run(1.1 + parts.config.request_timeout)
    assert parts.sends() == [(b"B", SubscribeRequest(5, KEY, 10, 0.3, None, None))]
    assert parts.stats.timeouts == 1


def test_a_failure_naming_another_key_drops_the_peer() -> None:
    parts = Parts()
    for peer, location in ((b"U", 0.2), (b"A", 0.49)):
        parts.meet(peer, location)
    parts.searches.start_route(1.0, relayed())
    parts.out.take()
    parts.searches.on_failure(1.1, b"A", DataNotFound(5, KEY2, 3))
    [drop] = parts.out.take()
    assert drop.peer == b"A" and b"A" in parts.searches.routes[5].tried


def test_our_own_search_waits_for_a_peer_in_a_network_and_goes_on_at_one() -> None:
    parts = Parts(wait_for_peers=True)
    parts.searches.start_route(1.0, own(parts))
    assert parts.searches.parked == {6: None} and parts.calls == []
    parts.meet(b"A", 0.49)
    parts.searches.resume_parked(2.0)
    assert parts.searches.parked == {}
    assert parts.sends() == [(b"A", SubscribeRequest(6, KEY, 10, OWN, None, None))]


def test_alone_from_the_start_our_own_search_ends_at_once() -> None:
    parts = Parts()
    parts.searches.start_route(1.0, own(parts))
    assert parts.calls == [("end", 6)] and parts.searches.parked == {}


def test_a_uid_names_a_search_in_flight_or_one_our_subtree_confirms() -> None:
    parts = Parts()
    parts.meet(b"A", 0.49)
    parts.awaiting[7] = KEY2
    parts.searches.start_route(1.0, own(parts))
    assert parts.searches.uid_names(6) == KEY
    assert parts.searches.uid_names(7) == KEY2
    assert parts.searches.uid_names(8) is None
    assert parts.searches.waiting_on(b"A", KEY) and not parts.searches.waiting_on(b"A", KEY2)
