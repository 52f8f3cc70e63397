"""Looks that cross a looking root (``overlay.core.probes``, ``Probes.on_look_relayed``):
relays note a resubscribe's way back as a probe's, a root farther from the key than the
crossing look's origin follows it back, and forged crossings buy looks only as the
crossing backoff allows. Single-node tests, key at 0.5."""

from __future__ import annotations

from collections.abc import Sequence

import takeovers
from looking_roots import UID, new_root_looking, not_found, root
from nodes import KEY, make, meet, sends

from overlay.core.config import NodeConfig
from overlay.core.effects import Effect
from overlay.core.merges import RELOOKS
from overlay.core.node import Node
from overlay.core.probes import back_trail
from overlay.core.routing import TRAIL_HTL
from overlay.core.streams import State
from overlay.messages import DataNotFound, ResubscribeRequest, RootProbe


def test_a_relay_notes_the_way_back_of_a_look_it_passes_on() -> None:
    """A ResubscribeRequest (a restart's or a root's look, must-beat its origin's location)
    that a node routes on leaves the same trail as a probe: ``back_trail`` of its uid names
    the peer it came from, so a farther root it crossed can look back along it."""
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    out = sends(node.receive(1.0, b"P", ResubscribeRequest(UID, KEY, 5, 0.2, 0.2, 3)))
    assert [p for p, m in out if isinstance(m, ResubscribeRequest)] == [b"Q"]
    assert node.probes.trails == {back_trail(UID): b"P"}


def test_a_closer_origins_look_crossing_a_looking_root_makes_its_next_look_follow_it() -> None:
    """Two roots that took over from one dead root look at the same moments. N (0.45)
    looks; the look of a root at 0.48, closer to the key (0.5), comes in from P while N's
    label refuses it, and goes on. N's own look then finds nothing (greedy order keeps it
    in its own tree, refused by its own members), so its next look goes back the way the
    closer origin's came: P first, along ``back_trail`` of that look's uid, numbering held
    meanwhile. The closer origin takes it even while it looks itself (``restarts``,
    race 3); otherwise both would end their looks and number the same packets."""
    node, look = new_root_looking()
    crossing = ResubscribeRequest(UID, KEY, 5, 0.48, 0.48, 3)
    out = sends(node.receive(0.3, b"P", crossing))
    assert [(p, m.uid) for p, m in out if isinstance(m, ResubscribeRequest)] == [(b"Q", UID)]
    stats, stream = node.stats, node.streams[KEY]
    assert (stats.splits_found, stats.looks_crossed, stream.root.probe_misses) == (1, 1, 0)
    [(peer, again)] = [
        (p, m)
        for p, m in sends(node.receive(0.4, b"Q", DataNotFound(look.uid, KEY, 5)))
        if isinstance(m, ResubscribeRequest)
    ]
    assert (peer, again.uid) == (b"P", look.uid)
    effects = node.receive(0.5, b"P", not_found(again))  # this look found nothing
    [(peer, trailed)] = [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    assert (peer, trailed.trail, trailed.must_beat) == (b"P", back_trail(UID), 0.45)
    assert trailed.uid not in (UID, look.uid, back_trail(UID))  # a uid of its own
    assert trailed.htl == TRAIL_HTL  # the trail's own budget (``Searches.forward``)
    assert node.streams[KEY].root.recover_until is not None  # numbering still held
    assert node.streams[KEY].root.relooks == 1  # one of the repair's repeated looks
    # The trail found nothing, and the search at its end spent its budget: the look goes
    # on in greedy order with its own.
    reply = DataNotFound(trailed.uid, KEY, 0)
    [(peer, onward)] = looks(node.receive(0.6, b"P", reply))
    assert (peer, onward.uid, onward.htl) == (b"Q", trailed.uid, NodeConfig().check_htl)


def test_a_relay_sends_a_look_first_along_the_trail_it_names() -> None:
    """A look names the trail it follows beside a uid of its own: a relay that noted a
    way under that trail tries it first (P, though Q is closer to the key) and passes the
    trail on. Two roots that one search crossed follow one trail; under one uid, the
    second look's label would not reach the members that saw the first (they confirm a
    uid seen before at once), and a member below them could take its search: a cycle."""
    node = make(0.3)
    for peer, location in ((b"P", 0.2), (b"Q", 0.4), (b"S", 0.1)):
        meet(node, peer, location)
    node.receive(1.0, b"S", RootProbe(UID, KEY, 5, 0.1, 0.1))
    out = sends(
        node.receive(2.0, b"Q", ResubscribeRequest(9, KEY, 5, 0.45, 0.45, 3, None, back_trail(UID)))
    )
    [(peer, look)] = [(p, m) for p, m in out if isinstance(m, ResubscribeRequest)]
    assert (peer, look.uid, look.trail) == (b"S", 9, back_trail(UID))


def trail_relay() -> Node:
    """A node (0.3) with peers P (0.2), Q (0.4) and S (0.1) that relayed a probe from S:
    its ``back_trail`` names S."""
    node = make(0.3)
    for peer, location in ((b"P", 0.2), (b"Q", 0.4), (b"S", 0.1)):
        meet(node, peer, location)
    node.receive(1.0, b"S", RootProbe(UID, KEY, 5, 0.1, 0.1))
    return node


def looks(effects: Sequence[Effect]) -> list[tuple[bytes, ResubscribeRequest]]:
    return [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]


def test_a_relay_passes_a_look_along_its_trail_on_the_trails_budget_and_nowhere_else() -> None:
    """A trail is a way a probe walked to a closer root; in a darknet it can be twice a
    look's HTL long, and a look that runs out one hop short leaves two roots numbering
    side by side. So a relay passes a look on along the trail it noted with one less of the
    budget the look came with, up to ``TRAIL_HTL`` (more than a search may carry here),
    and when that hop finds nothing it tries no other peer: from every hop of a long trail,
    a search with most of a budget would make one look cost as many searches."""
    node = trail_relay()
    look = ResubscribeRequest(9, KEY, TRAIL_HTL, 0.45, 0.45, 3, None, back_trail(UID))
    [(peer, along)] = looks(node.receive(2.0, b"Q", look))
    assert (peer, along.htl) == (b"S", TRAIL_HTL - 1)
    out = sends(node.receive(2.1, b"S", DataNotFound(9, KEY, TRAIL_HTL - 2)))
    assert [(p, type(m)) for p, m in out] == [(b"Q", DataNotFound)]
    [(_, reply)] = out
    assert reply.lost  # type: ignore[attr-defined]  # (only one way tried: look again)


def test_a_relay_on_a_look_trail_that_finds_nothing_does_not_root_the_stream() -> None:
    """A relay closer to the key than the look's origin and than any node the look saw,
    whose trail hop finds nothing, answers "not found": it searched no further than that
    hop, so it is not where a search ran out, and rooting the stream there would make a
    root beside the closer one the trail leads to."""
    node = make(0.49)
    for peer, location in ((b"P", 0.2), (b"Q", 0.4), (b"S", 0.1)):
        meet(node, peer, location)
    node.receive(1.0, b"S", RootProbe(UID, KEY, 5, 0.1, 0.1))
    look = ResubscribeRequest(9, KEY, TRAIL_HTL, 0.45, 0.45, 3, None, back_trail(UID))
    [(peer, _)] = looks(node.receive(2.0, b"Q", look))
    assert peer == b"S"
    out = sends(node.receive(2.1, b"S", DataNotFound(9, KEY, TRAIL_HTL - 2)))
    assert [(p, type(m)) for p, m in out] == [(b"Q", DataNotFound)]
    assert KEY not in node.streams and node.stats.roots == 0


def test_a_look_whose_trail_names_no_hop_here_is_a_search_like_any_other() -> None:
    """A relay that noted no way under the look's trail (or noted one to a peer since
    gone) routes it in greedy order with a search's budget: at most ``check_htl`` less
    one, whatever the look came with, and backtracks when a hop finds nothing."""
    node = trail_relay()
    check_htl = NodeConfig().check_htl
    look = ResubscribeRequest(9, KEY, TRAIL_HTL, 0.45, 0.45, 3, None, back_trail(UID + 1))
    [(peer, along)] = looks(node.receive(2.0, b"Q", look))
    assert (peer, along.htl) == (b"P", check_htl - 1)
    [(peer, past)] = looks(node.receive(2.1, b"P", DataNotFound(9, KEY, 5)))
    assert (peer, past.htl) == (b"S", 5)
    node.link_down(3.0, b"S")
    look = ResubscribeRequest(10, KEY, TRAIL_HTL, 0.45, 0.45, 3, None, back_trail(UID))
    [(peer, along)] = looks(node.receive(3.1, b"Q", look))
    assert (peer, along.htl) == (b"P", check_htl - 1)


def test_a_crossing_look_counts_among_the_repairs_repeated_looks() -> None:
    """A look's crossing makes a looking root look once more, as one of its ``RELOOKS``:
    forged crossings, each followed by a look that a hostile first hop accepts and leaves
    unanswered, would otherwise hold the root's numbering for as long as they come."""
    node, _ = new_root_looking()
    stream = node.streams[KEY]
    stream.root.relooks = RELOOKS
    node.receive(0.3, b"P", ResubscribeRequest(UID, KEY, 5, 0.48, 0.48, 3))
    assert node.stats.looks_crossed == 0 and stream.root.crossed is None


def test_crossing_looks_back_off_across_repairs_until_one_merges() -> None:
    """A neighbour that forges a closer origin's look each time we look, and drops its
    link to bring on a new repair (whose repeated looks start again from none), makes us
    look along its trail, and so toward itself, only as a backoff allows: a probe interval
    two probe intervals after the first such look (which counts as a miss until it merges),
    four after the second, as long as none merges."""
    node, _ = new_root_looking()
    stream = node.streams[KEY]
    interval = NodeConfig().probe_interval
    looked = []
    for now in (1.0, 1.0 + interval, 1.0 + 2 * interval, 1.0 + 5 * interval, 1.0 + 6 * interval):
        stream.root.relooks = 0  # a new repair (``Merges.lost_child``)
        stream.root.crossed = None
        node.probes.on_look_relayed(now, b"P", UID + int(now), KEY, 0.48)
        looked.append(stream.root.crossed is not None)
    assert looked == [True, False, True, False, True]
    assert node.stats.looks_crossed == 3 and stream.root.probe_misses == 0


def test_a_look_crossing_a_settled_root_makes_no_look() -> None:
    """A settled root takes any resubscribe, except one under a uid of its old labels,
    which a peer that was below it can replay: passed on, it shows no tree that looks,
    and would make the root look toward that peer past the crossing looks' backoff."""
    node = root(0.45)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.3)
    node.streams[KEY].restarts_seen.append(UID)
    out = sends(node.receive(1.0, b"P", ResubscribeRequest(UID, KEY, 5, 0.48, 0.48, 3)))
    assert [(p, m.uid) for p, m in out if isinstance(m, ResubscribeRequest)] == [(b"Q", UID)]
    assert node.stats.looks_crossed == 0 and node.streams[KEY].root.looking is None


def test_a_takeover_starts_the_crossing_looks_backoff_again() -> None:
    """Two roots that take over from one dead root look in step, and the farther must
    follow the first crossing: misses from an earlier time as root do not hold it back."""
    net = takeovers.tree()
    stream = takeovers.carried(net, takeovers.X)
    stream.root.cross_misses, stream.root.crossed_at = 5, 0.5
    net.advance(1.0)
    net.hold(takeovers.C)
    net.disconnect(takeovers.R, takeovers.X)
    net.advance(1.0 + takeovers.ACCEPT)
    assert net.nodes[takeovers.X].stats.roots == 1 and stream.state is State.ROOT
    assert (stream.root.cross_misses, stream.root.crossed_at) == (0, None)


def test_with_probes_off_a_crossing_look_makes_no_look() -> None:
    node, look = new_root_looking(probe_interval=0.0)
    node.receive(0.3, b"P", ResubscribeRequest(UID, KEY, 5, 0.48, 0.48, 3))
    assert node.stats.splits_found == 0 and node.streams[KEY].root.crossed is None
    [(peer, again)] = [
        (p, m)
        for p, m in sends(node.receive(0.4, b"Q", DataNotFound(look.uid, KEY, 5)))
        if isinstance(m, ResubscribeRequest)
    ]
    assert (peer, again.uid) == (b"P", look.uid)
