"""Work carried by node ids (``keyspace.id_work``): what it is, how it is made, and a node
that refuses an unvouched peer whose id carries too little."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
import trio
from cli_processes import overlay
from loopback_nets import FAST, LIMIT, chain
from raw_peers import _peer_locations, _say_hello, closed_by_peer, still_works

from keyspace.id_work import DEFAULT_ID_WORK, DOMAIN, MAX_ID_WORK, id_work
from keyspace.location import location_from_id
from overlay.runtime.config import ConfigError, RuntimeConfig, config_from_dict
from overlay.runtime.identity import Identity, IdentityError, node_id_text
from overlay.runtime.vouching import work_refusal
from testnet.local import LocalNetwork


def test_work_is_the_leading_zero_bits_of_the_domain_separated_hash() -> None:
    for node_id in (bytes(32), bytes(range(32)), b"\xff" * 32):
        digest = hashlib.sha256(DOMAIN + node_id).digest()
        bits = "".join(f"{byte:08b}" for byte in digest)
        assert id_work(node_id) == len(bits) - len(bits.lstrip("0"))


def test_a_generated_identity_carries_the_work_asked() -> None:
    for work in (0, 4, 8):
        assert id_work(Identity.generate(work).public) >= work
    with pytest.raises(IdentityError, match="identity work"):
        Identity.generate(MAX_ID_WORK + 1)


def test_an_unvouched_id_with_too_little_work_is_refused_naming_both_counts() -> None:
    lazy = next(i for i in (Identity.generate() for _ in range(100)) if id_work(i.public) < 4)
    reason = work_refusal(lazy.public, 4, vouched=frozenset())
    assert reason is not None and f"carries {id_work(lazy.public)} bits" in reason
    assert "asks 4" in reason
    assert work_refusal(lazy.public, 4, vouched={lazy.public}) is None  # vouched: no work
    assert work_refusal(lazy.public, 0, vouched=frozenset()) is None


def test_the_config_takes_identity_work_in_peers_and_refuses_nonsense() -> None:
    assert RuntimeConfig().identity_work == DEFAULT_ID_WORK
    assert config_from_dict({"peers": {"identity_work": 16}}).identity_work == 16
    for bad in (-1, MAX_ID_WORK + 1, "12", 1.5, True):
        with pytest.raises(ConfigError, match="identity_work"):
            config_from_dict({"peers": {"identity_work": bad}})


async def test_an_open_node_refuses_a_peer_whose_id_carries_too_little_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stranger with a valid handshake and the location its id gives, but an id made with
    no work: its Hello is refused with one warning naming it and both counts, and counted
    under ``id_work``. A stranger whose id carries the work links."""
    caplog.set_level(logging.WARNING)
    lazy = next(i for i in (Identity.generate() for _ in range(100)) if id_work(i.public) < 8)
    worked = Identity.generate(DEFAULT_ID_WORK)
    with trio.fail_after(LIMIT):
        async with LocalNetwork(chain(2), core=FAST) as net:
            await net.wait_linked()
            host = net.node(0).host
            stream = await _say_hello(net.node(0), lazy, location_from_id(lazy.public))
            assert await closed_by_peer(stream)
            assert lazy.public not in _peer_locations(host)
            await host.wait_until(lambda: host.refusals.counts.get("id_work") == 1)
            (said,) = [r for r in caplog.records if node_id_text(lazy.public) in r.getMessage()]
            assert (
                said.levelno == logging.WARNING and f"asks {DEFAULT_ID_WORK}" in said.getMessage()
            )
            await _say_hello(net.node(0), worked, location_from_id(worked.public))
            await host.wait_until(lambda: worked.public in _peer_locations(host))
            await still_works(net)


def test_keygen_makes_an_id_with_the_work_asked(tmp_path: Path) -> None:
    made = overlay("keygen", "--work", "6", str(tmp_path / "n.key"))
    assert made.returncode == 0, made.stderr
    identity = Identity.load(tmp_path / "n.key")
    assert id_work(identity.public) >= 6 and f"({id_work(identity.public)} bits" in made.stdout
    too_much = overlay("keygen", "--work", "99", str(tmp_path / "m.key"))
    assert too_much.returncode != 0 and "--work must be in" in too_much.stderr
    assert len(too_much.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "m.key").exists()
