"""What the core asks its driver to do. The core never performs I/O; it returns these.

A driver (the simulator, the trio runtime) carries them out in order:
``Send`` a message to a connected peer, ``Deliver`` an event to a local client,
``SetTimer`` to call ``handle_timer`` at (or after) a time, ``DropPeer`` to close a link,
``Remember`` to keep a stream's newest packet number where the next start finds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from overlay.core.events import ClientEvent
from overlay.messages import Message

PeerId = bytes  # a peer's node id (32 bytes in the runtime; any unique bytes in tests)
ClientId = int  # a local client, numbered by the driver


# The effects made for every packet (a Send per child, a Deliver per local client, a
# Remember of the stream's newest number) are plain slotted records rather than frozen
# ones: a frozen dataclass sets each field through ``object.__setattr__``, which doubles
# the cost of making one. Nothing changes an effect once it is made.


@dataclass(slots=True)
class Send:
    peer: PeerId
    message: Message


@dataclass(slots=True)
class Deliver:
    client: ClientId
    event: ClientEvent


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Call ``handle_timer`` at ``at``. Replaces any earlier SetTimer of the same node."""

    at: float


@dataclass(frozen=True, slots=True)
class DropPeer:
    """Close the link to ``peer``: it broke the protocol (``fault``: the driver warns), or
    it went silent (not ``fault``). ``reason`` is for the log."""

    peer: PeerId
    reason: str
    fault: bool = True


@dataclass(slots=True)
class Remember:
    """Stream ``key`` has reached packet ``number``. A driver that keeps state across
    restarts stores it (a newer one for the same key replaces it) and passes what it kept
    back as ``Node(remembered=...)``; one that keeps nothing ignores it (``memory``)."""

    key: bytes
    number: int


Effect = Send | Deliver | SetTimer | DropPeer | Remember
