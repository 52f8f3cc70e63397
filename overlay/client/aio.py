"""The async (trio) client of a node's client port::

    async with open_client("127.0.0.1:7702") as client:
        number = await client.publish("ovl:open/prices", b"42")
        async with await client.subscribe("ovl:open/prices") as events:
            async for event in events:
                ...

Theory of operation: a thin trio driver of the sans-IO ``ClientConnection``. The client is an
async context manager that owns a nursery with two tasks: the *reader* feeds received bytes
to the connection and then wakes every waiter (one ``trio.Event`` per batch of bytes, swapped
for a fresh one: waiters re-check their condition, so nobody misses a wake-up); the *writer*
sends whatever the connection has queued, joined into one ``send_all``, so a burst of
pipelined publishes costs one system call, not one each. Request methods never touch the
socket themselves: they ask the connection for frames and wake the writer.

Pipelining: ``publish_nowait`` sends without waiting and returns the uid; ``wait(uid)``
or ``flush()`` collect the packet numbers. At most ``max_in_flight`` publishes are
unanswered at once (``publish_nowait`` raises ``trio.WouldBlock`` beyond; ``publish``
waits for room), so neither side's queues grow with a fast publisher. Beyond the stream's
publish window (how many its node sends up the tree at once, as the node tells it:
``ClientConnection.may_publish``) publishes only wait at the node, and that wait is in
their latency: a fast publisher that wants its packets' latency near the tree's own awaits
``room(stream)`` before each publish.

Errors: ``NodeUnreachable`` (cannot connect, or what answered is not a node's client port:
``NotAClientPort``; names the address), ``ClientClosed`` (the node
or network ended the connection, with the node's reason when it gave one),
``PublishRejectedError``/``PublishCollisionError``, ``SubscribeFailedError``,
``SubscriptionOverflow``, and ``keyspace.stream_key.StreamAddressError`` for a bad stream.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Self

import trio

from overlay.client.connection import (
    ClientClosed,
    ClientConnection,
    NodeUnreachable,
    StreamEvent,
    StreamLike,
    parse_address,
    resolve_stream,
)
from overlay.client.protocol import ClientProtocolError
from overlay.core.events import Subscribed
from overlay.messages import PacketKind

# Unanswered publishes one client keeps at once: enough to keep a node busy across a
# loopback round trip at hundreds of thousands a second, few enough that the acks of a
# whole window (~40 bytes each) sit far below the node's per-client queue bound.
DEFAULT_MAX_IN_FLIGHT = 10_000

# Bytes one receive_some takes: many events per wake-up when a stream is fast.
_READ_SIZE = 256 * 1024


class Subscription:
    """One stream's events, in packet-number order; an async iterator. ``subscribed`` is
    the node's Subscribed (the stream's frontier when this client joined)."""

    def __init__(self, client: Client, key: bytes, subscribed: Subscribed) -> None:
        self._client = client
        self.key = key
        self.subscribed = subscribed

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> StreamEvent:
        """The next event; ends (StopAsyncIteration) when the client closes cleanly."""
        try:
            return await self.next()
        except ClientClosed:
            if self._client.closed_by_us:
                raise StopAsyncIteration from None
            raise

    async def next(self) -> StreamEvent:
        """The next event, waiting for it; SubscriptionOverflow if the reader fell behind."""
        conn = self._client.connection
        while True:
            changed = self._client.changed
            event = conn.next_event(self.key)
            if event is not None:
                return event
            conn.check_open()
            await changed.wait()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client.connection.closed is None:
            await self._client.unsubscribe(self.key)


class Client:
    """A connection to a node's client port; use ``open_client`` or ``await connect``."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        address: str = "",
        name: str = "",
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        timeout: float = 10.0,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.max_in_flight = max_in_flight
        self.connection = ClientConnection(name=name)
        self.changed = trio.Event()  # set (and replaced) whenever the connection's state moves
        self.closed_by_us = False
        self._stream = stream
        self._outbound = trio.Event()
        self._pipelined: dict[int, None] = {}  # uids in sending order
        self._manager: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None

    # --- lifetime -------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        # The client owns its nursery (structured concurrency): entered here, left in
        # ``__aexit__``, so the reader and writer live exactly as long as the ``async with``.
        self._manager = trio.open_nursery()
        nursery = await self._manager.__aenter__()
        self._nursery = nursery
        nursery.start_soon(self._reader)
        nursery.start_soon(self._writer)
        self._outbound.set()  # the Hello
        try:
            with trio.fail_after(self.timeout):
                await self._until(lambda: self.connection.welcome is not None)
        except trio.TooSlowError:
            await self.aclose()
            raise NodeUnreachable(
                f"{self.address} accepted the connection but did not answer as a node "
                f"within {self.timeout} s"
            ) from None
        except ClientClosed:
            await self.aclose()
            raise self.connection.greeting_failed(self.address) from None
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.closed_by_us = True
        self.connection.connection_lost("the client closed the connection")
        self._wake()
        manager, self._manager = self._manager, None
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
            self._nursery = None
        try:
            if manager is not None:
                # The body's own exception is not handed to the nursery: it would come back
                # wrapped in an ExceptionGroup. It goes on unchanged once this returns.
                await manager.__aexit__(None, None, None)
        finally:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(self._stream)

    async def aclose(self) -> None:
        """Close the connection (``async with`` does it for you)."""
        await self.__aexit__(None, None, None)

    # --- publishing -----------------------------------------------------------------------

    async def publish(
        self,
        stream: StreamLike,
        data: bytes,
        *,
        uid: int | None = None,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
    ) -> int:
        """Publish ``data`` and return its packet number. ``uid`` (default: a random 64-bit
        id) makes a retry idempotent: the same uid is never ordered twice. On a signed
        stream the client names and signs the number itself, re-signing on collision."""
        await self._until(lambda: self.connection.in_flight < self.max_in_flight)
        uid = self._send_publish(stream, data, uid, packet, epoch, kind)
        return await self.wait(uid)

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
        """Send a publish without waiting for its answer; returns its uid, for ``wait``, and
        ``flush`` returns its number. Raises trio.WouldBlock if ``max_in_flight`` publishes
        are unanswered (``await client.flush()`` or ``wait`` first). To keep a fast
        publisher's latency down, ``await client.room(stream)`` before each (the notes)."""
        if self.connection.in_flight >= self.max_in_flight:
            raise trio.WouldBlock(f"{self.max_in_flight} publishes are awaiting their answer")
        uid = self._send_publish(stream, data, uid, packet, epoch, kind)
        self._pipelined[uid] = None
        return uid

    async def room(self, stream: StreamLike) -> None:
        """Wait until one more publish of ``stream`` should go: fewer than
        ``max_in_flight`` are unanswered, and fewer of the stream's than the publish window
        its node told (``ClientConnection.may_publish``)."""
        conn, limit = self.connection, self.max_in_flight
        key = conn.resolve(stream)[0].key
        await self._until(lambda: conn.may_publish(key, limit))

    async def wait(self, uid: int) -> int:
        """The packet number of publish ``uid``; its PublishRejectedError if refused."""
        conn = self.connection
        await self._until(lambda: conn.answered(uid))
        self._pipelined.pop(uid, None)
        number = conn.outcome(uid)
        assert number is not None
        return number

    async def flush(self) -> list[int]:
        """Wait for every ``publish_nowait`` not yet waited for; their packet numbers, in
        the order they were sent. If any was refused, raises the first refusal after all
        have answered (the others' numbers are then lost to the caller)."""
        uids, self._pipelined = list(self._pipelined), {}
        await self._until(self.connection.all_answered(uids))
        return self.connection.numbers(uids)

    async def close_epoch(self, stream: StreamLike, epoch: int) -> int:
        """Close ``epoch``: atomic subscribers now get its packets whole. Returns the
        marker's packet number."""
        return await self.publish(stream, b"", epoch=epoch, kind=PacketKind.EPOCH_CLOSED)

    async def abort_epoch(self, stream: StreamLike, epoch: int) -> int:
        """Abort ``epoch``: none of its packets reach atomic subscribers."""
        return await self.publish(stream, b"", epoch=epoch, kind=PacketKind.EPOCH_ABORTED)

    # --- subscribing ----------------------------------------------------------------------

    async def subscribe(
        self, stream: StreamLike, *, last_seen: int | None = None, atomic: bool = False
    ) -> Subscription:
        """Join the stream; returns once the node is in its tree (SubscribeFailedError if it
        cannot join). Events after ``last_seen`` (default: from now on; -1: from the
        stream's first packet still held); ``atomic`` subscribers get closed epochs whole
        (``Epoch``) and never a torn one."""
        conn = self.connection
        key = conn.subscribe(stream, last_seen=last_seen, atomic=atomic)
        self._wake_writer()
        subscribed: list[Subscribed] = []

        def ready() -> bool:
            joined = conn.joined(key)  # raises SubscribeFailedError
            if joined is not None:
                subscribed.append(joined)
            return joined is not None

        await self._until(ready)
        return Subscription(self, key, subscribed[0])

    async def unsubscribe(self, stream: StreamLike | bytes) -> None:
        """Leave the stream; once this returns no more of its events arrive."""
        conn = self.connection
        rid = conn.leave(stream) if isinstance(stream, bytes) else conn.unsubscribe(stream)
        self._wake_writer()
        await self._until(lambda: conn.unsubscribed(rid))

    # --- inspection -----------------------------------------------------------------------

    async def describe(self, stream: StreamLike | None = None) -> dict[str, object]:
        """The node's state (``NodeHost.describe``): identity, links, counters, and its
        view of every stream it carries, or only of ``stream``."""
        conn = self.connection
        key = None if stream is None else resolve_stream(stream)[0].key
        rid = conn.describe(key)
        self._wake_writer()
        result: list[dict[str, object]] = []

        def ready() -> bool:
            state = conn.description(rid)
            if state is not None:
                result.append(state)
            return state is not None

        await self._until(ready)
        return result[0]

    # --- the driver -----------------------------------------------------------------------

    def _send_publish(
        self,
        stream: StreamLike,
        data: bytes,
        uid: int | None,
        packet: int | None,
        epoch: int | None,
        kind: PacketKind,
    ) -> int:
        uid = self.connection.publish(stream, data, uid=uid, packet=packet, epoch=epoch, kind=kind)
        self._wake_writer()
        return uid

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds; ClientClosed if the connection ends first."""
        while True:
            changed = self.changed
            if condition():
                return
            self.connection.check_open()
            await changed.wait()

    def _wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    def _wake_writer(self) -> None:
        self._outbound.set()

    async def _reader(self) -> None:
        conn = self.connection
        try:
            while conn.closed is None:
                data = await self._stream.receive_some(_READ_SIZE)
                if not data:
                    conn.connection_lost(f"the node at {self.address} closed the connection")
                    break
                conn.receive_data(bytes(data))
                self._wake_writer()  # a collision may have queued a re-signed retry
                self._wake()
        except ClientProtocolError:
            pass  # the connection recorded it: waiters raise ``closed``
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            conn.connection_lost(f"the connection to {self.address} broke: {exc!r}")
        self._wake()

    async def _writer(self) -> None:
        conn = self.connection
        while True:
            await self._outbound.wait()
            self._outbound = trio.Event()
            data = conn.data_to_send()
            if not data:
                continue
            try:
                await self._stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                conn.connection_lost(f"the connection to {self.address} broke: {exc!r}")
                self._wake()
                return


async def connect(
    address: str | tuple[str, int],
    *,
    name: str = "",
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    timeout: float = 10.0,
) -> Client:
    """Open a TCP connection to a node's client port; ``async with`` the result. Raises
    NodeUnreachable naming the address if nothing accepts within ``timeout`` seconds."""
    host, port = parse_address(address)
    shown = f"{host}:{port}"
    try:
        with trio.fail_after(timeout):
            stream = await trio.open_tcp_stream(host, port)
    except trio.TooSlowError:
        raise NodeUnreachable(f"no node answered at {shown} within {timeout} s") from None
    except OSError as exc:
        raise NodeUnreachable(f"cannot connect to a node at {shown}: {_reason(exc)}") from None
    return Client(stream, address=shown, name=name, max_in_flight=max_in_flight, timeout=timeout)


def _reason(error: OSError) -> str:
    """Why a connection failed, as the system says it ("Connection refused"). trio's
    ``open_tcp_stream`` raises "all attempts to connect to ... failed" and keeps each
    attempt's error in its cause: with one reason shared by all, that reason."""
    cause = error.__cause__
    if error.strerror is None and isinstance(cause, BaseExceptionGroup):
        reasons = {
            os.strerror(e.errno) if e.errno else e.strerror
            for e in cause.exceptions
            if isinstance(e, OSError)
        }
        if len(reasons) == 1 and None not in reasons:
            return str(reasons.pop())
    return str(error.strerror or error)


@asynccontextmanager
async def open_client(
    address: str | tuple[str, int],
    *,
    name: str = "",
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    timeout: float = 10.0,
) -> AsyncIterator[Client]:
    """``connect`` and enter the client: ``async with open_client(addr) as client``."""
    client = await connect(address, name=name, max_in_flight=max_in_flight, timeout=timeout)
    async with client:
        yield client
