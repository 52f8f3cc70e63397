"""A swapping node's location kept across restarts (``overlay.runtime.location_file``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import trio
from loopback_nets import FAST, LIMIT

from overlay.runtime.config import Address, RuntimeConfig
from overlay.runtime.identity import Identity
from overlay.runtime.location_file import LocationFile, LocationFileError
from testnet.pool import NodePool


def test_a_location_is_read_back_exactly_and_a_missing_file_is_none(tmp_path: Path) -> None:
    kept = LocationFile.beside(tmp_path / "node.state")
    assert kept.path == tmp_path / "node.state.location"
    assert kept.read() is None
    kept.write(0.1 + 0.2)
    assert kept.read() == 0.1 + 0.2
    assert not (tmp_path / "node.state.location.tmp").exists()


@pytest.mark.parametrize("text", ["", "nan", "1.0", "-0.5", "0.5 0.6", "\xff"])
def test_a_file_without_a_location_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "node.state.location"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(LocationFileError, match=str(path)):
        LocationFile(path).read()


async def test_a_node_that_moved_restarts_where_it_moved_to(tmp_path: Path) -> None:
    """A swapping node with a state file moves (as a swap moves it): its location file
    holds the new location, and when it is restarted it starts there, not at the location
    it was configured with, where its partner would now stand."""
    identity = Identity.generate()
    config = RuntimeConfig(
        network="testnet",
        identity_work=0,
        location=0.5,
        trusted=frozenset({identity.public}),
        trust_listed=True,
        listen=Address("127.0.0.1", 0),
        client=Address("127.0.0.1", 0),
        keep_state=True,
        state=tmp_path / "node.state",
        core=dataclasses.replace(FAST, swap_interval=60.0),
    )
    with trio.fail_after(LIMIT):
        async with NodePool() as pool:
            host = (await pool.start(0, identity, config)).host
            assert host.core.location == 0.5
            host.core.relocate(trio.current_time(), 0.125)
            host._apply([])  # (what the host does after every core call)
            assert LocationFile.beside(tmp_path / "node.state").read() == 0.125
            restarted = await pool.restart(0)
            assert restarted.host.core.location == 0.125
            # Without swapping, a kept location is no reason to stand elsewhere.
            pool.reconfigure(0, core=FAST)
            assert (await pool.restart(0)).host.core.location == 0.5
