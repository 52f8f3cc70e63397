"""Chaos scenarios (``test_sim_chaos``) in which a publisher's node died just after a
partition cut, before its claim on a number reached the new root, while the cut-off side
held the old packet under that number; the relay that had carried its confirmation up
survived on the new root's side and now claims it for it (``overlay.core.witnesses``), or,
where no such relay survived, a direct peer the publisher's node told the number as it
confirmed it (``overlay.core.peer_witnesses``).
Replayed exactly: the simulation is deterministic."""

from __future__ import annotations

from chaos_scenarios import Fault, Scenario, failures, run

from testnet.sim.network import NetworkModel


def test_a_claim_beyond_a_dead_publishers_number_is_taken_in_order() -> None:
    # Built by hand (20 nodes, one stream). Root 15 numbers node 16's publish 15 and node 8's 16,
    # and sends both down as the cut (+16.1919) comes; 4, 17 and 18 on its side get both. Node 16
    # dies at +16.2414. The other side's new root 12 was the relay that passed 16's confirmation of
    # 15 up: without a witness, it refuses 8's claim on 16 (not its next number) and gives 15 and 16
    # to other publishes. With one it holds a witness claim on 15, takes it as its next number, then
    # 8's claim on 16.
    outcome = run(DEAD_PUBLISHER_BEFORE_A_CLAIM)
    assert outcome.log.acks and failures(outcome) == []


DEAD_PUBLISHER_BEFORE_A_CLAIM = Scenario(
    seed=108,
    nodes=20,
    streams=1,
    subscribers=5,
    faults=(Fault(at=16.2414, kind="crash", arg=11, until=None),),
    partition=(16.1919, 45.0, 0.375),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.0
    ),
    confirm=True,
)


def test_a_new_root_that_relayed_a_dead_publishers_confirmations_claims_them() -> None:
    # A root numbers two publishers' publishes alternately and sends them down as a cut comes,
    # so only one branch gets them. One publisher's node dies silently, and its relay, which
    # passed that node's confirmations up, takes the tree over. Its witness claims fill the dead
    # publisher's numbers and the live publisher's claims are taken between them; without
    # witnesses the new root refuses the live claims beyond the first hole and gives the numbers
    # to other publishes, while the root's side was shown the first ones.
    outcome = run(RELAY_OF_A_DEAD_PUBLISHER_TAKES_OVER)
    assert outcome.log.acks and failures(outcome) == []


RELAY_OF_A_DEAD_PUBLISHER_TAKES_OVER = Scenario(
    seed=184,
    nodes=48,
    streams=2,
    subscribers=5,
    faults=(
        Fault(at=3.0614277045381257e-53, kind="crash", arg=2784, until=None),
        Fault(at=2.566791268013397e-11, kind="crash", arg=581, until=None),
        Fault(at=7.193505037082896, kind="crash", arg=39269, until=31.309491047648535),
        Fault(at=9.198310230722692, kind="crash", arg=2246, until=49.19831023072269),
        Fault(at=11.191884556313184, kind="loud-crash", arg=744, until=42.206691661933675),
        Fault(at=12.563831587455022, kind="crash", arg=723, until=50.96532410241576),
        Fault(at=14.540672311105356, kind="loud-crash", arg=1, until=None),
        Fault(at=22.046208945005922, kind="crash", arg=5473, until=38.00293720447204),
        Fault(at=24.194815120218514, kind="crash", arg=487, until=38.85081961414934),
        Fault(at=26.836067005294442, kind="crash", arg=100582, until=65.81496138475102),
        Fault(at=27.32945650305529, kind="crash", arg=26095, until=67.3294565030553),
        Fault(at=27.619485052165988, kind="loud-crash", arg=188, until=None),
        Fault(at=29.333653620111242, kind="crash", arg=5737, until=None),
        Fault(at=29.659785263347946, kind="crash", arg=2692, until=None),
    ),
    partition=(22.50623210365103, 62.50623210365103, 0.2650155021931381),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.01, duplicate=0.0, jitter=0.02
    ),
    confirm=True,
)


# Peer witnesses (``overlay.core.peer_witnesses``): where no relay of the dead publisher's
# confirmations survives, a direct peer that it told the number claims it.


def test_a_peer_of_a_dead_publisher_that_was_the_roots_own_child_claims_its_number() -> None:
    # Built by hand (20 nodes, one stream). Root 15 numbers
    # publisher 1's publish as 20; node 1 confirms and 15 sends 20 down. The cut (+20.40)
    # leaves only node 0 of 15's children on its side; node 1 dies at +20.5, before any
    # takeover asks for its claim. Node 1 was 15's own child: no relay witnessed it. Without peer
    # witnesses the other side's new root (7) gives 20 to another publish, and subscriber 17
    # on 15's side was shown the first publish as 20. With them node 1 has told its peers 20 as it
    # confirmed, and the one on 7's side claims it there.
    outcome = run(PUBLISHER_WITHOUT_A_RELAY_DIES)
    assert outcome.log.acks and failures(outcome) == []


PUBLISHER_WITHOUT_A_RELAY_DIES = Scenario(
    seed=1,
    nodes=20,
    streams=1,
    subscribers=5,
    faults=(Fault(at=20.5, kind="crash", arg=0, until=None),),
    partition=(20.4, 45.0, 0.375),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.0, jitter=0.0
    ),
    confirm=True,
)


def test_a_peer_claims_a_dead_publishers_numbers_where_its_relay_died_too() -> None:
    # A root numbers a publisher's publishes just before and after a cut, and only the
    # publisher's node, its relay and one other node get them; the publisher and the root die,
    # then the relay, leaving the remaining holder on an island. The publisher's peers witness
    # the numbers: of the three it tells (``witness_peers``), one dies without ever carrying the
    # stream and one is cut off, but the third, on the publishers' side, pushes them when asked.
    # Without peer witnesses that side's root gives the numbers to other publishes. (With two
    # peers told, this still fails.)
    outcome = run(PUBLISHER_AND_RELAY_DIE)
    assert outcome.log.acks and failures(outcome) == []


PUBLISHER_AND_RELAY_DIE = Scenario(
    seed=346372,
    nodes=53,
    streams=2,
    subscribers=4,
    faults=(
        Fault(at=1.9933498711547588e-300, kind="loud-crash", arg=159, until=None),
        Fault(at=0.5, kind="loud-crash", arg=78181, until=None),
        Fault(at=2.0, kind="loud-crash", arg=117, until=22.12398351168806),
        Fault(at=6.059783764510899, kind="loud-crash", arg=3023, until=None),
        Fault(at=13.274357736810709, kind="add", arg=2, until=None),
        Fault(at=17.601702658787204, kind="loud-crash", arg=761, until=25.13616614746728),
        Fault(at=17.627842670657905, kind="loud-crash", arg=216, until=None),
        Fault(at=17.740971646068584, kind="loud-crash", arg=761, until=None),
        Fault(at=18.455134390681806, kind="loud-crash", arg=160283, until=33.23605932053637),
        Fault(at=18.455134390681806, kind="crash", arg=256, until=31.366619065526567),
        Fault(at=20.52997270143813, kind="loud-crash", arg=403, until=None),
        Fault(at=26.016042356918266, kind="loud-crash", arg=65535, until=36.88566803364769),
    ),
    partition=(12.947861490315727, 43.910393825975824, 0.3646676881143175),
    weather=NetworkModel(
        base_latency=0.005, latency_spread=0.095, drop=0.0, duplicate=0.05, jitter=0.0
    ),
    confirm=True,
)
