"""The state file (``overlay.runtime.state_file``): what a node keeps of each stream's
numbering across restarts; a torn last record is dropped, any other damage refused; the file
is compacted; and ``[node] state`` chooses it."""

from __future__ import annotations

import os
import random
from pathlib import Path

import cbor2
import pytest
import trio

from overlay.core.effects import Remember
from overlay.runtime.config import RuntimeConfig, config_from_dict, load_config
from overlay.runtime.host import NodeHost
from overlay.runtime.state_file import _MIN_COMPACT, StateFile, StateFileError

A, B = b"a" * 32, b"b" * 32


def test_what_is_remembered_is_kept_for_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    assert state.kept == {}
    state.remember(A, 3)
    state.remember(B, 1)
    state.remember(A, 4)
    state.close()
    assert StateFile(path).kept == {A: 4, B: 1}


def test_a_record_torn_by_a_kill_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    state.remember(A, 3)
    state.close()
    whole = cbor2.dumps([A, 4])
    with path.open("ab") as f:
        f.write(whole[:-3])  # the process died inside this write
    assert StateFile(path).kept == {A: 3}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\xff\xff junk", "not a state file (at byte 0"),
        (cbor2.dumps([A, 1]) + cbor2.dumps({"a": 1}), "a record at byte 36 is not [key, packet"),
        (cbor2.dumps([A, -1]), "is not [key, packet number]"),
        (cbor2.dumps(["text", 1]), "is not [key, packet number]"),
        (cbor2.dumps([A, 2**63]), "is not [key, packet number]"),
    ],
)
def test_a_damaged_file_is_refused_naming_it(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "n.state"
    path.write_bytes(content)
    with pytest.raises(StateFileError) as refused:
        StateFile(path)
    assert str(refused.value).startswith(f"{path}: ") and says in str(refused.value)
    assert path.read_bytes() == content  # refused, not overwritten


def test_the_file_is_compacted_to_one_record_per_stream(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    for number in range(3 * _MIN_COMPACT):
        state.remember(A, number)
    state.remember(B, 7)
    state.close()
    one = len(cbor2.dumps([A, 3 * _MIN_COMPACT - 1]))
    assert path.stat().st_size < (_MIN_COMPACT + 2) * one  # never more than one batch
    assert StateFile(path).kept == {A: 3 * _MIN_COMPACT - 1, B: 7}
    assert path.stat().st_size <= 2 * one  # opening compacts it
    assert not (tmp_path / "n.state.new").exists()


def test_the_state_file_goes_beside_the_identity_unless_named(tmp_path: Path) -> None:
    assert RuntimeConfig().state_file is None  # a node built in code keeps nothing
    assert load_config(None).state_file == Path("node.state")
    config = tmp_path / "node.toml"
    config.write_text('[node]\nidentity = "keys/b.key"\n')
    assert load_config(config).state_file == tmp_path / "keys" / "b.state"
    config.write_text('[node]\nstate = "var/numbers"\n')
    assert load_config(config).state_file == tmp_path / "var" / "numbers"
    config.write_text('[node]\nstate = ""\n')
    assert load_config(config).state_file is None
    assert config_from_dict({"node": {"state": "x"}}).state_file == Path("x")


async def test_the_host_keeps_every_remember_and_hands_it_back(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    host = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=state)
    host._apply([Remember(A, 5)])
    state.close()
    again = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=StateFile(path))
    assert again.core.memory.last(A) == 5


async def test_a_failing_disk_is_logged_once_and_the_node_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = StateFile(tmp_path / "n.state")
    host = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=state)
    os.close(state._fd)  # the disk is gone from under it
    host._apply([Remember(A, 5), Remember(A, 6)])
    await trio.lowlevel.checkpoint()
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert "no longer kept on disk" in caplog.records[0].getMessage()
