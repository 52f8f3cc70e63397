"""The root's uid table on its own: numbers by uid, content digests, the bound."""

from __future__ import annotations

from overlay.core.uid_table import UidTable, content_digest, data_digests
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


def test_a_batchs_uids_are_remembered_as_one_by_one_the_oldest_forgotten_past_the_bound() -> None:
    one_by_one, batched = UidTable(5), UidTable(5)
    for table in (one_by_one, batched):
        table.remember(100, 0, digest(b"a"))
        table.remember(101, 1, digest(b"b"))
    uids, digests = [7, 3, 9, 4], [digest(b"%d" % uid) for uid in (7, 3, 9, 4)]
    for uid, number, each in zip(uids, range(2, 6), digests, strict=True):
        one_by_one.remember(uid, number, each)
    batched.remember_run(uids, range(2, 6), digests)
    assert batched.numbers() == one_by_one.numbers() == {101: 1, 7: 2, 3: 3, 9: 4, 4: 5}
    assert list(batched.numbers()) == list(one_by_one.numbers())  # (oldest first: evicted first)
    assert not batched.reused(9, digest(b"9")) and batched.reused(9, digest(b"x"))


def test_past_an_eighth_over_the_capacity_the_oldest_go_down_to_the_capacity() -> None:
    table = UidTable(16)
    table.remember_run(list(range(18)), range(18), data_digests(b"%d" % n for n in range(18)))
    assert len(table) == 18  # (two over: within an eighth of 16, none forgotten yet)
    table.remember(18, 18, digest(b"18"))
    assert list(table.numbers()) == list(range(3, 19))  # the three oldest went at once
    table.remember(3, 99, digest(b"again"))  # (a uid remembered again keeps its place)
    assert table.get(3) == 99 and next(iter(table.numbers())) == 3


def test_data_digests_are_each_payloads_content_digest_as_plain_data() -> None:
    payloads = [b"", b"x", bytes(1024)]
    assert data_digests(payloads) == [digest(data) for data in payloads]
