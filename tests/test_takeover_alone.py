"""``Takeover`` built alone: a root's grace, its tokens and timers, and a claim that
moves its head."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, store

from overlay.core.memory import Memory
from overlay.core.streams import State, Stream
from overlay.core.takeover import RECOVER_TIMER, Takeover
from overlay.core.tokens import Tokens


class Setup:
    def __init__(self, kit: Kit) -> None:
        self.tokens = Tokens()
        self.ask_down, self.carried, self.missing = Calls(), Calls(), Calls()
        self.fired: list[tuple[int, int]] = []
        kit.timers.on(RECOVER_TIMER, lambda now, token, again: self.fired.append((token, again)))
        confirming = Calls()  # (not reached by these tests)
        self.part = Takeover(
            kit.config,
            kit.streams,
            kit.timers,
            kit.stats,
            Memory(8, Calls()),
            self.tokens,
            confirming,  # type: ignore[arg-type]
            self.ask_down,
            self.missing,
            Calls(),
            Calls(),
            Calls(),
            self.carried,
            Calls(),
            Calls(),
        )


def root(kit: Kit) -> Stream:
    stream = kit.stream(State.ROOT, children=(b"C",))
    store(stream, 0, 1)
    return stream


def test_a_grace_takes_a_token_from_the_shared_counter() -> None:
    kit = Kit()
    setup = Setup(kit)
    setup.tokens.take()  # (a question to a parent took one)
    stream = root(kit)
    setup.part.hold(0.0, stream)
    assert stream.recover_token == 2 and setup.part.recovering == {2: KEY}
    assert stream.recover_until == kit.config.takeover_grace


def test_a_childs_claim_beyond_the_head_holds_numbering_and_asks_the_subtree() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit)
    setup.part.reported(0.0, stream, 5)
    assert stream.high == 5 and stream.recover_until is not None
    assert setup.ask_down.calls == [(stream,)]
    kit.timers.run(kit.config.takeover_grace / 2)
    assert setup.fired == [(stream.recover_token, 1)]


def test_a_claim_is_moved_at_most_one_window() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit)
    setup.part.reported(0.0, stream, 10 * kit.config.window_packets)
    assert stream.high == 1 + kit.config.window_packets


def test_the_graces_end_sends_what_waited() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit)
    setup.part.hold(0.0, stream)
    token = stream.recover_token
    setup.part.on_recover_timer(kit.config.takeover_grace, token)
    assert stream.recover_until is None and not setup.part.recovering
    assert setup.carried.calls == [(kit.config.takeover_grace, stream)]
