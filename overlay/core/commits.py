"""Commits: a root shows its own clients a packet only once another node holds it.

A root numbers a packet, stores it and sends it to its children. Its local subscribers would
see it at once, and a local publisher would be told it is acknowledged, while the root is
the only node holding it: if the root dies then, before any child has the packet, the next
root knows nothing of that number and gives it to another packet (chaos: a subscriber at the
root had packet 20 with one content, the rest of the tree with another). A remote publisher
is safe already: its acknowledgement goes down the same FIFO links after the packet, so
every node on its path holds the packet first.

So a root with children and local clients asks its children (``HeldQuery``) to say once they
hold the packet, and shows its clients nothing past the newest number one of them has
confirmed (``Held``, cumulative). One question is outstanding at a time; the answer to it
asks about the newest packet again, so under load one round trip covers many packets. A root
without children has no one to wait for. A child that never answers costs at most
``confirm_timeout`` (counted in heartbeat rounds): then the root shows what it has, as it
did before, rather than let a silent or hostile child stall its clients.

These methods are mixed into ``PacketFlow`` (``overlay.core.publishing``).
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from overlay.core.config import NodeConfig
from overlay.core.effects import ClientId, PeerId
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.messages import Held, HeldQuery, Message, PublishSucceeded


class _FlowParts(Protocol):
    config: NodeConfig
    streams: dict[bytes, Stream]
    stats: NodeStats

    def _send(self, peer: PeerId, message: Message) -> None: ...
    def _answer_local(self, client: ClientId, answer: Any) -> None: ...
    def pump(self, stream: Stream) -> None: ...
    def _ask(self, stream: Stream, number: int) -> None: ...
    def _commit(self, stream: Stream) -> None: ...


class Commits:
    """Mixed into ``PacketFlow``; each method's ``self`` is the flow (``_FlowParts``)."""

    def stored_at_root(self: _FlowParts, stream: Stream, number: int) -> None:
        """The root stored packet ``number`` and sent it to its children."""
        if not stream.children or not stream.local:
            self._commit(stream)  # nobody to wait for, or nobody local to shield
            return
        if stream.committed is None:
            stream.committed = number - 1
        if stream.asked is None or stream.asked <= stream.committed:
            self._ask(stream, number)

    def ack_local(self: _FlowParts, stream: Stream, client: ClientId, answer: Any) -> None:
        """Tell a local publisher at the root its publish is acknowledged, once committed."""
        committed = stream.committed
        if (
            isinstance(answer, PublishSucceeded)
            and stream.state is State.ROOT
            and committed is not None
            and answer.packet > committed
        ):
            stream.unacked.append((client, answer))
        else:
            self._answer_local(client, answer)

    def on_held(self: _FlowParts, peer: PeerId, message: Held, stream: Stream) -> None:
        """A child holds everything up to ``message.packet``."""
        if stream.state is not State.ROOT or peer not in stream.children:
            self.stats.ignored += 1
            return
        if stream.next_in is None or stream.committed is None:
            return
        number = min(message.packet, stream.next_in - 1)
        if number <= stream.committed:
            return
        stream.committed = number
        head = stream.next_in - 1
        if head > number and stream.local and stream.children:
            self._ask(stream, head)
        self.pump(stream)

    def children_changed(self: _FlowParts, stream: Stream) -> None:
        """A root lost a child or stopped being root: nobody left to wait for commits all."""
        if stream.committed is not None and (stream.state is not State.ROOT or not stream.children):
            self._commit(stream)

    def overdue(self: _FlowParts) -> None:
        """One heartbeat round passed: a question unanswered for ``confirm_timeout`` is
        given up, and the root shows what it holds."""
        rounds = math.ceil(self.config.confirm_timeout / self.config.heartbeat_interval)
        for stream in self.streams.values():
            asked, committed = stream.asked, stream.committed
            if asked is None or committed is None or asked <= committed:
                continue
            stream.ask_rounds += 1
            if stream.ask_rounds > rounds:
                self.stats.commit_timeouts += 1
                self._commit(stream)

    def _ask(self: _FlowParts, stream: Stream, number: int) -> None:
        stream.asked = number
        stream.ask_rounds = 0
        query = HeldQuery(stream.key, number)
        for child in stream.children:
            self._send(child, query)

    def _commit(self: _FlowParts, stream: Stream) -> None:
        """Everything held may be shown: deliver it and release the held acknowledgements.
        The next packet with someone to wait for asks afresh."""
        if stream.committed is None:
            return  # no bound: everything already is
        stream.committed = None
        stream.asked = None
        self.pump(stream)

    def release(self: _FlowParts, stream: Stream) -> None:
        """Give local publishers the acknowledgements that are committed now."""
        committed = stream.committed if stream.state is State.ROOT else None
        held, stream.unacked = stream.unacked, []
        for client, answer in held:
            if committed is not None and answer.packet > committed:
                stream.unacked.append((client, answer))
            else:
                self._answer_local(client, answer)
