"""Cooldowns: a peer cut off for a fault is refused for FIRST seconds, doubling per repeat up
to LONGEST, forgiven after QUIET; an address only past its allowance; vouched peers for
less; both tables bounded. Time is an explicit clock."""

from __future__ import annotations

import pytest

from overlay.runtime.cooldown import (
    ADDRESS_ALLOWANCE,
    FIRST,
    LONGEST,
    QUIET,
    TRUSTED_LONGEST,
    Cooldowns,
)

PEER = b"p" * 32
OTHER = b"o" * 32


def clocked() -> tuple[list[float], Cooldowns]:
    now = [1000.0]
    return now, Cooldowns(lambda: now[0])


def test_a_fault_refuses_the_id_for_the_first_cooldown_and_no_longer() -> None:
    now, cooldowns = clocked()
    assert cooldowns.peer_remaining(PEER) == 0.0
    assert cooldowns.cut_off(PEER, None, trusted=False) == FIRST
    now[0] += FIRST - 1
    assert cooldowns.peer_remaining(PEER) == 1.0
    assert cooldowns.peer_remaining(OTHER) == 0.0
    now[0] += 1
    assert cooldowns.peer_remaining(PEER) == 0.0


def test_each_repeat_doubles_the_cooldown_up_to_the_longest() -> None:
    now, cooldowns = clocked()
    seen = []
    for _ in range(12):
        seen.append(cooldowns.cut_off(PEER, None, trusted=False))
        now[0] += seen[-1]  # back as soon as it may, and at fault again
    assert seen[:4] == [FIRST, 2 * FIRST, 4 * FIRST, 8 * FIRST]
    assert max(seen) == LONGEST and seen[-1] == LONGEST


def test_a_quiet_period_after_the_cooldown_forgives() -> None:
    now, cooldowns = clocked()
    cooldowns.cut_off(PEER, None, trusted=False)
    now[0] += FIRST + QUIET - 1
    assert cooldowns.cut_off(PEER, None, trusted=False) == 2 * FIRST  # not quiet long enough
    now[0] += 2 * FIRST + QUIET
    assert cooldowns.cut_off(PEER, None, trusted=False) == FIRST


def test_an_address_is_refused_only_past_its_allowance_of_faults() -> None:
    now, cooldowns = clocked()
    for n in range(ADDRESS_ALLOWANCE - 1):
        cooldowns.cut_off(bytes([n]) * 32, "10.0.0.9", trusted=False)
        assert cooldowns.address_remaining("10.0.0.9") == 0.0  # neighbours behind a NAT
    cooldowns.cut_off(b"z" * 32, "10.0.0.9", trusted=False)
    assert cooldowns.address_remaining("10.0.0.9") == FIRST
    cooldowns.cut_off(b"y" * 32, "10.0.0.9", trusted=False)
    assert cooldowns.address_remaining("10.0.0.9") == 2 * FIRST
    assert cooldowns.address_remaining("10.0.0.8") == 0.0
    now[0] += 2 * FIRST
    assert cooldowns.address_remaining("10.0.0.9") == 0.0


def test_a_vouched_peer_cools_down_for_less_and_spares_its_address() -> None:
    now, cooldowns = clocked()
    first = cooldowns.cut_off(PEER, "10.0.0.9", trusted=True)
    assert 0 < first < FIRST
    longest = 0.0
    for _ in range(20):
        now[0] += longest
        longest = cooldowns.cut_off(PEER, "10.0.0.9", trusted=True)
    assert longest == TRUSTED_LONGEST
    assert cooldowns.address_remaining("10.0.0.9") == 0.0


@pytest.mark.parametrize("capacity", [1, 8, 100])
def test_the_tables_are_bounded_and_forget_the_longest_ago_struck(capacity: int) -> None:
    now, cooldowns = clocked()
    cooldowns = Cooldowns(lambda: now[0], capacity=capacity)
    for n in range(capacity * 10):
        cooldowns.cut_off(n.to_bytes(32, "big"), f"10.0.{n // 256}.{n % 256}", trusted=False)
    assert len(cooldowns.ids) == capacity
    assert len(cooldowns.addresses) == max(1, capacity // 4)
    newest = (capacity * 10 - 1).to_bytes(32, "big")
    assert cooldowns.peer_remaining(newest) == FIRST
    assert cooldowns.peer_remaining((0).to_bytes(32, "big")) == 0.0  # forgotten


def test_a_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Cooldowns(lambda: 0.0, capacity=0)
