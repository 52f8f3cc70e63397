"""A local client's publish, from its start until its answer (``local_publishing``), and
the answer a batch numbered in one pass waits with (``batches``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from overlay.core.effects import ClientId
from overlay.messages import PublishData


@dataclass(slots=True, eq=False)
class LocalPublish:
    """A local client's publish awaiting its answer; resent on timeout with the same uid."""

    client: ClientId
    message: PublishData
    attempt: int = 1
    # Other clients that published the same uid while it was in flight (a Spark task and
    # its speculative copy): one publish, so they wait for the same answer.
    also: list[ClientId] = field(default_factory=list)

    @property
    def clients(self) -> list[ClientId]:
        return [self.client, *self.also]


@dataclass(slots=True, eq=False)
class BatchAck:
    """The acknowledgements of a batch numbered in one pass, held until its last packet
    (``packet``) is committed (``Commits.ack_local``). ``uid`` is what the held answers
    are keyed by: below 0 (``batch_id``), so that no publish's answer, held under its uid,
    takes the batch's place (a retry of one of its uids before the commit, say).
    ``numbers``: each uid with its packet number, in order; ``also``: other clients that
    published one of its uids while it waited, by uid (they get the same answer); ``sent``:
    when it was numbered (its answers time the stream's ``pace``)."""

    key: bytes
    uid: int
    packet: int
    numbers: list[tuple[int, int]]
    client: ClientId
    sent: float  # when it was numbered (its answers are samples for the pace)
    also: dict[int, list[ClientId]] = field(default_factory=dict)


def batch_id(first: int) -> int:
    """The key a batch whose first packet is ``first`` is held under: never a uid."""
    return -1 - first
