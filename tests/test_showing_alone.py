"""``Showing`` built alone: the marks a root stamps and tells, and a member's from its parent."""

from __future__ import annotations

import dataclasses

import pytest
from flowkit import KEY, Calls, Kit, packet, store

from overlay.core.showing import MARK_TIMER, Showing
from overlay.core.streams import State
from overlay.messages import Committed


def showing(kit: Kit) -> tuple[Showing, Calls]:
    pump = Calls()
    return Showing(kit.config, kit.streams, kit.stats, kit.timers, kit.out, pump), pump


def test_a_root_stamps_its_mark_from_before_the_packet() -> None:
    kit = Kit()
    part, _ = showing(kit)
    stream = kit.stream(State.ROOT, children=(b"C",))
    store(stream, 0, 1, 2)
    stamped = part.stamp(stream, packet(3))
    assert stamped.mark == 2  # everything processed: no bound applies
    assert stream.shown_upto == 2
    assert KEY in part.marks_sent and stream.mark_carried


def test_a_moved_mark_no_packet_took_down_is_told_once_the_event_is_done() -> None:
    kit = Kit()
    part, _ = showing(kit)
    stream = kit.stream(State.ROOT, children=(b"C", b"D"))
    store(stream, 0, 1)
    part.mark_moved(stream)
    assert KEY in part.marks_due
    part.tell_marks(5.0)
    assert kit.sent() == [(b"C", Committed(KEY, 1)), (b"D", Committed(KEY, 1))]
    assert not part.marks_due and kit.stats.commit_notices == 2


def test_a_member_shows_up_to_its_parents_mark_and_passes_it_on() -> None:
    kit = Kit()
    part, pump = showing(kit)
    stream = kit.stream(State.JOINED, parent=b"P", children=(b"C",))
    store(stream, 0, 1, 2, 3)
    part.on_committed(1.0, Committed(KEY, 2), stream)
    assert stream.shown_upto == 2
    assert pump.calls == [(stream,)]
    assert kit.sent() == [(b"C", Committed(KEY, 2))]


def test_a_member_never_takes_a_mark_past_what_it_processed() -> None:
    kit = Kit()
    part, _ = showing(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    store(stream, 0)
    stamped = part.stamp(stream, dataclasses.replace(packet(1), mark=7))
    assert stream.shown_upto == 1 and stamped.mark == 1


def test_it_registers_the_mark_timer_it_arms() -> None:
    kit = Kit()
    showing(kit)
    with pytest.raises(ValueError):
        kit.timers.on(MARK_TIMER, lambda now, uid, attempt: None)
