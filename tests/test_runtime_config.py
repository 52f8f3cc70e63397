"""The node's TOML config: ``[limits]`` holds the core's limits and the runtime's bounds."""

from __future__ import annotations

import pytest

from overlay.runtime.config import ConfigError, RuntimeConfig, config_from_dict


def test_limits_hold_the_core_s_and_the_runtime_s_bounds() -> None:
    config = config_from_dict(
        {
            "limits": {
                "max_streams": 8,
                "max_links": 12,
                "max_queued_bytes": 1 << 20,
                "max_cooldowns": 64,
            }
        }
    )
    assert config.core.max_streams == 8
    assert (config.max_links, config.max_queued_bytes, config.max_cooldowns) == (12, 1 << 20, 64)
    assert config.max_clients == RuntimeConfig().max_clients


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "8"])
def test_a_runtime_bound_must_be_a_positive_integer(value: object) -> None:
    with pytest.raises(ConfigError, match=r"\[limits\] max_handshakes must be a positive"):
        config_from_dict({"limits": {"max_handshakes": value}})


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("max_streams", "8", "max_streams must be an integer, got '8'"),
        ("max_streams", 8.0, "max_streams must be an integer, got 8.0"),
        ("heartbeat_interval", "5", "heartbeat_interval must be a number, got '5'"),
        ("confirm_publishes", 1, "confirm_publishes must be true or false, got 1"),
    ],
)
def test_a_core_limit_of_the_wrong_type_is_named(key: str, value: object, says: str) -> None:
    """The core's own range checks compare numbers: a string would fail there with a
    message about ``<`` that names no setting."""
    with pytest.raises(ConfigError, match=rf"\[limits\] {says}"):
        config_from_dict({"limits": {key: value}})


def test_a_core_limit_that_is_a_float_may_be_written_as_an_integer() -> None:
    assert config_from_dict({"limits": {"heartbeat_interval": 5}}).core.heartbeat_interval == 5.0


@pytest.mark.parametrize("value", [1.5, 0, True, "1"])
def test_a_runtime_queue_size_is_a_whole_positive_number_of_bytes(value: object) -> None:
    with pytest.raises(
        ConfigError, match=r"\[runtime\] send_queue_bytes must be a positive integer"
    ):
        config_from_dict({"runtime": {"send_queue_bytes": value}})


def test_swapping_needs_listed_trust() -> None:
    """A node that swaps sends Hellos with locations its id does not give; only peers that
    vouch for it (listed trust) take those, so in open trust its links would all be cut."""
    with pytest.raises(ConfigError, match=r'swap_interval = 30.0 needs \[peers\] trust = "listed"'):
        config_from_dict({"limits": {"swap_interval": 30}})
    listed = config_from_dict(
        {"limits": {"swap_interval": 30}, "peers": {"trust": "listed", "trusted": []}}
    )
    assert listed.core.swap_interval == 30.0
