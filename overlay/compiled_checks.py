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
A ``SubscribeRun``'s packets are the exception: their checks are compiled as one loop over
the run, in each direction, and so is building the ``SubscribeData`` a run stands for
(``compile_packets_of``), since a relay or a root pays each of these once per packet; so
are a ``Bundle``'s messages (``compile_bundle_decoder``), each hop's once per publish.

Checked messages, run packets and client events are built by setting their slots, every
field given (none of these classes has a ``__post_init__``): in C where the install compiled
``overlay/_slotted.c`` (one allocation and a pointer store per field), else from Python
(``object.__new__`` and each slot descriptor's ``__set__``, about ten times slower).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from overlay.messages import (
    DIGEST_SIZE,
    KEY_SIZE,
    MAX_DESCRIPTOR,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    MAX_WIRE_HTL,
    RUN_ITEM_SIZE,
    SIGNATURE_SIZE,
    Kind,
    Message,
    PacketKind,
    RunItem,
    SubscribeData,
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


# The C builder of instances by their slots (``overlay/_slotted.c``), where the install
# could compile it; else, or with ``OVERLAY_PURE_PYTHON=1`` set, each builder here sets the
# slots from Python. Both build the same objects (the tests build with each and compare).
try:
    from overlay._slotted import Builder as _NativeBuilder
except ImportError:  # (installed without a C compiler)
    _NativeBuilder = None  # type: ignore[assignment,misc]
NATIVE_BUILT = _NativeBuilder is not None
# ``OVERLAY_PURE_PYTHON=1``: every compiled module is left unused (``overlay.codec`` too).
PURE_PYTHON_FORCED = os.environ.get("OVERLAY_PURE_PYTHON", "") not in ("", "0")
PURE_PYTHON = not NATIVE_BUILT or PURE_PYTHON_FORCED


def _native_builder(cls: type) -> _NativeBuilder | None:
    """The C builder of ``cls`` by its dataclass fields, or None: pure Python, or a class the
    C builder refuses (it builds plain slotted objects only, and says so)."""
    if PURE_PYTHON or hasattr(cls, "__post_init__"):
        return None
    names = tuple(field.name for field in dataclasses.fields(cls))
    try:
        return _NativeBuilder(cls, names)
    except TypeError:
        return None


def _compile(source: str, name: str, extra: dict[str, Any]) -> Any:
    namespace = dict(_NAMESPACE, **extra)
    exec(compile(source, f"<compiled check {name}>", "exec"), namespace)
    return namespace[name]


def compile_decoder(cls: type[Message], pure: bool = False) -> Decoder | None:
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
    kinds_out = [
        f"_KINDS[{v}]" if kind is Kind.PACKET_KIND else v
        for v, (_, kind) in zip(names, fields, strict=True)
    ]
    native = None if pure else _native_builder(cls)
    if native is not None:
        build = f"        return _make({', '.join(kinds_out)})\n"
        extra: dict[str, Any] = {"_make": native.make}
    else:
        sets = "".join(f"        _set{i}(message, {v})\n" for i, v in enumerate(kinds_out))
        build = f"        message = _new(_cls)\n{sets}        return message\n"
        setters = {f"_set{i}": getattr(cls, name).__set__ for i, (name, _) in enumerate(fields)}
        extra = {"_cls": cls, "_new": object.__new__, **setters}
    source = (
        f"def decode_{cls.__name__}(value):\n"
        f"    _, {', '.join(names)}, = value\n"
        f"    if {test}:\n"
        f"{build}"
        f"    return None\n"
    )
    decoder: Decoder = _compile(source, f"decode_{cls.__name__}", extra)
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


# A run's packets (``SubscribeRun.packets``) compiled as one loop over all of them, so a run of
# 64 packets costs one call, not 64. On the wire the packets are one flat array, each
# packet's ``RUN_ITEM_SIZE`` values after the last's (``Kind.RUN``); the message holds a tuple
# per packet. ``RunItemsDecoder``: the flat array in, the tuples out; ``RunItemsEncoder``: the
# reverse. Each returns None as soon as one packet is not plainly valid (or the array is not
# whole packets), and the codec's field-by-field checks decide.
RunItemsDecoder = Callable[[list[Any]], tuple[RunItem, ...] | None]
RunItemsEncoder = Callable[[Sequence[RunItem]], list[Any] | None]


def run_item_kinds() -> tuple[Kind, ...]:
    """The kinds of one packet of a run: SubscribeData's fields after its key and number."""
    kinds = tuple(kind for _, kind in field_kinds(SubscribeData))[2:]
    assert len(kinds) == RUN_ITEM_SIZE
    return kinds


def _run_item_parts(
    test_of: Callable[[Kind, str], str], kind_out: str
) -> tuple[list[str], str, list[str]]:
    """For the source of a loop over a run's packets: the names of one packet's values, the
    test of all of them (each kind's by ``test_of``), and each value as it is put out (a
    packet kind as ``kind_out`` makes it of ``{v}``)."""
    kinds = run_item_kinds()
    names = [f"v{i}" for i in range(len(kinds))]
    tests = " and ".join(test_of(kind, v) for v, kind in zip(names, kinds, strict=True))
    values = [
        kind_out.format(v=v) if kind is Kind.PACKET_KIND else v
        for v, kind in zip(names, kinds, strict=True)
    ]
    return names, tests, values


def compile_run_items_decoder() -> RunItemsDecoder:
    """The decoder of a run's packets from the flat array a frame holds."""
    names, tests, values = _run_item_parts(_wire_test, "_KINDS[{v}]")
    # (zip over one iterator, once per field: a packet's values at a time, in C.)
    source = (
        "def decode_run_items(flat):\n"
        f"    if len(flat) % {len(names)}:\n"
        "        return None\n"
        "    run = []\n"
        "    append = run.append\n"
        "    values = iter(flat)\n"
        f"    for {', '.join(names)}, in zip({', '.join(['values'] * len(names))}):\n"
        f"        if not ({tests}):\n"
        "            return None\n"
        f"        append(({', '.join(values)},))\n"
        "    return tuple(run)\n"
    )
    decoder: RunItemsDecoder = _compile(source, "decode_run_items", {})
    return decoder


def compile_run_items_encoder() -> RunItemsEncoder:
    """The encoder of a run's packets as the message holds them (each a tuple of exactly its
    kinds' values, a packet kind the ``PacketKind`` member the code made) to a flat array."""
    names, tests, values = _run_item_parts(_held_test, "{v}._value_")
    source = (
        "def encode_run_items(items):\n"
        "    flat = []\n"
        "    extend = flat.extend\n"
        "    for item in items:\n"
        f"        if type(item) is not tuple or len(item) != {len(names)}:\n"
        "            return None\n"
        f"        {', '.join(names)}, = item\n"
        f"        if not ({tests}):\n"
        "            return None\n"
        f"        extend(({', '.join(values)}))\n"
        "    return flat\n"
    )
    encoder: RunItemsEncoder = _compile(source, "encode_run_items", {"_PacketKind": PacketKind})
    return encoder


# A compiled decoder of a Bundle's messages of one class: the bundle's flat array (its type
# code and key first, then whole messages: the caller checked both) and the key in, each
# message out, or None when some value is not plainly valid.
BundleDecoder = Callable[[list[Any], bytes], list[Message] | None]


def compile_bundle_decoder(cls: type[Message], pure: bool = False) -> BundleDecoder | None:
    """The decoder of a Bundle's messages of ``cls`` (whose second field is its key, which
    the bundle holds once), as ``compile_decoder``'s would decode each alone; None where
    ``compile_decoder`` has none."""
    fields = field_kinds(cls)
    if compile_decoder(cls, pure=True) is None or fields[1][0] != "key":
        return None
    names = [f"v{i}" for i in range(len(fields))]
    carried = [v for i, v in enumerate(names) if i != 1]  # (each message's, but its key)
    test = " and ".join(
        _TESTS[kind].format(v=v)
        for i, (v, (_, kind)) in enumerate(zip(names, fields, strict=True))
        if i != 1
    )
    row = [
        f"_KINDS[{v}]" if kind is Kind.PACKET_KIND else v
        for v, (_, kind) in zip(names, fields, strict=True)
    ]
    # (zip over one iterator, once per value: a message's values at a time, in C.)
    source = (
        f"def decode_bundle_{cls.__name__}(flat, v1):\n"
        "    rows = []\n"
        "    append = rows.append\n"
        "    values = iter(flat)\n"
        "    next(values)\n"
        "    next(values)\n"
        f"    for {', '.join(carried)}, in zip({', '.join(['values'] * len(carried))}):\n"
        f"        if not ({test}):\n"
        "            return None\n"
        f"        append(({', '.join(row)},))\n"
        "    return _build(rows)\n"
    )
    decoder: BundleDecoder = _compile(
        source, f"decode_bundle_{cls.__name__}", {"_build": compile_builder(cls, pure)}
    )
    return decoder


# Instances of a frozen, slotted dataclass built as the decoders build a message: by their
# slots, each field given (none of these classes has a ``__post_init__``), nothing checked.
PacketsOf = Callable[[bytes, int, Sequence[RunItem]], list[SubscribeData]]
Builder = Callable[[Iterable[tuple[Any, ...]]], list[Any]]


def _slot_sets(cls: type, names: list[str], target: str) -> tuple[str, dict[str, Any]]:
    """Source lines setting each slot of ``cls`` on ``target`` to its value in ``names``,
    in field order, and the setters they call."""
    fields = [field.name for field in dataclasses.fields(cls)]
    assert len(fields) == len(names) and not hasattr(cls, "__post_init__"), cls
    sets = "".join(f"        _set{i}({target}, {v})\n" for i, v in enumerate(names))
    setters = {f"_set{i}": getattr(cls, name).__set__ for i, name in enumerate(fields)}
    return sets, {"_new": object.__new__, "_cls": cls, **setters}


def compile_builder(cls: type, pure: bool = False) -> Builder:
    """``build(rows)``: an instance of ``cls`` for each row, a tuple of its fields' values
    in order."""
    native = None if pure else _native_builder(cls)
    if native is not None:
        return native.build
    names = [f"v{i}" for i in range(len(dataclasses.fields(cls)))]
    sets, extra = _slot_sets(cls, names, "built")
    source = (
        f"def build_{cls.__name__}(rows):\n"
        "    every = []\n"
        "    append = every.append\n"
        f"    for {', '.join(names)}, in rows:\n"
        "        built = _new(_cls)\n"
        f"{sets}"
        "        append(built)\n"
        "    return every\n"
    )
    build: Builder = _compile(source, f"build_{cls.__name__}", extra)
    return build


def compile_maker(cls: type, pure: bool = False) -> Callable[..., Any]:
    """``make(*values)``: an instance of ``cls``, every field given in order, built by its
    slots in C (a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``: a message built once per packet and hop pays that). Nothing is
    checked. Without the C builder, ``cls`` itself."""
    native = None if pure else _native_builder(cls)
    return cls if native is None else native.make


def compile_with(cls: type, name: str, pure: bool = False) -> Callable[[Any, Any], Any]:
    """``with_(instance, value)``: ``dataclasses.replace(instance, name=value)`` for an
    instance of ``cls`` exactly, built by its slots (a relay's publish with one hop less to
    live, a packet with this node's mark: once per packet and hop). Nothing is checked."""
    fields = [field.name for field in dataclasses.fields(cls)]
    assert name in fields, (cls, name)
    values = ["value" if field == name else f"instance.{field}" for field in fields]
    native = None if pure else _native_builder(cls)
    if native is not None:
        source = f"def with_{name}(instance, value):\n    return _make({', '.join(values)})\n"
        extra: dict[str, Any] = {"_make": native.make}
    else:
        sets, extra = _slot_sets(cls, values, "built")
        source = (
            f"def with_{name}(instance, value):\n"
            "        built = _new(_cls)\n"
            f"{sets}"
            "        return built\n"
        )
    replacer: Callable[[Any, Any], Any] = _compile(source, f"with_{name}", extra)
    return replacer


def compile_packets_of(pure: bool = False) -> PacketsOf:
    """``packets_of(key, first, items)``: the SubscribeData that a run of ``items`` from packet
    ``first`` of stream ``key`` stands for, in order. Nothing is checked: the items are a
    run message's, which the codec checked, or the code's own."""
    native = None if pure else _native_builder(SubscribeData)
    if native is not None:
        return native.build_run
    names = [f"v{i}" for i in range(len(field_kinds(SubscribeData)))]
    sets, extra = _slot_sets(SubscribeData, names, "built")
    source = (
        "def packets_of(v0, v1, items):\n"
        "    packets = []\n"
        "    append = packets.append\n"
        f"    for {', '.join(names[2:])}, in items:\n"
        "        built = _new(_cls)\n"
        f"{sets}"
        "        append(built)\n"
        "        v1 += 1\n"
        "    return packets\n"
    )
    packets_of: PacketsOf = _compile(source, "packets_of", extra)
    return packets_of
