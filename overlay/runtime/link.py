"""One authenticated, encrypted link to a peer, after its handshake: a reader and a writer.

Each frame on the wire is a 4-byte length and a ChaCha20Poly1305-sealed plaintext of one or
more records, each one CBOR message (``overlay.runtime.framing``,
``overlay.runtime.handshake.Session``). The nonces are per-direction counters that never
travel, so a frame replayed, dropped, reordered or altered fails to open, and the link closes.

Writing never blocks the node: ``send`` appends the message, as a record, to this link's
queue, and one writer task seals everything queued into as few frames as fit and sends them
in a single ``send_all``. That keeps the core's calls synchronous; coalescing is what lets
trio move hundreds of thousands of messages a second instead of the ~40,000 one ``send_all``
a frame allows, and sealing many messages at once costs a fifth per byte of sealing each.
A message is never held back for company: the writer takes whatever is queued when it runs.

A slow peer: the queue is bounded in bytes (``max_queue_bytes``). A peer that reads slower
than the node must send to it, for longer than the queue absorbs, is disconnected: the link
closes with the reason "send queue full", the core learns it as a lost link (the peer's
subtree restarts and finds another way; a child catches up from its new parent's window).
Dropping the link, not messages, is deliberate: the protocol assumes each link delivers
everything in order (as TCP does), and one silently lost frame would be a silent gap.

Reading: frames are opened and decoded one at a time and handed to the host. Anything wrong
(a frame over the size limit, one that fails authentication, a malformed message) closes this
link with a logged reason; the node and its other links go on (``RemoteProtocolError``).
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from overlay.codec import decode, encode
from overlay.core.effects import PeerId
from overlay.errors import RemoteProtocolError
from overlay.messages import Message
from overlay.runtime.budget import QueueBudget
from overlay.runtime.framing import (
    MAX_PLAINTEXT,
    PREFIX_SIZE,
    FrameReader,
    frame,
    split_records,
)
from overlay.runtime.refusals import Refusal

log = logging.getLogger("overlay.link")

# Bytes asked of the kernel per read: large enough for dozens of 1 KB frames at a time.
READ_SIZE = 256 * 1024
# A link's default send queue bound: about a second of 1 KB packets at full rate, several
# thousand windows of control traffic. Memory per node is at most this per link.
DEFAULT_MAX_QUEUE_BYTES = 16 * 1024 * 1024


class Sealer(Protocol):
    """What a link needs of ``overlay.runtime.handshake.Session``."""

    def seal(self, plaintext: bytes) -> bytes: ...
    def open(self, ciphertext: bytes) -> bytes: ...


class LinkOwner(Protocol):
    """What a link reports to (``overlay.runtime.host.NodeHost``)."""

    def received(self, link: Link, message: Message) -> None: ...
    def read_done(self) -> None: ...
    def link_closed(self, link: Link, reason: str) -> None: ...


class Link:
    """A link to ``peer``; ``initiator`` is the id of the side that dialled. Run ``run`` in a
    task: it returns once the link is closed, after telling its owner."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        session: Sealer,
        reader: FrameReader,
        *,
        peer: PeerId,
        initiator: PeerId,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
        budget: QueueBudget | None = None,
    ) -> None:
        self.peer = peer
        self.initiator = initiator
        self._stream = stream
        self._session = session
        self._reader = reader
        self._max_queue = max_queue_bytes
        # The plaintexts to seal, each a list of parts (length, body, length, body, ...), and
        # the room left in the last one.
        self._queue: list[list[bytes]] = []
        self._room = 0
        self._queued = 0  # plaintext bytes queued
        self._writing = 0  # bytes of the batch the writer is sending
        # The node's bound on all queues together (``overlay.runtime.budget``), if any.
        self._budget = budget
        self._ready = trio.Event()
        self._scope = trio.CancelScope()
        self._done = trio.Event()
        self.reason: str | None = None  # why the link closed, once it has
        # Closed for something the operator should see (a peer breaking the protocol, a
        # slow peer, a bug of ours), not an ordinary disconnect: counted and logged as a
        # warning under this reason (``overlay.runtime.refusals``).
        self.refusal: Refusal | None = None
        # The IP address the peer connected from, if it dialled us (``cooldown``).
        self.address: str | None = None
        self.bytes_out = 0
        self.bytes_in = 0

    @property
    def closed(self) -> bool:
        return self.reason is not None

    @property
    def queued_bytes(self) -> int:
        return self._queued

    @property
    def held_bytes(self) -> int:
        """Bytes queued or being written: what this link holds of the node's budget."""
        return self._queued + self._writing

    def send(self, message: Message) -> None:
        self.send_encoded(encode(message))

    def send_encoded(self, body: bytes) -> None:
        """Send a message already encoded: a broadcast encodes once for all its links."""
        if self.reason is not None:
            return
        size = PREFIX_SIZE + len(body)
        if size > self._room:
            self._queue.append([])
            self._room = MAX_PLAINTEXT
        parts = self._queue[-1]
        parts.append(len(body).to_bytes(PREFIX_SIZE, "big"))
        parts.append(body)
        self._room -= size
        self._queued += size
        if self._budget is not None:
            self._budget.grow(size)  # which may cut this very link
        if self._queued > self._max_queue:
            self.refusal = Refusal.SLOW_PEER
            self.close(f"send queue full ({self._queued} bytes): the peer reads too slowly")
            return
        self._ready.set()

    def cut(self, reason: str) -> None:
        """Close for holding the most of the node's queue budget (``QueueBudget``)."""
        self.refusal = Refusal.QUEUES_FULL
        self.close(reason)

    def close(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self._release(self._queued)
            self._queue.clear()
            self._room = 0
            self._queued = 0
        self._scope.cancel()

    def _release(self, size: int) -> None:
        if self._budget is not None and size:
            self._budget.shrink(size)

    async def run(self, owner: LinkOwner, first: list[bytes] | None = None) -> None:
        """Read and write until the link closes, then report it to ``owner``. ``first``:
        sealed frames that arrived together with the end of the handshake. Every error of
        the peer's or the connection's is caught in the task that meets it and becomes a
        ``close`` with its reason, so nothing of it escapes to the node."""
        if self._budget is not None:
            self._budget.join(self)
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write)
                    await self._read(owner, first or [])
        finally:
            if self.reason is None:
                self.reason = "node shutting down"
            if self._budget is not None:
                self._budget.leave(self)
            owner.link_closed(self, self.reason)
            self._done.set()
            await trio.aclose_forcefully(self._stream)

    async def wait_closed(self) -> None:
        await self._done.wait()

    async def _read(self, owner: LinkOwner, first: list[bytes]) -> None:
        # After the messages of each read, however the read ended, ``read_done``: what the
        # owner does once per read (the state file's write), before this task next waits.
        try:
            try:
                for body in first:
                    self._take(owner, body)
            finally:
                owner.read_done()
            while not self.closed:
                data = await self._stream.receive_some(READ_SIZE)
                if not data:
                    self.close("the peer closed the link")
                    return
                self.bytes_in += len(data)
                try:
                    for body in self._reader.feed(data):
                        self._take(owner, body)
                finally:
                    owner.read_done()
        except RemoteProtocolError as error:
            self.refusal = Refusal.PEER_PROTOCOL
            self.close(f"{type(error).__name__}: {error}")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            self.close(f"connection lost: {error}")

    def _take(self, owner: LinkOwner, body: bytes) -> None:
        if self.reason is not None:
            return  # closed by an earlier frame of the same read: the rest is void
        for record in split_records(self._session.open(body)):
            message = decode(record)
            try:
                owner.received(self, message)
            except Exception as error:
                # A bug of ours, not the peer's fault; still, one link's message must not take
                # the whole node down. Log it loudly and drop only this link.
                log.exception("internal error handling %s from %s", type(message).__name__, self)
                self.close(f"internal error: {error!r}")
            if self.closed:
                return  # closed by this message: the rest of the frame is void

    async def _write(self) -> None:
        try:
            while True:
                await self._ready.wait()
                self._ready = trio.Event()
                if not self._queue:
                    continue
                queue, self._queue, self._room = self._queue, [], 0
                seal = self._session.seal
                data = b"".join([frame(seal(b"".join(parts))) for parts in queue])
                self._writing, self._queued = self._queued, 0
                self.bytes_out += len(data)
                try:
                    await self._stream.send_all(data)
                finally:
                    self._release(self._writing)
                    self._writing = 0
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            self.close(f"connection lost: {error}")

    def __repr__(self) -> str:
        return f"Link({self.peer.hex()[:12]})"
