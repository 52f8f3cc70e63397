"""``LocalPublishes`` built alone: a client's publish resent until answered, its answer
delivered, and the claim of one given up kept for its retry."""

from __future__ import annotations

import pytest
from flowkit import KEY, Calls, Kit, publish

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver
from overlay.core.events import PublishAcked, PublishFailed
from overlay.core.local_publishing import PUBLISH_TIMER, LocalPublishes
from overlay.core.streams import State
from overlay.messages import PublishError, PublishSucceeded


def publishes(kit: Kit) -> tuple[LocalPublishes, Calls]:
    route = Calls()
    return LocalPublishes(kit.config, kit.streams, kit.stats, kit.timers, kit.out, route), route


def test_a_publish_goes_up_and_is_resent_with_its_uid_until_its_last_try() -> None:
    kit = Kit(config=NodeConfig(publish_timeout=1.0, publish_attempts=2))
    part, route = publishes(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    part.publish(0.0, stream, 1, publish(7))
    kit.timers.run(1.0)
    assert [call[3].uid for call in route.calls] == [7, 7] and kit.stats.publish_retries == 1
    kit.timers.run(2.0)
    [event] = [e.event for e in kit.delivered()]
    assert isinstance(event, PublishFailed) and event.error is PublishError.TIMEOUT
    assert not part.local


def test_an_answer_goes_to_every_client_waiting_for_that_uid_once() -> None:
    kit = Kit()
    part, _ = publishes(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    part.publish(0.0, stream, 1, publish(7))
    part.join(7, 2)
    part.answer(1, PublishSucceeded(7, KEY, 3))
    part.answer(1, PublishSucceeded(7, KEY, 3))  # a resend's answer crossed the first
    assert kit.out.take() == [
        Deliver(1, PublishAcked(KEY, 7, 3)),
        Deliver(2, PublishAcked(KEY, 7, 3)),
    ]
    assert not part.local and not part.credit.credits


def test_a_publish_whose_client_went_keeps_its_claim_for_a_retry() -> None:
    kit = Kit()
    part, _ = publishes(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    part.publish(0.0, stream, 1, publish(7))
    stream.claims[7] = 4
    part.forget_client(1)
    assert not part.local and stream.claims == {} and part.lapsed == {7: (KEY, 4)}
    part.publish(1.0, stream, 2, publish(7))
    assert stream.claims == {7: 4} and not part.lapsed


def test_it_registers_the_publish_timer_it_arms() -> None:
    kit = Kit()
    publishes(kit)
    with pytest.raises(ValueError):
        kit.timers.on(PUBLISH_TIMER, lambda now, uid, attempt: None)
