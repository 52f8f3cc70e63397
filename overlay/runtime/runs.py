"""Runs and bundles: what one step sends a peer, gathered into fewer frames.

The core says "send this packet to that child" once per packet and child. What one step of
the node produces for a child (a burst a root numbered, a run a relay took in, a catch-up)
goes out as one ``SubscribeRun`` of consecutive packets instead: one frame to decode and
one event at the child, not one per packet. Nothing waits for a run to grow: a run is what
is already queued when the step ends (``Host._flush_outputs``), so a lone packet on a quiet
stream goes as its own ``SubscribeData``, as early as before.

Rules that keep a run's meaning that of its packets sent one by one:

* a run holds consecutive numbers of one stream, to one link, in the order the core sent
  them; a packet that does not continue it (another stream, a gap, a refill below) starts a
  new one;
* any other message to the peer sends the peer's pending run first (``send``), so what the
  child reads is in the order the core sent it;
* a run stays within the frame bound (``MAX_FRAME``) and ``MAX_RUN`` packets (``run_fits``).

The same packets sent to several children make one run object (``_made``), so the driver
encodes it once for all of them, as it does a single packet.

The publish path is gathered the same way: publishes going up, their numbers,
confirmations and acknowledgements, and witnesses (``messages.BUNDLED``), one type and one
stream in a row to a peer, go as one ``Bundle``, which the peer handles as those very
messages in that order. A step that relays a burst of publishes sends each hop one frame,
not one per publish. The same rules hold: nothing waits, a lone message goes as itself,
any other message to the peer sends the pending bundle first, and a bundle stays within a
frame and ``MAX_BUNDLE`` messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from overlay.core.effects import PeerId
from overlay.messages import BUNDLED, MAX_BUNDLE, MAX_FRAME, Bundle, Message, SubscribeData
from overlay.run_packing import held_run_of, run_fits

Link = TypeVar("Link")
_BUNDLED = frozenset(BUNDLED)


class _Pending(Generic[Link]):
    __slots__ = ("data", "link", "packets")

    def __init__(self, link: Link, packet: SubscribeData) -> None:
        self.link = link
        self.packets = [packet]
        self.data = len(packet.data)

    def take(self, packet: SubscribeData) -> bool:
        """Add ``packet`` if it continues the run and fits; False: it starts another."""
        last = self.packets[-1]
        data = self.data + len(packet.data)
        if (
            packet.packet != last.packet + 1
            or packet.key != last.key
            or not run_fits(len(self.packets) + 1, data)
        ):
            return False
        self.packets.append(packet)
        self.data = data
        return True


# What a message adds to a bundle's frame besides its data, at most (a signature, a
# location, integers of up to nine bytes, headers), and what a bundle adds besides its
# messages (headers, the type code, the key). Counted high, so a bundle within the budget
# fits a frame.
BUNDLED_OVERHEAD = 128
BUNDLE_OVERHEAD = 64


def _bundled_size(message: Message) -> int:
    data = getattr(message, "data", None)
    return BUNDLED_OVERHEAD + (len(data) if type(data) is bytes else 0)


class _Bundling(Generic[Link]):
    __slots__ = ("link", "messages", "size")

    def __init__(self, link: Link, message: Message) -> None:
        self.link = link
        self.messages = [message]
        self.size = BUNDLE_OVERHEAD + _bundled_size(message)

    def take(self, message: Message) -> bool:
        """Add ``message`` if it is of the bundle's type and stream and fits; False: it
        starts another."""
        first = self.messages[0]
        size = self.size + _bundled_size(message)
        if (
            type(message) is not type(first)
            or message.key != first.key  # type: ignore[attr-defined]
            or len(self.messages) >= MAX_BUNDLE
            or size > MAX_FRAME
        ):
            return False
        self.messages.append(message)
        self.size = size
        return True

    def message(self) -> Message:
        messages = self.messages
        return messages[0] if len(messages) == 1 else Bundle(tuple(messages))


class Runs(Generic[Link]):
    """Each peer's pending run or bundle this step. ``send(link, peer, message)`` writes a
    message (the driver's encode-and-queue); ``Link`` is whatever the driver keeps per
    peer."""

    __slots__ = ("_made", "_pending", "_send")

    def __init__(self, send: Callable[[Link, PeerId, Message], None]) -> None:
        self._send = send
        self._pending: dict[PeerId, _Pending[Link] | _Bundling[Link]] = {}
        self._made: tuple[list[SubscribeData], Message] | None = None

    def __bool__(self) -> bool:
        return bool(self._pending)

    def offer(self, link: Link, peer: PeerId, message: Message) -> bool:
        """The driver is to send ``message`` to ``peer`` over ``link``: True if it is
        gathered here (a packet into a run, a ``BUNDLED`` message into a bundle), to go at
        ``send_all``; False if the driver sends it now, after ``peer``'s pending run or
        bundle, which this sends first."""
        kind = type(message)
        if kind is SubscribeData:
            self._gather(_Pending, link, peer, message)
            return True
        if kind in _BUNDLED:
            self._gather(_Bundling, link, peer, message)
            return True
        if self._pending:
            self.send(peer)
        return False

    def _gather(
        self,
        kind: type[_Pending[Link]] | type[_Bundling[Link]],
        link: Link,
        peer: PeerId,
        message: Any,
    ) -> None:
        pending = self._pending.get(peer)
        if pending is not None:
            if type(pending) is kind and pending.link is link and pending.take(message):
                return
            self.send(peer)
        self._pending[peer] = kind(link, message)

    def send(self, peer: PeerId) -> None:
        """Send ``peer``'s pending run or bundle now, if it has one (another message
        follows it)."""
        pending = self._pending.pop(peer, None)
        if pending is not None:
            self._send(pending.link, peer, self._message(pending))

    def send_all(self) -> None:
        """The step is done: every pending run and bundle goes."""
        pending, self._pending = self._pending, {}
        for peer, run in pending.items():
            self._send(run.link, peer, self._message(run))
        self._made = None

    def _message(self, pending: _Pending[Link] | _Bundling[Link]) -> Message:
        if type(pending) is _Bundling:
            return pending.message()
        packets = pending.packets  # type: ignore[union-attr]
        if len(packets) == 1:
            return packets[0]
        made = self._made
        if (
            made is not None
            and len(made[0]) == len(packets)
            and all(a is b for a, b in zip(made[0], packets, strict=True))
        ):
            return made[1]
        run = held_run_of(packets)  # (the core's packets: each held, and checked as it came)
        self._made = (packets, run)
        return run
