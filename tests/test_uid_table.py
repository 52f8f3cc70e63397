"""The root's uid table on its own: numbers by uid, content digests, the bound."""

from __future__ import annotations

from overlay.core.uid_table import UidTable, content_digest
from overlay.messages import PacketKind


def digest(data: bytes, epoch: int | None = None) -> int:
    return content_digest(data, epoch, PacketKind.DATA)


def test_a_uid_is_reused_only_for_other_content() -> None:
    table = UidTable(4)
    table.remember(7, 0, digest(b"x"))
    assert table.get(7) == 0 and 7 in table and table[7] == 0
    assert not table.reused(7, digest(b"x"))
    assert table.reused(7, digest(b"y"))
    assert table.reused(7, digest(b"x", epoch=1))  # the epoch is content too
    assert table.reused(7, content_digest(b"x", None, PacketKind.EPOCH_CLOSED))
    assert not table.reused(8, digest(b"y"))  # unknown: nothing to compare with


def test_the_oldest_uid_is_forgotten_past_the_capacity() -> None:
    table = UidTable(2)
    for uid in range(3):
        table.remember(uid, uid, digest(b"%d" % uid))
    assert table.numbers() == {1: 1, 2: 2} and table.get(0) is None and len(table) == 2
    table.forget(1)
    table.forget(5)  # not there: no error
    assert table.numbers() == {2: 2}
