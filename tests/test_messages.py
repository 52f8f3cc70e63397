"""The message declarations: immutable, slotted, and pinned to their wire codes and layouts.

Type codes and field order are the wire format, so the tables below pin them: renumbering a
type, reordering its fields or changing a field's kind must fail here, loudly, and be a
conscious decision (add a new type instead). Adding a new type only needs a new row.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from codec_values import SAMPLE_VALUE, sample

from overlay import messages
from overlay.messages import (
    MESSAGE_TYPES,
    Kind,
    Message,
    PacketKind,
    field_kinds,
)

# name -> type code, as deployed. Never edit a row; only append.
PINNED_TYPE_CODES: dict[str, int] = {
    "Hello": 1,
    "Heartbeat": 2,
    "SubscribeRequest": 3,
    "ResubscribeRequest": 4,
    "SubscribeSucceeded": 5,
    "SubscribeSucceededNewRoot": 6,
    "SubscribeRestarted": 7,
    "DataNotFound": 8,
    "RejectOverload": 9,
    "RejectedLoop": 10,
    "Unsubscribe": 11,
    "PublishData": 12,
    "PublishSucceeded": 13,
    "PublishCollision": 14,
    "PublishRejected": 15,
    "SubscribeData": 16,
    "PacketsMissed": 17,
    "Neighbours": 18,
    "Accepted": 19,
    "RestartConfirmed": 20,
    "RestartEnded": 21,
    "FillRequest": 22,
    "RootProbe": 23,
    "ProbeAnswer": 24,
    "HeldQuery": 25,
    "Held": 26,
    "PastQuery": 27,
    "PublishNumbered": 28,
    "PublishConfirmed": 29,
    "Committed": 30,
    "PublishWitness": 31,
    "SubscribeRun": 32,
    "SwapRequest": 33,
    "SwapReply": 34,
    "SwapCommit": 35,
    "SwapComplete": 36,
    "SwapRejected": 37,
    "Bundle": 38,
}

# name -> wire field layout (positional on the wire, so order matters as much as the code).
PINNED_LAYOUTS: dict[str, tuple[tuple[str, Kind], ...]] = {
    "Hello": (
        ("location", Kind.LOCATION),
        ("boot_id", Kind.BOOT_ID),
        ("vouch", Kind.OPT_SIGNATURE),
    ),
    "Heartbeat": (("seq", Kind.UID),),
    "SubscribeRequest": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("htl", Kind.HTL),
        ("best_loc", Kind.LOCATION),
        ("last_seen", Kind.OPT_SEEN),
        ("descriptor", Kind.OPT_DESCRIPTOR),
    ),
    "ResubscribeRequest": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("htl", Kind.HTL),
        ("best_loc", Kind.LOCATION),
        ("must_beat", Kind.LOCATION),
        ("last_seen", Kind.OPT_SEEN),
        ("descriptor", Kind.OPT_DESCRIPTOR),
        ("trail", Kind.OPT_UID),
    ),
    "SubscribeSucceeded": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("last_packet", Kind.OPT_PACKET),
        ("last_closed", Kind.OPT_PACKET),
        ("open_epochs", Kind.EPOCH_STARTS),
        ("restart", Kind.OPT_UID),
        ("origin", Kind.OPT_LOCATION),
    ),
    "SubscribeSucceededNewRoot": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("last_packet", Kind.OPT_PACKET),
    ),
    "SubscribeRestarted": (("uid", Kind.UID), ("key", Kind.KEY), ("origin", Kind.LOCATION)),
    "RestartConfirmed": (("uid", Kind.UID), ("key", Kind.KEY), ("last_seen", Kind.OPT_SEEN)),
    "RestartEnded": (("uid", Kind.UID), ("key", Kind.KEY)),
    "DataNotFound": (("uid", Kind.UID), ("key", Kind.KEY), ("htl", Kind.HTL), ("lost", Kind.FLAG)),
    "RejectOverload": (("uid", Kind.UID), ("key", Kind.KEY)),
    "RejectedLoop": (("uid", Kind.UID),),
    "Unsubscribe": (("key", Kind.KEY),),
    "PublishData": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("packet", Kind.OPT_PACKET),
        ("best_loc", Kind.LOCATION),
        ("htl", Kind.HTL),
        ("data", Kind.DATA),
        ("epoch", Kind.OPT_PACKET),
        ("kind", Kind.PACKET_KIND),
        ("sig", Kind.OPT_SIGNATURE),
        ("pushed", Kind.FLAG),
        ("claim", Kind.FLAG),
    ),
    "PublishSucceeded": (("uid", Kind.UID), ("key", Kind.KEY), ("packet", Kind.PACKET)),
    "PublishCollision": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("packet", Kind.PACKET),
        ("suggested_next", Kind.PACKET),
    ),
    "PublishRejected": (("uid", Kind.UID), ("key", Kind.KEY), ("reason", Kind.COUNT)),
    "SubscribeData": (
        ("key", Kind.KEY),
        ("packet", Kind.PACKET),
        ("data", Kind.DATA),
        ("epoch", Kind.OPT_PACKET),
        ("kind", Kind.PACKET_KIND),
        ("sig", Kind.OPT_SIGNATURE),
        ("epoch_first", Kind.OPT_PACKET),
        ("uid", Kind.OPT_UID),
        ("mark", Kind.OPT_PACKET),
    ),
    "SubscribeRun": (("key", Kind.KEY), ("first", Kind.PACKET), ("packets", Kind.RUN)),
    "PacketsMissed": (("key", Kind.KEY), ("first", Kind.PACKET), ("last", Kind.PACKET)),
    "FillRequest": (("key", Kind.KEY), ("first", Kind.PACKET), ("last", Kind.PACKET)),
    "RootProbe": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("htl", Kind.HTL),
        ("best_loc", Kind.LOCATION),
        ("must_beat", Kind.LOCATION),
    ),
    "ProbeAnswer": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("root", Kind.OPT_LOCATION),
        ("htl", Kind.HTL),
    ),
    "HeldQuery": (("key", Kind.KEY), ("packet", Kind.PACKET)),
    "Held": (("key", Kind.KEY), ("packet", Kind.PACKET)),
    "PastQuery": (
        ("key", Kind.KEY),
        ("first", Kind.PACKET),
        ("last", Kind.PACKET),
        ("htl", Kind.HTL),
    ),
    "PublishNumbered": (("uid", Kind.UID), ("key", Kind.KEY), ("packet", Kind.PACKET)),
    "PublishConfirmed": (("uid", Kind.UID), ("key", Kind.KEY), ("packet", Kind.PACKET)),
    "Committed": (("key", Kind.KEY), ("upto", Kind.PACKET)),
    "PublishWitness": (
        ("uid", Kind.UID),
        ("key", Kind.KEY),
        ("packet", Kind.PACKET),
        ("data", Kind.DATA),
        ("epoch", Kind.OPT_PACKET),
        ("kind", Kind.PACKET_KIND),
        ("sig", Kind.OPT_SIGNATURE),
    ),
    "Neighbours": (("locations", Kind.LOCATIONS), ("vouches", Kind.VOUCHES)),
    "Accepted": (("uid", Kind.UID),),
    "SwapRequest": (("uid", Kind.UID), ("htl", Kind.HTL), ("commitment", Kind.DIGEST)),
    "SwapReply": (("uid", Kind.UID), ("commitment", Kind.DIGEST)),
    "SwapCommit": (
        ("uid", Kind.UID),
        ("nonce", Kind.DIGEST),
        ("location", Kind.LOCATION),
        ("neighbours", Kind.LOCATIONS),
        ("away", Kind.LOCATIONS),
    ),
    "SwapComplete": (
        ("uid", Kind.UID),
        ("nonce", Kind.DIGEST),
        ("location", Kind.LOCATION),
        ("neighbours", Kind.LOCATIONS),
        ("away", Kind.LOCATIONS),
    ),
    "SwapRejected": (("uid", Kind.UID),),
    "Bundle": (("messages", Kind.BUNDLE),),
}


def by_name(cls: type[Message]) -> str:
    return cls.__name__


def test_type_codes_are_pinned() -> None:
    assert {cls.__name__: cls.TYPE for cls in MESSAGE_TYPES} == PINNED_TYPE_CODES


def test_type_codes_are_unique_and_positive() -> None:
    codes = [cls.TYPE for cls in MESSAGE_TYPES]
    assert len(set(codes)) == len(codes)
    assert all(type(code) is int and code > 0 for code in codes)
    # 0 is the base class's code and must never reach the wire.
    assert Message.TYPE == 0
    assert Message not in MESSAGE_TYPES


def test_class_names_are_unique() -> None:
    names = [cls.__name__ for cls in MESSAGE_TYPES]
    assert len(set(names)) == len(names)


def test_every_message_class_in_the_module_is_registered() -> None:
    """A message class that is declared but missing from MESSAGE_TYPES could never be sent."""
    declared = {
        obj
        for obj in vars(messages).values()
        if inspect.isclass(obj) and issubclass(obj, Message) and obj is not Message
    }
    assert declared == set(MESSAGE_TYPES)


def test_field_layouts_are_pinned() -> None:
    assert {cls.__name__: field_kinds(cls) for cls in MESSAGE_TYPES} == PINNED_LAYOUTS


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_field_kinds_returns_every_field_in_declaration_order(cls: type[Message]) -> None:
    kinds = field_kinds(cls)
    assert [name for name, _ in kinds] == [f.name for f in dataclasses.fields(cls)]
    assert all(type(kind) is Kind for _, kind in kinds)
    # ClassVar TYPE is not a field, and no field is left without a kind.
    assert "TYPE" not in dict(kinds)
    assert all("kind" in f.metadata for f in dataclasses.fields(cls))


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_message_is_a_frozen_dataclass(cls: type[Message]) -> None:
    assert dataclasses.is_dataclass(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    message = sample(cls)
    for name, _ in field_kinds(cls):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, name, None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(message, name)
    assert message == sample(cls)


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_message_is_slotted(cls: type[Message]) -> None:
    message = sample(cls)
    assert not hasattr(message, "__dict__")
    assert cls.__slots__ == tuple(name for name, _ in field_kinds(cls))
    # Every class in the hierarchy must be slotted, or instances regain a __dict__.
    for base in cls.__mro__[:-1]:
        assert "__slots__" in vars(base), f"{base.__name__} is not slotted"
    with pytest.raises((AttributeError, TypeError)):
        setattr(message, "not_a_field", 1)  # noqa: B010


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=by_name)
def test_messages_are_hashable_values(cls: type[Message]) -> None:
    """Frozen dataclasses compare and hash by value, so the core can key tables on them."""
    assert sample(cls) == sample(cls)
    assert hash(sample(cls)) == hash(sample(cls))


def test_packet_kind_values_are_pinned() -> None:
    assert {kind.name: kind.value for kind in PacketKind} == {
        "DATA": 0,
        "EPOCH_CLOSED": 1,
        "EPOCH_ABORTED": 2,
    }


def test_every_kind_is_used_or_known() -> None:
    """Sample values exist for every kind, so a new kind forces the tests to learn it."""
    assert set(SAMPLE_VALUE) == set(Kind)
