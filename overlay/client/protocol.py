"""The client-port wire protocol: how a script talks to its local node. Sans-IO, no sockets.

Theory of operation. A client connection is a TCP byte stream of frames, each a 4-byte
big-endian body length followed by that many bytes of CBOR (``overlay.runtime.framing``, the
framing of peer links): one array ``[type code, ...]``.
The client sends *requests*, each carrying a request id (``rid``) it chose; the node sends
*events*: replies naming the rid they answer (``Welcome``, ``Unsubscribed``, ``Description``,
``ProtocolError``), the core's client events (``overlay.core.events``), which name their
stream key and, for publish answers, the publish uid, and ``PublishWindow``, how many of a
stream's publishes are worth keeping unanswered. The first request must be ``Hello``; the
node answers ``Welcome`` in the newest version both speak or, to a client older than it
serves, ``ProtocolError``.

Decoding is strict in BOTH directions (the node trusts no client, the client trusts no
socket): every field's type and range is checked, CBOR tags and trailing bytes are refused,
and every failure raises ``ClientProtocolError``, the one exception ``decode_request`` and
``decode_event`` ever raise. Canonical encoding is not required (unlike the peer codec in
``overlay.codec``): nothing signs or deduplicates client frames by their bytes, and clients
may be written with any CBOR library.

Invariants: ``decode_request(body(encode_request(r))) == r`` and likewise for events, for
every valid value; ``encode_*`` raise ``LocalProtocolError`` for a value our own code built
wrongly, so an invalid frame never leaves either side.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import cbor2

from overlay.core.events import (
    ClientEvent,
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
from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.messages import (
    KEY_SIZE,
    MAX_DESCRIPTOR,
    MAX_OPEN_EPOCHS,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    SIGNATURE_SIZE,
    PacketKind,
    PublishError,
)
from overlay.runtime.framing import frame

# Where local clients connect unless configured otherwise (next to the peer port, 7701).
DEFAULT_CLIENT_PORT = 7702

# Bumped on any incompatible change. A node answers a Hello in the newest version both
# speak (the one asked, or its own if older), and refuses one older than
# OLDEST_PROTOCOL_VERSION; a client takes a Welcome in any version it speaks. Version 2 adds
# ``PublishWindow``, which a version 1 client would not decode.
PROTOCOL_VERSION = 2
OLDEST_PROTOCOL_VERSION = 1

# The largest publish window a node tells (``PublishWindow``): far above any credit.
MAX_PUBLISH_WINDOW = 2**20

# The largest request is a Publish: a full payload plus key, uid, signature, descriptor and
# CBOR overhead, which 1 KiB covers with room to spare.
MAX_REQUEST_FRAME = MAX_PAYLOAD + 1024

# The largest event is an atomic subscriber's Epoch, which carries a whole closed epoch in one
# frame. An epoch is bounded by the stream's window (4 MiB by default); 16 MiB allows a
# node configured with larger windows. The node sends EpochSkipped for one that cannot fit.
MAX_EVENT_FRAME = 16 * 1024 * 1024

# Human-readable reasons are for people; 1,000 characters is ample, and the encoder clips
# longer ones rather than fail to tell the client anything.
MAX_REASON = 1000

# A client's self-description in Hello, for the node's logs.
MAX_CLIENT_NAME = 100


# What a client is told when the node it talks to has no peer up, beside the error that
# brought it on (a publish's TIMEOUT from the node; a subscribe's confirmation that did not
# come, ``blocking.Client.subscribe``): the likely cause, and where the node says more
# (each failed dial is a warning in its log).
NO_PEERS = "this node has no peer up (are its --connect peers reachable? see its log)"


class ClientProtocolError(RemoteProtocolError):
    """A frame from the other end of a client connection that breaks this protocol. On the
    node: the client is at fault and is disconnected. On the client: the node (or whatever
    answered on that port) is at fault."""


class ErrorCode(IntEnum):
    """Why the node ends a client connection (``ProtocolError.code``)."""

    MALFORMED = 1  # a frame that does not decode as a request
    FRAME_TOO_LARGE = 2  # a length prefix above MAX_REQUEST_FRAME
    BAD_VERSION = 3  # a Hello with a version the node does not speak
    NOT_HELLO = 4  # a request before Hello, or a second Hello
    TOO_SLOW = 5  # the client read too slowly: its outbound queue exceeded its bound
    SHUTDOWN = 6  # the node is stopping
    BUSY = 7  # the node serves as many clients as it may (its max_clients)


# --- requests (client -> node) ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    rid: int
    version: int = PROTOCOL_VERSION
    name: str = ""


@dataclass(frozen=True, slots=True)
class Subscribe:
    rid: int
    key: bytes
    last_seen: int | None = None
    atomic: bool = False
    descriptor: bytes | None = None


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    rid: int
    key: bytes


@dataclass(frozen=True, slots=True)
class Publish:
    """``uid`` is the idempotency id: the root orders a uid once, however often it comes."""

    rid: int
    key: bytes
    uid: int
    data: bytes
    packet: int | None = None
    epoch: int | None = None
    kind: PacketKind = PacketKind.DATA
    sig: bytes | None = None
    descriptor: bytes | None = None


@dataclass(frozen=True, slots=True)
class Describe:
    rid: int
    key: bytes | None = None


Request = Hello | Subscribe | Unsubscribe | Publish | Describe


# --- replies (node -> client), beside the core's ClientEvent ---------------------------------


@dataclass(frozen=True, slots=True)
class Welcome:
    """The answer to Hello: the node's id and the largest request frame it accepts."""

    rid: int
    version: int
    node_id: bytes
    max_request: int


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    """The node processed the Unsubscribe: no event of that stream follows on this
    connection (the byte stream is ordered)."""

    rid: int
    key: bytes


@dataclass(frozen=True, slots=True)
class Description:
    """The answer to Describe: ``NodeHost.describe``'s snapshot, a map with text keys."""

    rid: int
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ProtocolError:
    """The node's last frame on a connection it is closing; ``rid`` is the request at fault
    when it could be read."""

    rid: int | None
    code: ErrorCode
    reason: str


@dataclass(frozen=True, slots=True)
class PublishWindow:
    """How many publishes of stream ``key`` the client should keep unanswered at most: its
    share of what the node sends up its tree at once (its credit, paced by how fast the tree
    answers: ``overlay.core.pace``); the node holds the rest, so more only wait there and
    add to every packet's latency. Sent (version 2 on) once the client publishes to the
    stream, and again, once it has moved, with a publish or answer of the stream; a client
    asked for room keeps to the latest one it was told (``overlay.runtime.publish_windows``)."""

    key: bytes
    window: int


Reply = Welcome | Unsubscribed | Description | ProtocolError | PublishWindow
Event = ClientEvent | Reply


# --- field checks ------------------------------------------------------------------------------


def _int(value: object, low: int, high: int, what: str) -> int:
    # bool is an int subclass in Python; CBOR true/false are never numbers here.
    if type(value) is not int:
        raise ClientProtocolError(f"{what}: expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        shown = value if abs(value) < 10**30 else f"a {value.bit_length()}-bit integer"
        raise ClientProtocolError(f"{what}: {shown} is outside [{low}, {high}]")
    return value


def _opt_int(value: object, low: int, high: int, what: str) -> int | None:
    return None if value is None else _int(value, low, high, what)


def _bytes(value: object, low: int, high: int, what: str) -> bytes:
    if type(value) is not bytes:
        raise ClientProtocolError(f"{what}: expected bytes, got {type(value).__name__}")
    if not low <= len(value) <= high:
        raise ClientProtocolError(f"{what}: {len(value)} bytes is outside [{low}, {high}]")
    return value


def _opt_bytes(value: object, low: int, high: int, what: str) -> bytes | None:
    return None if value is None else _bytes(value, low, high, what)


def _text(value: object, high: int, what: str) -> str:
    if type(value) is not str:
        raise ClientProtocolError(f"{what}: expected text, got {type(value).__name__}")
    if len(value) > high:
        raise ClientProtocolError(f"{what}: {len(value)} characters exceed {high}")
    return value


def _bool(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise ClientProtocolError(f"{what}: expected true or false, got {type(value).__name__}")
    return value


def _kind(value: object, what: str) -> PacketKind:
    number = _int(value, 0, 255, what)
    try:
        return PacketKind(number)
    except ValueError:
        raise ClientProtocolError(f"{what}: unknown packet kind {number}") from None


def _array(value: object, high: int, what: str) -> list[Any]:
    if type(value) is not list:
        raise ClientProtocolError(f"{what}: expected an array, got {type(value).__name__}")
    if len(value) > high:
        raise ClientProtocolError(f"{what}: {len(value)} items exceed {high}")
    return value


def _key(value: object, what: str = "key") -> bytes:
    return _bytes(value, KEY_SIZE, KEY_SIZE, what)


def _rid(value: object) -> int:
    return _int(value, 0, MAX_U64, "rid")


def _clip(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


# --- the codec -----------------------------------------------------------------------------------

# Type codes are part of the wire format: never renumber one, only add. Requests are below
# 64 and events from 64 on, so a frame sent the wrong way round is named as such.
_HELLO, _SUBSCRIBE, _UNSUBSCRIBE, _PUBLISH, _DESCRIBE = 1, 2, 3, 4, 5
_WELCOME, _SUBSCRIBED, _SUBSCRIBE_FAILED, _PACKET, _MISSED, _EPOCH = 64, 65, 66, 67, 68, 69
_EPOCH_SKIPPED, _EPOCH_ABORTED, _ACKED, _COLLIDED, _FAILED = 70, 71, 72, 73, 74
_DESCRIPTION, _UNSUBSCRIBED, _PROTOCOL_ERROR, _PUBLISH_WINDOW = 75, 76, 77, 78


def _packet_fields(packet: Packet) -> list[Any]:
    return [packet.number, packet.data, packet.epoch, int(packet.kind)]


def _event_values(event: Event) -> list[Any]:
    """The CBOR array for ``event`` (its fields are checked by decoding it back, in tests,
    and by the types of the core's events; reasons are clipped)."""
    if type(event) is Packet:  # (nearly every event: before the match's tests of the rest)
        return [_PACKET, event.key, *_packet_fields(event)]
    match event:
        case Welcome(rid, version, node_id, max_request):
            return [_WELCOME, rid, version, node_id, max_request]
        case Subscribed(key, root, last_packet, last_closed, open_epochs):
            epochs = [list(pair) for pair in open_epochs]
            return [_SUBSCRIBED, key, root, last_packet, last_closed, epochs]
        case SubscribeFailed(key, reason):
            return [_SUBSCRIBE_FAILED, key, _clip(reason)]
        case Packet():
            return [_PACKET, event.key, *_packet_fields(event)]
        case Missed(key, first, last):
            return [_MISSED, key, first, last]
        case Epoch(key, epoch, packets, closed_at):
            return [_EPOCH, key, epoch, [_packet_fields(p) for p in packets], closed_at]
        case EpochSkipped(key, epoch, reason):
            return [_EPOCH_SKIPPED, key, epoch, _clip(reason)]
        case EpochAborted(key, epoch):
            return [_EPOCH_ABORTED, key, epoch]
        case PublishAcked(key, uid, number):
            return [_ACKED, key, uid, number]
        case PublishCollided(key, uid, number, suggested_next):
            return [_COLLIDED, key, uid, number, suggested_next]
        case PublishFailed(key, uid, error, reason):
            return [_FAILED, key, uid, int(error), _clip(reason)]
        case Description(rid, state):
            return [_DESCRIPTION, rid, state]
        case Unsubscribed(rid, key):
            return [_UNSUBSCRIBED, rid, key]
        case ProtocolError(rid, code, reason):
            return [_PROTOCOL_ERROR, rid, int(code), _clip(reason)]
        case PublishWindow(key, window):
            return [_PUBLISH_WINDOW, key, window]
    raise LocalProtocolError(f"{type(event).__name__} is not a client-port event")


def _request_values(request: Request) -> list[Any]:
    match request:
        case Hello(rid, version, name):
            return [_HELLO, rid, version, name]
        case Subscribe(rid, key, last_seen, atomic, descriptor):
            return [_SUBSCRIBE, rid, key, last_seen, atomic, descriptor]
        case Unsubscribe(rid, key):
            return [_UNSUBSCRIBE, rid, key]
        case Publish(rid, key, uid, data, packet, epoch, kind, sig, descriptor):
            return [_PUBLISH, rid, key, uid, data, packet, epoch, int(kind), sig, descriptor]
        case Describe(rid, key):
            return [_DESCRIBE, rid, key]
    raise LocalProtocolError(f"{type(request).__name__} is not a client-port request")


def _framed(values: list[Any], limit: int, what: str) -> bytes:
    try:
        body: bytes = cbor2.dumps(values)
    except (cbor2.CBOREncodeError, TypeError, ValueError) as exc:
        raise LocalProtocolError(f"{what} does not encode as CBOR: {exc}") from None
    if len(body) > limit:
        raise FrameTooLargeError(f"{what} encodes to {len(body)} bytes, above {limit}")
    return frame(body)


class FrameTooLargeError(LocalProtocolError):
    """Our own side built a frame above the limit (the node turns such an Epoch into
    EpochSkipped rather than send it)."""


def encode_request(request: Request) -> bytes:
    """One framed request. Its fields pass the node's own checks first (``_request``, what
    ``decode_request`` applies), so a bad value is our error, raised here, never a frame
    the node would refuse. The values are checked as they are, not parsed back from CBOR:
    a publish carries up to 64 KiB, and decoding that again doubled a publisher's cost."""
    values = _request_values(request)
    try:
        _request(values[0], values[1:])
    except ClientProtocolError as exc:
        raise LocalProtocolError(f"invalid {type(request).__name__}: {exc}") from None
    return _framed(values, MAX_REQUEST_FRAME, type(request).__name__)


def encode_event(event: Event, limit: int = MAX_EVENT_FRAME) -> bytes:
    """One framed event. Raises FrameTooLargeError above ``limit``."""
    return _framed(_event_values(event), limit, type(event).__name__)


def _refuse_tag(decoder: Any, tag: Any) -> Any:
    # Unknown tags would decode to CBORTag objects and known ones to bignums, dates...
    raise ClientProtocolError(f"CBOR tag {tag.tag} is not allowed")


def _parse(body: bytes, limit: int) -> tuple[int, list[Any]]:
    if len(body) > limit:
        raise ClientProtocolError(f"a frame of {len(body)} bytes exceeds the limit of {limit}")
    stream = io.BytesIO(body)
    try:
        value = cbor2.CBORDecoder(stream, tag_hook=_refuse_tag).decode()
    except ClientProtocolError:
        raise
    except (cbor2.CBORError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # The parser is third-party code fed hostile bytes: whatever it raises for them
        # becomes our one error type.
        raise ClientProtocolError(f"not valid CBOR: {exc}") from None
    if stream.tell() != len(body):
        raise ClientProtocolError(f"{len(body) - stream.tell()} bytes follow the CBOR value")
    if type(value) is not list or not value:
        raise ClientProtocolError(f"expected a non-empty CBOR array, got {type(value).__name__}")
    code = value[0]
    if type(code) is not int:
        raise ClientProtocolError(f"the type code is {type(code).__name__}, not an integer")
    return code, value[1:]


def _arity(name: str, fields: list[Any], count: int) -> None:
    if len(fields) != count:
        raise ClientProtocolError(f"{name} needs {count} fields, got {len(fields)}")


def decode_request(body: bytes) -> Request:
    """The request in one frame body (without its length prefix), or ClientProtocolError
    naming what is wrong."""
    code, f = _parse(body, MAX_REQUEST_FRAME)
    return _request(code, f)


def _request(code: int, f: list[Any]) -> Request:
    """The request of type ``code`` with fields ``f``, every one checked."""
    if code == _HELLO:
        _arity("Hello", f, 3)
        return Hello(_rid(f[0]), _int(f[1], 0, MAX_U64, "Hello.version"), _name(f[2]))
    if code == _SUBSCRIBE:
        _arity("Subscribe", f, 5)
        return Subscribe(
            _rid(f[0]),
            _key(f[1], "Subscribe.key"),
            _opt_int(f[2], -1, MAX_PACKET, "Subscribe.last_seen"),  # -1: from packet 0
            _bool(f[3], "Subscribe.atomic"),
            _opt_bytes(f[4], 33, MAX_DESCRIPTOR, "Subscribe.descriptor"),
        )
    if code == _UNSUBSCRIBE:
        _arity("Unsubscribe", f, 2)
        return Unsubscribe(_rid(f[0]), _key(f[1], "Unsubscribe.key"))
    if code == _PUBLISH:
        _arity("Publish", f, 9)
        return Publish(
            _rid(f[0]),
            _key(f[1], "Publish.key"),
            _int(f[2], 0, MAX_U64, "Publish.uid"),
            _bytes(f[3], 0, MAX_PAYLOAD, "Publish.data"),
            _opt_int(f[4], 0, MAX_PACKET, "Publish.packet"),
            _opt_int(f[5], 0, MAX_PACKET, "Publish.epoch"),
            _kind(f[6], "Publish.kind"),
            _opt_bytes(f[7], SIGNATURE_SIZE, SIGNATURE_SIZE, "Publish.sig"),
            _opt_bytes(f[8], 33, MAX_DESCRIPTOR, "Publish.descriptor"),
        )
    if code == _DESCRIBE:
        _arity("Describe", f, 2)
        return Describe(_rid(f[0]), _opt_bytes(f[1], KEY_SIZE, KEY_SIZE, "Describe.key"))
    if code in _EVENT_DECODERS:
        raise ClientProtocolError(f"type code {code} is an event, sent to the node as a request")
    raise ClientProtocolError(f"unknown request type {code}")


def _name(value: object) -> str:
    return _text(value, MAX_CLIENT_NAME, "Hello.name")


def _reason(value: object, what: str) -> str:
    return _text(value, MAX_REASON, what)


def _packet(key: bytes, f: list[Any], what: str) -> Packet:
    _arity(what, f, 4)
    return Packet(
        key,
        _int(f[0], 0, MAX_PACKET, f"{what}.number"),
        _bytes(f[1], 0, MAX_PAYLOAD, f"{what}.data"),
        _opt_int(f[2], 0, MAX_PACKET, f"{what}.epoch"),
        _kind(f[3], f"{what}.kind"),
    )


def _subscribed(f: list[Any]) -> Subscribed:
    _arity("Subscribed", f, 5)
    starts = []
    for pair in _array(f[4], MAX_OPEN_EPOCHS, "Subscribed.open_epochs"):
        items = _array(pair, 2, "Subscribed.open_epochs item")
        _arity("Subscribed.open_epochs item", items, 2)
        what = "Subscribed.open_epochs"
        starts.append((_int(items[0], 0, MAX_PACKET, what), _int(items[1], 0, MAX_PACKET, what)))
    return Subscribed(
        _key(f[0], "Subscribed.key"),
        _bool(f[1], "Subscribed.root"),
        _opt_int(f[2], 0, MAX_PACKET, "Subscribed.last_packet"),
        _opt_int(f[3], 0, MAX_PACKET, "Subscribed.last_closed"),
        tuple(starts),
    )


def _epoch(f: list[Any]) -> Epoch:
    _arity("Epoch", f, 4)
    key = _key(f[0], "Epoch.key")
    packets = _array(f[2], MAX_EVENT_FRAME, "Epoch.packets")
    return Epoch(
        key,
        _int(f[1], 0, MAX_PACKET, "Epoch.epoch"),
        tuple(_packet(key, _array(p, 4, "Epoch.packet"), "Epoch.packet") for p in packets),
        _int(f[3], 0, MAX_PACKET, "Epoch.closed_at"),
    )


def _publish_error(value: object) -> PublishError:
    number = _int(value, 0, 255, "PublishFailed.error")
    try:
        return PublishError(number)
    except ValueError:
        raise ClientProtocolError(f"PublishFailed.error: unknown error code {number}") from None


def _error_code(value: object) -> ErrorCode:
    number = _int(value, 0, 255, "ProtocolError.code")
    try:
        return ErrorCode(number)
    except ValueError:
        raise ClientProtocolError(f"ProtocolError.code: unknown code {number}") from None


def _state(value: object) -> dict[str, Any]:
    if type(value) is not dict or not all(type(k) is str for k in value):
        raise ClientProtocolError("Description.state: expected a map with text keys")
    return value


def _n(f: list[Any], i: int, what: str) -> int:
    return _int(f[i], 0, MAX_PACKET, what)


_EVENT_DECODERS: dict[int, tuple[str, int, Callable[[list[Any]], Event]]] = {
    _WELCOME: (
        "Welcome",
        4,
        lambda f: Welcome(
            _rid(f[0]),
            _int(f[1], 0, MAX_U64, "Welcome.version"),
            _bytes(f[2], 1, 64, "Welcome.node_id"),
            _int(f[3], 0, 2**32 - 1, "Welcome.max_request"),
        ),
    ),
    _SUBSCRIBE_FAILED: (
        "SubscribeFailed",
        2,
        lambda f: SubscribeFailed(_key(f[0]), _reason(f[1], "SubscribeFailed.reason")),
    ),
    _MISSED: (
        "Missed",
        3,
        lambda f: Missed(_key(f[0]), _n(f, 1, "Missed.first"), _n(f, 2, "Missed.last")),
    ),
    _EPOCH_SKIPPED: (
        "EpochSkipped",
        3,
        lambda f: EpochSkipped(
            _key(f[0]), _n(f, 1, "EpochSkipped.epoch"), _reason(f[2], "EpochSkipped.reason")
        ),
    ),
    _EPOCH_ABORTED: (
        "EpochAborted",
        2,
        lambda f: EpochAborted(_key(f[0]), _n(f, 1, "EpochAborted.epoch")),
    ),
    _ACKED: (
        "PublishAcked",
        3,
        lambda f: PublishAcked(
            _key(f[0]), _int(f[1], 0, MAX_U64, "PublishAcked.uid"), _n(f, 2, "PublishAcked.number")
        ),
    ),
    _COLLIDED: (
        "PublishCollided",
        4,
        lambda f: PublishCollided(
            _key(f[0]),
            _int(f[1], 0, MAX_U64, "PublishCollided.uid"),
            _n(f, 2, "PublishCollided.number"),
            _n(f, 3, "PublishCollided.suggested_next"),
        ),
    ),
    _FAILED: (
        "PublishFailed",
        4,
        lambda f: PublishFailed(
            _key(f[0]),
            _int(f[1], 0, MAX_U64, "PublishFailed.uid"),
            _publish_error(f[2]),
            _reason(f[3], "PublishFailed.reason"),
        ),
    ),
    _DESCRIPTION: ("Description", 2, lambda f: Description(_rid(f[0]), _state(f[1]))),
    _UNSUBSCRIBED: (
        "Unsubscribed",
        2,
        lambda f: Unsubscribed(_rid(f[0]), _key(f[1], "Unsubscribed.key")),
    ),
    _PROTOCOL_ERROR: (
        "ProtocolError",
        3,
        lambda f: ProtocolError(
            None if f[0] is None else _rid(f[0]),
            _error_code(f[1]),
            _reason(f[2], "ProtocolError.reason"),
        ),
    ),
    _PUBLISH_WINDOW: (
        "PublishWindow",
        2,
        lambda f: PublishWindow(
            _key(f[0], "PublishWindow.key"),
            _int(f[1], 1, MAX_PUBLISH_WINDOW, "PublishWindow.window"),
        ),
    ),
}


# A packet kind by its value on the wire.
_KIND_OF = {int(kind): kind for kind in PacketKind}


def _plain_packet(f: list[Any]) -> Packet | None:
    """The Packet event of fields ``f`` when each is plainly valid, as nearly every one a
    subscriber reads is, tested in one expression; else None, and ``_packet`` checks them
    one by one to name what is wrong. It accepts exactly what ``_packet`` does."""
    if len(f) != 5:
        return None
    key, number, data, epoch, kind = f
    if (
        type(key) is bytes
        and len(key) == KEY_SIZE
        and type(number) is int
        and 0 <= number <= MAX_PACKET
        and type(data) is bytes
        and len(data) <= MAX_PAYLOAD
        and (epoch is None or (type(epoch) is int and 0 <= epoch <= MAX_PACKET))
        and type(kind) is int
        and kind in _KIND_OF
    ):
        return Packet(key, number, data, epoch, _KIND_OF[kind])
    return None


def decode_event(body: bytes, limit: int = MAX_EVENT_FRAME) -> Event:
    """The event in one frame body (without its length prefix), or ClientProtocolError."""
    code, f = _parse(body, limit)
    if code == _PACKET:
        packet = _plain_packet(f)
        if packet is not None:
            return packet
        _arity("Packet", f, 5)
        return _packet(_key(f[0], "Packet.key"), f[1:], "Packet")
    if code == _SUBSCRIBED:
        return _subscribed(f)
    if code == _EPOCH:
        return _epoch(f)
    entry = _EVENT_DECODERS.get(code)
    if entry is None:
        if _HELLO <= code <= _DESCRIBE:
            raise ClientProtocolError(f"type code {code} is a request, sent to a client")
        raise ClientProtocolError(f"unknown event type {code}")
    name, count, build = entry
    _arity(name, f, count)
    return build(f)
