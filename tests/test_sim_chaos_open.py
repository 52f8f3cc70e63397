"""Chaos scenarios (``test_sim_chaos``) that still break a guarantee (issue 4 is open),
kept so the next fix can start from them: each is a strict expected failure, so a change
that fixes it turns this test red until it moves to a regression file with its cause."""

from __future__ import annotations

import pytest
from test_sim_chaos import failures, run
from test_sim_chaos_acks import ONE_BRANCH_HELD_IT


@pytest.mark.xfail(strict=True, reason="open (issue 4): shown before the tree had it")
def test_a_subscriber_is_not_shown_a_packet_that_only_one_branch_held() -> None:
    # The scenario of test_sim_chaos_acks.py, whose acknowledgement is fixed. Publisher 7
    # subscribes too, and its node is shown packets as they come down, committed or not:
    # it was shown its own 12 before root 1, relay 0's cut and its own death took 12 with
    # them, and the rest of the tree then gave 12 to another publish. Its client died
    # with it, but what it was shown disagrees with the stream. Closing it needs members
    # to show a packet only once the root says it is committed (a notice down the tree,
    # and a round trip more of delivery latency), or numbers no two roots can both give.
    outcome = run(ONE_BRANCH_HELD_IT)
    assert failures(outcome) == []
