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
