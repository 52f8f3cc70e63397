"""``Ordering`` built alone: a root numbers publishes densely, answers a number it holds as a
success or a collision, and gives a retried uid its original number."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, publish, store

from overlay.core.confirming import Confirming
from overlay.core.local_publishes import LocalPublish
from overlay.core.ordering import Ordering
from overlay.core.streams import State, Stream
from overlay.core.tokens import Tokens
from overlay.core.uid_table import UidTable
from overlay.core.witnesses import Witnesses
from overlay.messages import (
    PublishCollision,
    PublishConfirmed,
    PublishError,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
)


class Setup:
    """An ``Ordering`` with a real ``Confirming``; storing and sending down (``broadcast``)
    and the takeover's tail isolated as fakes."""

    def __init__(self, kit: Kit) -> None:
        self.store, self.close_tail = Calls(), Calls()
        part = self.part = Ordering(kit.stats, kit.memory, kit.signatures.packet_ok, self.store)
        local: dict[int, LocalPublish] = {}
        witnesses = Witnesses(kit.config, kit.stats, local, Calls(result=True))
        self.confirming = Confirming(
            kit.config,
            kit.streams,
            kit.stats,
            kit.out,
            witnesses,
            Calls(),
            part.store_new,
            Calls(),
            kit.timers,
            Tokens(),
        )
        part.attach(self.confirming, self.close_tail)

    def stored(self) -> list[tuple[int, int | None]]:
        """What was stored and sent down, as (number, uid)."""
        return [(packet.packet, packet.uid) for _, packet in self.store.calls]


def root(kit: Kit, *numbers: int) -> Stream:
    stream = kit.stream(State.ROOT, children=(b"C",))
    stream.uids = UidTable(kit.config.publish_uids)  # (a root's, as ``Takeover`` makes it)
    store(stream, *numbers)
    return stream


def test_a_new_publish_gets_the_next_number_and_goes_down() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit, 0, 1, 2)
    answer = setup.part.serialize(0.0, stream, publish(7), 1)  # (a local client's)
    assert answer == PublishSucceeded(7, KEY, 3)
    assert setup.stored() == [(3, 7)] and setup.close_tail.calls == [(stream,)]
    assert (kit.stats.published, kit.stats.numbered) == (1, 1)


def test_a_peers_publish_is_numbered_and_waits_for_its_node_to_confirm() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit, 0)
    assert setup.part.serialize(0.0, stream, publish(7), b"C") == PublishNumbered(7, KEY, 1)
    assert setup.stored() == []
    setup.confirming.on_confirmed(0.1, b"C", PublishConfirmed(7, KEY, 1))
    assert setup.stored() == [(1, 7)]


def test_a_retried_uid_gets_its_original_number_and_is_not_ordered_twice() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit, 0)
    setup.part.serialize(0.0, stream, publish(7), 1)
    assert setup.part.serialize(0.0, stream, publish(7), 1) == PublishSucceeded(7, KEY, 1)
    assert setup.stored() == [(1, 7)] and kit.stats.published == 1


def test_a_uid_reused_with_other_content_is_refused() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit, 0)
    setup.part.serialize(0.0, stream, publish(7, data=b"a"), 1)
    answer = setup.part.serialize(0.0, stream, publish(7, data=b"b"), 1)
    assert answer == PublishRejected(7, KEY, int(PublishError.UID_REUSED))
    assert kit.stats.uids_reused == 1 and setup.stored() == [(1, 7)]


def test_a_number_held_is_a_success_with_its_content_and_a_collision_without() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit, 0, 1, 2)
    assert setup.part.serialize(0.0, stream, publish(8, 1), 1) == PublishSucceeded(8, KEY, 1)
    answer = setup.part.serialize(0.0, stream, publish(9, 1, data=b"other"), 1)
    assert answer == PublishCollision(9, KEY, 1, 3)  # (the next number suggested)
    assert setup.stored() == []


def test_a_publisher_naming_a_number_past_the_next_is_told_the_next() -> None:
    kit = Kit()
    setup = Setup(kit)
    stream = root(kit, 0)
    assert setup.part.serialize(0.0, stream, publish(7, 5), 1) == PublishCollision(7, KEY, 5, 1)
    assert setup.stored() == [] and kit.stats.published == 0
