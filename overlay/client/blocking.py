"""The blocking client of a node's client port, for plain scripts and Spark executors::

    with Client("127.0.0.1:7702") as c:
        number = c.publish("ovl:open/prices", b"42")
        for event in c.subscribe("ovl:open/prices"):
            ...

Theory of operation: a thin driver of the same sans-IO ``ClientConnection`` as the async
client, on one plain socket, with no threads and no event loop. Every call that needs an
answer sends what the connection has queued and then reads frames until its answer is
there; the other events that arrive meanwhile (another subscription's packets, earlier
publishes' acks) stay buffered in the connection for whoever asks for them next. So one
thread may publish and iterate a subscription alternately, and nothing is lost.

Pipelining: ``publish_nowait`` buffers the request (sending in batches of ``_SEND_BATCH``
bytes) and returns its uid; ``flush`` sends the rest and waits for every answer, returning
the packet numbers in order. At most ``max_in_flight`` publishes are unanswered: the one
beyond waits (reading answers) until one is answered, so the node's per-client queue of acks
stays far under its bound however long the loop. The node may read publishes more slowly
than they are sent (it waits for its tree: ``overlay.runtime.client_port``); a send then
blocks until it reads on, within ``timeout``. A publisher that calls ``room(stream)``
before each publish also keeps to the stream's publish window (how many its node sends up
the tree at once, as the node tells it), so its packets do not wait at the node.

Timeouts: every wait has a deadline (``timeout`` per call, default the client's); a wait
that passes it raises ``ClientTimeout`` saying what was awaited. The connection stays usable:
the answer, when it comes, is buffered like any other event.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

from overlay.client.connection import (
    ClientClosed,
    ClientConnection,
    ClientError,
    ClientTimeout,
    NodeUnreachable,
    StreamEvent,
    StreamLike,
    parse_address,
    resolve_stream,
)
from overlay.client.protocol import NO_PEERS, ClientProtocolError
from overlay.core.events import Subscribed
from overlay.messages import PacketKind

# Pipelined requests are sent once this many bytes are buffered (or when an answer is
# awaited): a few system calls per thousand small publishes instead of one each.
_SEND_BATCH = 64 * 1024

# Bytes one recv takes.
_READ_SIZE = 256 * 1024

# Default wait for any one answer: far above a healthy node's round trip, short enough that
# a wedged script says so.
DEFAULT_TIMEOUT = 30.0

# How long a subscribe that timed out waits for the node's description, to say whether the
# node has a peer up: a node that answers at all answers that in a round trip.
NO_PEERS_ASK = 2.0


class BlockingSubscription:
    """One stream's events, in order; iterating blocks until the next one arrives (with
    ``timeout`` None, for ever). ``subscribed`` is the frontier when the client joined."""

    def __init__(
        self, client: Client, key: bytes, subscribed: Subscribed, timeout: float | None
    ) -> None:
        self._client = client
        self.key = key
        self.subscribed = subscribed
        self.timeout = timeout

    def __iter__(self) -> Iterator[StreamEvent]:
        while True:
            try:
                yield self.next(self.timeout)
            except ClientClosed:
                if self._client.closed_by_us:
                    return
                raise

    def next(self, timeout: float | None = None) -> StreamEvent:
        """The next event; ClientTimeout if none arrives within ``timeout`` seconds (None:
        wait for ever)."""
        conn = self._client.connection
        found: list[StreamEvent] = []

        def ready() -> bool:
            event = conn.next_event(self.key)
            if event is not None:
                found.append(event)
            return event is not None

        self._client._until(ready, math.inf if timeout is None else timeout, "the next event")
        return found[0]

    def unsubscribe(self) -> None:
        self._client.unsubscribe(self.key)


class Client:
    """A blocking connection to a node's client port (see the module notes)."""

    def __init__(
        self,
        address: str | tuple[str, int],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_in_flight: int = 1_000,
        name: str = "",
    ) -> None:
        """Connect and greet the node; NodeUnreachable naming the address if it cannot."""
        host, port = parse_address(address)
        self.address = f"{host}:{port}"
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.connection = ClientConnection(name=name)
        self.closed_by_us = False
        self._pipelined: dict[int, None] = {}  # uids in sending order
        try:
            self._socket = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError:
            raise NodeUnreachable(
                f"no node answered at {self.address} within {timeout} s"
            ) from None
        except OSError as exc:
            reason = exc.strerror or exc
            raise NodeUnreachable(f"cannot connect to a node at {self.address}: {reason}") from None
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._until(lambda: self.connection.welcome is not None, timeout, "the node's Welcome")
        except ClientTimeout:
            self._socket.close()
            raise NodeUnreachable(
                f"{self.address} accepted the connection but did not answer as a node "
                f"within {timeout} s"
            ) from None
        except ClientClosed:
            self._socket.close()
            raise self.connection.greeting_failed(self.address) from None
        except BaseException:
            self._socket.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; buffered requests not yet sent are dropped (``flush``
        first to be sure every publish arrived)."""
        self.closed_by_us = True
        self.connection.connection_lost("the client closed the connection")
        self._socket.close()

    # --- publishing -----------------------------------------------------------------------

    def publish(
        self,
        stream: StreamLike,
        data: bytes,
        *,
        uid: int | None = None,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
        timeout: float | None = None,
    ) -> int:
        """Publish ``data``; returns its packet number (PublishRejectedError if refused).
        ``uid`` (default random) makes a retry idempotent at the root."""
        uid = self._start_publish(stream, data, uid, packet, epoch, kind)
        return self.wait(uid, timeout)

    def publish_nowait(
        self,
        stream: StreamLike,
        data: bytes,
        *,
        uid: int | None = None,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
    ) -> int:
        """Queue a publish without waiting for its answer; returns its uid. Blocks only
        while ``max_in_flight`` publishes are unanswered. ``flush`` collects the numbers."""
        uid = self._start_publish(stream, data, uid, packet, epoch, kind)
        self._pipelined[uid] = None
        return uid

    def room(self, stream: StreamLike, timeout: float | None = None) -> None:
        """Wait (reading answers) until one more publish of ``stream`` should go: fewer than
        ``max_in_flight`` are unanswered, and fewer of the stream's than the publish window
        its node told (``ClientConnection.may_publish``). A fast publisher that calls it
        before each publish keeps its packets' latency near the tree's own."""
        conn, limit = self.connection, self.max_in_flight
        key = conn.resolve(stream)[0].key
        if not conn.may_publish(key, limit):
            self._until(lambda: conn.may_publish(key, limit), timeout, "room in the publish window")

    def wait(self, uid: int, timeout: float | None = None) -> int:
        """The packet number of publish ``uid``, waiting for it."""
        conn = self.connection
        self._until(lambda: conn.answered(uid), timeout, f"the answer to publish {uid:#x}")
        self._pipelined.pop(uid, None)
        number = conn.outcome(uid)
        assert number is not None
        return number

    def flush(self, timeout: float | None = None) -> list[int]:
        """Send every queued publish and wait for all their answers; their packet numbers in
        the order they were queued. A refusal is raised after all have answered."""
        uids, self._pipelined = list(self._pipelined), {}
        waiting = f"the answers to {len(uids)} publishes"
        self._until(self.connection.all_answered(uids), timeout, waiting)
        return self.connection.numbers(uids)

    def close_epoch(self, stream: StreamLike, epoch: int, timeout: float | None = None) -> int:
        """Close ``epoch`` (atomic subscribers get it whole); the marker's packet number."""
        return self.publish(stream, b"", epoch=epoch, kind=PacketKind.EPOCH_CLOSED, timeout=timeout)

    def abort_epoch(self, stream: StreamLike, epoch: int, timeout: float | None = None) -> int:
        """Abort ``epoch``: none of its packets reach atomic subscribers."""
        return self.publish(
            stream, b"", epoch=epoch, kind=PacketKind.EPOCH_ABORTED, timeout=timeout
        )

    # --- subscribing ----------------------------------------------------------------------

    def subscribe(
        self,
        stream: StreamLike,
        *,
        last_seen: int | None = None,
        atomic: bool = False,
        timeout: float | None = None,
        event_timeout: float | None = None,
    ) -> BlockingSubscription:
        """Join the stream, waiting until the node is in its tree (``timeout``); iterate
        the result for its events (each waited for up to ``event_timeout``, None: for
        ever). SubscribeFailedError if the node cannot join."""
        conn = self.connection
        key = conn.subscribe(stream, last_seen=last_seen, atomic=atomic)
        joined: list[Subscribed] = []

        def ready() -> bool:
            event = conn.joined(key)
            if event is not None:
                joined.append(event)
            return event is not None

        try:
            self._until(ready, timeout, "the subscription's confirmation")
        except ClientTimeout as error:
            raise ClientTimeout(f"{error}{self._no_peers()}") from None
        return BlockingSubscription(self, key, joined[0], event_timeout)

    def _no_peers(self) -> str:
        """``": " + NO_PEERS`` if the node says it has no link up (why a subscribe waited
        in vain, most likely), else nothing; a node that does not answer adds nothing."""
        try:
            links = self.describe(timeout=NO_PEERS_ASK).get("links")
        except (ClientError, OSError):
            return ""
        return f": {NO_PEERS}" if links == 0 else ""

    def unsubscribe(self, stream: StreamLike | bytes, timeout: float | None = None) -> None:
        """Leave the stream; once this returns no more of its events arrive."""
        conn = self.connection
        rid = conn.leave(stream) if isinstance(stream, bytes) else conn.unsubscribe(stream)
        self._until(lambda: conn.unsubscribed(rid), timeout, "the unsubscribe's confirmation")

    def describe(
        self, stream: StreamLike | None = None, timeout: float | None = None
    ) -> dict[str, object]:
        """The node's state (``NodeHost.describe``), or its view of ``stream`` only."""
        conn = self.connection
        rid = conn.describe(None if stream is None else resolve_stream(stream)[0].key)
        found: list[dict[str, object]] = []

        def ready() -> bool:
            state = conn.description(rid)
            if state is not None:
                found.append(state)
            return state is not None

        self._until(ready, timeout, "the node's description")
        return found[0]

    # --- the driver -----------------------------------------------------------------------

    def _start_publish(
        self,
        stream: StreamLike,
        data: bytes,
        uid: int | None,
        packet: int | None,
        epoch: int | None,
        kind: PacketKind,
    ) -> int:
        conn = self.connection
        if conn.in_flight >= self.max_in_flight:
            self._until(
                lambda: conn.in_flight < self.max_in_flight, None, "room in the publish window"
            )
        uid = conn.publish(stream, data, uid=uid, packet=packet, epoch=epoch, kind=kind)
        if conn.outbound_bytes >= _SEND_BATCH:
            self._send()
        return uid

    def _send(self) -> None:
        data = self.connection.data_to_send()
        if data:
            try:
                self._socket.settimeout(self.timeout)
                self._socket.sendall(data)
            except OSError as exc:
                self.connection.connection_lost(f"the connection to {self.address} broke: {exc}")
                raise self.connection.closed or ClientClosed(str(exc)) from None

    def _until(self, condition: Callable[[], bool], timeout: float | None, what: str) -> None:
        """Send what is queued, then read until ``condition()`` holds. ``timeout``: None is
        the client's default; ``math.inf`` waits for ever."""
        self._send()
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        conn = self.connection
        while not condition():
            conn.check_open()
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientTimeout(f"waited {limit} s for {what} from {self.address}; none came")
            self._socket.settimeout(None if math.isinf(left) else left)
            try:
                data = self._socket.recv(_READ_SIZE)
            except TimeoutError:
                continue
            except OSError as exc:
                conn.connection_lost(f"the connection to {self.address} broke: {exc}")
                continue
            if not data:
                conn.connection_lost(f"the node at {self.address} closed the connection")
                continue
            try:
                conn.receive_data(data)
            except ClientProtocolError:
                continue  # recorded as ``closed``: check_open raises it
            self._send()  # a collision may have queued a re-signed retry
