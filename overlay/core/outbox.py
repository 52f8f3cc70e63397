"""The effects one call into the core produces, in order, for its driver to carry out.

Every component that speaks to peers, clients or the driver writes here; the node hands the
whole list back at the end of the call (``take``). One outbox per node: effects keep the
order in which the protocol produced them, whichever component produced them.
"""

from __future__ import annotations

from itertools import repeat

from overlay.compiled_checks import compile_builder
from overlay.core.effects import ClientId, Deliver, DropPeer, Effect, PeerId, Send
from overlay.core.events import ClientEvent
from overlay.core.stats import NodeStats
from overlay.messages import Message

# ``Deliver`` effects built by their slots (``compile_builder``): a run of packets delivered
# to a client costs a few calls, not one constructor call per packet.
_deliveries = compile_builder(Deliver)


class Outbox:
    __slots__ = ("_dropped", "_effects", "_stats")

    def __init__(self, stats: NodeStats) -> None:
        self._effects: list[Effect] = []
        self._stats = stats
        # The peers ``drop`` named since ``take``: None while there are none (most calls;
        # a simulator holds a million outboxes).
        self._dropped: set[PeerId] | None = None

    def send(self, peer: PeerId, message: Message) -> None:
        self._stats.sent += 1
        self._effects.append(Send(peer, message))

    def deliver(self, client: ClientId, event: ClientEvent) -> None:
        self._effects.append(Deliver(client, event))

    def deliver_all(self, client: ClientId, events: list[ClientEvent]) -> None:
        """``deliver`` each of ``events`` to ``client``, in order."""
        self._effects += _deliveries(zip(repeat(client), events))

    def drop(self, peer: PeerId, reason: str, fault: bool = True) -> None:
        """Close the link to ``peer``: it broke the protocol (``fault``), or went silent."""
        self._effects.append(DropPeer(peer, reason, fault))
        if self._dropped is None:
            self._dropped = set()
        self._dropped.add(peer)

    def dropping(self, peer: PeerId) -> bool:
        """Whether this call has cut ``peer`` off: what else it sent is not for handling."""
        dropped = self._dropped
        return dropped is not None and peer in dropped

    def append(self, effect: Effect) -> None:
        self._effects.append(effect)

    def take(self) -> list[Effect]:
        """Everything produced since the last call, in order; the outbox starts empty."""
        effects, self._effects = self._effects, []
        self._dropped = None
        return effects
