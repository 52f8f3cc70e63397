"""``EarlyWaits`` built alone: packets above a gap the parent was asked about wait for
its answer, or for ``fill_timeout``."""

from __future__ import annotations

from flowkit import Calls, Kit, packet, store

from overlay.core.early_waits import EarlyWaits
from overlay.core.streams import State, Stream
from overlay.core.tokens import Tokens


def waits(kit: Kit) -> tuple[EarlyWaits, Calls, Calls]:
    stored, missing = Calls(), Calls()
    part = EarlyWaits(kit.config, kit.streams, kit.stats, kit.timers, Tokens(), stored, missing)
    return part, stored, missing


def member(kit: Kit) -> Stream:
    stream = kit.stream(State.JOINED, parent=b"P")
    store(stream, 0)
    return stream


def test_a_question_takes_a_token_and_arms_its_timer() -> None:
    kit = Kit()
    part, _, _ = waits(kit)
    stream = member(kit)
    part.expect_fill(0.0, stream, 1, 3)
    assert stream.early is not None and (stream.early.first, stream.early.last) == (1, 3)
    assert part.early_waits == {stream.early.token: stream.key}
    assert kit.timers.earliest() == kit.config.fill_timeout


def test_giving_up_takes_the_waiting_packets_each_gap_announced_missed() -> None:
    kit = Kit()
    part, stored, missing = waits(kit)
    stream = member(kit)
    part.expect_fill(0.0, stream, 1, 3)
    assert stream.early is not None and stream.early.hold(packet(5))
    kit.timers.run(kit.config.fill_timeout)
    assert missing.calls == [(stream, 1, 4)]
    assert [call[1].packet for call in stored.calls] == [5]
    assert stream.early is None and not part.early_waits


def test_a_timer_for_an_older_question_changes_nothing() -> None:
    kit = Kit()
    part, stored, _ = waits(kit)
    stream = member(kit)
    part.expect_fill(0.0, stream, 1, 3)
    first = stream.early
    part.expect_fill(1.0, stream, 1, 3)  # (a new parent: the first question is over)
    assert stream.early is not first
    part.on_early_timer(2.0, first.token if first else 0, 0)
    assert stream.early is not None and stored.calls == []
