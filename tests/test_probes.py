"""Root probes (``overlay.core.probes``): a root asks now and then whether a closer root of
its stream exists, and a split tree merges when one does.

Single-node tests feed RootProbe/ProbeAnswer to one core (key at 0.5); the end-to-end test
builds two trees of one stream that cannot see each other, links them far from either
root (so no root meets a closer peer), and waits for the probes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from core_parts import Parts
from corenet import CoreNet
from looking_roots import UID, new_root_looking, not_found, root
from nodes import KEY, make, meet, sends
from takeovers import acked, seen

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Effect
from overlay.core.events import PublishAcked
from overlay.core.merges import RELOOKS
from overlay.core.node import Node
from overlay.core.probes import _PATHS, ahead_trail, back_trail
from overlay.core.routing import Route
from overlay.core.streams import State
from overlay.messages import (
    DataNotFound,
    Heartbeat,
    Hello,
    ProbeAnswer,
    RestartConfirmed,
    ResubscribeRequest,
    RootProbe,
    SubscribeRequest,
    SubscribeRestarted,
)


def test_a_settled_root_closer_than_the_asker_answers_with_its_location() -> None:
    node = root(0.45)
    meet(node, b"P", 0.2)
    effects = node.receive(1.0, b"P", RootProbe(UID, KEY, 5, 0.3, 0.3))
    assert sends(effects) == [(b"P", ProbeAnswer(UID, KEY, 0.45, 0))]


def test_a_root_no_closer_than_the_asker_passes_the_probe_on_and_looks_back_along_it() -> None:
    """The probe shows that a root closer than N exists, and that the way to it is back
    the way the probe came: N looks, first through P (though Q is closer to the key), under
    a uid of its own and the trail ``back_trail`` derives from the probe's uid, under which
    every relay of the probe noted its way. At most one such look per probe interval,
    doubled by each miss."""
    node = root(0.45)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.3)
    out = sends(node.receive(1.0, b"P", RootProbe(UID, KEY, 5, 0.48, 0.48)))
    assert (b"Q", RootProbe(UID, KEY, 4, 0.48, 0.48)) in out
    [(peer, look)] = [(p, m) for p, m in out if isinstance(m, ResubscribeRequest)]
    assert (peer, look.trail, look.must_beat) == (b"P", back_trail(UID), 0.45)
    assert node.stats.splits_found == 1 and node.streams[KEY].root.recover_until is not None
    [(peer, again)] = sends(node.receive(1.1, b"P", DataNotFound(look.uid, KEY, 5)))
    assert peer == b"Q" and again.uid == look.uid  # then greedy order
    node.receive(1.2, b"Q", not_found(again))
    assert node.streams[KEY].root.recover_until is None  # found nothing: numbering goes on
    interval = NodeConfig().probe_interval  # after a miss, twice that (the probe backoff)
    for now, uid, looks in (
        (2.0, UID + 1, 0),
        (1 + interval, UID + 2, 0),
        (1 + 2 * interval, UID + 3, 1),
    ):
        out = sends(node.receive(now, b"P", RootProbe(uid, KEY, 5, 0.48, 0.48)))
        assert len([m for _, m in out if isinstance(m, ResubscribeRequest)]) == looks


def test_a_root_in_a_repair_closer_than_the_asker_answers_too() -> None:
    """Its look may miss the asker's tree (a partition that heals while the closer root
    looks): unanswered, the farther root's probe passes it and both number side by side."""
    node, _ = new_root_looking()
    effects = node.receive(0.3, b"P", RootProbe(UID, KEY, 5, 0.3, 0.3))
    assert sends(effects) == [(b"P", ProbeAnswer(UID, KEY, 0.45, 0))]


@pytest.mark.parametrize("probe_interval", [30.0, 0.0])
def test_a_root_whose_look_found_no_other_tree_probes_at_once(probe_interval: float) -> None:
    """N's look finds no other tree, so its grace ends: it probes toward the key then, not
    a probe interval later. Its look could only reach a closer root; a farther root that
    numbers beside it (the other side of a partition that healed just before N took over,
    whose probe on the new links found nobody) learns of N when N's probe crosses it. With
    probes off, no probe."""
    node, look = new_root_looking(probe_interval=probe_interval)
    out = sends(node.receive(0.3, b"Q", not_found(look)))  # no budget left: the look ends
    stream = node.streams[KEY]
    assert stream.state is State.ROOT and stream.root.looking is None
    assert stream.root.recover_until is None
    probes = [(p, m) for p, m in out if isinstance(m, RootProbe)]
    if probe_interval:
        assert [(p, m.key, m.must_beat) for p, m in probes] == [(b"Q", KEY, 0.45)]
        assert stream.root.looked_probe_at == 0.3
    else:
        assert probes == []


def test_a_closer_root_probe_crossing_a_look_makes_the_next_look_follow_it_back() -> None:
    node, look = new_root_looking()
    out = sends(node.receive(0.3, b"P", RootProbe(UID, KEY, 5, 0.48, 0.48)))
    assert [type(m) for _, m in out] == [RootProbe]  # relayed; the look under way goes on
    [(peer, again)] = sends(node.receive(0.4, b"Q", DataNotFound(look.uid, KEY, 5)))
    assert (peer, again.uid) == (b"P", look.uid)
    effects = node.receive(0.5, b"P", not_found(again))  # this look found nothing
    [(peer, trailed)] = [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    assert (peer, trailed.trail, trailed.must_beat) == (b"P", back_trail(UID), 0.45)
    assert node.streams[KEY].root.recover_until is not None  # numbering still held


def test_a_probe_crossing_a_root_in_a_grace_with_no_look_makes_one_due() -> None:
    """A root holding numbering for a claim (no look of its own under way) would let its
    grace end without looking: the crossing makes a look due, under the probe's trail."""
    node = root(0.45)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.3)
    stream = node.streams[KEY]
    node.flow.hold(1.0, stream)
    out = sends(node.receive(1.0, b"P", RootProbe(UID, KEY, 5, 0.48, 0.48)))
    assert [type(m) for _, m in out] == [RootProbe] and stream.root.look_due
    assert stream.root.recover_until is not None
    [(peer, look)] = [
        (p, m)
        for p, m in sends(node.handle_timer(stream.root.recover_until))
        if isinstance(m, ResubscribeRequest)
    ]
    assert (peer, look.trail, look.must_beat) == (b"P", back_trail(UID), 0.45)


def test_with_probes_off_a_crossing_probe_makes_no_look() -> None:
    node = root(0.45, probe_interval=0.0)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.3)
    out = sends(node.receive(1.0, b"P", RootProbe(UID, KEY, 5, 0.48, 0.48)))
    assert out == [(b"Q", RootProbe(UID, KEY, 4, 0.48, 0.48))]


def test_a_relay_notes_the_way_back_of_every_probe_and_the_way_on_of_a_found_root() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    [(peer, _)] = sends(node.receive(1.0, b"P", RootProbe(UID, KEY, 5, 0.2, 0.2)))
    assert peer == b"Q"
    node.receive(1.1, b"Q", ProbeAnswer(UID, KEY, 0.49, 0))
    assert node.probes.trails == {back_trail(UID): b"P", ahead_trail(UID): b"Q"}


def test_a_node_without_the_stream_relays_the_probe_and_its_answer() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    meet(node, b"S", 0.1)
    # Closer than best_loc: best_loc is ours (the search rule), and HTL is reset to the
    # budget a probe starts with (check_htl, 20), wider than a subscribe's max_htl.
    effects = node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.2, 0.45))
    assert sends(effects) == [(b"Q", RootProbe(UID, KEY, 20, 0.3, 0.45))]
    assert NodeConfig().check_htl == 20
    assert sends(node.receive(1.1, b"Q", ProbeAnswer(UID, KEY, 0.49, 0))) == [
        (b"P", ProbeAnswer(UID, KEY, 0.49, 0))
    ]
    # Once answered the way back is forgotten: a second answer goes nowhere.
    assert sends(node.receive(1.2, b"Q", ProbeAnswer(UID, KEY, 0.49, 0))) == []


def test_a_probe_backtracks_with_the_budget_the_failed_branch_left() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    meet(node, b"S", 0.1)
    node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.35, 0.45))
    effects = node.receive(1.1, b"Q", ProbeAnswer(UID, KEY, None, 1))
    assert sends(effects) == [(b"S", RootProbe(UID, KEY, 1, 0.35, 0.45))]
    # Nothing left to try: "none" goes back with what is left of the budget.
    assert sends(node.receive(1.2, b"S", ProbeAnswer(UID, KEY, None, 0))) == [
        (b"P", ProbeAnswer(UID, KEY, None, 0))
    ]


def test_a_probe_whose_next_hop_goes_away_goes_on_past_it() -> None:
    """A relay sent a probe to Q, and Q's link goes (it had died unnoticed): the probe
    goes on to the next peer with the budget it had, and when none is left "none" goes
    back. Lost in Q, a root's probe on a healed partition's new links would leave two
    roots numbering side by side until the next probe round."""
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    meet(node, b"S", 0.1)
    node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.35, 0.45))
    effects = node.link_down(2.0, b"Q")
    assert [(p, m) for p, m in sends(effects) if isinstance(m, RootProbe)] == [
        (b"S", RootProbe(UID, KEY, 2, 0.35, 0.45))
    ]
    effects = node.link_down(3.0, b"S")
    assert [(p, m) for p, m in sends(effects) if isinstance(m, ProbeAnswer)] == [
        (b"P", ProbeAnswer(UID, KEY, None, 2))
    ]
    assert node.stats.probes_rerouted == 2


def test_a_roots_own_probe_whose_hop_goes_away_goes_on_past_it() -> None:
    """A root's probe on a new link waits on P; P goes: the probe goes on to Q with the
    budget it had. P going again sends nothing: no probe waits on it any more."""
    parts = Parts()
    parts.meet(b"P", 0.3)
    parts.meet(b"Q", 0.2)
    parts.stream(KEY)
    parts.probes.lost_a_link = True
    parts.probes.probe_new_links(1.0)
    [(peer, probe)] = parts.sends()
    assert peer == b"P" and isinstance(probe, RootProbe)
    parts.probes.lost_peer(b"P")
    assert parts.sends() == [(b"Q", probe)]
    parts.probes.lost_peer(b"P")  # no probe waits on it any more
    assert parts.sends() == []


def test_a_probe_whose_sender_redials_is_still_answered() -> None:
    """P's link drops and P dials again at once (the same node, its boot id unchanged)
    while the probe it sent waits on Q: Q's answer still goes back to P, whose probe waits
    for it. Forgotten with the link, the answer would be lost, and a root beside a closer
    one would number on until its next probe round."""
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.35, 0.45))
    node.link_down(1.1, b"P")
    meet(node, b"P", 0.2, now=1.2)
    assert sends(node.receive(1.3, b"Q", ProbeAnswer(UID, KEY, 0.49, 0))) == [
        (b"P", ProbeAnswer(UID, KEY, 0.49, 0))
    ]


def test_an_answer_from_a_peer_not_asked_is_ignored() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    meet(node, b"S", 0.1)
    node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.35, 0.45))
    assert sends(node.receive(1.1, b"S", ProbeAnswer(UID, KEY, 0.49, 0))) == []
    assert sends(node.receive(1.1, b"S", ProbeAnswer(UID + 1, KEY, 0.49, 0))) == []


def test_a_probe_seen_before_is_a_loop_answered_with_its_own_budget() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.35, 0.45))
    effects = node.receive(1.1, b"Q", RootProbe(UID, KEY, 2, 0.4, 0.45))
    assert sends(effects) == [(b"Q", ProbeAnswer(UID, KEY, None, 2))]


def test_a_node_with_nowhere_to_send_a_probe_answers_none() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    effects = node.receive(1.0, b"P", RootProbe(UID, KEY, 3, 0.35, 0.45))
    assert sends(effects) == [(b"P", ProbeAnswer(UID, KEY, None, 2))]


def test_a_flood_of_probes_keeps_bounded_state() -> None:
    node = make(0.3)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.4)
    for uid in range(_PATHS + 500):
        node.receive(1.0, b"P", RootProbe(uid, KEY, 3, 0.35, 0.45))
    assert node.probes.in_flight == _PATHS
    # The oldest were forgotten: their answers are dropped, the newest still go back.
    assert sends(node.receive(1.1, b"Q", ProbeAnswer(0, KEY, 0.49, 0))) == []
    last = _PATHS + 499
    assert sends(node.receive(1.1, b"Q", ProbeAnswer(last, KEY, 0.49, 0))) == [
        (b"P", ProbeAnswer(last, KEY, 0.49, 0))
    ]


BEATS = {"heartbeat_interval": 1.0, "dead_after": 1e6, "probe_interval": 3.0}


def probes_sent(effects: Sequence[Effect]) -> list[RootProbe]:
    return [m for _, m in sends(effects) if isinstance(m, RootProbe)]


def beat_until_probe(node: Node, start: float) -> tuple[float, RootProbe]:
    """Let heartbeat rounds fire until the node probes; returns when, and the probe."""
    now = start
    node.receive(now, b"P", Heartbeat(1))  # starts nothing: rounds run from the first Hello
    for _ in range(10):
        now = node.next_deadline() or now
        found = probes_sent(node.handle_timer(now))
        if found:
            assert len(found) == 1
            return now, found[0]
    raise AssertionError("the root never probed")


def test_a_root_probes_every_interval_and_looks_when_a_closer_root_answers() -> None:
    node = root(0.45, **BEATS)
    meet(node, b"P", 0.2)
    now, probe = beat_until_probe(node, 0.0)
    assert (probe.key, probe.must_beat, probe.best_loc) == (KEY, 0.45, 0.45)
    assert probe.htl == NodeConfig().check_htl  # wider than a subscribe's (``config``)
    assert node.stats.probes == 1
    effects = node.handle_timer(now)  # (nothing more this round)
    # A farther "root" changes nothing (it would have to join us, not we it).
    node.receive(now, b"P", ProbeAnswer(probe.uid, KEY, 0.4, 0))
    assert node.streams[KEY].root.looking is None
    now, probe = beat_until_probe(node, now)
    effects = node.receive(now, b"P", ProbeAnswer(probe.uid, KEY, 0.49, 0))
    stream = node.streams[KEY]
    assert node.stats.splits_found == 1
    assert (
        stream.root.looking is not None and stream.root.recover_until is not None
    )  # numbering held
    search = [m for _, m in sends(effects)]
    assert any(getattr(m, "must_beat", None) == 0.45 for m in search)  # the look's search


def test_a_look_after_a_probe_follows_the_way_the_answer_came() -> None:
    """The probe went to Q first (closer to the key), found nothing there, and reached the
    closer root through P: the look goes through P first, along the trail ``ahead_trail``
    derives from the probe's uid, under which each relay of the answer noted its way."""
    node = root(0.45, **BEATS)
    meet(node, b"P", 0.2)
    meet(node, b"Q", 0.3)
    now, probe = beat_until_probe(node, 0.0)
    [(peer, retry)] = sends(node.receive(now, b"Q", ProbeAnswer(probe.uid, KEY, None, 3)))
    assert peer == b"P" and retry.uid == probe.uid
    effects = node.receive(now, b"P", ProbeAnswer(probe.uid, KEY, 0.49, 0))
    [(peer, look)] = [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    assert (peer, look.trail, look.must_beat) == (b"P", ahead_trail(probe.uid), 0.45)


def test_a_root_whose_looks_miss_probes_less_and_less_often() -> None:
    node = root(0.45, **BEATS)
    meet(node, b"P", 0.2)
    stream = node.streams[KEY]
    times = []
    now = 0.0
    for _ in range(3):
        now, probe = beat_until_probe(node, now)
        times.append(now)
        node.receive(now, b"P", ProbeAnswer(probe.uid, KEY, 0.49, 0))
        # The look's search finds nothing (the closer root is out of its reach).
        for _ in range(50):
            if stream.root.looking is None and stream.root.recover_until is None:
                break
            now = node.next_deadline() or now
            for _, message in sends(node.handle_timer(now)):
                if hasattr(message, "must_beat") and not isinstance(message, RootProbe):
                    node.receive(now, b"P", not_found(message))
        assert stream.root.looking is None and stream.state is State.ROOT
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[1] > gaps[0] > 0
    assert stream.root.probe_misses == 3


def hello(node: Node, now: float, peer: bytes, location: float) -> list[RootProbe]:
    """A new peer's link comes up and its Hello arrives; the probes that sends."""
    effects = list(node.link_up(now, peer))
    effects += node.receive(now, peer, Hello(location, 100))
    return probes_sent(effects)


def test_a_look_s_probe_does_not_silence_the_probe_a_healed_link_sends() -> None:
    """N loses a link (a partition), and its look ends half a heartbeat before the
    partition heals: the look's probe went out over the cut graph, so the probe on the new
    link must still go, or N waits a probe interval to meet a root beyond the cut."""
    node, look = new_root_looking(**BEATS)
    node.link_down(0.25, b"P")
    assert probes_sent(node.receive(0.3, b"Q", not_found(look)))  # the look's end
    assert hello(node, 0.8, b"R", 0.3)  # the heal, within the same heartbeat interval


def test_looks_ending_within_a_heartbeat_probe_once() -> None:
    """Link churn can make a root look again and again (each lost child holds it for a
    grace and a look); the probes that looks' ends send come at most once a heartbeat
    interval, so they cannot outrun the rounds' bound."""
    node, look = new_root_looking(**BEATS)
    stream = node.streams[KEY]
    assert probes_sent(node.receive(0.3, b"Q", not_found(look)))
    node.merges.start_look(0.5, stream)  # another look, as a lost child's grace ends in one
    [again] = [m for _, m in sends(node.out.take()) if isinstance(m, ResubscribeRequest)]
    assert probes_sent(node.receive(0.6, b"Q", not_found(again))) == []
    assert stream.root.looked_probe_at == 0.3


def test_a_root_that_lost_a_link_probes_as_soon_as_a_new_one_comes_up() -> None:
    node = root(0.45, **BEATS)
    # Links growing on a node that never lost one cut nothing apart: no probe yet.
    assert hello(node, 0.0, b"P", 0.2) == []
    node.link_down(0.5, b"P")  # (a partition, a crash: from here a link may be a way back)
    probes = hello(node, 1.0, b"Q", 0.3)
    assert [(p.key, p.must_beat, p.htl) for p in probes] == [(KEY, 0.45, NodeConfig().check_htl)]
    assert node.stats.probes == 1
    # More links within one heartbeat interval do not probe again; after it, they do.
    assert hello(node, 1.5, b"R", 0.25) == []
    assert len(hello(node, 2.0, b"S", 0.35)) == 1


def test_a_root_whose_looks_miss_gets_no_probe_from_new_links() -> None:
    node = root(0.45, **BEATS)
    hello(node, 0.0, b"P", 0.2)
    node.link_down(0.5, b"P")
    node.streams[KEY].root.probe_misses = 1  # (its rounds back off: links must not undo that)
    assert hello(node, 1.0, b"Q", 0.3) == []


def root_beside_a_closer_peer(*others: tuple[bytes, float]) -> tuple[Node, float]:
    """N (0.45) is root of KEY though P (0.48) is closer: P, and any ``others`` N is linked
    to, refuse every search of N's (busy elsewhere, say). Returns N once its looks are
    over, and the time then."""
    node = make(0.45, **BEATS)
    for peer, location in ((b"P", 0.48), *others):
        meet(node, peer, location)
    effects = node.subscribe(0.0, KEY, 1)
    stream = node.streams[KEY]
    now = 0.1
    while True:  # the search, the first look, and the looks again after it (``merges``)
        for peer, message in sends(effects):
            if isinstance(message, SubscribeRequest | ResubscribeRequest):
                effects = node.receive(now, peer, not_found(message))
                break
        else:
            if stream.root.recover_until is None and not stream.root.look_due:
                break
            now = node.next_deadline() or now
            effects = node.handle_timer(now)
    assert stream.state is State.ROOT and stream.root.looking is None
    return node, now


def test_a_failed_look_beside_a_closer_stranger_is_repeated_after_a_pause() -> None:
    """Two roots that took over from one dead root look at the same time, and each one's
    label makes the other's search fail where it meets the other tree. A root with a
    closer peer outside its tree looks again (up to RELOOKS times) after a random pause
    of at most a heartbeat interval, holding numbering, so that the two looks part; then
    numbering resumes."""
    node = make(0.45, **BEATS)
    meet(node, b"P", 0.48)
    [(_, search)] = sends(node.subscribe(0.0, KEY, 1))
    [(_, look)] = sends(node.receive(0.1, b"P", not_found(search)))
    stream = node.streams[KEY]
    now = 0.2
    for _ in range(RELOOKS):
        assert sends(node.receive(now, b"P", not_found(look))) == []  # no look at once
        assert stream.root.look_due and stream.root.recover_until is not None
        pause = stream.root.recover_until - now
        assert 0 <= pause <= BEATS["heartbeat_interval"]
        assert not [e for e in node.publish(now, KEY, 1, 9, b"held") if isinstance(e, Deliver)]
        now = stream.root.recover_until
        [look] = [m for _, m in sends(node.handle_timer(now)) if isinstance(m, ResubscribeRequest)]
        assert look.must_beat == 0.45
    effects = node.receive(now, b"P", not_found(look))  # the last: numbering resumes
    assert stream.root.recover_until is None and node.stats.looks == 1 + RELOOKS
    assert Deliver(1, PublishAcked(KEY, 9, 0)) in effects


def test_a_root_with_a_closer_peer_outside_its_tree_looks_instead_of_probing() -> None:
    """Greedy routing from P would never reach N, and P may hang in another tree whose
    root is farther than N, which no probe of N's meets. So at its probe round N looks,
    must-beat its own location, which P's tree would take; a look that finds nothing
    counts as a miss (the next comes half as often)."""
    node, now = root_beside_a_closer_peer()
    looks = node.stats.looks
    while node.stats.looks == looks:
        now = node.next_deadline() or now
        assert now < 100, "the root never looked again"
        effects = node.handle_timer(now)
    assert probes_sent(effects) == [] and node.stats.probes == 0
    [(peer, again)] = [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    assert (peer, again.must_beat) == (b"P", 0.45)
    stream = node.streams[KEY]
    assert stream.root.recover_until is not None and stream.root.probe_misses == 1  # numbering held
    # Found nothing: not repeated (it would hold numbering again each time); numbering on.
    node.receive(now, b"P", not_found(again))
    assert stream.root.recover_until is None and node.stats.looks == looks + 1


def test_a_closer_roots_probe_crossing_a_look_past_a_closer_peer_is_followed() -> None:
    """N's look past P is a guess (P may well be in N's own tree); a probe from a closer
    root that crosses it meanwhile is news, and the look after it follows that probe back.
    Counted against the same backoff as the guess, which has just begun, a root whose
    rounds come just before the other root's probes would never follow one, and the two
    roots would never merge."""
    node, now = root_beside_a_closer_peer((b"Q", 0.3))
    looks = node.stats.looks
    while node.stats.looks == looks:
        now = node.next_deadline() or now
        assert now < 100, "the root never looked again"
        effects = node.handle_timer(now)
    [guess] = [m for p, m in sends(effects) if isinstance(m, ResubscribeRequest) and p == b"P"]
    crossing = node.receive(now, b"Q", RootProbe(UID, KEY, 5, 0.49, 0.49))
    assert [type(m) for _, m in sends(crossing)] == [RootProbe]  # relayed; the guess goes on
    effects = node.receive(now, b"P", not_found(guess))
    [(peer, trailed)] = [(p, m) for p, m in sends(effects) if isinstance(m, ResubscribeRequest)]
    assert (peer, trailed.trail, trailed.must_beat) == (b"Q", back_trail(UID), 0.45)


def test_a_root_whose_closer_peer_is_its_child_probes() -> None:
    """Once P hangs from N, P is in N's tree: a look could only be refused there."""
    node, now = root_beside_a_closer_peer()
    node.receive(now, b"P", SubscribeRequest(5, KEY, 10, 0.48, None))
    assert b"P" in node.streams[KEY].children
    _, probe = beat_until_probe(node, now)
    assert probe.must_beat == 0.45


def test_a_look_goes_first_to_the_closest_peer_outside_the_tree() -> None:
    """Greedy order would send N's look to its child C (0.49), whose subtree carries the
    look's label and refuses it, and may spend the look's whole budget in there: a farther
    root's looks might never reach the closer root beside it (across the 0/1 wrap, say).
    The look goes first to P (0.48), the closest peer closer than N that is not its child;
    after P, in greedy order."""
    node, now = root_beside_a_closer_peer((b"C", 0.49))
    node.receive(now, b"C", SubscribeRequest(5, KEY, 10, 0.49, None))
    assert b"C" in node.streams[KEY].children
    labels: list[SubscribeRestarted] = []
    while not labels:
        now = node.next_deadline() or now
        assert now < 100, "the root never looked again"
        labels = [m for _, m in sends(node.handle_timer(now)) if isinstance(m, SubscribeRestarted)]
    [(first, look)] = sends(node.receive(now, b"C", RestartConfirmed(labels[0].uid, KEY)))
    assert (first, type(look)) == (b"P", ResubscribeRequest)
    [(second, again)] = sends(node.receive(now, b"P", DataNotFound(look.uid, KEY, 5)))
    assert (second, again.uid) == (b"C", look.uid)


# --- end to end: a split that no takeover looked for -----------------------------------------


R1, A1, R2, A2 = b"R1", b"A1", b"R2", b"A2"


@pytest.mark.parametrize("probe_interval", [0.0, 5.0])
def test_two_trees_of_one_stream_become_one_once_linked(probe_interval: float) -> None:
    config = NodeConfig(heartbeat_interval=1.0, dead_after=3.0, probe_interval=probe_interval)
    net = CoreNet(seed=3, config=config)
    for name, location in ((R1, 0.52), (A1, 0.3), (R2, 0.45), (A2, 0.2)):
        net.add(name, location)
    net.connect(R1, A1)
    net.connect(R2, A2)
    net.subscribe(A1, KEY)
    net.subscribe(A2, KEY)
    assert net.roots(KEY) == [R1, R2]  # two trees that cannot see each other
    net.publish(A1, KEY, b"one side", uid=500)
    # Linked far from either root: no root meets a closer peer, nothing restarts.
    net.connect(A1, A2)
    net.advance(net.now + 30.0)
    if probe_interval == 0:
        assert net.roots(KEY) == [R1, R2]  # without probes the split stays: the control
        return
    assert net.roots(KEY) == [R1] and net.tree_problems(KEY) == []
    assert net.nodes[R2].stats.splits_found >= 1
    # A2 went over to A1 (its old root R2, which has no client, then left the stream).
    assert net.stream(A2, KEY).parent == A1  # type: ignore[union-attr]
    # One numbering: a publish from the side that joined reaches both sides.
    net.publish(A2, KEY, b"after", uid=501)
    assert acked(net, A2) == {501: 1}
    assert seen(net, A1) == [(0, b"one side"), (1, b"after")]
    assert seen(net, A2)[-1:] == [(1, b"after")]


# --- the component alone ------------------------------------------------------------------


def test_a_settled_root_probes_at_its_round_and_only_then() -> None:
    parts = Parts(probe_interval=3.0, heartbeat_interval=1.0)
    parts.meet(b"P", 0.3)  # farther than us (0.45) from the key: not a closer stranger
    parts.stream(KEY)
    parts.probes.probe_roots(1.0, 1)
    assert parts.sends() == []
    parts.probes.probe_roots(3.0, 3)
    [(peer, probe)] = parts.sends()
    assert peer == b"P" and isinstance(probe, RootProbe)
    assert (probe.key, probe.must_beat, probe.htl) == (KEY, 0.45, NodeConfig().check_htl)
    assert parts.seen.contains(probe.uid, 3.0) and parts.probes.in_flight == 1


def test_a_root_with_a_closer_stranger_looks_past_it_instead() -> None:
    parts = Parts(probe_interval=1.0, heartbeat_interval=1.0)
    parts.meet(b"Q", 0.49)
    stream = parts.stream(KEY)
    parts.probes.probe_roots(1.0, 1)
    assert parts.sends() == [] and parts.calls == [("look", KEY, None)]
    assert stream.root.relooks == RELOOKS and stream.root.probe_misses == 1


def test_a_closer_root_answers_and_a_relay_notes_both_ways() -> None:
    root = Parts(location=0.49)
    root.stream(KEY)
    root.probes.on_probe(1.0, b"R", RootProbe(UID, KEY, 5, 0.45, 0.45))
    assert root.sends() == [(b"R", ProbeAnswer(UID, KEY, 0.49, 0))]
    relay = Parts(location=0.3)
    relay.meet(b"P", 0.2)
    relay.meet(b"Q", 0.4)
    relay.probes.on_probe(1.0, b"P", RootProbe(UID, KEY, 5, 0.2, 0.2))
    check = NodeConfig().check_htl  # progress resets a probe to its first budget
    assert relay.sends() == [(b"Q", RootProbe(UID, KEY, check, 0.3, 0.2))]
    relay.probes.on_probe(1.1, b"Q", RootProbe(UID, KEY, 5, 0.2, 0.2))  # a loop
    assert relay.sends() == [(b"Q", ProbeAnswer(UID, KEY, None, 5))]
    relay.probes.on_answer(1.2, b"Q", ProbeAnswer(UID, KEY, 0.49, 0))
    assert relay.sends() == [(b"P", ProbeAnswer(UID, KEY, 0.49, 0))]
    assert relay.probes.trails == {back_trail(UID): b"P", ahead_trail(UID): b"Q"}
    assert relay.probes.in_flight == 0


def test_a_found_closer_root_makes_our_root_look_along_the_answers_trail() -> None:
    parts = Parts(probe_interval=1.0, heartbeat_interval=1.0)
    parts.meet(b"P", 0.3)
    stream = parts.stream(KEY)
    parts.probes.probe_roots(15.0, 15)
    [(_, probe)] = parts.sends()
    assert isinstance(probe, RootProbe)
    parts.probes.on_answer(15.5, b"P", ProbeAnswer(probe.uid, KEY, 0.49, 0))
    assert parts.calls == [("look", KEY, ahead_trail(probe.uid))]
    assert stream.root.relooks == 0 and parts.stats.splits_found == 1
    route = Route(UID, KEY, 0.5, None, 5, 0.45, True, None, 0.45)
    route.trail = ahead_trail(probe.uid)
    assert parts.probes.first_hop(route) == b"P"  # the answer's way back


def test_new_links_bring_a_probe_only_after_a_link_was_lost() -> None:
    parts = Parts()
    parts.meet(b"P", 0.3)
    parts.stream(KEY)
    parts.probes.probe_new_links(1.0)
    assert parts.sends() == []
    parts.probes.lost_a_link = True
    parts.probes.probe_new_links(2.0)
    assert [type(m) for _, m in parts.sends()] == [RootProbe]
    parts.probes.probe_new_links(2.5)  # within a heartbeat interval of the last
    assert parts.sends() == []
