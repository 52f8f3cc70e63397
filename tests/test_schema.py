"""The wire schema's fingerprint (``overlay.schema``): it changes with anything two nodes
must agree on to decode each other's messages, and with nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

from overlay import codec
from overlay.messages import (
    MESSAGE_TYPES,
    Heartbeat,
    Kind,
    Message,
    _f,
    field_kinds,
)
from overlay.schema import SCHEMA_SIZE, WIRE_SCHEMA, fingerprint, schema_text


@dataclass(frozen=True, slots=True)
class HeartbeatWithMore(Message):
    """Heartbeat as a later build might send it: one more field."""

    TYPE: ClassVar[int] = Heartbeat.TYPE
    seq: int = _f(Kind.UID)
    extra: int = _f(Kind.COUNT)


@dataclass(frozen=True, slots=True)
class HeartbeatRekinded(Message):
    TYPE: ClassVar[int] = Heartbeat.TYPE
    seq: int = _f(Kind.COUNT)


def with_heartbeat(
    cls: type[Message], monkeypatch: pytest.MonkeyPatch
) -> tuple[type[Message], ...]:
    """The message set with ``cls`` for Heartbeat, which the codec then encodes too."""
    checks = tuple((name, codec.FIELD_CHECKS[kind]) for name, kind in field_kinds(cls))
    monkeypatch.setitem(codec._SCHEMA, cls.TYPE, (cls, checks))
    return tuple(cls if t is Heartbeat else t for t in MESSAGE_TYPES)


def test_the_fingerprint_is_eight_bytes_of_the_current_messages() -> None:
    assert len(WIRE_SCHEMA) == SCHEMA_SIZE == 8
    assert fingerprint() == WIRE_SCHEMA


def test_a_new_field_changes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fingerprint(with_heartbeat(HeartbeatWithMore, monkeypatch)) != WIRE_SCHEMA


def test_a_field_of_another_kind_changes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert fingerprint(with_heartbeat(HeartbeatRekinded, monkeypatch)) != WIRE_SCHEMA


def test_another_encoding_changes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same fields, another layout on the wire (say, CBOR maps instead of arrays)."""
    monkeypatch.setattr(codec.cbor2, "dumps", lambda value: repr(value).encode())
    assert fingerprint() != WIRE_SCHEMA


def test_a_message_more_or_less_changes_it() -> None:
    assert fingerprint(MESSAGE_TYPES[:-1]) != WIRE_SCHEMA


def test_every_message_is_covered_with_its_encoding() -> None:
    text = schema_text().decode()
    for cls in MESSAGE_TYPES:
        assert f"\n{cls.TYPE} {cls.__name__} " in text


def test_it_is_the_same_in_every_process() -> None:
    """Nodes of one build must agree: nothing in it may depend on hash seeds or the like."""
    code = "from overlay.schema import WIRE_SCHEMA; print(WIRE_SCHEMA.hex())"
    seen = set()
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        seen.add(out.stdout.strip())
    assert seen == {WIRE_SCHEMA.hex()}
