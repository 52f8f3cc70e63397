"""The client port: the node side of the protocol local scripts speak (``overlay.client``).

Theory of operation. ``serve_client_port`` accepts TCP connections and runs one
``ClientSession`` per connection, in the listener's nursery. A session is two tasks:

* the *reader* reads frames (``overlay.runtime.framing``), decodes each request
  (``overlay.client.protocol.decode_request``) and makes the matching ``NodeHost`` call; the
  core's answers come back through ``deliver``. Consecutive plain publishes of one stream
  in a read (no number, epoch, signature or descriptor: a Spark partition, ``overlay
  publish`` reading a file) go to the host as one batch (``NodeHost.publish_batch``), which
  a stream's root numbers in one pass; a batch means what its publishes would, one by one;
* the *writer* sends what the socket did not take at once. ``deliver`` runs inside the
  host's effect loop, so it never blocks: it encodes the event at once (so the queue's size
  in bytes is exact) and appends the frame. Once a step's events are all delivered (the
  host calls ``flush``; the reader does after a read's requests) the whole queue goes out
  in one write, if the socket takes it (``overlay.runtime.direct_io``), so an answer or a
  packet leaves in the step that made it; only the rest waits for the writer, which sends
  it before anything queued later. One write per frame caps trio near 40,000 frames a
  second; joining them reaches several hundred thousand.

Slow clients (the policy). A client's outbound queue is bounded by
``ClientPortConfig.max_queue_events`` frames and ``max_queue_bytes`` bytes. A client that
reads more slowly than its streams and answers arrive lets the queue fill; the event that
would exceed either bound instead ends the session: the queue is dropped, one
``ProtocolError(TOO_SLOW)`` frame is sent as the last word (given ``close_timeout`` to get
out, and the send in progress the same), the connection is closed, and the client is
removed from the host (``NodeHost.remove_client``), which leaves every stream it subscribed
to and forgets its publishes in flight. The client may reconnect and resubscribe from its
``last_seen``; the stream window replays what it still holds and ``Missed`` names the rest.
Invariant: a session holds at most ``max_queue_bytes`` queued plus one batch being sent
(itself at most ``max_queue_bytes``) plus one event frame, whatever its client does.

Fast publishers (back-pressure). The node sends a stream's local publishes up the tree only
as its credit allows (``overlay.core.credit``) and holds the rest. What it holds only waits,
so the session tells a client (version 2 on) its share of each stream's window as it
publishes (``overlay.runtime.publish_windows``), for a publisher that asks for room. So that what
the node holds for one client stays bounded whatever the client does, the session stops
reading that client's requests while the client has ``max_unanswered_publishes``
publishes, or ``max_unanswered_bytes`` of payload, unanswered, and reads on as answers
come. TCP then pushes back on the client: its writes
block, which the client library's drivers allow for (they keep reading answers meanwhile).
A fast client is slowed, never refused. The reader waits on answers produced by the node,
not on the client reading them, so a client blocked in a write cannot stall it.

Bounds per node. At most ``max_clients`` sessions at once: one more is answered
``ProtocolError(BUSY)`` and closed. Every session's queue (and the batch it is writing)
counts towards the node's ``QueueBudget`` (``overlay.runtime.budget``), shared with the
links: past it, the reader holding the most is cut off as a slow client is. Every client cut
off or refused is counted and logged as a warning (``overlay.runtime.refusals``).

Malformed input. A frame that does not decode as a request, a frame announced above
``max_request_frame``, a request before ``Hello``: the session answers one ``ProtocolError``
naming the problem and closes that connection only. The node and its other clients go on.
A publish or subscribe that decodes but is refused by the core (a bad signature, a number
out of range) is not a protocol error: the core answers it (``PublishFailed``,
``SubscribeFailed``) and the connection stays.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

import trio

from overlay.client.protocol import (
    MAX_EVENT_FRAME,
    MAX_REQUEST_FRAME,
    NO_PEERS,
    OLDEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    ClientProtocolError,
    Describe,
    Description,
    ErrorCode,
    Event,
    FrameTooLargeError,
    Hello,
    ProtocolError,
    Publish,
    Request,
    Subscribe,
    Unsubscribe,
    Unsubscribed,
    Welcome,
    decode_request,
    encode_event,
)
from overlay.core.effects import ClientId
from overlay.core.events import (
    BatchAcked,
    ClientEvent,
    Epoch,
    EpochSkipped,
    PublishAcked,
    PublishCollided,
    PublishFailed,
)
from overlay.messages import PacketKind, PublishError
from overlay.runtime.direct_io import NO_SOCKET, receive, socket_of, write_now
from overlay.runtime.framing import FrameReader, FrameTooLarge
from overlay.runtime.host import NodeHost
from overlay.runtime.publish_windows import Publishers, PublishWindows
from overlay.runtime.refusals import Refusal

log = logging.getLogger("overlay.client_port")

# One read takes at most this much: a few full publishes per wakeup.
_READ_SIZE = 256 * 1024
# What each way of ending a session counts as (``overlay stats``); any other code is the
# client breaking the protocol.
_REFUSALS = {ErrorCode.TOO_SLOW: Refusal.SLOW_CLIENT, ErrorCode.BUSY: Refusal.CLIENTS_FULL}


@dataclass(frozen=True, slots=True)
class ClientPortConfig:
    """Per-connection bounds of the client port."""

    # The outbound queue (see the module notes). 64 MiB holds seconds of a fast stream for a
    # reader that pauses (a GC, a slow batch) and is the runtime config's default too;
    # 100,000 frames bounds the deque's overhead when the frames are small acks.
    max_queue_bytes: int = 64 * 1024 * 1024
    max_queue_events: int = 100_000
    # Requests: a publish with a full payload is the largest there is.
    max_request_frame: int = MAX_REQUEST_FRAME
    # Events: an Epoch larger than this is sent as EpochSkipped (the client's reader refuses
    # frames above MAX_EVENT_FRAME by default).
    max_event_frame: int = MAX_EVENT_FRAME
    # Publishes one client may have unanswered before its session stops reading its
    # requests (the module notes). Far above a stream's credit (``NodeConfig
    # .publish_credit_bytes``, 2 MiB), so a client keeps its node's credit busy; 16 MiB
    # bounds what the node holds for one client however many it sends without waiting.
    max_unanswered_publishes: int = 4096
    max_unanswered_bytes: int = 16 * 1024 * 1024
    # How long the last frame (an error) and a send under way get before a closing session
    # drops the connection anyway: a client that reads nothing must not hold it open.
    close_timeout: float = 5.0
    # Sessions at once (``[limits] max_clients``, whose default this is): each may hold
    # max_queue_bytes, so the count bounds a node's clients however many connect.
    max_clients: int = 256


class ClientSession:
    """One client connection: the host's ``ClientSink`` for it, and its two tasks."""

    def __init__(
        self,
        host: NodeHost,
        stream: trio.abc.Stream,
        config: ClientPortConfig,
        publishers: Publishers | None = None,
    ) -> None:
        """``publishers``: the port's count of sessions publishing each stream, which
        share its window (``overlay.runtime.publish_windows``)."""
        self.host = host
        self.stream = stream
        self.config = config
        self.client: ClientId | None = None  # set once Hello is accepted
        self._publishers = Publishers() if publishers is None else publishers
        self.windows: PublishWindows | None = None  # (once Hello is accepted)
        self._tells_windows = False  # (version 2 on)
        self.queue: deque[bytes] = deque()
        self.queued_bytes = 0
        self.writing_bytes = 0  # of the batch being sent
        self.peak_queued_bytes = 0
        self.closing: ProtocolError | None = None  # the last word, once the session ends
        self._wakeup = trio.Event()
        self._send_scope: trio.CancelScope | None = None
        # The socket's descriptor (``direct_io``), written by ``flush`` only while the
        # session is open; ``run`` closes the stream after its tasks end.
        self._fd = socket_of(stream)
        self._unsent: memoryview | None = None  # what ``flush`` could not write
        # Publishes read and not yet answered (uid -> payload bytes): back-pressure.
        self.unanswered: dict[int, int] = {}
        self.unanswered_bytes = 0
        self._room = trio.Event()  # set when an answer made room
        # Plain publishes read and not yet handed to the host: one stream's, in order.
        self._batch: list[tuple[int, bytes]] = []
        self._batch_key = b""

    # --- ClientSink -----------------------------------------------------------------------

    def deliver(self, event: ClientEvent) -> None:
        """Queue ``event`` (never blocks); a queue past its bound ends the session."""
        if self.closing is not None:
            return
        if type(event) is BatchAcked:
            # The client protocol answers each publish on its own (``PublishAcked``).
            key = event.key
            for uid, number in event.numbers:
                self.deliver(PublishAcked(key, uid, number))
            return
        if isinstance(event, PublishAcked | PublishCollided | PublishFailed):
            self._answered(event.uid)
            if self.windows is not None:
                self.windows.answered(event.uid)
        if (
            isinstance(event, PublishFailed)
            and event.error is PublishError.TIMEOUT
            and not self.host.links
        ):
            # The root did not answer because nothing links this node to it: say so, or
            # the client blames a root that may be fine.
            event = replace(event, reason=f"{event.reason}: {NO_PEERS}")
        try:
            data = encode_event(event, self.config.max_event_frame)
        except FrameTooLargeError:
            if not isinstance(event, Epoch):
                raise
            reason = f"the epoch is larger than one client frame ({self.config.max_event_frame})"
            data = encode_event(EpochSkipped(event.key, event.epoch, reason))
        self._queue(data)

    def _queue(self, data: bytes) -> None:
        config = self.config
        if self.queue and (
            len(self.queue) >= config.max_queue_events
            or self.queued_bytes + len(data) > config.max_queue_bytes
        ):
            self.fail(
                None,
                ErrorCode.TOO_SLOW,
                f"the client read too slowly: more than {config.max_queue_events} frames or "
                f"{config.max_queue_bytes} bytes were waiting for it; its subscriptions are "
                f"dropped (resubscribe with last_seen)",
            )
            return
        self.queue.append(data)
        self.queued_bytes += len(data)
        self.peak_queued_bytes = max(self.peak_queued_bytes, self.queued_bytes)
        if self._fd == NO_SOCKET:
            self._wakeup.set()  # (a socket's queue goes at the step's end: ``flush``)
        budget = self.host.budget
        if budget is not None:
            budget.grow(len(data))  # which may cut this very session

    def flush(self) -> None:
        """Write what is queued now, as far as the socket takes it; the writer sends the
        rest, and anything queued while it does."""
        windows = self.windows
        if windows is not None and windows.moved:
            if self._tells_windows:
                for told in windows.tell():
                    self._reply(told)
            else:
                windows.moved.clear()
        if self.closing is not None or not self.queue:
            return
        if self._fd == NO_SOCKET or self.writing_bytes:
            self._wakeup.set()
            return
        data = b"".join(self.queue)
        self.queue.clear()
        size, self.queued_bytes = self.queued_bytes, 0
        try:
            self._unsent = write_now(self._fd, data)
        except OSError:
            # (all left to the writer, whose send meets the same error and ends the session)
            self._unsent = memoryview(data)
        if self._unsent is None:
            self._release(size)
            return
        self.writing_bytes = size
        self._wakeup.set()

    @property
    def held_bytes(self) -> int:
        """Bytes queued or being sent: what this session holds of the node's budget."""
        return self.queued_bytes + self.writing_bytes

    def cut(self, reason: str) -> None:
        """End the session for holding the most of the node's queue budget."""
        self.fail(None, ErrorCode.TOO_SLOW, reason, Refusal.QUEUES_FULL)

    def _release(self, size: int) -> None:
        budget = self.host.budget
        if budget is not None and size:
            budget.shrink(size)

    def _answered(self, uid: int) -> None:
        size = self.unanswered.pop(uid, None)
        if size is not None:
            self.unanswered_bytes -= size
            if not self.saturated:
                self._room.set()

    @property
    def saturated(self) -> bool:
        """Whether the client has as many publishes unanswered as it may: its requests
        wait in TCP until an answer comes."""
        config = self.config
        return (
            len(self.unanswered) >= config.max_unanswered_publishes
            or self.unanswered_bytes >= config.max_unanswered_bytes
        )

    def _reply(self, event: Event) -> None:
        if self.closing is None:
            self._queue(encode_event(event, self.config.max_event_frame))

    def fail(
        self, rid: int | None, code: ErrorCode, reason: str, refusal: Refusal | None = None
    ) -> None:
        """End the session with one last ProtocolError frame: the queue is dropped, the send
        under way gets ``close_timeout`` to finish."""
        if self.closing is not None:
            return
        if refusal is None:
            refusal = _REFUSALS.get(code, Refusal.CLIENT_PROTOCOL)
        who = "a new client" if self.client is None else f"client {self.client}"
        self.host.refusals(refusal, who, f"{code.name}: {reason}")
        self.closing = ProtocolError(rid, code, reason)
        self.queue.clear()
        self._release(self.queued_bytes)
        self.queued_bytes = 0
        if self._send_scope is not None:
            self._send_scope.deadline = trio.current_time() + self.config.close_timeout
        self._wakeup.set()
        self._room.set()

    @property
    def ended(self) -> bool:
        """Whether the session is closing (its last frame chosen)."""
        return self.closing is not None

    # --- the tasks ------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve the connection until either side ends it; then the client leaves the
        host. Exceptions of our own code are logged and end this session only."""
        budget = self.host.budget
        if budget is not None:
            budget.join(self)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader, nursery.cancel_scope)
                await self._writer()
                nursery.cancel_scope.cancel()
        except Exception:
            log.exception("client session %s failed (a bug of this node)", self.client)
        finally:
            # What is still queued or begun goes back to the budget: the tasks may have
            # ended (the client's end of the connection, a cancel) holding some.
            self._release(self.queued_bytes + self.writing_bytes)
            self.queue.clear()
            self.queued_bytes = self.writing_bytes = 0
            self._unsent = None
            if budget is not None:
                budget.leave(self)
            if self.windows is not None:
                self.windows.close()
            if self.client is not None:
                self.host.remove_client(self.client)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self.stream)

    async def _reader(self, scope: trio.CancelScope) -> None:
        frames = FrameReader(self.config.max_request_frame)
        try:
            while self.closing is None:
                data = await receive(self.stream, self._fd, _READ_SIZE)
                if not data:
                    break
                frames.push(data)
                while (body := frames.pop()) is not None:
                    self._request(decode_request(body))
                    if self.ended:
                        self._publish_batch()
                        return
                    if self.saturated:
                        self._publish_batch()  # (their answers are what this task waits for)
                        self.flush()  # (the answers so far go before this task waits)
                        if not await self._room_for_more():
                            return
                self._publish_batch()
                self.flush()
        except FrameTooLarge as exc:
            self._publish_batch()  # (the requests before it were good)
            self.fail(None, ErrorCode.FRAME_TOO_LARGE, str(exc))
            return
        except ClientProtocolError as exc:
            self._publish_batch()
            self.fail(None, ErrorCode.MALFORMED, f"malformed request: {exc}")
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        if self.closing is None:
            scope.cancel()  # the client is gone: nothing left to write
        # (else the session is ending: the writer sends the rest begun and the last word,
        # within ``close_timeout``, and then the session ends)

    async def _room_for_more(self) -> bool:
        """Wait while the client has too many publishes unanswered (the rest of this read
        waits in the frame reader, the rest in TCP); False if the session ended meanwhile."""
        while self.saturated and self.closing is None:
            self._room = trio.Event()
            await self._room.wait()
        return self.closing is None

    async def _writer(self) -> None:
        while self.closing is None:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            if self.closing is not None or (self._unsent is None and not self.queue):
                continue
            if self._unsent is not None:
                data: bytes | memoryview = self._unsent
                self._unsent = None  # (``writing_bytes`` already counts it)
            else:
                data = b"".join(self.queue)
                self.queue.clear()
                self.writing_bytes, self.queued_bytes = self.queued_bytes, 0
            try:
                sent = await self._send(data)
            finally:
                self._release(self.writing_bytes)
                self.writing_bytes = 0
            if not sent:
                return
            if self.queue:
                self._wakeup.set()  # (queued while that was being sent)
        closing = encode_event(self.closing)
        begun, self._unsent = self._unsent, None
        self._send_scope = None
        with trio.move_on_after(self.config.close_timeout):
            if begun is not None:
                # The rest of the batch ``flush`` began: the send in progress, which gets
                # the same time as the last word, and which the last word must not cut.
                try:
                    if not await self._send(begun):
                        return
                finally:
                    self._release(self.writing_bytes)
                    self.writing_bytes = 0
            await self._send(closing)

    async def _send(self, data: bytes | memoryview) -> bool:
        """Send ``data``; False if the connection broke or the send ran out of time."""
        with trio.CancelScope() as scope:
            self._send_scope = scope
            if self.closing is not None:
                scope.deadline = trio.current_time() + self.config.close_timeout
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
            finally:
                self._send_scope = None
        return not scope.cancelled_caught

    # --- requests -------------------------------------------------------------------------

    def _request(self, request: Request) -> None:
        host = self.host
        if self.client is None:
            if not isinstance(request, Hello):
                what = type(request).__name__
                self.fail(request.rid, ErrorCode.NOT_HELLO, f"{what} before Hello")
            elif request.version < OLDEST_PROTOCOL_VERSION:
                reason = (
                    f"version {request.version} asked; this node speaks versions "
                    f"{OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}"
                )
                self.fail(request.rid, ErrorCode.BAD_VERSION, reason)
            else:
                # The newest version both speak: a newer client hears this node's.
                version = min(request.version, PROTOCOL_VERSION)
                self.client = host.add_client(self, self.flush)
                # (a version 1 client is told no window, but counts among the publishers)
                self.windows = PublishWindows(host, self._publishers)
                self._tells_windows = version >= 2
                max_request = self.config.max_request_frame
                self._reply(Welcome(request.rid, version, host.node_id, max_request))
            return
        client = self.client
        plain = isinstance(request, Publish) and _plain(request)
        if self._batch and not (
            isinstance(request, Publish) and plain and request.key == self._batch_key
        ):
            self._publish_batch()  # (what came before goes first)
        match request:
            case Publish(rid, key, uid, data, packet, epoch, kind, sig, descriptor):
                if self.windows is not None:
                    self.windows.published(uid, key)
                if uid not in self.unanswered:
                    self.unanswered[uid] = len(data)
                    self.unanswered_bytes += len(data)
                if plain:
                    self._batch.append((uid, data))
                    self._batch_key = key
                    return
                host.publish(
                    client,
                    key,
                    uid,
                    data,
                    packet=packet,
                    epoch=epoch,
                    kind=kind,
                    sig=sig,
                    descriptor=descriptor,
                )
            case Subscribe(rid, key, last_seen, atomic, descriptor):
                host.subscribe(
                    client, key, last_seen=last_seen, atomic=atomic, descriptor=descriptor
                )
            case Unsubscribe(rid, key):
                host.unsubscribe(client, key)
                self._reply(Unsubscribed(rid, key))
            case Describe(rid, key):
                self._reply(Description(rid, host.describe(key)))
            case Hello(rid):
                self.fail(rid, ErrorCode.NOT_HELLO, "a second Hello on one connection")

    def _publish_batch(self) -> None:
        """Hand the plain publishes read so far to the host: one batch, or one publish."""
        batch = self._batch
        if not batch or self.client is None:
            return
        self._batch = []
        if len(batch) == 1:
            uid, data = batch[0]
            self.host.publish(self.client, self._batch_key, uid, data)
        else:
            self.host.publish_batch(self.client, self._batch_key, batch)


def _plain(request: Publish) -> bool:
    """Whether ``request`` may go in a batch: no number, epoch, marker, signature or
    descriptor (``overlay.core.batches``)."""
    return (
        request.packet is None
        and request.epoch is None
        and request.kind is PacketKind.DATA
        and request.sig is None
        and request.descriptor is None
    )


class ClientPort:
    """The client port of one host: its config, its live sessions and its counters."""

    def __init__(self, host: NodeHost, config: ClientPortConfig | None = None) -> None:
        self.host = host
        self.config = config or ClientPortConfig()
        self.sessions: set[ClientSession] = set()
        self.publishers = Publishers()  # (``overlay.runtime.publish_windows``)
        self.accepted = 0
        self.dropped_slow = 0
        self.dropped_malformed = 0

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one connection (any trio stream: tests may hand a memory stream)."""
        session = ClientSession(self.host, stream, self.config, self.publishers)
        if len(self.sessions) >= self.config.max_clients:
            # Told why, then closed: ``run`` sends only the last word.
            session.fail(None, ErrorCode.BUSY, f"the node serves {len(self.sessions)} clients")
            await session.run()
            return
        self.sessions.add(session)
        self.accepted += 1
        try:
            await session.run()
        finally:
            self.sessions.discard(session)
            if session.closing is not None:
                if session.closing.code is ErrorCode.TOO_SLOW:
                    self.dropped_slow += 1
                else:
                    self.dropped_malformed += 1

    async def serve(
        self,
        listen: Sequence[trio.SocketListener] | tuple[str, int],
        *,
        task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections until cancelled; reports the listeners (their bound ports)."""
        if isinstance(listen, tuple):
            address, port = listen
            listeners = await trio.open_tcp_listeners(port, host=address)
        else:
            listeners = list(listen)
        await trio.serve_listeners(self.handle, listeners, task_status=task_status)


async def serve_client_port(
    host: NodeHost,
    listen: Sequence[trio.SocketListener] | tuple[str, int],
    *,
    config: ClientPortConfig | None = None,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``host``'s client port on ``listen`` (open listeners, or an (address, port) to
    open; port 0 picks a free one) until cancelled; ``task_status.started`` gets the
    listeners once they accept."""
    await ClientPort(host, config).serve(listen, task_status=task_status)
