"""One authenticated, encrypted link to a peer, after its handshake: a reader and a writer.

Each frame on the wire is a 4-byte length and an AES-256-GCM-sealed plaintext of one or
more records, each one CBOR message (``overlay.runtime.framing``,
``overlay.runtime.handshake.Session``). The nonces are per-direction counters that never
travel, so a frame replayed, dropped, reordered or altered fails to open, and the link closes.

Writing never blocks the node: ``send_encoded`` appends the message, as a record, to this
link's queue, and ``flush`` (the host calls it once a step's effects are all queued: the
messages of one read, a timer, a client's request) seals everything queued into as few
frames as fit and writes them at once, if the socket takes them all. Only what it does not
take (a full socket buffer: the peer reads slowly) is left to the link's writer task, which
waits until the socket is writable; while that task holds bytes, later frames queue behind
them, so the order on the wire is the sealing order. Writing in the step that queued the
frames, rather than waking the writer for it, saves a task switch per frame and, above all,
a pass of trio's scheduler per hop: on a busy node every pass runs all its ready tasks, so
a message that waits for the next one waits for all of them. Coalescing is what lets trio
move hundreds of thousands of messages a second instead of the ~40,000 one write a frame
allows, and sealing many messages at once costs about a sixth per byte of sealing each. A message
is never held back for company: ``flush`` takes whatever is queued when it is called.

A slow peer: the queue is bounded in bytes (``max_queue_bytes``). A peer that reads slower
than the node must send to it, for longer than the queue absorbs, is disconnected: the link
closes with the reason "send queue full", the core learns it as a lost link (the peer's
subtree restarts and finds another way; a child catches up from its new parent's window).
Dropping the link, not messages, is deliberate: the protocol assumes each link delivers
everything in order (as TCP does), and one silently lost frame would be a silent gap.

Reading: straight from the socket (``overlay.runtime.direct_io``), with a checkpoint
between reads. Frames are opened and decoded one at a time and handed to the host. Anything wrong
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
from overlay.runtime.direct_io import NO_SOCKET, receive, socket_of, write_now
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
        # The socket's descriptor (``direct_io``): written by ``flush`` only while ``reason``
        # is None, read by the reader task; ``run`` closes the stream after both.
        self._fd = socket_of(stream)
        # Sealed bytes ``flush`` could not write: the writer sends them before anything else.
        self._unsent: memoryview | None = None

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
        """Queue ``message`` and write what is queued (``send_encoded``, then ``flush``)."""
        self.send_encoded(encode(message))
        self.flush()

    def send_encoded(self, body: bytes) -> None:
        """Queue a message already encoded (a broadcast encodes once for all its links); it
        goes out at the next ``flush``."""
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

    def flush(self) -> None:
        """Seal what is queued and write it now, as far as the socket takes it without
        waiting; the writer task sends the rest, and anything queued while it does."""
        if self.reason is not None or not self._queue:
            return
        if self._fd == NO_SOCKET or self._writing:
            self._ready.set()  # (the writer is busy: it takes the queue when it is done)
            return
        data = self._seal_queued()
        size, self._queued = self._queued, 0
        try:
            self._unsent = write_now(self._fd, data)
        except OSError as error:
            self._release(size)
            self.close(f"connection lost: {error}")
            return
        if self._unsent is None:
            self._release(size)
            return
        self._writing = size
        self._ready.set()

    def _seal_queued(self) -> bytes:
        """The queued plaintexts, each sealed into its frame, taken off the queue."""
        queue, self._queue, self._room = self._queue, [], 0
        seal = self._session.seal
        data = b"".join([frame(seal(b"".join(parts))) for parts in queue])
        self.bytes_out += len(data)
        return data

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
            # What is still held goes back to the budget: the writer can be cancelled at
            # its wait, before the send that would release a partial flush's rest.
            self._release(self._queued + self._writing)
            self._queue.clear()
            self._queued = self._writing = 0
            self._unsent = None
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
                data = await receive(self._stream, self._fd, READ_SIZE)
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
                if self._unsent is not None:
                    data: bytes | memoryview = self._unsent
                    self._unsent = None  # (``_writing`` already counts its bytes)
                elif self._queue:
                    data = self._seal_queued()
                    self._writing, self._queued = self._queued, 0
                else:
                    continue
                try:
                    await self._stream.send_all(data)
                finally:
                    self._release(self._writing)
                    self._writing = 0
                if self._queue:
                    self._ready.set()  # (queued while this batch was being sent)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
            self.close(f"connection lost: {error}")

    def __repr__(self) -> str:
        return f"Link({self.peer.hex()[:12]})"
