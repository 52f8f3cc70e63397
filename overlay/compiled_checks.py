"""Each message class's field checks, compiled into one function per class and direction.

Why. ``overlay.codec`` checks a message field by field, calling one check function per
field: about ten Python calls per SubscribeData, paid at every hop for every packet, and most
of the time a codec spends beyond CBOR itself. A check here is one boolean expression over all
of a message's fields, generated from the same declarations (``overlay.messages.Kind``), in
the way ``dataclasses`` generates ``__init__``.

The rule that keeps it safe: a compiled check only ever *accepts*. When it says yes, every
field satisfies its kind exactly as the codec's own check would have it (the tests compare
the two on every kind's edge values and on random values); when it says anything else, the
codec runs its field-by-field checks, which find the fault and name it. So error messages,
and the decision for any input, are the codec's; only the time to accept valid input changes.

Kinds with no simple expression (the arrays: ``LOCATIONS``, ``EPOCH_STARTS``) are not
compiled: a class with such a field has no compiled check, and the codec's path serves it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from overlay.messages import (
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_DESCRIPTOR,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    MAX_WIRE_HTL,
    SIGNATURE_SIZE,
    Kind,
    Message,
    PacketKind,
    field_kinds,
)


def _int_in(low: int, high: int) -> str:
    return f"(type({{v}}) is int and {low} <= {{v}} <= {high})"


def _bytes_of(low: int, high: int) -> str:
    if low == high:
        return f"(type({{v}}) is bytes and len({{v}}) == {low})"
    return f"(type({{v}}) is bytes and {low} <= len({{v}}) <= {high})"


def _optional(expression: str) -> str:
    return f"({{v}} is None or {expression})"


# A location is a float in [0, 1): NaN fails both comparisons and an infinity one of them, so
# the range test alone also says it is finite.
_LOCATION = "(type({v}) is float and 0.0 <= {v} < 1.0)"

# Each kind's test of a wire value (``{v}``), as the decoder sees it: plain ints, bytes, floats.
_TESTS: dict[Kind, str] = {
    Kind.UID: _int_in(0, MAX_U64),
    Kind.KEY: _bytes_of(KEY_SIZE, KEY_SIZE),
    Kind.HTL: _int_in(0, MAX_WIRE_HTL),
    Kind.LOCATION: _LOCATION,
    Kind.PACKET: _int_in(0, MAX_PACKET),
    Kind.OPT_PACKET: _optional(_int_in(0, MAX_PACKET)),
    Kind.DATA: _bytes_of(0, MAX_PAYLOAD),
    Kind.OPT_SIGNATURE: _optional(_bytes_of(SIGNATURE_SIZE, SIGNATURE_SIZE)),
    Kind.DIGEST: _bytes_of(DIGEST_SIZE, DIGEST_SIZE),
    Kind.PACKET_KIND: "(type({v}) is int and {v} in _KINDS)",
    Kind.BOOT_ID: _int_in(0, MAX_U64),
    Kind.COUNT: _int_in(0, 2**32 - 1),
    Kind.OPT_DESCRIPTOR: _optional(_bytes_of(33, MAX_DESCRIPTOR)),
    Kind.OPT_UID: _optional(_int_in(0, MAX_U64)),
    Kind.OPT_LOCATION: _optional(_LOCATION),
    Kind.OPT_SEEN: _optional(_int_in(-1, MAX_PACKET)),
    Kind.FLAG: "(type({v}) is bool)",
}

_KINDS: dict[int, PacketKind] = {int(kind): kind for kind in PacketKind}
_NAMESPACE: dict[str, Any] = {"_KINDS": _KINDS}

# A compiled decoder: the decoded CBOR array (type code first, length already checked) in,
# the message out, or None when some field is not plainly valid.
Decoder = Callable[[list[Any]], Message | None]
# A compiled encoder: a message (of its class exactly) in, the CBOR array out, or None.
Encoder = Callable[[Message], list[Any] | None]


def _wire_test(kind: Kind, v: str) -> str:
    """The test of value ``v`` of ``kind`` as a frame holds it."""
    return _TESTS[kind].format(v=v)


def _held_test(kind: Kind, v: str) -> str:
    """The test of value ``v`` of ``kind`` as a message holds it: a packet kind is the
    ``PacketKind`` member the code made, every other kind as a frame holds it."""
    return f"(type({v}) is _PacketKind)" if kind is Kind.PACKET_KIND else _wire_test(kind, v)


def _compile(source: str, name: str, extra: dict[str, Any]) -> Any:
    namespace = dict(_NAMESPACE, **extra)
    exec(compile(source, f"<compiled check {name}>", "exec"), namespace)
    return namespace[name]


def compile_decoder(cls: type[Message]) -> Decoder | None:
    """The decoder for ``cls``, or None if it has no field, a kind with no compiled test, or
    a ``__post_init__``.

    The message is built by setting its slots directly: a frozen dataclass's __init__ goes
    through ``object.__setattr__`` per field, half of what building one costs. Every field
    is given, so only a __post_init__ (no message has one) would be skipped."""
    fields = field_kinds(cls)
    if not fields or hasattr(cls, "__post_init__"):
        return None
    if any(kind not in _TESTS for _, kind in fields):
        return None
    names = [f"v{i}" for i in range(len(fields))]
    test = " and ".join(
        _TESTS[kind].format(v=v) for v, (_, kind) in zip(names, fields, strict=True)
    )
    sets = "".join(
        f"        _set{i}(message, {f'_KINDS[{v}]' if kind is Kind.PACKET_KIND else v})\n"
        for i, (v, (_, kind)) in enumerate(zip(names, fields, strict=True))
    )
    setters = {f"_set{i}": getattr(cls, name).__set__ for i, (name, _) in enumerate(fields)}
    source = (
        f"def decode_{cls.__name__}(value):\n"
        f"    _, {', '.join(names)}, = value\n"
        f"    if {test}:\n"
        f"        message = _new(_cls)\n"
        f"{sets}"
        f"        return message\n"
        f"    return None\n"
    )
    decoder: Decoder = _compile(
        source, f"decode_{cls.__name__}", {"_cls": cls, "_new": object.__new__, **setters}
    )
    return decoder


def compile_encoder(cls: type[Message]) -> Encoder | None:
    """The encoder for ``cls``, or None if it has no field or a kind with no compiled test.

    A message's fields hold what the code built: a ``PacketKind`` member where the wire
    has its int (the encoder writes the int); any other enum member in an int field, or a
    tuple, is not plain, and the codec's path, which unwraps it, serves that message."""
    kinds = field_kinds(cls)
    if not kinds or any(kind not in _TESTS for _, kind in kinds):
        return None
    names = [f"v{i}" for i in range(len(kinds))]
    loads = "\n".join(
        f"    {v} = message.{name}" for v, (name, _) in zip(names, kinds, strict=True)
    )
    tests = [_held_test(kind, v) for v, (_, kind) in zip(names, kinds, strict=True)]
    values = [
        f"{v}._value_" if kind is Kind.PACKET_KIND else v
        for v, (_, kind) in zip(names, kinds, strict=True)
    ]
    source = (
        f"def encode_{cls.__name__}(message):\n"
        f"{loads}\n"
        f"    if {' and '.join(tests)}:\n"
        f"        return [{cls.TYPE}, {', '.join(values)}]\n"
        f"    return None\n"
    )
    encoder: Encoder = _compile(source, f"encode_{cls.__name__}", {"_PacketKind": PacketKind})
    return encoder


# A compiled test of one array's values against their kinds: True only if each is plainly
# valid (the wire's ints, or a ``PacketKind`` member where the kind is one).
Test = Callable[[Any], bool]


def compile_test(name: str, kinds: tuple[Kind, ...], members: bool = False) -> Test:
    """The test of a sequence of exactly ``len(kinds)`` values, one per kind: what a
    ``SubscribeRun`` checks for each packet it carries. As with the decoders, it only ever
    accepts; the codec's field-by-field checks decide anything else and name the fault.
    ``members``: a packet kind is the ``PacketKind`` member the code holds (encoding),
    not the plain int a frame has (decoding)."""
    names = [f"v{i}" for i in range(len(kinds))]
    test_of = _held_test if members else _wire_test
    tests = " and ".join(test_of(kind, v) for v, kind in zip(names, kinds, strict=True))
    source = (
        f"def test_{name}(value):\n"
        f"    if type(value) not in (list, tuple) or len(value) != {len(kinds)}:\n"
        f"        return False\n"
        f"    {', '.join(names)}, = value\n"
        f"    return {tests}\n"
    )
    test: Test = _compile(source, f"test_{name}", {"_PacketKind": PacketKind})
    return test
