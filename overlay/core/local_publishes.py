"""A local client's publish, from its start until its answer (``local_publishing``)."""

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
