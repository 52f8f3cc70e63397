"""The state file (``overlay.runtime.state_file``): what a node keeps of each stream's
numbering across restarts; a torn tail is dropped, any other damage refused; the file is
locked, compacted and bounded; the host writes it once per core call, or once per read of
a link, and survives a failing disk; and ``[node] state`` / ``--state`` choose it."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

import cbor2
import pytest

from overlay.core.effects import Remember, Send
from overlay.messages import Heartbeat, Hello
from overlay.runtime.config import RuntimeConfig, config_from_dict, load_config
from overlay.runtime.host import NodeHost
from overlay.runtime.state_file import _MIN_COMPACT, StateFile, StateFileError, _record

A, B, C = b"a" * 32, b"b" * 32, b"c" * 32


class FakeLink:
    """The host's view of a link: its peer, how it was closed, and each time what was
    queued on it was written (``flushed``: the messages of that write)."""

    def __init__(self, peer: bytes, log: list[object] | None = None) -> None:
        self.peer = self.initiator = peer
        self.refusal: object = None
        self.address: str | None = None
        self.reason: str | None = None
        self.queued_bytes = 0
        self.log = log if log is not None else []
        self._queued: list[bytes] = []

    def send_encoded(self, body: bytes) -> None:
        self._queued.append(body)

    def flush(self) -> None:
        if self._queued:
            self.log.append(("sent", len(self._queued)))
            self._queued = []

    def close(self, reason: str) -> None:
        self.reason = self.reason or reason


def test_what_is_remembered_is_kept_for_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    assert state.kept == {}
    state.remember({A: 3, B: 1})
    state.remember({A: 4})
    state.close()
    assert StateFile(path).kept == {A: 4, B: 1}


def test_a_lower_number_never_replaces_a_higher_one(tmp_path: Path) -> None:
    # The core forgets a stream it has not seen for long (``remembered_streams``); when it
    # sees it again its first Remember may be lower than what the file holds.
    path = tmp_path / "n.state"
    state = StateFile(path)
    state.remember({A: 50})
    state.remember({A: 3})
    state.close()
    assert StateFile(path).kept == {A: 50}


def test_it_keeps_the_most_recently_raised_streams(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path, capacity=2)
    state.remember({A: 1})
    state.remember({B: 1})
    state.remember({A: 2})  # raised again: now the newest
    state.remember({C: 1})
    state.close()
    assert list(StateFile(path, capacity=2).kept.items()) == [(A, 2), (C, 1)]


@pytest.mark.parametrize("tail", [b"torn", b"zeros"])
def test_a_torn_tail_is_dropped(tmp_path: Path, tail: str) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    state.remember({A: 3})
    state.close()
    with path.open("ab") as f:
        # A kill inside a write, or a power cut that left the file's new end as zeros.
        f.write(cbor2.dumps([A, 4])[:-3] if tail == "torn" else bytes(512))
    assert StateFile(path).kept == {A: 3}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"\xff\xff junk", "not a state file (at byte 0"),
        (cbor2.dumps([A, 1]) + cbor2.dumps({"a": 1}), "a record at byte 36 is not [key, packet"),
        (cbor2.dumps([A, -1]), "is not [key, packet number]"),
        (cbor2.dumps(["text", 1]), "is not [key, packet number]"),
        (cbor2.dumps([A, 2**63]), "is not [key, packet number]"),
        (bytes(4) + cbor2.dumps([A, 1]), "a record at byte 0 is not"),  # zeros, then more
    ],
)
def test_a_damaged_file_is_refused_naming_it(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "n.state"
    path.write_bytes(content)
    with pytest.raises(StateFileError) as refused:
        StateFile(path)
    assert str(refused.value).startswith(f"{path}: ") and says in str(refused.value)
    assert path.read_bytes() == content  # refused, not overwritten
    StateFile(tmp_path / "other.state").close()  # and the lock it took was let go


def test_two_nodes_cannot_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    first = StateFile(path)
    with pytest.raises(StateFileError, match="in use by another running node"):
        StateFile(path)
    first.remember({A: 9})
    first.close()
    assert StateFile(path).kept == {A: 9}  # the refused one changed nothing


def test_the_file_is_compacted_to_one_record_per_stream(tmp_path: Path) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    last = 3 * _MIN_COMPACT - 1
    for number in range(last + 1):
        state.remember({A: number})
    state.remember({B: 7})
    state.close()
    one = len(cbor2.dumps([A, last]))
    assert path.stat().st_size < (_MIN_COMPACT + 2) * one  # never more than one batch
    assert StateFile(path).kept == {A: last, B: 7}
    assert path.stat().st_size <= 2 * one  # opening compacts it
    assert not (tmp_path / "n.state.new").exists()


def test_a_new_file_is_not_rewritten_when_it_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A testnet starts a thousand nodes at once: a rewrite and an fsync each for an empty
    # file would cost seconds for nothing.
    flushed: list[int] = []
    monkeypatch.setattr(os, "fsync", flushed.append)
    path = tmp_path / "n.state"
    state = StateFile(path)
    state.remember({A: 1})
    state.close()
    assert flushed == [] and not (tmp_path / "n.state.new").exists()
    StateFile(path).close()  # one that holds something is rewritten, and flushed
    assert len(flushed) == 1
    assert StateFile(path).kept == {A: 1}


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


async def test_the_host_writes_once_per_call_and_hands_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "n.state"
    state = StateFile(path)
    writes: list[bytes] = []
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    host = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=state)
    host._apply([Remember(A, 5), Remember(B, 1), Remember(A, 6)])
    assert writes == [cbor2.dumps([A, 6]) + cbor2.dumps([B, 1])]
    state.close()
    again = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=StateFile(path))
    assert (again.core.memory.last(A), again.core.memory.last(B)) == (6, 1)


async def test_the_messages_of_one_read_of_a_link_are_written_once_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relay handles every packet of a read in turn (each a core call with its Remember);
    # the frames they queue are sent only once the link's task waits, after ``read_done``.
    state = StateFile(tmp_path / "n.state")
    writes: list[bytes] = []
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        writes.append(bytes(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    host = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=state, vouched={B})
    link = FakeLink(B)
    assert host.link_opened(link)
    host.received(link, Hello(0.25, 1))  # the read's first message
    host._apply([Remember(A, 5)])  # the core's effects of its next ones
    host._apply([Remember(A, 6), Remember(C, 2)])
    assert writes == []
    host.read_done()
    assert writes == [cbor2.dumps([A, 6]) + cbor2.dumps([C, 2])]
    host._apply([Remember(A, 7)])  # outside a read (a client's publish, a timer): at once
    assert writes[1:] == [cbor2.dumps([A, 7])]


async def test_a_number_is_on_disk_before_the_frames_of_its_step_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A root numbers a packet and sends it down in one step. Were the frame out first, a
    # root that crashed between the two would restart without the number and give it to
    # another packet, while a child holds this one under it. So in a step the state file
    # is written first, then the links: at the end of a call, or of a link's read.
    state = StateFile(tmp_path / "n.state")
    log: list[object] = []
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        log.append("state file")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    host = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=state, vouched={B})
    link = FakeLink(B, log)
    assert host.link_opened(link)  # (its Hello goes out)
    log.clear()
    host._apply([Send(B, Heartbeat(1)), Remember(A, 5), Send(B, Heartbeat(2))])
    assert log == ["state file", ("sent", 2)]
    log.clear()
    host.received(link, Hello(0.25, 1))  # a read's first message; its answers wait
    host._apply([Send(B, Heartbeat(3)), Remember(A, 6)])
    assert log == []
    host.read_done()
    assert log == ["state file", ("sent", 1)]


@pytest.mark.parametrize("fails", ["write", "replace"])
async def test_a_failing_disk_is_logged_once_and_the_node_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fails: str
) -> None:
    state = StateFile(tmp_path / "n.state")
    host = NodeHost(bytes(32), 0.5, rng=random.Random(1), state=state)

    def full(*args: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fails, full)
    if fails == "replace":
        state._records = 10**9  # the next write compacts
    with caplog.at_level(logging.ERROR, logger="overlay.node"):
        host._apply([Remember(A, 5)])
        host._apply([Remember(A, 6)])  # nothing more is tried, or said
    (said,) = [r.getMessage() for r in caplog.records]
    assert said.startswith(f"state file {tmp_path / 'n.state'}: ")
    assert "No space left on device" in said and "no longer kept on disk" in said
    assert host.core.memory.last(A) is None  # (the core remembers what it saw itself only)
    # The node goes on: the core still answers.
    assert host.core.link_up(0.0, b"p" * 32)


@pytest.mark.parametrize("key_size", [0, 5, 23, 24, 32, 255, 256])
def test_a_record_is_the_cbor_of_key_and_number(key_size: int) -> None:
    # (written by hand: a relay writes one per packet, and cbor2 is slower at this shape)
    key = bytes(range(256))[:key_size]
    for number in (0, 1, 23, 24, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 2):
        assert _record(key, number) == cbor2.dumps([key, number])
