"""The node-wide queue budget: past its limit, the member holding the most is cut off."""

from __future__ import annotations

import pytest

from overlay.runtime.budget import QueueBudget


class _Queue:
    def __init__(self, budget: QueueBudget) -> None:
        self.budget = budget
        self.held_bytes = 0
        self.reason: str | None = None
        budget.join(self)

    def put(self, size: int) -> None:
        self.held_bytes += size
        self.budget.grow(size)

    def cut(self, reason: str) -> None:
        self.reason = reason
        self.budget.shrink(self.held_bytes)
        self.held_bytes = 0


def test_the_fullest_member_is_cut_and_the_total_stays_within_the_limit() -> None:
    budget = QueueBudget(1000)
    fast, slow, other = _Queue(budget), _Queue(budget), _Queue(budget)
    fast.put(100)
    slow.put(600)
    other.put(200)
    assert budget.cuts == 0
    fast.put(150)  # 1050: the slow reader holds the most
    assert slow.reason is not None and "max_queued_bytes (1000)" in slow.reason
    assert (fast.reason, other.reason) == (None, None)
    assert budget.total == 450 and budget.cuts == 1


def test_bytes_no_member_can_let_go_of_end_the_cutting() -> None:
    budget = QueueBudget(10)
    budget.grow(50)  # a write under way of a member that left already
    assert budget.total == 50 and budget.cuts == 0


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError):
        QueueBudget(0)
