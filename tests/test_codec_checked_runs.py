"""Runs of packets a node holds (``codec.note_checked``): encoded without checking each packet
again, to the same frame; the run's own fields still checked; the list bounded."""

from __future__ import annotations

import pytest
from codec_values import messages_of
from hypothesis import given, settings

from overlay import codec
from overlay.codec import EncodeError, decode, encode, note_checked
from overlay.messages import PacketKind, SubscribeData, SubscribeRun
from overlay.run_packing import held_run_of, note_held, runs_of_items

KEY = bytes(range(32))
ITEM = (b"data", None, PacketKind.DATA, None, None, 7, 3)


@settings(max_examples=100, deadline=None)
@given(messages_of(SubscribeRun))
def test_a_noted_run_encodes_to_the_frame_a_checked_one_does(run: SubscribeRun) -> None:
    checked = encode(run)
    again = SubscribeRun(run.key, run.first, run.packets)
    note_checked(again)
    assert encode(again) == checked and decode(checked) == run


def test_a_noted_runs_packets_are_not_checked_again_but_its_own_fields_are() -> None:
    bad_mark = (b"data", None, PacketKind.DATA, None, None, 7, -1)  # (a mark below 0)
    unnoted = SubscribeRun(KEY, 1, (ITEM, bad_mark))
    with pytest.raises(EncodeError):
        encode(unnoted)  # (anyone's run: each packet checked)
    noted = SubscribeRun(KEY, 1, (ITEM, bad_mark))
    note_checked(noted)
    encode(noted)  # (the node's word for its packets: taken)
    short_key = SubscribeRun(KEY[:5], 1, (ITEM,))
    note_checked(short_key)
    with pytest.raises(EncodeError):
        encode(short_key)


def test_a_note_is_for_one_encoding_and_the_list_is_bounded() -> None:
    bad = (b"data", None, PacketKind.DATA, None, None, -5, 3)  # (a uid below 0)
    run = SubscribeRun(KEY, 1, (bad,))
    note_checked(run)
    encode(run)
    with pytest.raises(EncodeError):
        encode(run)  # (the note is used up: checked in full)
    oldest = SubscribeRun(KEY, 1, (bad,))
    note_checked(oldest)
    others = [SubscribeRun(KEY, 1, (ITEM,)) for _ in range(codec._CHECKED_RUNS_SIZE)]
    for other in others:
        note_checked(other)
    with pytest.raises(EncodeError):
        encode(oldest)  # (forgotten past the bound: checked as any other)
    assert len(codec._checked_runs) == codec._CHECKED_RUNS_SIZE


def test_runs_are_noted_when_made_to_be_sent_and_not_before() -> None:
    packets = [
        SubscribeData(KEY, n, b"x", None, PacketKind.DATA, None, None, n, None) for n in (4, 5)
    ]
    run = held_run_of(packets)  # (made as it is sent)
    assert codec._checked_runs.get(id(run)) is run
    (batch,) = runs_of_items(KEY, 4, [ITEM, ITEM])  # (a root's batch: maybe never sent)
    assert id(batch) not in codec._checked_runs
    note_held([batch])  # (it goes)
    assert codec._checked_runs.get(id(batch)) is batch
    encode(batch)
    assert id(batch) not in codec._checked_runs  # (the note is used up)
