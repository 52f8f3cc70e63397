"""Ask many nodes for their state at once: the client port's ``describe``, fanned out.

``overlay tree``, ``overlay stats``, ``overlay testnet status`` and the launcher's readiness
check all need every node's ``describe`` answer. A node that cannot be reached (killed,
not started yet, the wrong address) is not an error of the survey: its ``Answer`` carries
the reason instead of a description, and the caller decides what that means (an orphan's
parent that did not answer, a node still starting).

Concurrency is bounded (``DEFAULT_CONCURRENCY`` connections at once) so that surveying a
1,000-node testnet stays far below the process's open-file limit and does not flood the
nodes' accept queues; each answer has its own timeout so one wedged node cannot stall the
rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from overlay.client.aio import open_client
from overlay.client.connection import ClientError

# Connections open at once: a survey of 1,000 nodes takes a fraction of a second at this
# width, and it uses 64 descriptors of the 20,000 a process may have.
DEFAULT_CONCURRENCY = 64

# A node on loopback answers describe in milliseconds; 5 s means it is wedged or gone.
DEFAULT_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Answer:
    """One node's answer: ``description`` (``NodeHost.describe``) or ``error``."""

    address: str
    description: dict[str, Any] | None
    error: str | None = None
    index: int | None = None  # the node's index in a testnet manifest, if known

    @property
    def label(self) -> str:
        return f"node {self.index}" if self.index is not None else self.address


async def describe_one(
    address: str, stream: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """One node's ``describe`` (of ``stream`` only, an address or name, if given);
    ClientError if the node cannot be reached or does not answer within ``timeout``."""
    with trio.move_on_after(timeout) as scope:
        async with open_client(address, timeout=timeout) as client:
            return dict(await client.describe(stream))
    assert scope.cancelled_caught
    raise ClientError(f"the node at {address} did not answer describe within {timeout} s")


async def survey(
    addresses: Sequence[str],
    stream: str | None = None,
    *,
    indices: Sequence[int | None] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[Answer]:
    """Every node's answer, in the order of ``addresses``."""
    labels = list(indices) if indices is not None else [None] * len(addresses)
    answers: list[Answer | None] = [None] * len(addresses)
    limiter = trio.CapacityLimiter(concurrency)

    async def ask(i: int) -> None:
        async with limiter:
            try:
                description = await describe_one(addresses[i], stream, timeout=timeout)
            except (ClientError, OSError) as error:
                answers[i] = Answer(addresses[i], None, str(error), labels[i])
                return
        answers[i] = Answer(addresses[i], description, None, labels[i])

    async with trio.open_nursery() as nursery:
        for i in range(len(addresses)):
            nursery.start_soon(ask, i)
    return [a for a in answers if a is not None]
