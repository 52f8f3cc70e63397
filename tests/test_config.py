"""NodeConfig: the spec's defaults, and every invalid limit refused with a clear message."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from overlay.core.config import NodeConfig
from overlay.messages import MAX_WIRE_HTL


def test_defaults_follow_the_spec() -> None:
    config = NodeConfig()
    assert config.max_htl == 10  # "max HTL should be low, say 10"
    assert config.max_streams == 32  # "If we have less than 32 streams"
    assert config.request_timeout > 0
    assert config.seen_uid_ttl > config.request_timeout
    assert config.seen_uid_capacity >= 1


@pytest.mark.parametrize(
    ("kwargs", "check_htl"),
    [({}, 20), ({"max_htl": 4}, 8), ({"max_htl": 20}, MAX_WIRE_HTL), ({"repair_htl": 12}, 12)],
)
def test_a_roots_checks_get_twice_max_htl_unless_repair_htl_says(
    kwargs: dict[str, int], check_htl: int
) -> None:
    assert NodeConfig(**kwargs).check_htl == check_htl


@pytest.mark.parametrize("max_htl", [1, MAX_WIRE_HTL])
def test_max_htl_bounds_are_valid(max_htl: int) -> None:
    assert NodeConfig(max_htl=max_htl).max_htl == max_htl


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_htl": 0}, "max_htl"),
        ({"max_htl": MAX_WIRE_HTL + 1}, "max_htl"),
        ({"max_htl": -3}, "max_htl"),
        ({"repair_htl": 9}, "repair_htl must be in \\[max_htl, 32\\] \\(max_htl is 10\\)"),
        ({"repair_htl": MAX_WIRE_HTL + 1}, "repair_htl"),
        ({"max_streams": 0}, "max_streams"),
        ({"request_timeout": 0.0}, "request_timeout"),
        ({"request_timeout": -1.0}, "request_timeout"),
        ({"request_timeout": math.nan}, "request_timeout"),
        ({"seen_uid_ttl": 0.0}, "seen_uid_ttl"),
        ({"seen_uid_ttl": math.nan}, "seen_uid_ttl"),
        ({"seen_uid_capacity": 0}, "seen_uid_capacity"),
        ({"announce_delay": -0.5}, "announce_delay"),
        ({"linger": -1.0}, "linger must not be negative"),
        ({"linger": math.nan}, "linger"),
        ({"keep_idle": -1.0}, "keep_idle must not be negative"),
        ({"keep_idle": math.nan}, "keep_idle"),
        ({"confirm_publishes": "yes"}, "confirm_publishes must be true or false, got 'yes'"),
        ({"confirm_publishes": 1}, "confirm_publishes must be true or false, got 1"),
        ({"catch_up_rate": 0.0}, "catch_up_rate must be positive"),
        ({"catch_up_rate": math.nan}, "catch_up_rate"),
        ({"catch_up_rate": math.inf}, "catch_up_rate"),
        ({"publish_queue_delay": -0.1}, "publish_queue_delay must be non-negative"),
        ({"publish_queue_delay": math.nan}, "publish_queue_delay"),
        ({"publish_queue_delay": math.inf}, "publish_queue_delay"),
        ({"catch_up_burst": 0.5}, "catch_up_burst must be at least 1"),
        ({"catch_up_burst": math.nan}, "catch_up_burst"),
    ],
)
def test_invalid_limits_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NodeConfig(**kwargs)


def test_error_names_the_offending_value() -> None:
    with pytest.raises(ValueError, match="got 33"):
        NodeConfig(max_htl=33)


def test_config_is_frozen() -> None:
    config = NodeConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_htl = 3  # type: ignore[misc]
