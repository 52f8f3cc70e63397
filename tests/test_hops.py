"""Moving a search hop to hop (``overlay.core.hops``): here, where a member of a tree sends
a resubscribe it may not accept. The greedy rules themselves (closest untried peer,
backtracking, timeouts) are tested with the rest of the node in ``test_node``."""

from __future__ import annotations

from test_node import KEY, MAX_HTL, joined_node, meet, sends

from overlay.core.effects import Effect
from overlay.messages import Accepted, DataNotFound, ResubscribeRequest, SubscribeRestarted

UID = 900


def forwarded_to(effects: list[Effect]) -> list[bytes]:
    return [peer for peer, m in sends(effects) if isinstance(m, ResubscribeRequest)]


def test_a_member_sends_a_resubscribe_it_may_not_accept_up_its_tree_first() -> None:
    # N (0.45) is a member below P (0.49); Z (0.499) is closer to the key than P, so greedy
    # routing would go there. Up the tree the search reaches N's root, which takes any.
    node = joined_node()
    meet(node, b"Z", 0.499)
    request = ResubscribeRequest(UID, KEY, MAX_HTL, 0.3, 0.47, None)
    effects = node.receive(1.0, b"Q", request)
    assert sends(effects)[0] == (b"Q", Accepted(UID))
    assert forwarded_to(effects) == [b"P"]


def test_a_member_sends_its_own_ancestors_resubscribe_on_greedily() -> None:
    # The restart is labelled from above: up the tree is back to the one searching.
    node = joined_node()
    meet(node, b"Z", 0.499)
    node.receive(1.0, b"P", SubscribeRestarted(UID, KEY, 0.49))
    effects = node.receive(1.1, b"Q", ResubscribeRequest(UID, KEY, MAX_HTL, 0.3, 0.49, None))
    assert forwarded_to(effects) == [b"Z"]


def test_after_its_parent_failed_the_member_goes_on_greedily() -> None:
    node = joined_node()
    meet(node, b"Z", 0.499)
    effects = node.receive(1.0, b"Q", ResubscribeRequest(UID, KEY, MAX_HTL, 0.3, 0.47, None))
    assert forwarded_to(effects) == [b"P"]
    effects = node.receive(1.1, b"P", DataNotFound(UID, KEY, 5))
    assert forwarded_to(effects) == [b"Z"]
