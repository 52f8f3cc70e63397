"""``testnet.local.LocalNetwork``: real nodes in one process. Here: a state folder, so a node
restarted in a testnet numbers its streams on, as an ``overlay node`` with its state file
does (``overlay.runtime.state_file``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from loopback_nets import FAST, LIMIT, chain, publish_all

from testnet.local import LocalNetwork


@pytest.mark.parametrize("keep", [True, False])
async def test_nodes_restarted_with_a_state_folder_number_their_streams_on(
    tmp_path: Path, keep: bool
) -> None:
    state_dir = tmp_path / "state" if keep else None
    if state_dir is not None:
        state_dir.mkdir()
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST, state_dir=state_dir) as net:
            await net.wait_linked()
            before = await publish_all(net.node(0).host, 5)
            assert sorted(before.acked().values()) == [0, 1, 2, 3, 4]
            # Every node that held the stream goes down and comes back.
            for i in (0, 1):
                await net.stop(i)
            for i in (0, 1):
                await net.restart(i)
            await net.wait_linked()
            after = await publish_all(net.node(0).host, 1, start=5)
            [number] = after.acked().values()
    if keep:
        assert state_dir is not None
        assert sorted(p.name for p in state_dir.iterdir() if p.suffix == ".state") == [
            "node-0.state",
            "node-1.state",
        ]
        assert number == 5
    else:
        assert number == 0  # forgotten: the same number for another packet
