"""Must-beat: where a search may end (``overlay.core.must_beat``), so that a restarting
subtree never adopts its own ancestor and two detached subtrees never adopt each other."""

from __future__ import annotations

import pytest

from overlay.core.config import NodeConfig
from overlay.core.must_beat import may_accept, may_become_root, may_hang_below
from overlay.core.routing import Route
from overlay.core.streams import State, Stream, new_stream

KEY = bytes(32)
HERE = 0.1  # our location; the key's is 0.0


def route(i_am_best: bool, must_beat: float | None = None, target: float = 0.5) -> Route:
    return Route(1, KEY, target, None, 5, 0.4, i_am_best, None, must_beat)


def member() -> Stream:
    return new_stream(KEY, State.JOINED, b"P", None, NodeConfig())


# --- may_become_root -------------------------------------------------------------------------


def test_only_the_closest_node_seen_may_become_root() -> None:
    assert may_become_root(route(i_am_best=True), 0.45) is True
    assert may_become_root(route(i_am_best=False), 0.45) is False


def test_resubscribe_root_must_beat_the_must_beat_location() -> None:
    assert may_become_root(route(True, must_beat=0.4), 0.45) is True
    assert may_become_root(route(True, must_beat=0.48), 0.45) is False


def test_resubscribe_root_at_exactly_must_beat_distance_fails() -> None:
    # Strictly closer is required: the restarting node itself (own == must_beat) cannot win.
    assert may_become_root(route(True, must_beat=0.25), 0.25) is False
    # Mirror image, same distance (values exact in binary, so no rounding decides it).
    assert may_become_root(route(True, must_beat=0.75), 0.25) is False


def test_not_best_never_becomes_root_even_if_it_beats_must_beat() -> None:
    assert may_become_root(route(False, must_beat=0.1), 0.45) is False


# --- a resubscribe at a member, a root, a detached subtree ------------------------------


@pytest.mark.parametrize(
    ("state", "origin", "uid", "must_beat", "accepts"),
    [
        (State.JOINED, None, 1, None, True),  # a plain subscribe
        (State.JOINED, None, 1, 0.3, True),  # we are closer than must-beat
        (State.JOINED, None, 1, 0.05, False),  # we are farther
        (State.JOINED, None, 9, 0.3, False),  # our ancestor's restart, relayed here
        (State.ROOT, None, 1, 0.05, True),  # an attached root takes any
        (State.RESTARTING, 0.2, 1, 0.3, True),  # detached: the request's origin is farther
        (State.RESTARTING, 0.2, 1, 0.15, False),  # detached: it is closer (rule 3)
    ],
)
def test_which_resubscribe_may_end_here(
    state: State, origin: float | None, uid: int, must_beat: float | None, accepts: bool
) -> None:
    stream = member()
    stream.state, stream.restart_origin = state, origin
    stream.restarts_seen.append(9)
    assert may_accept(stream, HERE, uid, must_beat) is accepts


def test_only_a_farther_subtree_hangs_below_a_detached_one() -> None:
    stream = member()
    assert may_hang_below(stream, 1, 0.05)  # not detached: any
    stream.restart_origin = 0.2
    assert may_hang_below(stream, 1, 0.3) and not may_hang_below(stream, 1, 0.15)
