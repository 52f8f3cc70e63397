"""The client side of one client-port connection, sans-IO: what both client drivers share.

Theory of operation (h11's shape). ``ClientConnection`` never touches a socket. Each request
method (``subscribe``, ``publish``, ...) appends its frame to an outbound buffer that the
driver empties with ``data_to_send()``; the driver hands every received chunk to
``receive_data()``, which decodes the node's events and updates the state the driver then
queries: a publish's outcome by uid (``outcome``), a subscription's next event
(``next_event``), a describe's answer by request id (``description``). The async client
(``overlay.client.aio``) and the blocking one (``overlay.client.blocking``) are two thin
drivers of this one object.

Signed streams: the client holds the private key (``SignedStream``) and signs each packet,
whose signature covers its number, so the publisher names the number. The connection guesses
the stream's next number (from its last ack, or from its subscription's packets, else 0);
a wrong guess is answered ``PublishCollided`` with ``suggested_next``, and the connection
re-signs for that number (or the first after it that none of its own publishes in flight
holds) and sends the publish again under the same uid, at most ``MAX_SIGNED_RETRIES`` times.
Reusing the uid keeps the retry idempotent at the root. The suggestion wins even when it is
lower than the connection's guess: a root that restarted numbers from what it remembers, and
a guess that ran ahead of that would otherwise collide on every publish.

Publish windows: a node sends a stream's publishes up its tree only as fast as the tree
answers them and holds the rest, so a publish beyond what it sends up at once only waits
there, and that wait is in its packet's latency. The node says how many that is per stream
(``PublishWindow``: ``overlay.runtime.publish_windows``); ``may_publish`` keeps to it,
from ``INITIAL_WINDOW`` (where a node's pace starts by default) until the node has said,
which it does once it has read the first publish. The drivers' ``room`` waits for it, so
a fast publisher that asks for room before each publish keeps its latency near the tree's
own (about ``publish_queue_delay`` above it) instead of growing with how many it keeps in
flight; their ``publish`` waits only for ``max_in_flight`` (why: ``publish_windows``). A
node that answers in protocol version 1 tells no windows, and only ``max_in_flight``
applies. (A node of a release before version 2 refuses a version 2 Hello: clients need a
node of their release or later.)

Invariants: memory is bounded by the caller's use: each subscription buffers at most
``max_buffered_events`` events and ``max_buffered_bytes`` payload bytes; beyond that it stops
buffering, unsubscribes, and its reader gets ``SubscriptionOverflow`` after the buffered
events, naming the ``last_seen`` to resubscribe from (the node's window then replays what it
still has, and ``Missed`` names the rest). Publish outcomes are kept until taken.
"""

from __future__ import annotations

import os
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from keyspace.stream_key import StreamAddressError, StreamKey, sign_packet
from overlay.client.protocol import (
    DEFAULT_CLIENT_PORT,
    MAX_EVENT_FRAME,
    OLDEST_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    ClientProtocolError,
    Describe,
    Description,
    Event,
    Hello,
    ProtocolError,
    Publish,
    PublishWindow,
    Request,
    Subscribe,
    Unsubscribe,
    Unsubscribed,
    Welcome,
    decode_event,
    encode_request,
)
from overlay.core.events import (
    Epoch,
    EpochAborted,
    EpochSkipped,
    Missed,
    Packet,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    Subscribed,
    SubscribeFailed,
)
from overlay.core.pace import INITIAL_WINDOW
from overlay.errors import LocalProtocolError
from overlay.messages import RETRYABLE, PacketKind, PublishError
from overlay.runtime.framing import FrameReader, FrameTooLarge
from overlay.runtime.identity import Identity

# Re-signing after a collision: each retry takes a number the root just called free, so more
# than a few retries means another publisher races us on the same signed stream. 16 rounds
# of that is a contest this client will not win; the caller hears PublishCollisionError.
MAX_SIGNED_RETRIES = 16

# Per-subscription buffer bounds (see the module notes): 65,536 events cover a fast stream
# for seconds of a reader's pause; 64 MiB bounds the payload they hold.
DEFAULT_MAX_BUFFERED_EVENTS = 65_536
DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024

StreamEvent = Packet | Missed | Epoch | EpochSkipped | EpochAborted


class ClientError(Exception):
    """Base of every error the client library raises about the node or the connection."""


class NodeUnreachable(ClientError, ConnectionError):
    """No node answers at the address (refused, unresolvable, not a node); names it."""


class NotAClientPort(NodeUnreachable):
    """Something accepted the connection but hung up on the Hello without a word of the
    client protocol: most often a node's peer port given where its client port belongs."""


class BadNodeAddress(NodeUnreachable, ValueError):
    """The node address itself is malformed (no port, another scheme than ``tcp://``): no
    connection was tried. A NodeUnreachable, as any address no node answers at, and a
    ValueError, as the caller's mistake."""


class ClientClosed(ClientError):
    """The connection is closed: by the node (its reason is in the message), the network,
    or this client's own ``close``."""


class ClientTimeout(ClientError, TimeoutError):
    """An answer the client waited for did not come within its timeout."""


class PublishRejectedError(ClientError):
    """The node refused a publish. ``error`` is the protocol's ``PublishError``;
    ``retryable`` says whether the same publish (same uid) may succeed later."""

    def __init__(self, key: bytes, uid: int, error: PublishError, reason: str) -> None:
        super().__init__(f"publish {uid:#x} refused ({error.name}): {reason}")
        self.key = key
        self.uid = uid
        self.error = error
        self.reason = reason
        self.retryable = error in RETRYABLE


class PublishCollisionError(PublishRejectedError):
    """The stream already holds another packet under the number asked for; packet
    ``suggested_next`` is free (a signed publisher re-signs for it)."""

    def __init__(self, key: bytes, uid: int, number: int, suggested_next: int) -> None:
        reason = f"packet {number} is taken; {suggested_next} is free"
        super().__init__(key, uid, PublishError.INVALID, reason)
        self.number = number
        self.suggested_next = suggested_next
        self.retryable = False


class SubscribeFailedError(ClientError):
    """The node could not join the stream's tree; ``reason`` says why."""

    def __init__(self, key: bytes, reason: str) -> None:
        super().__init__(f"subscribe failed: {reason}")
        self.key = key
        self.reason = reason


class SubscriptionOverflow(ClientError):
    """The reader fell behind the buffer's bound; the client unsubscribed. Subscribe again
    with ``last_seen`` (None: no packet was read) to go on where the reader stopped."""

    def __init__(self, key: bytes, last_seen: int | None, dropped: int) -> None:
        super().__init__(
            f"subscription buffer full: {dropped} events dropped and the stream left; "
            f"resubscribe with last_seen={last_seen}"
        )
        self.key = key
        self.last_seen = last_seen


@dataclass(frozen=True)
class SignedStream:
    """A signed stream together with its private key: what a publisher needs. Subscribers
    need only ``stream`` (or its ``address``)."""

    stream: StreamKey
    private_key: Ed25519PrivateKey

    def __post_init__(self) -> None:
        public = self.private_key.public_key().public_bytes_raw()
        if self.stream.public_key != public:
            raise StreamAddressError(
                f"the private key does not belong to signed stream {self.stream.address}"
            )

    @classmethod
    def generate(cls, name: str) -> SignedStream:
        """A new signed stream named ``name`` under a freshly generated key pair."""
        private = Ed25519PrivateKey.generate()
        return cls(StreamKey.signed(private.public_key().public_bytes_raw(), name), private)

    @classmethod
    def from_private_bytes(cls, raw: bytes, name: str) -> SignedStream:
        """The signed stream ``name`` of the raw 32-byte Ed25519 private key ``raw``."""
        if len(raw) != 32:
            raise StreamAddressError(f"an Ed25519 private key is 32 bytes, got {len(raw)}")
        private = Ed25519PrivateKey.from_private_bytes(raw)
        return cls(StreamKey.signed(private.public_key().public_bytes_raw(), name), private)

    def private_bytes(self) -> bytes:
        """The raw 32-byte private key, to keep on disk."""
        return self.private_key.private_bytes_raw()

    @classmethod
    def load(cls, path: str | os.PathLike[str], stream: StreamLike) -> SignedStream:
        """The signing key file ``overlay keygen --stream NAME`` wrote, for ``stream`` (its
        ``ovl:`` address). Raises IdentityError for an unreadable file and
        StreamAddressError if the key is not that stream's, each naming the file."""
        key, _ = resolve_stream(stream)
        if not key.is_signed:
            raise StreamAddressError(f"{key.address} is an open stream: it takes no key file")
        identity = Identity.load(path)
        if identity.public != key.public_key:
            raise StreamAddressError(
                f"{os.fspath(path)} holds the key of "
                f"{StreamKey.signed(identity.public, key.name).address}, not of {key.address}"
            )
        return cls.from_private_bytes(identity.private_bytes(), key.name)

    @property
    def address(self) -> str:
        return self.stream.address


StreamLike = str | StreamKey | SignedStream


def resolve_stream(stream: StreamLike) -> tuple[StreamKey, Ed25519PrivateKey | None]:
    """The stream key and signing key (if any) of a client's ``stream`` argument: an ``ovl:``
    address or bare name, a ``StreamKey``, or a ``SignedStream``. StreamAddressError for a bad
    address."""
    if isinstance(stream, SignedStream):
        return stream.stream, stream.private_key
    if isinstance(stream, StreamKey):
        return stream, None
    return StreamKey.parse(stream), None


def fresh_uid() -> int:
    """A random 64-bit publish uid: collisions between clients are negligible."""
    return secrets.randbits(64)


def parse_address(
    address: str | tuple[str, int], default_port: int | None = DEFAULT_CLIENT_PORT
) -> tuple[str, int]:
    """``"host:port"``, ``"tcp://host:port"``, ``"host"`` (``default_port``; None: a port is
    required) or ``(host, port)``; a bad one raises BadNodeAddress naming it. The client
    port is plain TCP, so ``tcp://`` is the one scheme: any other (``http://``) is a mistake
    said as such, not a host name that fails to resolve."""
    if isinstance(address, tuple):
        return address
    text = address
    scheme, separator, rest = text.partition("://")
    if separator:
        if scheme.lower() != "tcp":
            raise BadNodeAddress(
                f"bad node address {address!r}: a node's client port is plain TCP; "
                "give host:port (or tcp://host:port)"
            )
        text = rest
    host, colon, port = text.rpartition(":")
    if not colon or (text.startswith("[") and not host.endswith("]")):
        if default_port is None:
            raise BadNodeAddress(f"bad node address {address!r}: no port; expected host:port")
        return text.strip("[]"), default_port
    host = host.strip("[]")  # "[::1]:7702"
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadNodeAddress(f"bad node address {address!r}: expected host:port")
    return host, int(port)


def format_address(host: str, port: int) -> str:
    """``host:port`` as ``parse_address`` reads it back (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class _Subscription:
    key: bytes
    joined: Subscribed | None = None
    failed: str | None = None
    leaving: bool = False
    events: deque[StreamEvent] = field(default_factory=deque)
    buffered_bytes: int = 0
    last_seen: int | None = None  # newest packet number buffered
    dropped: int = 0  # > 0: overflowed


@dataclass
class _Pending:
    """A publish awaiting its answer; ``signer`` set if the connection chose the number."""

    request: Publish
    signer: Ed25519PrivateKey | None
    retries: int = 0


class ClientConnection:
    """One connection's client-side state; see the module notes. Not thread-safe: one
    driver, one thread or one trio task group."""

    def __init__(
        self,
        *,
        name: str = "",
        max_event_frame: int = MAX_EVENT_FRAME,
        max_buffered_events: int = DEFAULT_MAX_BUFFERED_EVENTS,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
    ) -> None:
        self.max_buffered_events = max_buffered_events
        self.max_buffered_bytes = max_buffered_bytes
        self._frames = FrameReader(max_event_frame)
        self._max_event_frame = max_event_frame
        self._out = bytearray()
        self._next_rid = 0
        self._subs: dict[bytes, _Subscription] = {}
        self._pending: dict[int, _Pending] = {}
        self._outcomes: dict[int, int | PublishRejectedError] = {}
        self._descriptions: dict[int, dict[str, object]] = {}
        self._unsubscribing: dict[int, bytes] = {}
        self._next_number: dict[bytes, int] = {}
        # Per stream published to: publishes unanswered, and the window the node told.
        self._unanswered: dict[bytes, int] = {}
        self._windows: dict[bytes, int] = {}
        self._windowed = True  # (a node of version 1 tells no windows)
        self._resolved: tuple[StreamLike, tuple[StreamKey, Ed25519PrivateKey | None]] | None = None
        self.welcome: Welcome | None = None
        self.closed: ClientError | None = None
        self._heard = False  # one valid client-port frame came: a node's client port answered
        self._send(Hello(self._rid(), PROTOCOL_VERSION, name))

    # --- bytes in and out -----------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """Every request frame built since the last call (possibly empty)."""
        data = bytes(self._out)
        self._out.clear()
        return data

    @property
    def outbound_bytes(self) -> int:
        """Bytes of requests built and not yet taken by ``data_to_send``."""
        return len(self._out)

    def receive_data(self, data: bytes) -> list[Event]:
        """Take bytes from the node; returns the events they completed (state is already
        updated). A protocol violation closes the connection and raises
        ClientProtocolError; a node's ProtocolError closes it (see ``closed``)."""
        if self.closed is not None:
            return []
        try:
            try:
                bodies = self._frames.feed(data)
            except FrameTooLarge as exc:
                raise ClientProtocolError(str(exc)) from None
            events = [decode_event(body, self._max_event_frame) for body in bodies]
        except ClientProtocolError as exc:
            self.closed = ClientClosed(f"the node broke the client protocol: {exc}")
            raise
        self._heard = self._heard or bool(events)
        for event in events:
            self._handle(event)
        return events

    def connection_lost(self, reason: str = "the node closed the connection") -> None:
        """The byte stream ended; every waiter should now see ``closed``."""
        if self.closed is None:
            self.closed = ClientClosed(reason)

    def check_open(self) -> None:
        """Raise the reason the connection closed, if it did."""
        if self.closed is not None:
            raise self.closed

    def greeting_failed(self, address: str) -> ClientError:
        """What to raise when the connection to ``address`` closed before the Welcome. A
        node's client port answers every Hello (Welcome, or ProtocolError naming why not);
        an end that closed without one valid client-port frame is something else, most
        often the node's *peer* port, which expects an encrypted handshake and hangs up on a
        Hello. That is a wrong address, so NotAClientPort (a NodeUnreachable), naming it."""
        if self._heard and self.closed is not None:
            return self.closed
        return NotAClientPort(
            f"{address} closed the connection without answering as a node's client port: "
            "probably a node's peer port, not its client port (overlay node prints both: "
            "use the 'clients' one)"
        )

    # --- requests -------------------------------------------------------------------------

    def subscribe(
        self, stream: StreamLike, *, last_seen: int | None = None, atomic: bool = False
    ) -> bytes:
        """Ask for the stream's events; returns its key (for ``joined``/``next_event``)."""
        self.check_open()
        key, _ = resolve_stream(stream)
        raw = key.key
        if raw in self._subs:
            raise LocalProtocolError(f"already subscribed to {key.address} on this connection")
        self._subs[raw] = _Subscription(raw, last_seen=last_seen)
        self._send(Subscribe(self._rid(), raw, last_seen, atomic, key.descriptor))
        return raw

    def joined(self, key: bytes) -> Subscribed | None:
        """The subscription's Subscribed event once it came; SubscribeFailedError if the
        node could not join (the subscription is then forgotten)."""
        sub = self._subs.get(key)
        if sub is None:
            raise LocalProtocolError("no subscription to that stream on this connection")
        if sub.failed is not None:
            del self._subs[key]
            raise SubscribeFailedError(key, sub.failed)
        return sub.joined

    def next_event(self, key: bytes) -> StreamEvent | None:
        """The subscription's next buffered event, or None. After an overflow, once the
        buffer is drained: SubscriptionOverflow."""
        sub = self._subs.get(key)
        if sub is None:
            raise LocalProtocolError("no subscription to that stream on this connection")
        if sub.events:
            event = sub.events.popleft()
            if isinstance(event, Packet):
                sub.buffered_bytes -= len(event.data)
            elif isinstance(event, Epoch):
                sub.buffered_bytes -= sum(len(p.data) for p in event.packets)
            return event
        if sub.dropped:
            del self._subs[key]  # the stream was left; the caller may subscribe anew
            raise SubscriptionOverflow(key, sub.last_seen, sub.dropped)
        return None

    def unsubscribe(self, stream: StreamLike) -> int:
        """Leave the stream; returns the request id ``unsubscribed`` reports on."""
        self.check_open()
        return self.leave(resolve_stream(stream)[0].key)

    def unsubscribed(self, rid: int) -> bool:
        """Whether the node confirmed the Unsubscribe ``rid`` (then no event follows)."""
        return rid not in self._unsubscribing

    def publish(
        self,
        stream: StreamLike,
        data: bytes,
        *,
        uid: int | None = None,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
    ) -> int:
        """Send a publish; returns its uid, which ``outcome`` reports on. On a signed stream
        with ``packet`` None the connection chooses the number and re-signs on collision."""
        self.check_open()
        key, signer = self.resolve(stream)
        uid = fresh_uid() if uid is None else uid
        if uid in self._pending or uid in self._outcomes:
            raise LocalProtocolError(f"publish uid {uid:#x} is already in use on this connection")
        raw = key.key
        chooses = signer is not None and packet is None
        if chooses:
            packet = self._next_number.get(raw, 0)
            self._next_number[raw] = packet + 1
        sig = None
        if signer is not None:
            if packet is None:
                raise LocalProtocolError("unreachable: a signed publish always has a number")
            sig = sign_packet(signer, raw, packet, epoch, int(kind), data)
        request = Publish(
            self._rid(), raw, uid, data, packet, epoch, kind, sig, key.descriptor if sig else None
        )
        self._send(request)
        self._pending[uid] = _Pending(request, signer if chooses else None)
        self._unanswered[raw] = self._unanswered.get(raw, 0) + 1
        return uid

    def resolve(self, stream: StreamLike) -> tuple[StreamKey, Ed25519PrivateKey | None]:
        """``resolve_stream(stream)``, remembering the last one: a publisher names one
        stream over and over."""
        last = self._resolved
        if last is not None and type(last[0]) is type(stream) and last[0] == stream:
            return last[1]
        resolved = resolve_stream(stream)
        self._resolved = (stream, resolved)
        return resolved

    def may_publish(self, key: bytes, max_in_flight: int) -> bool:
        """Whether one more publish of stream ``key`` should go now: fewer than
        ``max_in_flight`` publishes are unanswered, and fewer of this stream's than its
        publish window (the module notes)."""
        if len(self._pending) >= max_in_flight:
            return False
        return not self._windowed or self._unanswered.get(key, 0) < self.publish_window(key)

    def publish_window(self, key: bytes) -> int:
        """Stream ``key``'s publish window as the node last told it (the module notes)."""
        return self._windows.get(key, INITIAL_WINDOW)

    def outcome(self, uid: int) -> int | None:
        """The packet number of publish ``uid`` once answered (taking it), None before;
        raises its PublishRejectedError if it was refused."""
        result = self._outcomes.pop(uid, None)
        if result is None:
            if uid not in self._pending:
                raise LocalProtocolError(f"no publish {uid:#x} in flight on this connection")
            return None
        if isinstance(result, PublishRejectedError):
            raise result
        return result

    def answered(self, uid: int) -> bool:
        """Whether publish ``uid`` has an outcome waiting (``outcome`` won't return None)."""
        return uid in self._outcomes

    def all_answered(self, uids: list[int]) -> Callable[[], bool]:
        """A predicate that holds once every publish of ``uids`` has an outcome. Answers come
        in about the order of sending, so it walks forward and never rescans."""
        remaining = iter(uids)
        pending = next(remaining, None)

        def done() -> bool:
            nonlocal pending
            while pending is not None and pending in self._outcomes:
                pending = next(remaining, None)
            return pending is None

        return done

    def numbers(self, uids: list[int]) -> list[int]:
        """The packet numbers of the answered publishes ``uids``, in order, taking every
        outcome; if any was refused, raises the first refusal once all are taken."""
        numbers: list[int] = []
        first_error: Exception | None = None
        for uid in uids:
            try:
                number = self.outcome(uid)
            except PublishRejectedError as exc:
                first_error = first_error or exc
                continue
            assert number is not None, f"publish {uid:#x} is not answered yet"
            numbers.append(number)
        if first_error is not None:
            raise first_error
        return numbers

    @property
    def in_flight(self) -> int:
        """Publishes sent and not yet answered."""
        return len(self._pending)

    def describe(self, key: bytes | None = None) -> int:
        """Ask for the node's state (or one stream's); returns the request id."""
        self.check_open()
        rid = self._rid()
        self._send(Describe(rid, key))
        return rid

    def description(self, rid: int) -> dict[str, object] | None:
        """The answer to Describe ``rid`` once it came (taking it), else None."""
        return self._descriptions.pop(rid, None)

    # --- internals ------------------------------------------------------------------------

    def _rid(self) -> int:
        rid = self._next_rid
        self._next_rid += 1
        return rid

    def _send(self, request: Request) -> None:
        self._out += encode_request(request)

    def leave(self, key: bytes) -> int:
        """``unsubscribe`` by raw stream key."""
        self.check_open()
        rid = self._rid()
        sub = self._subs.get(key)
        if sub is not None:
            sub.leaving = True
        self._unsubscribing[rid] = key
        self._send(Unsubscribe(rid, key))
        return rid

    def _handle(self, event: Event) -> None:
        match event:
            case PublishAcked(key, uid, number):
                if self._settle(uid):
                    self._outcomes[uid] = number
                    self._learn(key, number)
            case PublishCollided():
                self._collided(event)
            case PublishFailed(key, uid, error, reason):
                if self._settle(uid):
                    self._outcomes[uid] = PublishRejectedError(key, uid, error, reason)
            case PublishWindow(key, window):
                if key in self._unanswered:  # (a stream this connection published to)
                    self._windows[key] = window
            case Subscribed():
                sub = self._subs.get(event.key)
                if sub is not None and sub.joined is None:
                    sub.joined = event
                    if event.last_packet is not None:
                        self._learn(event.key, event.last_packet)
            case SubscribeFailed(key, reason):
                sub = self._subs.get(key)
                if sub is not None and sub.joined is None:
                    sub.failed = reason
            case Packet() | Missed() | Epoch() | EpochSkipped() | EpochAborted():
                self._buffer(event)
            case Unsubscribed(rid, key):
                if self._unsubscribing.pop(rid, None) is not None:
                    sub = self._subs.get(key)
                    if sub is not None and sub.leaving:
                        del self._subs[key]
            case Description(rid, state):
                self._descriptions[rid] = state
            case Welcome():
                if not OLDEST_PROTOCOL_VERSION <= event.version <= PROTOCOL_VERSION:
                    self.closed = ClientClosed(f"the node speaks version {event.version}")
                    raise ClientProtocolError(f"Welcome names version {event.version}")
                self.welcome = event
                self._windowed = event.version >= 2
            case ProtocolError(rid, code, reason):
                self.closed = ClientClosed(
                    f"the node closed the connection ({code.name}): {reason}"
                )

    def _collided(self, event: PublishCollided) -> None:
        pending = self._pending.get(event.uid)
        if pending is None:
            return
        if pending.signer is None or pending.retries >= MAX_SIGNED_RETRIES:
            self._settle(event.uid)
            self._outcomes[event.uid] = PublishCollisionError(
                event.key, event.uid, event.number, event.suggested_next
            )
            return
        old = pending.request
        number = self._free_number(old.key, event.suggested_next, event.uid)
        self._next_number[old.key] = self._free_number(old.key, number + 1, event.uid)
        sig = sign_packet(pending.signer, old.key, number, old.epoch, int(old.kind), old.data)
        retry = Publish(
            self._rid(),
            old.key,
            old.uid,
            old.data,
            number,
            old.epoch,
            old.kind,
            sig,
            old.descriptor,
        )
        pending.request = retry
        pending.retries += 1
        self._send(retry)

    def _settle(self, uid: int) -> bool:
        """Take publish ``uid`` out of those in flight; False if it was not."""
        pending = self._pending.pop(uid, None)
        if pending is None:
            return False
        self._unanswered[pending.request.key] -= 1
        return True

    def _free_number(self, key: bytes, start: int, uid: int) -> int:
        """The first number from ``start`` on that no other publish of ours to ``key``
        holds while in flight.

        The root's ``suggested_next`` is the rule: it names the one number the root takes
        next, and any other number collides, so a counter that ran ahead of it (retries
        against a root that crashed and came back numbering lower) must come back down to
        it, or every publish collides for good. What it must not do is take a number our
        own publishes sent after this one hold: those reach the root first and may take
        it (a pipelined publisher whose first number another publisher took), and two of
        ours under one number would collide with each other, round after round.
        """
        held = {
            p.request.packet
            for other, p in self._pending.items()
            if other != uid and p.request.key == key and p.request.packet is not None
        }
        number = start
        while number in held:
            number += 1
        return number

    def _learn(self, key: bytes, number: int) -> None:
        # The next number a signed publish should try: after the newest this client saw.
        if number + 1 > self._next_number.get(key, 0):
            self._next_number[key] = number + 1

    def _buffer(self, event: StreamEvent) -> None:
        sub = self._subs.get(event.key)
        if sub is None or sub.leaving:
            return  # events racing an Unsubscribe, or of a stream we only publish to
        if sub.dropped:
            sub.dropped += 1
            return
        size = 0
        newest: int | None = None
        if isinstance(event, Packet):
            size, newest = len(event.data), event.number
        elif isinstance(event, Epoch):
            size = sum(len(p.data) for p in event.packets)
            newest = event.closed_at
        elif isinstance(event, Missed):
            newest = event.last
        if newest is not None:
            self._learn(event.key, newest)
        full = len(sub.events) >= self.max_buffered_events
        if full or (sub.events and sub.buffered_bytes + size > self.max_buffered_bytes):
            sub.dropped = 1
            self.leave(sub.key)
            sub.leaving = False  # keep it until its reader has seen the overflow
            return
        sub.events.append(event)
        sub.buffered_bytes += size
        if newest is not None:
            sub.last_seen = newest
