"""The pure rules of one search: how HTL and best_loc advance, and its record."""

from __future__ import annotations

import pytest

from overlay.core.routing import Route, advance
from overlay.messages import ResubscribeRequest, SubscribeRequest

KEY = bytes(32)
MAX_HTL = 10


def route(i_am_best: bool, must_beat: float | None = None, target: float = 0.5) -> Route:
    return Route(1, KEY, target, None, 5, 0.4, i_am_best, None, must_beat)


# --- advance ---------------------------------------------------------------------------------


def test_closer_node_resets_htl_and_becomes_best() -> None:
    assert advance(0.49, 0.5, best_loc=0.4, htl=3, max_htl=MAX_HTL) == (0.49, MAX_HTL, True)


def test_reset_happens_even_from_zero_htl() -> None:
    # Spec: "If we are closer to the key than the last nearest node, we reset this field".
    assert advance(0.49, 0.5, best_loc=0.4, htl=0, max_htl=MAX_HTL) == (0.49, MAX_HTL, True)


def test_farther_node_decrements_htl_and_keeps_best_loc() -> None:
    assert advance(0.3, 0.5, best_loc=0.4, htl=7, max_htl=MAX_HTL) == (0.4, 6, False)


def test_equally_close_node_is_not_closer() -> None:
    # 0.75 and 0.25 are both exactly 0.25 from 0.5: no progress, so HTL goes down.
    assert advance(0.75, 0.5, best_loc=0.25, htl=7, max_htl=MAX_HTL) == (0.25, 6, False)


def test_htl_above_our_maximum_is_clamped_before_the_decrement() -> None:
    assert advance(0.3, 0.5, best_loc=0.4, htl=32, max_htl=MAX_HTL) == (0.4, MAX_HTL - 1, False)


def test_a_wider_cap_clamps_above_it_but_progress_still_resets_to_max_htl() -> None:
    assert advance(0.3, 0.5, best_loc=0.4, htl=20, max_htl=MAX_HTL, cap=20) == (0.4, 19, False)
    assert advance(0.3, 0.5, best_loc=0.4, htl=32, max_htl=MAX_HTL, cap=20) == (0.4, 19, False)
    assert advance(0.49, 0.5, best_loc=0.4, htl=20, max_htl=MAX_HTL, cap=20) == (
        0.49,
        MAX_HTL,
        True,
    )


@pytest.mark.parametrize("htl", [0, 1])
def test_htl_never_goes_below_zero(htl: int) -> None:
    assert advance(0.3, 0.5, best_loc=0.4, htl=htl, max_htl=MAX_HTL) == (0.4, 0, False)


def test_closeness_is_circular() -> None:
    # 0.99 is 0.02 from 0.01, 0.05 is 0.04 from it: 0.99 is closer, across the wrap.
    assert advance(0.99, 0.01, best_loc=0.05, htl=2, max_htl=MAX_HTL) == (0.99, MAX_HTL, True)
    assert advance(0.05, 0.01, best_loc=0.99, htl=2, max_htl=MAX_HTL) == (0.99, 1, False)


# --- Route ------------------------------------------------------------------------------------


def test_route_request_is_a_subscribe_request_without_must_beat() -> None:
    r = Route(9, KEY, 0.5, None, 4, 0.3, True, 17, None)
    assert r.is_resubscribe is False
    assert r.request() == SubscribeRequest(9, KEY, 4, 0.3, 17)


def test_route_request_is_a_resubscribe_request_with_must_beat() -> None:
    r = Route(9, KEY, 0.5, b"up", 4, 0.3, False, None, 0.2)
    assert r.is_resubscribe is True
    assert r.request() == ResubscribeRequest(9, KEY, 4, 0.3, 0.2, None)


def test_route_defaults() -> None:
    r = Route(9, KEY, 0.5, None, 4, 0.3, True, None, None)
    assert (r.tried, r.current, r.attempt) == (set(), None, 0)
