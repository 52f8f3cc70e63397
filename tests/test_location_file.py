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
    config = _swapping(identity, tmp_path)
    with trio.fail_after(LIMIT):
        async with NodePool() as pool:
            host = (await pool.start(0, identity, config)).host
            assert host.core.location == 0.5
            host.core.relocate(trio.current_time(), 0.125)
            host._apply([])  # (what the host does after every core call)
            assert LocationFile.beside(tmp_path / "node.state").read() == 0.125
            restarted = await pool.restart(0)
            assert restarted.host.core.location == 0.125
            # With swapping turned off it stays there (its old place may be another's now),
            # and moves no more; outside listed trust, a kept location is not taken.
            pool.reconfigure(0, core=FAST)
            assert (await pool.restart(0)).host.core.location == 0.125
            pool.reconfigure(0, trust_listed=False)
            assert (await pool.restart(0)).host.core.location == 0.5


async def test_a_location_that_cannot_be_written_is_said_once_and_not_kept_old(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fails under a node that moves: the error is one line, the node goes on,
    and the older location on disk is removed, so that a restart starts at the configured
    location rather than at a place the node left two swaps ago."""
    identity = Identity.generate()
    config = _swapping(identity, tmp_path)
    kept = LocationFile.beside(tmp_path / "node.state")
    with trio.fail_after(LIMIT):
        async with NodePool() as pool:
            host = (await pool.start(0, identity, config)).host
            host.core.relocate(trio.current_time(), 0.125)
            host._apply([])
            assert kept.read() == 0.125
            (tmp_path / "node.state.location.tmp").mkdir()  # (every write now fails)
            for location in (0.75, 0.3):
                host.core.relocate(trio.current_time(), location)
                host._apply([])
            said = [r for r in caplog.records if "location file" in r.getMessage()]
            assert len(said) == 1 and said[0].levelname == "ERROR"
            assert not kept.path.exists() and pool.alive(0)
            assert (await pool.restart(0)).host.core.location == 0.5


def _swapping(identity: Identity, folder: Path) -> RuntimeConfig:
    """A node configured at 0.5, in listed trust, that swaps and keeps a state file."""
    return RuntimeConfig(
        network="testnet",
        identity_work=0,
        location=0.5,
        trusted=frozenset({identity.public}),
        trust_listed=True,
        listen=Address("127.0.0.1", 0),
        client=Address("127.0.0.1", 0),
        keep_state=True,
        state=folder / "node.state",
        core=dataclasses.replace(FAST, swap_interval=60.0),
    )
