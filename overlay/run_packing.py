"""Packets as runs and back: the ``SubscribeRun`` a list of consecutive ``SubscribeData``
makes, cut to fit a frame, and the packets a run stands for."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import accumulate
from operator import attrgetter, itemgetter

from overlay.codec import note_checked
from overlay.compiled_checks import compile_packets_of
from overlay.messages import (
    MAX_FRAME,
    MAX_RUN,
    RunItem,
    SubscribeData,
    SubscribeRun,
)

# A packet's fields after its key and number, in order: what a run holds of it (one C call).
run_item: Callable[[SubscribeData], RunItem] = attrgetter(
    "data", "epoch", "kind", "sig", "epoch_first", "uid", "mark"
)


def run_of(packets: list[SubscribeData]) -> SubscribeRun:
    """The run of ``packets``: consecutive numbers of one stream, at least one, within a
    frame (``runs_of`` splits longer ones)."""
    first = packets[0]
    return SubscribeRun(first.key, first.packet, tuple(map(run_item, packets)))


def held_run_of(packets: list[SubscribeData]) -> SubscribeRun:
    """``run_of`` packets this node holds, each checked where it entered the node, for
    sending now: its frame does not check each packet again (``note_held``)."""
    run = run_of(packets)
    note_held([run])
    return run


def note_held(runs: list[SubscribeRun]) -> None:
    """``runs`` hold packets this node holds, each checked where it entered the node, and
    are about to be sent: their frames do not check each packet again (``codec.note_checked``;
    only runs about to be encoded, as the note is used up by their encoding)."""
    for run in runs:
        note_checked(run)


# What a packet adds to a run's frame besides its data, at most (its signature, five
# integers of up to nine bytes, headers), and what a run adds besides its packets (its
# header, key and first number). Counted high, so a run within the budget fits a frame.
RUN_PACKET_OVERHEAD = 128
RUN_OVERHEAD = 64
_PACKET_COST = RUN_PACKET_OVERHEAD.__add__  # (a packet's data bytes -> what it adds to a run)
_data = attrgetter("data")
_item_data = itemgetter(0)  # (a run item's data: ``run_item`` puts it first)


def run_fits(packets: int, data_bytes: int) -> bool:
    """Whether a run of ``packets`` packets holding ``data_bytes`` of data fits a frame."""
    size = RUN_OVERHEAD + packets * RUN_PACKET_OVERHEAD + data_bytes
    return packets <= MAX_RUN and size <= MAX_FRAME


def _cuts(data_sizes: Iterable[int]) -> list[tuple[int, int]]:
    """Where a list of consecutive packets whose data have ``data_sizes`` is cut into runs,
    each within a frame, in order: (start, end) of each, as long as ``run_fits`` allows,
    one packet at least."""
    # What each packet adds to a run, summed from the first (in C), so each cut is a bisect.
    costs = list(accumulate(map(_PACKET_COST, data_sizes)))
    cuts: list[tuple[int, int]] = []
    start, before, count = 0, 0, len(costs)
    while start < count:
        end = bisect_right(costs, before + MAX_FRAME - RUN_OVERHEAD, start)
        end = min(max(end, start + 1), start + MAX_RUN)
        cuts.append((start, end))
        start, before = end, costs[end - 1]
    return cuts


def runs_of(packets: list[SubscribeData]) -> list[SubscribeRun]:
    """``packets`` (consecutive, of one stream, held by this node) as runs, each within a
    frame, in order (each a ``held_run_of``)."""
    return [held_run_of(packets[start:end]) for start, end in _cuts(map(len, map(_data, packets)))]


def runs_of_items(key: bytes, first: int, items: list[RunItem]) -> list[SubscribeRun]:
    """The runs of stream ``key``'s packets from number ``first`` whose run items are
    ``items`` (what ``run_item`` makes of each), each within a frame, in order: ``runs_of``
    those packets, without taking each packet apart again (nor noting them: ``note_held``
    once they go)."""
    return [
        SubscribeRun(key, first + start, tuple(items[start:end]))
        for start, end in _cuts(map(len, map(_item_data, items)))
    ]


# ``packets_of(key, first, items)``: the SubscribeData that ``items``, a run's packets from
# number ``first`` of stream ``key``, stand for, in order; built by their slots, unchecked.
packets_of = compile_packets_of()


def unrun(run: SubscribeRun) -> list[SubscribeData]:
    """The SubscribeData ``run`` stands for, in order."""
    return packets_of(run.key, run.first, run.packets)
