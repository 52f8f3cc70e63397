"""``PublishCredit`` built alone: a stream's credit of local publishes out, the rest held."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, publish

from overlay.core.config import NodeConfig
from overlay.core.credit import PublishCredit
from overlay.core.local_publishes import LocalPublish
from overlay.core.streams import State
from overlay.messages import PublishError


def credit(kit: Kit) -> tuple[PublishCredit, dict[int, LocalPublish], Calls, Calls, Calls]:
    local: dict[int, LocalPublish] = {}
    arm, route, fail = Calls(), Calls(), Calls()
    part = PublishCredit(kit.config, kit.streams, kit.stats, local, arm, route, fail)
    return part, local, arm, route, fail


def start(part: PublishCredit, local: dict[int, LocalPublish], kit: Kit, uid: int) -> None:
    message = publish(uid)
    local[uid] = LocalPublish(1, message)
    part.send_or_hold(0.0, kit.streams[KEY], 1, message)


def test_past_the_credit_a_publish_is_held_and_goes_once_one_is_answered() -> None:
    kit = Kit(config=NodeConfig(publish_credit_packets=1))
    part, local, arm, route, _ = credit(kit)
    kit.stream(State.JOINED, parent=b"P")
    start(part, local, kit, 1)
    start(part, local, kit, 2)
    assert [call[3].uid for call in route.calls] == [1]
    assert arm.calls == [(0.0, 1, 1)] and kit.stats.held_up == 1
    del local[1]
    part.free_credit(KEY, 1)
    assert KEY in part.released
    part.release_held(3.0)
    assert [call[3].uid for call in route.calls] == [1, 2]
    assert arm.calls[-1] == (3.0, 2, 1)  # its own timeout, counted from its release
    assert not part.released


def test_a_retry_of_a_claimed_publish_goes_up_at_once() -> None:
    kit = Kit(config=NodeConfig(publish_credit_packets=1))
    part, local, _, route, _ = credit(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    start(part, local, kit, 1)
    stream.claims[2] = 9
    start(part, local, kit, 2)
    assert [call[3].uid for call in route.calls] == [1, 2]


def test_held_publishes_fail_with_their_streams_timeout() -> None:
    kit = Kit(config=NodeConfig(publish_credit_packets=1))
    part, local, _, _, fail = credit(kit)
    kit.stream(State.JOINED, parent=b"P")
    start(part, local, kit, 1)
    start(part, local, kit, 2)
    part.fail_held(KEY, PublishError.TIMEOUT)
    assert fail.calls == [(1, local[2].message, PublishError.TIMEOUT)]
