"""A peer's location follows from its identity unless the operator vouches for it.

The real-socket tests dial a node of a two-node loopback network with a genuine identity
from outside the network, complete the link handshake, and send a Hello by hand, claiming a
location of the test's choosing.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import pytest
import trio
from loopback_nets import FAST, LIMIT, chain
from raw_peers import _peer_locations, _say_hello, closed_by_peer, still_works

from keyspace.id_work import DEFAULT_ID_WORK
from keyspace.location import location_from_id
from overlay.runtime.config import ConfigError, RuntimeConfig, config_from_dict, load_config
from overlay.runtime.identity import Identity, node_id_text
from overlay.runtime.vouching import location_refusal
from testnet.local import LocalNetwork

# --- the rule -------------------------------------------------------------------------------


def test_the_location_an_id_gives_is_taken_from_anyone() -> None:
    peer = Identity.generate().public
    assert location_refusal(peer, location_from_id(peer), frozenset()) is None


def test_any_other_location_is_refused_naming_both() -> None:
    peer = Identity.generate().public
    derived = location_from_id(peer)
    claimed = (derived + 0.5) % 1.0
    why = location_refusal(peer, claimed, frozenset())
    assert why is not None and repr(claimed) in why and repr(derived) in why


def test_even_the_nearest_other_float_is_refused() -> None:
    """Exact comparison: an honest claim is the receiver's own derivation bit for bit."""
    peer = Identity.generate().public
    derived = location_from_id(peer)
    assert location_refusal(peer, math.nextafter(derived, 1.0), ()) is not None
    assert location_refusal(peer, math.nextafter(derived, 0.0), ()) is not None


def test_a_vouched_peer_may_claim_any_location() -> None:
    peer = Identity.generate().public
    assert location_refusal(peer, (location_from_id(peer) + 0.5) % 1.0, {peer}) is None


# --- over a real link ----------------------------------------------------------------------


def _elsewhere(identity: Identity) -> float:
    """A location the identity's id does not give."""
    return (location_from_id(identity.public) + 0.37) % 1.0


async def test_an_open_node_refuses_a_location_the_peer_id_does_not_give(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="overlay")
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            liar = Identity.generate()
            claimed = _elsewhere(liar)
            stream = await _say_hello(net.node(0), liar, claimed)
            assert await closed_by_peer(stream)
            host = net.node(0).host
            assert liar.public not in _peer_locations(host)
            assert liar.public not in host.links
            (said,) = [r for r in caplog.records if node_id_text(liar.public) in r.getMessage()]
            assert said.levelno == logging.WARNING
            assert repr(claimed) in said.getMessage()
            assert repr(location_from_id(liar.public)) in said.getMessage()
            await still_works(net)


async def test_an_open_node_takes_the_location_the_peer_id_gives() -> None:
    honest = Identity.generate(DEFAULT_ID_WORK)  # (the work a node asks by default)
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            derived = location_from_id(honest.public)
            stream = await _say_hello(net.node(0), honest, derived)
            host = net.node(0).host
            await host.wait_until(lambda: honest.public in _peer_locations(host))
            assert _peer_locations(host)[honest.public] == derived
            await trio.aclose_forcefully(stream)


async def test_the_claim_of_a_vouched_peer_is_taken_and_the_same_claim_of_another_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Open mode with a trusted list: the listed peer may sit anywhere; a stranger may not."""
    caplog.set_level(logging.WARNING, logger="overlay")
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            friend, stranger = Identity.generate(), Identity.generate()
            net.set_runtime(0, trusted=frozenset({friend.public, net.node(1).identity.public}))
            node = await net.restart(0)
            host = node.host
            claimed = _elsewhere(friend)
            kept = await _say_hello(node, friend, claimed)
            await host.wait_until(lambda: friend.public in _peer_locations(host))
            assert _peer_locations(host)[friend.public] == claimed
            refused = await _say_hello(node, stranger, claimed)
            assert await closed_by_peer(refused)
            assert stranger.public not in _peer_locations(host)
            assert [
                r.levelno for r in caplog.records if node_id_text(stranger.public) in r.getMessage()
            ] == [logging.WARNING]
            await trio.aclose_forcefully(kept)


async def test_a_listed_peer_in_trust_mode_may_claim_any_location() -> None:
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            friend = Identity.generate()
            ids = frozenset({friend.public, net.node(1).identity.public})
            net.set_runtime(0, trust_listed=True, trusted=ids)
            node = await net.restart(0)
            claimed = _elsewhere(friend)
            stream = await _say_hello(node, friend, claimed)
            host = node.host
            await host.wait_until(lambda: friend.public in _peer_locations(host))
            assert _peer_locations(host)[friend.public] == claimed
            await trio.aclose_forcefully(stream)


# --- a node's own location -----------------------------------------------------------------


def test_a_chosen_location_without_a_trusted_list_fails_at_startup(tmp_path: Path) -> None:
    """Every peer would refuse such a node's Hello: it is refused before it starts."""
    path = tmp_path / "node.toml"
    path.write_text("[node]\nlocation = 0.25\n")
    with pytest.raises(ConfigError, match=r"location = 0.25 needs \[peers\] trusted") as info:
        load_config(path)
    assert str(path) in str(info.value)
    with pytest.raises(ConfigError, match="needs"):  # what `overlay node --location` does
        dataclasses.replace(load_config(None), location=0.25)
    with pytest.raises(ConfigError, match="needs"):
        RuntimeConfig(location=0.25)


def test_a_chosen_location_is_accepted_with_the_ids_it_is_vouched_among() -> None:
    friend = node_id_text(Identity.generate().public)
    for trust in ("open", "listed"):
        config = config_from_dict(
            {"node": {"location": 0.25}, "peers": {"trust": trust, "trusted": [friend]}}
        )
        assert config.location == 0.25
    assert config_from_dict({}).location is None  # the default: where the id puts it
