"""The root's publish uid table: which packet number each recent publish uid was given, and
what that packet held.

A publish's uid is its idempotency id (DESIGN: "an unconfirmed one is resent after a
timeout and its effect is idempotent"): a root that remembers the uid answers a retry with
the packet's original number and stores nothing, so a client reconnect or a Spark task
retry is never ordered twice. That answer is only right if the retry *is* the packet: a
uid that comes back with other content is a publisher reusing an id for different data
(a nondeterministic Spark plan whose retry cut other rows, two jobs given one run id). Such
a retry answered with the old number would be acknowledged and its content dropped, a
silent loss. So each entry keeps a digest of the content it was given for (data, epoch,
kind), and a retry whose content differs is refused (``PublishError.UID_REUSED``), which
the publisher sees and reports.

The digest is Python's ``hash`` of the content: it is compared only with digests this
process made (a root that takes a tree over rebuilds the table from its own window), costs
one pass over the payload at numbering (a bytes object caches it), and its randomization
across processes does not matter.

Bounded: the ``capacity`` most recent uids at least (``NodeConfig.publish_uids``), oldest
forgotten first. The entries are a plain dict, in the order remembered; the oldest go in
one pass (in C) once an eighth of the capacity more is held, not one by one, as a batch
of hundreds of uids would otherwise pay a Python call per uid to evict.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import islice, repeat

from overlay.messages import PacketKind


def content_digest(data: bytes, epoch: int | None, kind: PacketKind) -> int:
    """A digest of what a packet holds, for telling a retry from a reused uid."""
    return hash((data, epoch, kind))


def data_digests(payloads: Iterable[bytes]) -> list[int]:
    """``content_digest`` of each of ``payloads`` as plain data (no epoch), in one C pass."""
    return list(map(hash, zip(payloads, repeat(None), repeat(PacketKind.DATA))))


class UidTable:
    """Publish uid -> (packet number, content digest), the ``capacity`` most recent."""

    __slots__ = ("_entries", "capacity")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: dict[int, tuple[int, int]] = {}

    def get(self, uid: int | None) -> int | None:
        """The number ``uid`` was given, if it is remembered."""
        entry = None if uid is None else self._entries.get(uid)
        return None if entry is None else entry[0]

    def __contains__(self, uid: object) -> bool:
        return uid in self._entries

    def none_of(self, uids: list[int]) -> bool:
        """Whether none of ``uids`` is remembered."""
        return self._entries.keys().isdisjoint(uids)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, uid: int) -> int:
        return self._entries[uid][0]

    def remember(self, uid: int, number: int, digest: int) -> None:
        """``uid`` was given ``number`` for content with ``digest``."""
        self._entries[uid] = (number, digest)
        self._trim()

    def remember_run(self, uids: list[int], numbers: range, digests: list[int]) -> None:
        """``remember`` for each uid in turn, none of them remembered yet (a root's batch)."""
        entries = self._entries
        entries.update(zip(uids, zip(numbers, digests, strict=True), strict=True))
        self._trim()

    def _trim(self) -> None:
        """Down to ``capacity``, the oldest first, once past it by more than an eighth."""
        entries = self._entries
        over = len(entries) - self.capacity
        if over > self.capacity >> 3:
            deque(map(entries.__delitem__, list(islice(entries, over))), maxlen=0)

    def forget(self, uid: int) -> None:
        self._entries.pop(uid, None)

    def reused(self, uid: int, digest: int) -> bool:
        """Whether ``uid`` is remembered for content other than ``digest``'s."""
        entry = self._entries.get(uid)
        return entry is not None and entry[1] != digest

    def numbers(self) -> dict[int, int]:
        """Every remembered uid's number (for tools and tests)."""
        return {uid: number for uid, (number, _) in self._entries.items()}
