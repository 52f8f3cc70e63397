"""``Joining`` built alone (with the real components it calls): what a parent tells and
sends a new child, and what a node that took a parent does."""

from __future__ import annotations

from flowkit import KEY, Calls, Kit, store

from overlay.core.claims import Claims
from overlay.core.gathering import Gathering
from overlay.core.joining import Joining
from overlay.core.local_publishes import LocalPublish
from overlay.core.peer_witnesses import PeerWitnesses
from overlay.core.pushes import Pushes
from overlay.core.showing import Showing
from overlay.core.streams import State
from overlay.core.witnesses import Witnesses
from overlay.messages import PublishData, SubscribeData, SubscribeSucceeded


def joining(kit: Kit) -> tuple[Joining, Calls]:
    local: dict[int, LocalPublish] = {}
    ok = Calls(result=True)
    witnesses = Witnesses(kit.config, kit.stats, local, ok)
    peers = PeerWitnesses(kit.config, kit.stats, kit.streams, None, kit.out, witnesses, local, ok)
    claims = Claims(kit.streams, kit.stats, kit.out, local, witnesses, peers, Calls())
    pushes = Pushes(kit.config, kit.streams, kit.stats, kit.out)
    gathering = Gathering(kit.config, kit.stats, kit.out, pushes.push_one, claims.push_claims)
    showing = Showing(kit.config, kit.streams, kit.stats, kit.timers, kit.out, Calls())
    release_early = Calls()
    return Joining(kit.out, pushes, claims, gathering, showing, release_early), release_early


def test_a_new_child_is_told_the_newest_packet_processed_and_caught_up_after_its_last_seen() -> (
    None
):
    kit = Kit()
    part, _ = joining(kit)
    stream = kit.stream(State.JOINED, parent=b"P", children=(b"C",))
    store(stream, 0, 1, 2)
    reply = part.success(5, stream, last_seen=0)
    assert (reply.uid, reply.key, reply.last_packet) == (5, KEY, 2)
    part.catch_up(stream, b"C", 0)
    assert [(to, m.packet) for to, m in kit.sent() if isinstance(m, SubscribeData)] == [
        (b"C", 1),
        (b"C", 2),
    ]


def test_a_node_that_took_a_parent_pushes_up_what_the_parent_lacks() -> None:
    kit = Kit()
    part, release_early = joining(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    store(stream, 0, 1, 2)
    stream.shown_upto = 2
    part.attached(stream, SubscribeSucceeded(5, KEY, 0, None, {}), None)
    assert release_early.calls == [(stream, True)]
    pushed = [m.packet for to, m in kit.sent() if isinstance(m, PublishData)]
    assert pushed == [1, 2]


def test_a_fresh_node_starts_after_the_parents_head() -> None:
    kit = Kit()
    part, _ = joining(kit)
    stream = kit.stream(State.JOINED, parent=b"P")
    part.attached(stream, SubscribeSucceeded(5, KEY, 6, None, {}), None)
    assert stream.start == 7 and stream.high == 6
    assert part.resume_point(stream) == 6
