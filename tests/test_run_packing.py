"""Packing packets into runs (``overlay.run_packing``): a list of consecutive packets cut
into runs, each as long as a frame allows (``run_fits``), that stand for exactly those
packets in order."""

from __future__ import annotations

import random

import pytest

from overlay.codec import encode
from overlay.messages import MAX_FRAME, MAX_PAYLOAD, MAX_RUN, PacketKind, SubscribeData
from overlay.run_packing import run_fits, run_item, runs_of, runs_of_items, unrun

KEY = b"\x01" * 32


def packets(sizes: list[int], first: int = 7) -> list[SubscribeData]:
    return [
        SubscribeData(KEY, first + i, bytes(size), None, PacketKind.DATA, None, None, i, None)
        for i, size in enumerate(sizes)
    ]


def greedy(sizes: list[int]) -> list[int]:
    """The run lengths the rule gives: each run takes packets while ``run_fits`` holds."""
    lengths: list[int] = []
    count = data = 0
    for size in sizes:
        if count and not run_fits(count + 1, data + size):
            lengths.append(count)
            count = data = 0
        count, data = count + 1, data + size
    return [*lengths, count]


@pytest.mark.parametrize(
    "sizes",
    [
        [0],
        [0] * (MAX_RUN + 1),  # (empty packets: the frame bound cuts them before MAX_RUN)
        [1024] * 200,  # (the frame bound cuts)
        [MAX_PAYLOAD] * 3,  # (one packet a frame)
        [MAX_PAYLOAD, 0, 0, MAX_PAYLOAD],
    ],
)
def test_runs_stand_for_the_packets_each_as_long_as_a_frame_allows(sizes: list[int]) -> None:
    given = packets(sizes)
    runs = runs_of(given)
    assert [p for run in runs for p in unrun(run)] == given
    assert [len(run.packets) for run in runs] == greedy(sizes)
    assert all(len(encode(run)) <= MAX_FRAME for run in runs)


def test_random_lengths_are_cut_as_the_rule_says() -> None:
    draw = random.Random(11)
    for _ in range(200):
        sizes = [draw.choice((0, 1, 100, 1024, 9000, MAX_PAYLOAD)) for _ in range(300)]
        given = packets(sizes)
        runs = runs_of(given)
        assert [len(run.packets) for run in runs] == greedy(sizes)
        # A root's batch, cut from its packets' run items: the very same runs.
        assert runs_of_items(KEY, 7, [run_item(p) for p in given]) == runs
