"""The C builder of slotted instances (``overlay/_slotted.c``): what it builds equals what the
constructor builds, what it refuses it refuses at once, and the package runs without it."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import sysconfig
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import pytest

from overlay import compiled_checks
from overlay.core.events import Packet
from overlay.messages import KEY_SIZE, PacketKind, SubscribeData

KEY = bytes(range(KEY_SIZE))
ITEM = (b"data", None, PacketKind.DATA, None, None, 7, 3)


def _native() -> type:
    native = pytest.importorskip("overlay._slotted", reason="installed without a C compiler")
    builder: type = native.Builder
    return builder


def test_an_install_with_a_c_compiler_builds_and_uses_the_native_builder() -> None:
    compiler = sysconfig.get_config_var("CC") or "cc"
    has_compiler = shutil.which(compiler.split()[0]) is not None
    forced = os.environ.get("OVERLAY_PURE_PYTHON", "") not in ("", "0")
    assert (forced or not has_compiler) == compiled_checks.PURE_PYTHON


def test_a_run_built_natively_equals_one_built_by_the_constructor() -> None:
    builder = _native()(SubscribeData, tuple(f.name for f in dataclasses.fields(SubscribeData)))
    items = [ITEM, (b"", 4, PacketKind.EPOCH_CLOSED, bytes(64), 2, None, None)]
    built = builder.build_run(KEY, 2**64 - 1, items)  # (numbers past a machine word count on)
    assert built == [
        SubscribeData(KEY, 2**64 - 1, *ITEM),
        SubscribeData(KEY, 2**64, b"", 4, PacketKind.EPOCH_CLOSED, bytes(64), 2, None, None),
    ]
    assert builder.build_run(KEY, 5, ()) == []
    with pytest.raises(dataclasses.FrozenInstanceError):  # (built by its slots, still frozen)
        built[0].mark = 4


def test_building_natively_holds_each_value_once_per_instance() -> None:
    builder = _native()(Packet, ("key", "number", "data", "epoch", "kind"))
    data = bytes(1000)
    before = sys.getrefcount(data)
    built = builder.build([(KEY, n, data, None, PacketKind.DATA) for n in range(100)])
    assert sys.getrefcount(data) == before + 100
    one = builder.make(KEY, 1, data, 9, PacketKind.DATA)
    assert one == Packet(KEY, 1, data, 9, PacketKind.DATA)
    del built, one
    assert sys.getrefcount(data) == before


def test_the_native_builder_refuses_a_row_or_an_item_of_the_wrong_size() -> None:
    builder = _native()(Packet, ("key", "number", "data", "epoch", "kind"))
    with pytest.raises(ValueError, match="a row of 4 values for 5 fields"):
        builder.build([(KEY, 1, b"", None, PacketKind.DATA), (KEY, 2, b"", None)])
    with pytest.raises(TypeError, match="a row must be a sequence"):
        builder.build([7])
    with pytest.raises(ValueError, match="4 values for 5 fields"):
        builder.make(KEY, 1, b"", None)
    packets = _native()(SubscribeData, tuple(f.name for f in dataclasses.fields(SubscribeData)))
    with pytest.raises(ValueError, match="an item of 6 values, not 7"):
        packets.build_run(KEY, 1, [ITEM, ITEM[:-1]])
    with pytest.raises(TypeError, match="items must be a sequence"):
        packets.build_run(KEY, 1, 5)


@dataclass(frozen=True, slots=True)
class _Pair:
    left: object
    right: object


class _Plain:
    right = 1


class _Own(_Pair):
    def __new__(cls) -> _Own:
        return super().__new__(cls)


def test_the_native_builder_refuses_what_it_cannot_build_by_slots() -> None:
    builder = _native()
    assert builder(_Pair, ("left", "right")).make(1, 2) == _Pair(1, 2)
    with pytest.raises(TypeError, match="is not a writable slot"):
        builder(_Pair, ("left", "middle"))  # (no such field)
    with pytest.raises(TypeError, match="is not a writable slot"):
        builder(_Plain, ("right",))  # (a class attribute, not a slot)
    with pytest.raises(TypeError, match="is not a writable slot"):
        builder(Packet, ("key", "left"))  # (a field of another class)
    with pytest.raises(TypeError, match="not built as a plain object"):
        builder(_Own, ("left", "right"))  # (a __new__ of its own)
    with pytest.raises(TypeError, match="not built as a plain object"):
        builder(int, ("real",))
    with pytest.raises(TypeError, match="must be a class"):
        builder(_Pair(1, 2), ("left",))
    with pytest.raises(TypeError, match="fields"):
        builder(_Pair, ())
    with pytest.raises(TypeError):
        builder(_Pair, ["left", "right"])  # (names: a tuple)
    with pytest.raises(TypeError, match="named twice"):
        builder(_Pair, ("left", "left"))  # (a slot written twice would lose a reference)
    with pytest.raises(TypeError, match="not built as a plain object"):
        builder(_Abstract, ("left", "right"))  # (object.__new__ refuses it too)


@dataclass(frozen=True, slots=True)
class _Abstract(ABC):
    left: object
    right: object

    @abstractmethod
    def act(self) -> None: ...


class _Counter(int):
    """A packet number whose next number empties the list the run's items came in."""

    items: ClassVar[list[tuple[object, ...]]] = []

    def __add__(self, other: object) -> _Counter:
        self.items.clear()
        return _Counter(int(self) + int(other))  # type: ignore[call-overload]


def test_a_run_is_built_from_its_items_as_they_were_when_called() -> None:
    packets = _native()(SubscribeData, tuple(f.name for f in dataclasses.fields(SubscribeData)))
    items: list[tuple[object, ...]] = [ITEM, ITEM, list(ITEM)]  # type: ignore[list-item]
    _Counter.items = items
    built = packets.build_run(KEY, _Counter(1), items)
    assert items == []  # (emptied while it was built, from the first next number on)
    assert [p.packet for p in built] == [1, 2, 3] and built[2] == SubscribeData(KEY, 3, *ITEM)


def test_the_package_runs_its_pure_python_path_when_told_to() -> None:
    program = (
        "from overlay import compiled_checks, codec\n"
        "from overlay.messages import SubscribeRun, PacketKind\n"
        "from overlay.run_packing import unrun\n"
        "assert compiled_checks.PURE_PYTHON and codec._is_canonical is None\n"
        "run = SubscribeRun(bytes(32), 1, ((b'x', None, PacketKind.DATA, None, None, 5, 0),))\n"
        "decoded = codec.decode(codec.encode(run))\n"
        "packets = unrun(decoded)\n"
        "assert decoded == run and [p.packet for p in packets] == [1], packets\n"
        "print('pure')\n"
    )
    env = dict(os.environ, OVERLAY_PURE_PYTHON="1")
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == "pure\n", done.stderr


UNCOMPILED = """
import logging, sys
sys.modules["overlay._slotted"] = None  # (as an install without a C compiler leaves it)
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
import trio
from overlay import compiled_checks
from overlay.runtime.config import Address, RuntimeConfig
from overlay.runtime.identity import Identity
from overlay.runtime.service import run_node
assert compiled_checks.PURE_PYTHON and not compiled_checks.NATIVE_BUILT

async def main():
    config = RuntimeConfig(listen=Address("127.0.0.1", 0), client=Address("127.0.0.1", 0))
    async with trio.open_nursery() as nursery:
        for _ in range(2):
            await nursery.start(lambda task_status: run_node(
                config, identity=Identity.generate(), task_status=task_status))
        nursery.cancel_scope.cancel()

trio.run(main)
"""


def test_nodes_of_an_install_without_the_compiled_module_say_so_once() -> None:
    done = subprocess.run(
        [sys.executable, "-c", UNCOMPILED], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "running in pure Python" in line]
    assert len(said) == 1 and said[0].startswith("WARNING "), done.stderr
