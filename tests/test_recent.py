"""RecentIds: remembered for ttl seconds of core time, never more than capacity ids."""

from __future__ import annotations

from overlay.core.recent import RecentIds


def test_remembers_until_ttl() -> None:
    recent = RecentIds(ttl=10.0, capacity=100)
    recent.add(1, 100.0)
    assert recent.contains(1, 100.0)
    assert recent.contains(1, 109.999)
    assert not recent.contains(1, 110.0)
    assert len(recent) == 0


def test_unknown_id_is_not_contained() -> None:
    recent = RecentIds(ttl=10.0, capacity=100)
    recent.add(1, 0.0)
    assert not recent.contains(2, 0.0)


def test_expiry_forgets_only_the_old_ones() -> None:
    recent = RecentIds(ttl=10.0, capacity=100)
    recent.add(1, 0.0)
    recent.add(2, 5.0)
    assert not recent.contains(1, 12.0)
    assert recent.contains(2, 12.0)
    assert len(recent) == 1


def test_adding_again_refreshes() -> None:
    recent = RecentIds(ttl=10.0, capacity=100)
    recent.add(1, 0.0)
    recent.add(1, 8.0)
    assert recent.contains(1, 17.0)
    assert len(recent) == 1


def test_capacity_bounds_memory_forgetting_the_oldest() -> None:
    recent = RecentIds(ttl=1000.0, capacity=3)
    for uid in range(10):
        recent.add(uid, float(uid))
        assert len(recent) <= 3
    assert [recent.contains(uid, 10.0) for uid in range(10)] == [False] * 7 + [True] * 3


def test_refresh_protects_from_capacity_eviction() -> None:
    recent = RecentIds(ttl=1000.0, capacity=2)
    recent.add(1, 0.0)
    recent.add(2, 1.0)
    recent.add(1, 2.0)  # 1 is now the newest
    recent.add(3, 3.0)  # evicts 2, the oldest
    assert recent.contains(1, 3.0)
    assert not recent.contains(2, 3.0)
    assert recent.contains(3, 3.0)
