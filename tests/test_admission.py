"""Admission (``overlay.core.admission``) built alone, without a ``Node``: the searches
allowed per key and per peer, and the stream cap, at which a kept stream yields its place;
a search past any of them is answered RejectOverload."""

from __future__ import annotations

from core_parts import KEY, KEY2, KEY3, Parts

from overlay.core.admission import PEER_SHARE
from overlay.core.routing import Route
from overlay.core.streams import State
from overlay.messages import PacketKind, RejectOverload, SubscribeData


def relay_search(parts: Parts, uid: int, upstream: bytes, key: bytes = KEY) -> None:
    route = Route(uid, key, 0.5, upstream, 10, 0.3, False, None, None)
    route.tried.add(upstream)
    parts.searches.start_route(1.0, route)


def linked(**config: object) -> Parts:
    parts = Parts(**config)
    for n, peer in enumerate((b"A", b"B", b"C", b"Z")):
        parts.meet(peer, 0.2 + n / 10)
    parts.meet(b"X", 0.49)  # where every search goes on to
    return parts


def test_one_peer_holds_at_most_its_share_of_a_keys_searches() -> None:
    parts = linked(max_searches_per_key=8)
    share = 8 // PEER_SHARE
    for uid in range(share):
        assert not parts.admission.refuses(b"A", uid, KEY, None)
        relay_search(parts, uid, b"A")
    parts.out.take()
    assert parts.admission.refuses(b"A", 99, KEY, None)
    assert parts.sends() == [(b"A", RejectOverload(99, KEY))] and parts.stats.overloads == 1
    assert not parts.admission.refuses(b"B", 100, KEY, None)  # another peer still has room
    assert not parts.admission.refuses(b"A", 101, KEY2, None)  # and another key


def test_a_key_takes_at_most_its_allowance_of_searches() -> None:
    parts = linked(max_searches_per_key=2)
    relay_search(parts, 1, b"A")
    relay_search(parts, 2, b"B")
    assert parts.admission.too_many_searches(b"C", KEY)
    assert not parts.admission.too_many_searches(b"C", KEY2)


def test_the_stream_cap_counts_streams_carried_and_searched_for() -> None:
    parts = linked(max_streams=2)
    parts.stream(KEY, State.JOINED, parent=b"X")
    relay_search(parts, 1, b"A", KEY2)
    assert not parts.admission.has_room(KEY3)
    assert parts.admission.has_room(KEY) and parts.admission.has_room(KEY2)
    parts.out.take()
    assert parts.admission.refuses(b"B", 7, KEY3, None)
    assert parts.sends() == [(b"B", RejectOverload(7, KEY3))]
    carried = parts.streams[KEY]
    assert not parts.admission.refuses(b"B", 8, KEY, carried)  # one we carry: no cap


def kept_streams(parts: Parts, *keys: bytes) -> None:
    for key in keys:
        stream = parts.stream(key)
        stream.high = 3  # a history: kept when idle
        assert parts.keeping.keep(1.0, stream)


def test_a_kept_stream_yields_its_place_the_oldest_first() -> None:
    parts = linked(max_streams=2, keep_idle=100.0)
    kept_streams(parts, KEY, KEY2)
    assert parts.admission.has_room(KEY3)
    assert list(parts.streams) == [KEY2]  # the one kept longest went
    assert list(parts.keeping.kept.values()) == [KEY2]


def test_a_kept_stream_with_a_member_again_keeps_its_place() -> None:
    parts = linked(max_streams=2, keep_idle=100.0)
    kept_streams(parts, KEY, KEY2)
    for stream in parts.streams.values():
        stream.children[b"A"] = None  # not idle: it stays, though still marked kept
    assert not parts.admission.has_room(KEY3)
    assert list(parts.streams) == [KEY, KEY2]


def test_a_catch_up_past_the_peers_budget_is_refused_before_anything_else() -> None:
    parts = Parts(catch_up_rate=1.0, catch_up_burst=1.0, window_packets=4)
    stream = parts.stream(KEY)
    for number in range(4):
        stream.window.add(SubscribeData(KEY, number, b"p", None, PacketKind.DATA, None))
    stream.next_in = 4
    assert parts.admission.may_catch_up(1.0, stream, b"A", 1, -1)  # 4 packets: the burst
    assert parts.admission.may_catch_up(1.0, stream, b"A", 2, 3)  # nothing to replay
    assert parts.sends() == []
    assert not parts.admission.may_catch_up(1.0, stream, b"A", 3, -1)
    assert parts.sends() == [(b"A", RejectOverload(3, KEY))]
    assert parts.stats.overloads == 1 and parts.stats.catch_ups_refused == 1
    assert parts.admission.may_catch_up(1.0, stream, b"B", 4, -1)  # B's budget is its own
