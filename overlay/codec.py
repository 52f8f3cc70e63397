"""The one wire codec: a message is the CBOR array ``[type code, field, field, ...]``.

Decoding is strict. A frame must be at most ``MAX_FRAME`` bytes, hold exactly one CBOR array,
start with a known type code and carry exactly that type's fields, each valid for its declared
kind (see ``overlay.messages.Kind``). Anything else raises ``DecodeError``, the only exception
``decode`` ever raises, so a driver can drop the offending peer and nobody else.

The encoding is canonical: a frame is accepted only if it is byte for byte what ``encode``
produces for the decoded message. That one rule refuses trailing bytes, CBOR tags (including
the ones the parser would silently interpret, such as bignums), indefinite lengths and
non-minimal integers, and it gives every message exactly one encoding, which signatures and
duplicate detection can rely on.

Positional arrays rather than maps keep frames small (a SubscribeData's overhead is a few
bytes) and make "unknown field" impossible by construction.
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from enum import IntEnum
from itertools import chain
from typing import Any

import cbor2

from overlay.compiled_checks import (
    PURE_PYTHON_FORCED,
    BundleDecoder,
    Decoder,
    Encoder,
    compile_bundle_decoder,
    compile_decoder,
    compile_encoder,
    compile_run_items_decoder,
    compile_run_items_encoder,
    run_item_kinds,
)
from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.messages import (
    BUNDLED,
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_BUNDLE,
    MAX_DESCRIPTOR,
    MAX_FRAME,
    MAX_NEIGHBOURS,
    MAX_OPEN_EPOCHS,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_RUN,
    MAX_U64,
    MAX_WIRE_HTL,
    MESSAGE_TYPES,
    RUN_ITEM_SIZE,
    SIGNATURE_SIZE,
    VOUCH_SIZE,
    Bundle,
    Kind,
    Message,
    PacketKind,
    SubscribeData,
    SubscribeRun,
    field_kinds,
)

# The canonical check in C (``overlay/_canonical.c``), where the install could compile it: it
# says True only for a frame that encoding its value again would give back, so ``decode``
# need not do that; for any other frame, and without it, ``decode`` encodes and compares.
_native_is_canonical: Callable[[bytes], bool] | None
try:
    from overlay._canonical import is_canonical as _native_is_canonical
except ImportError:  # (installed without a C compiler)
    _native_is_canonical = None
CANONICAL_BUILT = _native_is_canonical is not None
_is_canonical = None if PURE_PYTHON_FORCED else _native_is_canonical


class DecodeError(RemoteProtocolError):
    """A frame that is not a valid message. The peer that sent it is at fault."""


class EncodeError(LocalProtocolError, ValueError):
    """A message our own code built with an invalid field: a local bug, not a peer's fault."""


def _int_in(low: int, high: int) -> Callable[[object], object]:
    def check(value: object) -> object:
        # bool is an int subclass in Python; CBOR true/false are never numbers here.
        if type(value) is not int:
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        if not low <= value <= high:
            # A hostile bignum may have more digits than Python will print.
            shown = value if abs(value) < 10**30 else f"a {value.bit_length()}-bit integer"
            raise ValueError(f"{shown} is outside [{low}, {high}]")
        return value

    return check


def _bytes_of(min_len: int, max_len: int) -> Callable[[object], object]:
    def check(value: object) -> object:
        if type(value) is not bytes:
            raise ValueError(f"expected bytes, got {type(value).__name__}")
        if not min_len <= len(value) <= max_len:
            if min_len == max_len:
                raise ValueError(f"expected {min_len} bytes, got {len(value)}")
            raise ValueError(f"length {len(value)} is outside [{min_len}, {max_len}]")
        return value

    return check


def _optional(check: Callable[[object], object]) -> Callable[[object], object]:
    def check_optional(value: object) -> object:
        return None if value is None else check(value)

    return check_optional


def _location(value: object) -> object:
    if type(value) is not float:
        raise ValueError(f"expected a float location, got {type(value).__name__}")
    if not (math.isfinite(value) and 0.0 <= value < 1.0):
        raise ValueError(f"location {value!r} is outside [0, 1)")
    return value


def _packet_kind(value: object) -> object:
    # The decoder sees a plain int, and so does the encoder (``encode`` unwraps enums).
    if not isinstance(value, int) or type(value) is bool:
        raise ValueError(f"expected a packet kind, got {type(value).__name__}")
    try:
        return PacketKind(value)
    except ValueError:
        raise ValueError(f"unknown packet kind {value}") from None


def _flag(value: object) -> object:
    if type(value) is not bool:
        raise ValueError(f"expected true or false, got {type(value).__name__}")
    return value


def _array(value: object, limit: int, what: str, items_are: str) -> Sequence[object]:
    """``value`` as a decoded array of at most ``limit`` items, or ValueError naming
    ``what`` it should hold (``items_are``: how the limit's message names them)."""
    # Decoded arrays are lists; messages hold tuples so they stay immutable and hashable.
    if type(value) not in (list, tuple):
        raise ValueError(f"expected an array of {what}, got {type(value).__name__}")
    items: Sequence[object] = value  # type: ignore[assignment]
    if len(items) > limit:
        raise ValueError(f"{len(items)} {items_are} exceed the limit of {limit}")
    return items


def _locations(value: object) -> object:
    items = _array(value, MAX_NEIGHBOURS, "locations", "locations")
    return tuple(_location(item) for item in items)


def _vouches(value: object) -> object:
    items = _array(value, MAX_NEIGHBOURS, "vouches", "vouches")
    for item in items:
        if type(item) is not bytes or len(item) not in (0, VOUCH_SIZE):
            raise ValueError(f"a vouch is empty or {VOUCH_SIZE} bytes")
    return tuple(items)


_PACKET = _int_in(0, MAX_PACKET)
_KEY = _bytes_of(KEY_SIZE, KEY_SIZE)


def _epoch_starts(value: object) -> object:
    items = _array(value, MAX_OPEN_EPOCHS, "epoch starts", "open epochs")
    starts = []
    for item in items:
        pair: list[object] | tuple[object, ...] = item  # type: ignore[assignment]
        if type(item) not in (list, tuple) or len(pair) != 2:
            raise ValueError("an epoch start is an [epoch, first packet] pair")
        starts.append((_PACKET(pair[0]), _PACKET(pair[1])))
    return tuple(starts)


# The kinds of one packet of a SubscribeRun: SubscribeData's fields after its key and number.
_RUN_ITEM_KINDS = run_item_kinds()


def _run_items(value: object) -> object:
    """A run's packets from the flat array a frame holds (``Kind.RUN``): a tuple each."""
    flat = _array(value, MAX_RUN * RUN_ITEM_SIZE, "packets", "packet values")
    if not flat:
        raise ValueError("a run holds at least one packet")
    if len(flat) % RUN_ITEM_SIZE:
        raise ValueError(f"{len(flat)} values are not whole packets of {RUN_ITEM_SIZE} fields")
    run = _RUN_ITEMS_DECODER(flat)  # type: ignore[arg-type]
    if run is not None:
        return run
    checks = _RUN_ITEM_CHECKS
    checked = []
    for index in range(len(flat) // RUN_ITEM_SIZE):
        fields = flat[index * RUN_ITEM_SIZE : (index + 1) * RUN_ITEM_SIZE]
        try:
            checked.append(tuple(check(field) for check, field in zip(checks, fields, strict=True)))
        except ValueError as exc:
            raise ValueError(f"packet {index}: {exc}") from None
    return tuple(checked)


def _flat_run(value: object) -> object:
    """A run's packets as a message holds them, a tuple each, as the wire's flat array (for
    ``_run_items`` to check); a value that is no such thing is returned as it is, for the
    check to refuse, unless a packet is not an array of its fields."""
    if type(value) not in (list, tuple):
        return value
    packets: Sequence[object] = value  # type: ignore[assignment]
    flat: list[object] = []
    for index, item in enumerate(packets):
        fields: Sequence[object] = item  # type: ignore[assignment]
        if type(item) not in (list, tuple) or len(fields) != RUN_ITEM_SIZE:
            raise ValueError(f"packet {index} is not an array of {RUN_ITEM_SIZE} fields")
        flat += fields
        kind = fields[_RUN_KIND_AT]
        if isinstance(kind, IntEnum):  # (the member the code made; any other field's is refused)
            flat[len(flat) - RUN_ITEM_SIZE + _RUN_KIND_AT] = int(kind)
    return flat


# Of each type a Bundle may carry: how many values one message adds to the bundle's flat
# array (its fields but the key, which the bundle holds once).
_BUNDLED_VALUES = {cls.TYPE: len(dataclasses.fields(cls)) - 1 for cls in BUNDLED}
assert all(dataclasses.fields(cls)[1].name == "key" for cls in BUNDLED), "a bundled key moved"


def _bundle_messages(value: object) -> object:
    """A bundle's messages from the flat array a frame holds (``Kind.BUNDLE``): each
    checked as that message alone would be (``_message_of``), or ValueError naming it."""
    flat = _array(value, 2 + MAX_BUNDLE * max(_BUNDLED_VALUES.values()), "messages", "values")
    if len(flat) < 2:
        raise ValueError("a bundle starts with its messages' type code and key")
    code, key = flat[0], flat[1]
    size = _BUNDLED_VALUES.get(code) if type(code) is int else None
    if size is None:
        raise ValueError(f"messages of type {code!r} are not bundled")
    _KEY(key)
    values = len(flat) - 2
    if values % size:
        raise ValueError(f"{values} values are not whole messages of {size}")
    count = values // size
    if not 2 <= count <= MAX_BUNDLE:
        raise ValueError(f"a bundle holds 2 to {MAX_BUNDLE} messages, not {count}")
    fast = _BUNDLE_DECODERS[code]  # type: ignore[index]
    built = None if fast is None else fast(flat, key)  # type: ignore[arg-type]
    if built is not None and (
        code not in _TIED or all(each.inconsistency() is None for each in built)
    ):
        return tuple(built)
    messages = []
    for index in range(count):
        at = 2 + index * size
        try:
            messages.append(_message_of([code, flat[at], key, *flat[at + 1 : at + size]]))
        except DecodeError as exc:
            raise ValueError(f"message {index}: {exc}") from None
    return tuple(messages)


# Each kind's check: the value as the message holds it, or ValueError saying what is wrong.
FIELD_CHECKS: dict[Kind, Callable[[object], object]] = {
    Kind.UID: _int_in(0, MAX_U64),
    Kind.KEY: _KEY,
    Kind.HTL: _int_in(0, MAX_WIRE_HTL),
    Kind.LOCATION: _location,
    Kind.PACKET: _PACKET,
    Kind.OPT_PACKET: _optional(_PACKET),
    Kind.DATA: _bytes_of(0, MAX_PAYLOAD),
    Kind.OPT_SIGNATURE: _optional(_bytes_of(SIGNATURE_SIZE, SIGNATURE_SIZE)),
    Kind.DIGEST: _bytes_of(DIGEST_SIZE, DIGEST_SIZE),
    Kind.PACKET_KIND: _packet_kind,
    Kind.BOOT_ID: _int_in(0, MAX_U64),
    Kind.COUNT: _int_in(0, 2**32 - 1),
    Kind.LOCATIONS: _locations,
    Kind.OPT_DESCRIPTOR: _optional(_bytes_of(33, MAX_DESCRIPTOR)),
    Kind.EPOCH_STARTS: _epoch_starts,
    Kind.OPT_UID: _optional(_int_in(0, MAX_U64)),
    Kind.OPT_LOCATION: _optional(_location),
    Kind.OPT_SEEN: _optional(_int_in(-1, MAX_PACKET)),
    Kind.FLAG: _flag,
    Kind.VOUCHES: _vouches,
    Kind.RUN: _run_items,
    Kind.BUNDLE: _bundle_messages,
}
_RUN_ITEM_CHECKS = tuple(FIELD_CHECKS[kind] for kind in _RUN_ITEM_KINDS)
_RUN_KIND_AT = _RUN_ITEM_KINDS.index(Kind.PACKET_KIND)
_RUN_ITEMS_DECODER = compile_run_items_decoder()
_RUN_ITEMS_ENCODER = compile_run_items_encoder()

# type code -> (class, ((field name, check), ...)), built once from the declarations.
_SCHEMA: dict[int, tuple[type[Message], tuple[tuple[str, Callable[[object], object]], ...]]] = {
    cls.TYPE: (cls, tuple((name, FIELD_CHECKS[kind]) for name, kind in field_kinds(cls)))
    for cls in MESSAGE_TYPES
}
assert len(_SCHEMA) == len(MESSAGE_TYPES), "two message classes share a type code"
# The same checks compiled per class (``overlay.compiled_checks``): tried first, and when one
# does not accept, the field-by-field path above decides and names the fault.
_DECODERS: dict[int, Decoder | None] = {cls.TYPE: compile_decoder(cls) for cls in MESSAGE_TYPES}
_ENCODERS: dict[int, Encoder | None] = {cls.TYPE: compile_encoder(cls) for cls in MESSAGE_TYPES}


def _encode_run(message: Message) -> list[Any] | None:
    """A SubscribeRun's CBOR array, if every field is plainly valid (else None: the codec's
    path decides, and names the fault), as a compiled encoder would make it."""
    key, first, packets = message.key, message.first, message.packets  # type: ignore[attr-defined]
    if not (
        type(key) is bytes
        and len(key) == KEY_SIZE
        and type(first) is int
        and 0 <= first <= MAX_PACKET
        and type(packets) is tuple
        and 0 < len(packets) <= MAX_RUN
    ):
        return None
    if _checked_runs.pop(id(message), None) is message:
        items: list[Any] | None = list(chain.from_iterable(packets))  # (see ``note_checked``)
    else:
        items = _RUN_ITEMS_ENCODER(packets)
    return None if items is None else [SubscribeRun.TYPE, key, first, items]


# Runs made of packets each checked where it entered this node (``note_checked``), by id,
# each kept alive here so that its id is not reused while listed. A run is noted as it is
# sent, and encoded at the end of that step; one whose link went meanwhile stays until
# pushed out. Bounded (a few steps' runs; at most 16 MiB of payloads held): past the
# bound the oldest is forgotten, and checked in full if it is encoded, as any other run.
_CHECKED_RUNS_SIZE = 256
_checked_runs: dict[int, Message] = {}


def note_checked(run: SubscribeRun) -> None:
    """``run``'s packets were each checked where they entered this node: decoded from a
    peer's frame, or a local client's publish checked at the root (``batches.batch_of``),
    with a mark the node worked out. Its next ``encode`` checks the run's own fields but
    not each packet again, as validating once where a packet enters the overlay is enough
    (about a third of a microsecond a packet, a tenth of what a root spends on one). A
    packet kind may be the ``PacketKind`` member (an int: CBOR writes its value)."""
    _checked_runs[id(run)] = run
    if len(_checked_runs) > _CHECKED_RUNS_SIZE:
        _checked_runs.pop(next(iter(_checked_runs)), None)


_ENCODERS[SubscribeRun.TYPE] = _encode_run


def _encode_bundle(message: Message) -> list[Any]:
    """A Bundle's CBOR array: each message's values, checked as ``encode`` checks that
    message alone, but its key; EncodeError if the messages are not 2 to ``MAX_BUNDLE`` of
    one bundled type and one stream, or one of them does not encode."""
    messages: Any = message.messages  # type: ignore[attr-defined]
    what = "Bundle.messages:"
    if type(messages) is not tuple:
        raise EncodeError(f"{what} expected an array of messages, got {type(messages).__name__}")
    if not 2 <= len(messages) <= MAX_BUNDLE:
        raise EncodeError(f"{what} a bundle holds 2 to {MAX_BUNDLE} messages, not {len(messages)}")
    cls = type(messages[0])
    code = getattr(cls, "TYPE", cls.__name__)
    if code not in _BUNDLED_VALUES or _SCHEMA[code][0] is not cls:
        raise EncodeError(f"{what} messages of type {code} are not bundled")
    key = messages[0].key
    flat: list[Any] = [code, key]
    for index, each in enumerate(messages):
        if type(each) is not cls or getattr(each, "key", None) != key:
            raise EncodeError(f"{what} message {index} is another type's or stream's")
        try:
            values = _message_values(each)
        except EncodeError as exc:
            raise EncodeError(f"{what} message {index}: {exc}") from None
        flat.append(values[1])
        flat += values[3:]
    return [Bundle.TYPE, flat]


_ENCODERS[Bundle.TYPE] = _encode_bundle
# Each bundled class's messages checked and built in one loop (``overlay.compiled_checks``):
# tried first, and when one does not accept, each message's own path decides and names
# the fault.
_BUNDLE_DECODERS: dict[int, BundleDecoder | None] = {
    cls.TYPE: compile_bundle_decoder(cls) for cls in BUNDLED
}
# The type codes of messages whose fields depend on one another (``Message.inconsistency``).
_TIED = frozenset(
    cls.TYPE for cls in MESSAGE_TYPES if cls.inconsistency is not Message.inconsistency
)

# The messages a relay sends on unchanged, to every child: worth remembering their frames.
_FORWARDED = frozenset((SubscribeData.TYPE, SubscribeRun.TYPE))


def _refuse_tag(decoder: Any, tag: Any) -> Any:
    # Unknown CBOR tags would otherwise decode to CBORTag objects; no message uses tags.
    raise DecodeError(f"CBOR tag {tag.tag} is not allowed")


# The last few messages ``decode`` returned, with their frames (message objects are kept
# alive here, so their ids cannot be reused while listed). A relay forwards the very
# SubscribeData object it decoded to each of its children; its frame is already known to be
# canonical and valid, so ``encode`` hands it back instead of validating and encoding again.
# Decoding, handling and forwarding one message happen in one synchronous step of a driver,
# so a handful of entries suffices.
# (An OrderedDict: its eviction is one atomic call, should two threads each run a node.)
_RECENT_SIZE = 8
_recent: OrderedDict[int, tuple[Message, bytes]] = OrderedDict()


def _remember(message: Message, frame: bytes) -> None:
    _recent[id(message)] = (message, frame)
    if len(_recent) > _RECENT_SIZE:
        _recent.popitem(last=False)


def encode(message: Message) -> bytes:
    """Encode ``message`` as one frame body. Validates fields so a local bug never reaches
    the wire as a frame that every peer would reject; of a run the node made of packets it
    holds (``note_checked``), each packet was validated where it entered."""
    known = _recent.get(id(message))
    if known is not None and known[0] is message:
        return known[1]
    frame: bytes = cbor2.dumps(_message_values(message))
    if len(frame) > MAX_FRAME:
        raise EncodeError(f"{type(message).__name__} encodes to {len(frame)} bytes > {MAX_FRAME}")
    return frame


def _message_values(message: Message) -> list[Any]:
    """``message`` as its CBOR array, every field checked; EncodeError names a bad one."""
    try:
        cls, checks = _SCHEMA[message.TYPE]
    except KeyError:
        raise EncodeError(f"{type(message).__name__} is not a wire message") from None
    if type(message) is not cls:
        raise EncodeError(f"{type(message).__name__} does not match type code {message.TYPE}")
    fast = _ENCODERS[cls.TYPE]
    values = None if fast is None else fast(message)
    if values is None:
        values = _checked_values(cls, checks, message)
    if cls.TYPE in _TIED:
        problem = message.inconsistency()
        if problem is not None:
            raise EncodeError(f"{cls.__name__}: {problem}")
    return values


def _checked_values(
    cls: type[Message],
    checks: tuple[tuple[str, Callable[[object], object]], ...],
    message: Message,
) -> list[object]:
    """``message`` as the CBOR array, each field checked; EncodeError names a bad one."""
    values: list[object] = [cls.TYPE]
    for name, check in checks:
        value = getattr(message, name)
        if check is _run_items:
            try:
                value = _flat_run(value)
            except ValueError as exc:
                raise EncodeError(f"{cls.__name__}.{name}: {exc}") from None
        if isinstance(value, IntEnum):
            # An enum member (a PacketKind, a PublishError code) goes on the wire as its
            # plain value, whichever int field it fills: the code that builds a message
            # need not remember which fields the wire keeps as bare ints.
            value = int(value)
        try:
            check(value)
        except ValueError as exc:
            raise EncodeError(f"{cls.__name__}.{name}: {exc}") from None
        if isinstance(value, tuple):
            value = [list(item) if isinstance(item, tuple) else item for item in value]
        values.append(value)
    return values


def decode(frame: bytes) -> Message:
    """Decode one frame body into a message, or raise ``DecodeError`` saying what is wrong."""
    if len(frame) > MAX_FRAME:
        raise DecodeError(f"frame of {len(frame)} bytes exceeds the limit of {MAX_FRAME}")
    try:
        value = cbor2.loads(frame, tag_hook=_refuse_tag)
    except DecodeError:
        raise
    except (cbor2.CBORError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # The CBOR parser is third-party code fed hostile bytes: whatever it raises for them
        # becomes our one error type, so callers never see a parser-specific exception.
        raise DecodeError(f"not valid CBOR: {exc}") from None
    if type(value) is not list or not value:
        raise DecodeError(f"expected a non-empty CBOR array, got {type(value).__name__}")
    message = _message_of(value)
    if _is_canonical is None or not _is_canonical(frame):
        canonical = cbor2.dumps(value)
        if canonical != frame:
            name = type(message).__name__
            if frame.startswith(canonical):
                raise DecodeError(f"{len(frame) - len(canonical)} bytes follow the {name}")
            raise DecodeError(f"{name} is not in canonical encoding (tags, padding, widths)")
    code = value[0]
    if code in _FORWARDED:
        _remember(message, bytes(frame))
    return message


def _message_of(value: list[Any]) -> Message:
    """The message a decoded CBOR array holds, each field checked and the fields consistent
    with one another, or DecodeError saying what is wrong."""
    code = value[0]
    if type(code) is not int or code not in _SCHEMA:
        raise DecodeError(f"unknown message type {code!r}")
    cls, checks = _SCHEMA[code]
    if len(value) != len(checks) + 1:
        raise DecodeError(f"{cls.__name__} needs {len(checks)} fields, got {len(value) - 1}")
    fast = _DECODERS[code]
    message = None if fast is None else fast(value)
    if message is None:
        fields: dict[str, object] = {}
        for (name, check), raw in zip(checks, value[1:], strict=True):
            try:
                fields[name] = check(raw)
            except ValueError as exc:
                raise DecodeError(f"{cls.__name__}.{name}: {exc}") from None
        message = cls(**fields)
    if code in _TIED:
        problem = message.inconsistency()
        if problem is not None:
            raise DecodeError(f"{cls.__name__}: {problem}")
    return message
