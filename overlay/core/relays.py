"""A relay entry: whom the answer to a publish we passed up goes back to (``publishing``),
and what a witness keeps (``witnesses``, ``peer_witnesses``)."""

from __future__ import annotations

from dataclasses import dataclass

from overlay.core.effects import PeerId
from overlay.messages import PublishData


@dataclass(slots=True, eq=False)
class Relay:
    """A child's publish we passed up: the answer from ``upstream`` goes to ``source``.
    ``number``: the number the root confirmed for it through us (a witness claim). Or, with
    ``peer``, a publish peer ``source`` told us it confirmed (``peer_witnesses``)."""

    uid: int
    key: bytes
    source: PeerId
    upstream: PeerId
    expires: float
    message: (
        PublishData | None
    )  # kept for a witness, within ``witness_bytes`` (``Witnesses.retain``)
    number: int | None = None
    peer: bool = False  # a peer witness: ``source`` told us directly (``peer_witnesses``)
