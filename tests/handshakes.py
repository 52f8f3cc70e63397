"""Honest handshakes between two fixed identities, for the handshake's and the session's
tests: a pair of Handshake objects, the three messages run between them (through a
tamperer if given), the two Sessions they key, and a one-byte change of a message."""

from __future__ import annotations

from collections.abc import Callable

from overlay.runtime.handshake import Handshake, Session
from overlay.runtime.identity import Identity

NET = b"testnet-1"
ALICE = Identity.from_private_bytes(bytes([1]) * 32)
BOB = Identity.from_private_bytes(bytes([2]) * 32)


def pair(
    initiator: Identity = ALICE,
    responder: Identity = BOB,
    *,
    network: tuple[bytes, bytes] = (NET, NET),
    accept: tuple[Callable[[bytes], bool] | None, Callable[[bytes], bool] | None] = (None, None),
    expect: bytes | None = None,
) -> tuple[Handshake, Handshake]:
    return (
        Handshake(initiator, initiator=True, network=network[0], accept=accept[0], expect=expect),
        Handshake(responder, initiator=False, network=network[1], accept=accept[1]),
    )


def run(
    i: Handshake, r: Handshake, tamper: Callable[[int, bytes], bytes] = lambda n, m: m
) -> list[bytes]:
    """Run the three messages through ``tamper``; return them as sent (before tampering)."""
    assert r.start() == b""
    hello = i.start()
    reply = r.receive(tamper(0, hello))
    finish = i.receive(tamper(1, reply))
    assert r.receive(tamper(2, finish)) == b""
    return [hello, reply, finish]


def linked() -> tuple[Session, Session]:
    i, r = pair()
    run(i, r)
    return i.session(), r.session()


def flip(position: int, mask: int) -> Callable[[bytes], bytes]:
    def tamper(message: bytes) -> bytes:
        return message[:position] + bytes([message[position] ^ mask]) + message[position + 1 :]

    return tamper
