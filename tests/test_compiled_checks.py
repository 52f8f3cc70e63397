"""The compiled checks accept exactly what the codec's field-by-field checks accept, and build
the same message: every compiled class, every field, edge values of every kind put in it."""

from __future__ import annotations

import dataclasses
import math
from enum import IntEnum

import pytest
from codec_values import (
    LARGEST_VALUE,
    RUN_ITEM_KINDS,
    SMALLEST_VALUE,
    messages_of,
    wire_fields,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.codec import FIELD_CHECKS, encode
from overlay.compiled_checks import (
    compile_builder,
    compile_bundle_decoder,
    compile_decoder,
    compile_encoder,
    compile_maker,
    compile_packets_of,
    compile_run_items_decoder,
    compile_run_items_encoder,
    compile_with,
)
from overlay.core.events import Packet
from overlay.messages import (
    BUNDLED,
    KEY_SIZE,
    MAX_DESCRIPTOR,
    MAX_PACKET,
    MAX_PAYLOAD,
    MAX_U64,
    MAX_WIRE_HTL,
    MESSAGE_TYPES,
    SIGNATURE_SIZE,
    Bundle,
    Kind,
    Message,
    Neighbours,
    PacketKind,
    PublishData,
    PublishError,
    PublishWitness,
    SubscribeData,
    SubscribeRun,
    SubscribeSucceeded,
    SwapCommit,
    SwapComplete,
    field_kinds,
)

COMPILED = [cls for cls in MESSAGE_TYPES if compile_decoder(cls) is not None]
# Each builder both ways: by the C builder where the install compiled it (what runs), and
# from Python (what runs without a compiler, or with OVERLAY_PURE_PYTHON=1).
PATHS = [False, True]
PATH_IDS = ["as-installed", "pure-python"]
_RUN_ITEMS = compile_run_items_decoder()
_HELD_RUN_ITEMS = compile_run_items_encoder()

# Values at and around every kind's bounds, and of every wrong type a peer could send.
_EDGES: list[object] = [
    None,
    True,
    False,
    -(2**70),
    -2,
    -1,
    0,
    1,
    2**32 - 1,
    2**32,
    MAX_WIRE_HTL,
    MAX_WIRE_HTL + 1,
    MAX_PACKET,
    MAX_PACKET + 1,
    MAX_U64,
    MAX_U64 + 1,
    2**200,
    0.0,
    -0.0,
    5e-324,
    0.5,
    math.nextafter(1.0, 0.0),
    1.0,
    -1e-300,
    math.inf,
    -math.inf,
    math.nan,
    0.5 + 0j,
    "x",
    b"",
    bytearray(KEY_SIZE),
    memoryview(bytes(KEY_SIZE)),
    [],
    (),
    PacketKind.DATA,
    PublishError.BUSY,
    *(int(kind) for kind in PacketKind),
    max(int(kind) for kind in PacketKind) + 1,
    *(
        bytes(n)
        for n in (
            1,
            KEY_SIZE - 1,
            KEY_SIZE,
            KEY_SIZE + 1,
            33,
            SIGNATURE_SIZE,
            SIGNATURE_SIZE + 1,
            MAX_DESCRIPTOR,
            MAX_DESCRIPTOR + 1,
            MAX_PAYLOAD,
            MAX_PAYLOAD + 1,
        )
    ),
]


# The types cbor2 decodes a peer's values to.
_DECODED = {type(None), bool, int, float, str, bytes, list}


def _accepted(kind: Kind, value: object) -> tuple[bool, object]:
    """Whether the codec's own check takes ``value`` for ``kind``, and what it makes of it."""
    try:
        return True, FIELD_CHECKS[kind](value)
    except (ValueError, TypeError):
        return False, None


def test_the_array_fields_and_only_those_are_left_to_the_codec() -> None:
    left = {cls for cls in MESSAGE_TYPES if cls not in COMPILED}
    assert left == {SubscribeSucceeded, Neighbours, SubscribeRun, SwapCommit, SwapComplete, Bundle}
    for cls in left:
        assert {Kind.EPOCH_STARTS, Kind.LOCATIONS, Kind.RUN, Kind.BUNDLE} & {
            kind for _, kind in field_kinds(cls)
        }
    assert all(compile_encoder(cls) is not None for cls in COMPILED)


@pytest.mark.parametrize("pure", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("cls", COMPILED, ids=lambda cls: cls.__name__)
def test_a_compiled_decoder_accepts_a_field_value_exactly_when_the_codec_does(
    cls: type[Message], pure: bool
) -> None:
    # Never one the codec refuses (the safety rule); and of the values CBOR decodes to, none
    # that the codec takes (or valid packets would all take the slow path).
    decoder = compile_decoder(cls, pure)
    assert decoder is not None
    kinds = [kind for _, kind in field_kinds(cls)]
    for base in (SMALLEST_VALUE, LARGEST_VALUE):
        row = [cls.TYPE] + [
            int(v) if isinstance(v, IntEnum) else v for v in (base[kind] for kind in kinds)
        ]
        for i, kind in enumerate(kinds):
            for value in _EDGES:
                wire = row[:]
                wire[i + 1] = value
                accepted, checked = _accepted(kind, value)
                message = decoder(wire)
                if type(value) in _DECODED:
                    assert (message is not None) == accepted, (cls.__name__, kind, value)
                if message is not None:
                    assert accepted, (cls.__name__, kind, value)
                    got = getattr(message, field_kinds(cls)[i][0])
                    assert got == checked and type(got) is type(checked), (kind, value)


@pytest.mark.parametrize("cls", COMPILED, ids=lambda cls: cls.__name__)
def test_a_compiled_encoder_refuses_what_the_codec_would_refuse(cls: type[Message]) -> None:
    encoder = compile_encoder(cls)
    assert encoder is not None
    kinds = field_kinds(cls)
    for base in (SMALLEST_VALUE, LARGEST_VALUE):
        for i, (name, kind) in enumerate(kinds):
            for value in _EDGES:
                fields = {n: base[k] for n, k in kinds}
                fields[name] = value
                message = cls(**fields)
                wire = encoder(message)
                plain = int(value) if isinstance(value, IntEnum) else value
                if wire is not None:
                    assert _accepted(kind, plain)[0], (cls.__name__, kind, value)
                    assert wire[i + 1] == plain


def test_a_runs_compiled_decoder_accepts_a_value_exactly_when_the_codec_does() -> None:
    # The run's packets, each alone and behind a valid one, against the codec's own check.
    for base in (SMALLEST_VALUE, LARGEST_VALUE):
        row = [int(v) if isinstance(v, IntEnum) else v for v in (base[k] for k in RUN_ITEM_KINDS)]
        for i, kind in enumerate(RUN_ITEM_KINDS):
            for value in _EDGES:
                item = row[:]
                item[i] = value
                accepted, checked = _accepted(Kind.RUN, row + item)
                decoded = _RUN_ITEMS(row + item)
                if type(value) in _DECODED:
                    assert (decoded is not None) == accepted, (kind, value)
                if decoded is not None:
                    assert accepted and decoded == checked, (kind, value)
                    got = decoded[1][i]
                    assert type(got) is type(_accepted(kind, value)[1]), (kind, value)
    assert _RUN_ITEMS(row[:-1]) is None and _RUN_ITEMS(row + row[:-1]) is None  # (not whole)
    assert _RUN_ITEMS([row]) is None  # (an array per packet: not what a frame holds)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(COMPILED).flatmap(messages_of), st.sampled_from(PATHS))
def test_compiled_and_field_by_field_agree_on_valid_messages(message: Message, pure: bool) -> None:
    cls = type(message)
    encoder, decoder = compile_encoder(cls), compile_decoder(cls, pure)
    assert encoder is not None and decoder is not None
    assert encoder(message) == wire_fields(message)
    decoded = decoder(wire_fields(message))
    assert decoded == message and hash(decoded) == hash(message)
    with pytest.raises(dataclasses.FrozenInstanceError):  # (built by its slots, still frozen)
        setattr(decoded, field_kinds(cls)[0][0], None)


def test_a_packet_kind_the_code_gave_as_a_plain_int_still_encodes() -> None:
    message = SubscribeData(bytes(KEY_SIZE), 1, b"x", None, 0, None)  # type: ignore[arg-type]
    encoder = compile_encoder(SubscribeData)
    assert encoder is not None and encoder(message) is None  # left to the codec, which
    assert encode(message) == encode(
        SubscribeData(bytes(KEY_SIZE), 1, b"x", None, PacketKind.DATA, None)
    )


def test_a_runs_compiled_encoder_takes_the_packet_kind_member_the_code_holds() -> None:
    item = (b"x", None, PacketKind.DATA, None, None, 5, 2)
    assert _HELD_RUN_ITEMS([item, item]) == [b"x", None, 0, None, None, 5, 2] * 2
    assert _RUN_ITEMS(list(item)) is None
    plain = (b"x", None, 0, None, None, 5, 2)  # (what a frame holds: the decoder's)
    assert _HELD_RUN_ITEMS([item, plain]) is None and _RUN_ITEMS(list(plain)) is not None
    other = (b"x", None, PublishError.BUSY, None, None, 5, 2)  # (an int enum, not a kind)
    assert _HELD_RUN_ITEMS([other]) is None and _RUN_ITEMS(list(other)) is None
    assert _HELD_RUN_ITEMS([item[:-1]]) is None and _HELD_RUN_ITEMS([list(item)]) is None


@settings(max_examples=200, deadline=None)
@given(messages_of(SubscribeRun), st.sampled_from(PATHS))
def test_a_runs_packets_built_by_their_slots_equal_those_built_by_the_constructor(
    run: SubscribeRun, pure: bool
) -> None:
    packets = compile_packets_of(pure)(run.key, run.first, run.packets)
    expected = [SubscribeData(run.key, run.first + i, *item) for i, item in enumerate(run.packets)]
    assert packets == expected and [hash(p) for p in packets] == [hash(p) for p in expected]
    with pytest.raises(dataclasses.FrozenInstanceError):  # (built by its slots, still frozen)
        packets[0].mark = None  # type: ignore[misc]


@pytest.mark.parametrize("pure", PATHS, ids=PATH_IDS)
def test_instances_built_by_their_slots_equal_those_built_by_the_constructor(pure: bool) -> None:
    rows = [
        (bytes(KEY_SIZE), n, b"%d" % n, None if n % 2 else n, PacketKind.DATA) for n in range(5)
    ]
    built = compile_builder(Packet, pure)(rows)
    expected = [Packet(*row) for row in rows]
    assert built == expected and [hash(p) for p in built] == [hash(p) for p in expected]
    with pytest.raises(dataclasses.FrozenInstanceError):  # (built by its slots, still frozen)
        built[0].number = 9  # type: ignore[misc]


@pytest.mark.parametrize("pure", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("cls", BUNDLED, ids=lambda cls: cls.__name__)
def test_a_bundles_compiled_decoder_accepts_a_value_exactly_when_the_codec_does(
    cls: type[Message], pure: bool
) -> None:
    # Two messages of ``cls``: the first valid, the second with one value at an edge. The
    # bundle's decoder takes them exactly when the codec's check takes that value, and
    # then builds what the lone decoder builds of each.
    decoder = compile_bundle_decoder(cls, pure)
    lone = compile_decoder(cls, pure)
    assert decoder is not None and lone is not None
    kinds = [kind for _, kind in field_kinds(cls)]
    for base in (SMALLEST_VALUE, LARGEST_VALUE):
        row = [cls.TYPE] + [
            int(v) if isinstance(v, IntEnum) else v for v in (base[kind] for kind in kinds)
        ]
        key = row[2]
        for i, kind in enumerate(kinds):
            if kind is Kind.KEY:
                continue  # (once per bundle, checked by the codec before this)
            for value in _EDGES:
                other = row[:]
                other[i + 1] = value
                flat = [cls.TYPE, key, row[1], *row[3:], other[1], *other[3:]]
                accepted, _ = _accepted(kind, value)
                built = decoder(flat, key)
                if type(value) in _DECODED:
                    assert (built is not None) == accepted, (cls.__name__, kind, value)
                if built is not None:
                    assert accepted, (cls.__name__, kind, value)
                    assert built == [lone(row), lone(other)]
                    assert [type(m) for m in built] == [cls, cls]


@pytest.mark.parametrize("pure", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("cls", [PublishData, SubscribeData], ids=lambda cls: cls.__name__)
def test_a_compiled_replacer_makes_what_dataclasses_replace_makes(
    cls: type[Message], pure: bool
) -> None:
    for base in (SMALLEST_VALUE, LARGEST_VALUE):
        message = cls(**{name: base[kind] for name, kind in field_kinds(cls)})
        for name, kind in field_kinds(cls):
            value = SMALLEST_VALUE[kind] if base is LARGEST_VALUE else LARGEST_VALUE[kind]
            made = compile_with(cls, name, pure)(message, value)
            assert type(made) is cls and made == dataclasses.replace(message, **{name: value})
            assert made is not message and getattr(message, name) == base[kind]


@pytest.mark.parametrize("pure", PATHS, ids=PATH_IDS)
@pytest.mark.parametrize("cls", [PublishData, PublishWitness], ids=lambda cls: cls.__name__)
def test_a_compiled_maker_makes_what_the_constructor_makes(cls: type[Message], pure: bool) -> None:
    make = compile_maker(cls, pure)
    for base in (SMALLEST_VALUE, LARGEST_VALUE):
        values = [base[kind] for _, kind in field_kinds(cls)]
        made = make(*values)
        assert type(made) is cls and made == cls(*values) and hash(made) == hash(cls(*values))
        with pytest.raises(dataclasses.FrozenInstanceError):  # (built by its slots, still frozen)
            made.uid = 9  # type: ignore[attr-defined]
