"""Tests for keyspace.location: circular distance, key locations, tie-breaking, validation."""

from __future__ import annotations

import hashlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from keyspace.location import (
    check_location,
    closeness,
    distance,
    is_closer,
    key_location,
    location_from_id,
)

locations = st.floats(min_value=0.0, max_value=1.0, exclude_max=True, allow_nan=False)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (0.0, 0.0, 0.0),
        (0.1, 0.3, 0.2),
        (0.3, 0.1, 0.2),
        (0.0, 0.5, 0.5),
        (0.99, 0.01, 0.02),
        (0.01, 0.99, 0.02),
        (0.25, 0.75, 0.5),
        (0.1, 0.7, 0.4),
    ],
)
def test_distance_examples(a: float, b: float, expected: float) -> None:
    assert distance(a, b) == pytest.approx(expected)


@given(locations, locations)
def test_distance_is_symmetric_and_bounded(a: float, b: float) -> None:
    d = distance(a, b)
    assert d == distance(b, a)
    assert 0.0 <= d <= 0.5
    assert distance(a, a) == 0.0


@given(locations, locations, locations)
def test_distance_triangle_inequality(a: float, b: float, c: float) -> None:
    assert distance(a, c) <= distance(a, b) + distance(b, c) + 1e-12


def test_key_location_reads_the_first_eight_bytes_big_endian() -> None:
    assert key_location(bytes(32)) == 0.0
    assert key_location(b"\x80" + bytes(31)) == 0.5
    assert key_location(b"\x40" + bytes(7) + b"\xff" * 24) == 0.25
    key = hashlib.sha256(b"hello").digest()
    assert key_location(key) == int.from_bytes(key[:8], "big") / 2**64


def test_key_location_never_reaches_one() -> None:
    # (2**64 - 1) / 2**64 rounds to 1.0 in float arithmetic; the location must stay below 1.
    top = key_location(b"\xff" * 32)
    assert top < 1.0
    assert top == math.nextafter(1.0, 0.0)
    assert check_location(top) == top


@given(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32))
def test_key_location_is_in_range_and_monotone(a: bytes, b: bytes) -> None:
    la, lb = key_location(a), key_location(b)
    assert 0.0 <= la < 1.0
    if a[:8] <= b[:8]:
        assert la <= lb


def test_key_location_rejects_short_keys() -> None:
    with pytest.raises(ValueError, match="at least 8 bytes"):
        key_location(b"\x01" * 7)


@given(st.binary(min_size=8, max_size=64))
def test_location_from_id_matches_key_location(node_id: bytes) -> None:
    assert location_from_id(node_id) == key_location(node_id)


def test_closeness_orders_by_distance_then_node_id() -> None:
    target = 0.5
    candidates = [
        (0.6, b"\x03"),  # distance 0.1
        (0.4, b"\x02"),  # distance 0.1, lower id: wins the tie
        (0.45, b"\x09"),  # distance 0.05: closest
        (0.0, b"\x00"),  # distance 0.5: farthest despite the lowest id
    ]
    ranked = sorted(candidates, key=lambda c: closeness(target, c[0], c[1]))
    assert [node_id for _, node_id in ranked] == [b"\x09", b"\x02", b"\x03", b"\x00"]


def test_closeness_wraps_around_zero() -> None:
    near = closeness(0.01, 0.99, b"\x01")
    far = closeness(0.01, 0.05, b"\x00")
    assert near < far


def test_is_closer_is_strict() -> None:
    assert is_closer(0.5, 0.45, 0.6)
    assert not is_closer(0.5, 0.6, 0.45)
    # Equal distances on either side of the target: neither is strictly closer.
    assert not is_closer(0.5, 0.4, 0.6)
    assert not is_closer(0.5, 0.6, 0.4)
    assert is_closer(0.0, 0.98, 0.03)


@given(locations)
def test_check_location_accepts_every_valid_location(value: float) -> None:
    assert check_location(value) == value


@pytest.mark.parametrize(
    "value",
    [1.0, -0.1, -1e-300, 1.5, math.nan, math.inf, -math.inf, 0, 1, True, False, "0.5", None],
)
def test_check_location_rejects_invalid_values(value: object) -> None:
    with pytest.raises(ValueError, match="location") as info:
        check_location(value)
    assert repr(value) in str(info.value)
