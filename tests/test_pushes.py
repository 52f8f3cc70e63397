"""``Pushes`` built alone: packets pushed up to a parent, resent until answered."""

from __future__ import annotations

from flowkit import KEY, Kit, store

from overlay.core.config import NodeConfig
from overlay.core.pushes import Pushes
from overlay.core.streams import State
from overlay.messages import PublishData, PublishError, PublishRejected, PublishSucceeded


def member(kit: Kit) -> Pushes:
    stream = kit.stream(State.JOINED, parent=b"P")
    store(stream, 0, 1, 2)
    return Pushes(kit.config, kit.streams, kit.stats, kit.out)


def test_what_a_parent_lacks_goes_up_as_pushes_with_original_uids() -> None:
    kit = Kit()
    part = member(kit)
    part.push_up(kit.streams[KEY], 0)
    sent = kit.sent()
    assert [(to, m.packet, m.uid, m.pushed) for to, m in sent if isinstance(m, PublishData)] == [
        (b"P", 1, 1001, True),
        (b"P", 2, 1002, True),
    ]
    assert list(part.pushes) == [1001, 1002] and kit.stats.pushed_up == 2


def test_an_unanswered_push_is_resent_after_publish_timeout_and_an_answer_ends_it() -> None:
    kit = Kit(config=NodeConfig(publish_timeout=5.0))
    part = member(kit)
    part.push_one(kit.streams[KEY], b"P", 2)
    kit.sent()
    part.resend_pushes(1.0)  # first noticed
    part.resend_pushes(3.0)
    assert kit.sent() == []
    part.resend_pushes(6.0)
    assert [m.packet for _, m in kit.sent()] == [2] and kit.stats.pushes_resent == 1
    part.push_answered(b"P", PublishRejected(1002, KEY, PublishError.BUSY))
    assert 1002 in part.pushes  # the tree is changing: sent again
    part.push_answered(b"P", PublishSucceeded(1002, KEY, 2))
    assert not part.pushes


def test_pushes_are_bounded_oldest_first() -> None:
    kit = Kit(config=NodeConfig(max_relayed_publishes=2))
    part = member(kit)
    part.push_up(kit.streams[KEY], None)
    assert list(part.pushes) == [1001, 1002]
