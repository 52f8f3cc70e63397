"""The link handshake (the Session it keys: ``test_session``).

Besides two honest Handshake objects, the tests use a *forger*: an independent implementation
of the wire format written from the module docstring, which can say anything a hostile peer
could (another identity, another role's label, a reflected signature). That it completes an
honest handshake with the module is itself a check that the module does what it documents.
"""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from handshakes import ALICE, BOB, NET, flip, pair, run

from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.runtime.handshake import (
    FINISH_SIZE,
    HANDSHAKE_INFO,
    INITIATOR_LABEL,
    MAGIC,
    MAX_HANDSHAKE_MESSAGE,
    MAX_NETWORK_TAG,
    MAX_REFUSAL_TEXT,
    PROTOCOL_NAME,
    REFUSAL,
    REPLY_SIZE,
    RESPONDER_LABEL,
    SESSION_INFO,
    VERSION,
    Handshake,
    HandshakeError,
    LinkAuthError,
    Session,
    derive_keys,
    refusal,
)
from overlay.runtime.identity import Identity, node_id_text
from overlay.schema import SCHEMA_SIZE, WIRE_SCHEMA

CAROL = Identity.from_private_bytes(bytes([3]) * 32)
ZERO_NONCE = bytes(12)
SMALL_ORDER_KEY = (1).to_bytes(32, "little")  # the neutral point: "signs" anything


# -- the forger ---------------------------------------------------------------------------------


class ForgedInitiator:
    """A hostile initiator that follows the documented wire format but signs what it likes."""

    def __init__(self, network: bytes = NET) -> None:
        self.ephemeral = X25519PrivateKey.generate()
        self.hello = (
            MAGIC
            + bytes((VERSION,))
            + WIRE_SCHEMA
            + bytes((len(network),))
            + network
            + self.ephemeral.public_key().public_bytes_raw()
        )
        self.h = hashlib.sha256(PROTOCOL_NAME + self.hello)
        self.responder = self.responder_sig = b""
        self.secret = self.finish_key = b""

    def read_reply(self, reply: bytes) -> None:
        their = reply[:32]
        self.secret = self.ephemeral.exchange(X25519PublicKey.from_public_bytes(their))
        self.h.update(their)
        reply_ad = self.h.digest()
        self.finish_key, reply_key = derive_keys(self.secret, reply_ad, HANDSHAKE_INFO)
        content = AESGCM(reply_key).decrypt(ZERO_NONCE, reply[32:], reply_ad)
        self.responder, self.responder_sig = content[:32], content[32:]
        self.h.update(content)

    def finish(
        self,
        reply: bytes,
        *,
        identity: bytes,
        signer: Identity,
        label: bytes = INITIATOR_LABEL,
        signature: bytes | None = None,
    ) -> bytes:
        if not self.secret:
            self.read_reply(reply)
        finish_ad = self.h.digest()
        self.h.update(identity)
        if signature is None:
            signature = signer.sign(label + self.h.digest())
        self.h.update(signature)
        sealed = identity + signature
        return AESGCM(self.finish_key).encrypt(ZERO_NONCE, sealed, finish_ad)

    def session(self) -> Session:
        to_responder, to_initiator = derive_keys(self.secret, self.h.digest(), SESSION_INFO)
        return Session(to_responder, to_initiator)


def forged_reply(
    hello: bytes,
    *,
    identity: bytes,
    signer: Identity,
    label: bytes = RESPONDER_LABEL,
    signature: bytes | None = None,
) -> bytes:
    """A hostile responder's reply to ``hello``, signing what it likes."""
    ephemeral = X25519PrivateKey.generate()
    ours = ephemeral.public_key().public_bytes_raw()
    secret = ephemeral.exchange(X25519PublicKey.from_public_bytes(hello[-32:]))
    h = hashlib.sha256(PROTOCOL_NAME + hello + ours)
    reply_ad = h.digest()
    _, reply_key = derive_keys(secret, reply_ad, HANDSHAKE_INFO)
    h.update(identity)
    if signature is None:
        signature = signer.sign(label + h.digest())
    return ours + AESGCM(reply_key).encrypt(ZERO_NONCE, identity + signature, reply_ad)


# -- honest handshakes --------------------------------------------------------------------------


def test_both_sides_finish_and_learn_each_other() -> None:
    i, r = pair()
    assert (i.done, r.done) == (False, False)
    run(i, r)
    assert (i.done, r.done) == (True, True)
    assert i.peer == BOB.public
    assert r.peer == ALICE.public


def test_message_sizes_fit_the_handshake_frame_limit() -> None:
    i, r = pair(network=(b"n" * MAX_NETWORK_TAG,) * 2)
    hello, reply, finish = run(i, r)
    assert len(hello) == 4 + 1 + SCHEMA_SIZE + 1 + MAX_NETWORK_TAG + 32
    assert len(reply) == REPLY_SIZE
    assert len(finish) == FINISH_SIZE
    longest = refusal("x" * 1000)
    assert len(longest) == len(REFUSAL) + MAX_REFUSAL_TEXT
    assert max(len(hello), len(reply), len(finish), len(longest)) == MAX_HANDSHAKE_MESSAGE


def test_identities_are_not_visible_on_the_wire() -> None:
    wire = b"".join(run(*pair()))
    assert ALICE.public not in wire
    assert BOB.public not in wire


def test_session_is_one_object_so_nonces_are_never_reused() -> None:
    i, r = pair()
    run(i, r)
    assert i.session() is i.session()
    assert r.session() is r.session()


def test_the_forger_speaks_the_documented_protocol() -> None:
    # An independent implementation of the module docstring completes an honest handshake
    # and derives the same session keys.
    forger = ForgedInitiator()
    r = Handshake(BOB, initiator=False, network=NET)
    reply = r.receive(forger.hello)
    r.receive(forger.finish(reply, identity=CAROL.public, signer=CAROL))
    assert r.done and r.peer == CAROL.public
    assert forger.responder == BOB.public
    ours, theirs = forger.session(), r.session()
    assert theirs.open(ours.seal(b"hi")) == b"hi"
    assert ours.open(theirs.seal(b"hello")) == b"hello"


def test_errors_are_the_remote_side_s_fault() -> None:
    assert issubclass(HandshakeError, RemoteProtocolError)
    assert issubclass(LinkAuthError, RemoteProtocolError)


# -- tampering ----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", [0, 1, 2], ids=["hello", "reply", "finish"])
@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_single_byte_change_of_a_handshake_message_fails(which: int, mask: int) -> None:
    # 0x80 on the last byte of an X25519 key is a change X25519 itself ignores (RFC 7748 masks
    # that bit): the transcript must still catch it.
    length = len(run(*pair())[which])
    for position in range(length):
        i, r = pair()
        change = flip(position, mask)
        with pytest.raises(HandshakeError):
            run(i, r, lambda n, m: change(m) if n == which else m)  # noqa: B023
        assert not (i.done and r.done)


# -- malformed and hostile handshakes -----------------------------------------------------------


def test_wrong_network_tag_is_refused_naming_both() -> None:
    i, r = pair(network=(b"testnet-a", b"testnet-b"))
    with pytest.raises(HandshakeError, match="network b'testnet-a', we are on b'testnet-b'"):
        run(i, r)


def refused(hello: bytes) -> tuple[str, bytes]:
    """What the responder says to ``hello``: its own error, and the refusal it sends."""
    with pytest.raises(HandshakeError) as caught:
        pair()[1].receive(hello)
    return str(caught.value), caught.value.refusal


def told(refusal: bytes) -> str:
    """The error an initiator raises on receiving ``refusal`` as its reply."""
    i = pair()[0]
    i.start()
    with pytest.raises(HandshakeError) as caught:
        i.receive(refusal)
    return str(caught.value)


def test_a_hello_from_another_build_is_refused_and_the_dialler_is_told_why() -> None:
    hello = pair()[0].start()
    other = bytes(SCHEMA_SIZE)
    error, refusal_sent = refused(hello[:5] + other + hello[5 + SCHEMA_SIZE :])
    assert f"schema {other.hex()}, ours {WIRE_SCHEMA.hex()}" in error and "same build" in error
    assert f"refused the link: this node's wire messages differ (schema {WIRE_SCHEMA.hex()}, " in (
        told(refusal_sent)
    )


def test_a_hello_on_another_network_is_refused_and_the_dialler_is_told_why() -> None:
    hello = Handshake(ALICE, initiator=True, network=b"other").start()
    error, refusal_sent = refused(hello)
    assert "network b'other', we are on b'testnet-1'" in error
    assert "refused the link: this node is on network b'testnet-1', not b'other'" in told(
        refusal_sent
    )


def test_a_node_in_trust_mode_names_neither_its_network_nor_its_build_to_a_stranger() -> None:
    for hello in (
        Handshake(ALICE, initiator=True, network=b"other").start(),
        pair()[0].start()[:5] + bytes(SCHEMA_SIZE) + pair()[0].start()[5 + SCHEMA_SIZE :],
    ):
        responder = Handshake(BOB, initiator=False, network=NET, accept=lambda _: True)
        with pytest.raises(HandshakeError) as caught:
            responder.receive(hello)
        text = told(caught.value.refusal)
        assert "refused the link" in text
        assert NET.decode() not in text and WIRE_SCHEMA.hex() not in text


def test_an_older_version_s_hello_is_refused_for_its_version_whatever_its_size() -> None:
    # Version 1's layout: no schema. With a short tag it is shorter than ours.
    old = MAGIC + bytes((1, 3)) + b"net" + bytes(32)
    error, refusal_sent = refused(old)
    assert f"version 1; we speak {VERSION}" in error
    assert f"this node speaks link protocol version {VERSION}, not 1" in told(refusal_sent)


def test_a_hello_of_the_version_before_ours_is_refused_for_its_version() -> None:
    # The version before ours has our hello's layout but seals one message per frame.
    hello = bytearray(pair()[0].start())
    hello[len(MAGIC)] = VERSION - 1
    error, refusal_sent = refused(bytes(hello))
    assert f"version {VERSION - 1}; we speak {VERSION}" in error
    assert f"speaks link protocol version {VERSION}, not {VERSION - 1}" in told(refusal_sent)


def test_garbage_gets_no_refusal() -> None:
    assert refused(b"GET / HTTP/1.1\r\n" + bytes(60))[1] == b""


def test_a_refusal_is_bounded_printable_and_never_a_reply_s_size() -> None:
    assert len(refusal("\u00e9" * 500)) <= len(REFUSAL) + MAX_REFUSAL_TEXT
    assert refusal("\u00e9" * 500).decode()  # cut on a character boundary
    for n in range(300):
        assert len(refusal("x" * n)) != REPLY_SIZE
    assert "\x1b" not in told(REFUSAL + b"\x1b[2Jhi\x00")
    assert "?[2Jhi?" in told(REFUSAL + b"\x1b[2Jhi\x00")


def test_a_reply_that_starts_like_a_refusal_is_still_a_reply() -> None:
    i, r = pair()
    hello = i.start()
    reply = r.receive(hello)
    with pytest.raises(HandshakeError, match="failed authentication"):
        i.receive(REFUSAL + reply[len(REFUSAL) :])  # REPLY_SIZE long: a (broken) reply


def test_wrong_magic_and_version() -> None:
    hello = pair()[0].start()
    with pytest.raises(HandshakeError, match="not an overlay link hello"):
        pair()[1].receive(b"GET / HTTP/1.1\r\n" + hello)
    with pytest.raises(HandshakeError, match=f"version {VERSION + 1}; we speak {VERSION}"):
        pair()[1].receive(hello[:4] + bytes((VERSION + 1,)) + hello[5:])


@pytest.mark.parametrize("which", [0, 1, 2], ids=["hello", "reply", "finish"])
def test_truncated_and_oversized_handshake_messages(which: int) -> None:
    sent = run(*pair())[which]
    variants = [sent[:n] for n in range(len(sent))] + [sent + b"\x00", sent + sent]
    for variant in variants:
        i, r = pair()
        with pytest.raises(HandshakeError, match=r"bytes|not an overlay link hello"):
            run(i, r, lambda n, m: variant if n == which else m)  # noqa: B023


def test_a_hello_whose_tag_length_disagrees_with_its_size() -> None:
    hello = pair()[0].start()
    at = 4 + 1 + SCHEMA_SIZE
    with pytest.raises(HandshakeError, match="network tag makes"):
        pair()[1].receive(hello[:at] + bytes([hello[at] + 1]) + hello[at + 1 :])


def test_a_low_order_ephemeral_key_is_refused_by_either_side() -> None:
    _, r = pair()
    hello = pair()[0].start()
    with pytest.raises(HandshakeError, match="low-order"):
        r.receive(hello[:-32] + bytes(32))
    i, r = pair()
    reply = r.receive(i.start())
    with pytest.raises(HandshakeError, match="low-order"):
        i.receive(bytes(32) + reply[32:])


def test_the_responder_refuses_an_untrusted_initiator() -> None:
    seen: list[bytes] = []

    def trust(peer: bytes) -> bool:
        seen.append(peer)
        return peer == CAROL.public

    i, r = pair(accept=(None, trust))
    with pytest.raises(HandshakeError, match=f"{node_id_text(ALICE.public)} is not in the trust"):
        run(i, r)
    assert seen == [ALICE.public]
    assert not r.done


def test_the_initiator_refuses_an_untrusted_responder() -> None:
    i, r = pair(accept=(lambda peer: peer == CAROL.public, None))
    hello = i.start()
    with pytest.raises(HandshakeError, match=f"{node_id_text(BOB.public)} is not in the trust"):
        i.receive(r.receive(hello))


def test_trusted_peers_pass_both_ways() -> None:
    i, r = pair(accept=(lambda p: p == BOB.public, lambda p: p == ALICE.public))
    run(i, r)
    assert i.done and r.done


def test_the_initiator_refuses_a_peer_it_did_not_dial() -> None:
    i, r = pair(expect=CAROL.public)
    with pytest.raises(
        HandshakeError,
        match=f"dialled {node_id_text(CAROL.public)} but the peer is {node_id_text(BOB.public)}",
    ):
        run(i, r)


def test_the_expected_peer_passes() -> None:
    i, r = pair(expect=BOB.public)
    run(i, r)
    assert i.peer == BOB.public


def test_a_connection_to_ourselves_is_refused() -> None:
    # Dialling our own address, or our hello reflected to a listener with our identity: the
    # reply is validly signed by our own key, and must still be refused.
    i, r = pair(ALICE, ALICE)
    with pytest.raises(HandshakeError, match="our own identity"):
        run(i, r)


def test_the_responder_refuses_its_own_identity_in_a_finish() -> None:
    forger = ForgedInitiator()
    r = Handshake(BOB, initiator=False, network=NET)
    reply = r.receive(forger.hello)
    with pytest.raises(HandshakeError, match="our own identity"):
        r.receive(forger.finish(reply, identity=BOB.public, signer=BOB))


def test_a_reply_signature_reflected_as_the_finish_fails() -> None:
    # The forger sends back the responder's own identity and reply signature.
    forger = ForgedInitiator()
    r = Handshake(BOB, initiator=False, network=NET)
    reply = r.receive(forger.hello)
    forger.read_reply(reply)
    finish = forger.finish(reply, identity=BOB.public, signer=BOB, signature=forger.responder_sig)
    with pytest.raises(HandshakeError, match="does not verify"):
        r.receive(finish)


def test_a_signature_with_the_other_role_s_label_fails_at_the_responder() -> None:
    forger = ForgedInitiator()
    r = Handshake(BOB, initiator=False, network=NET)
    reply = r.receive(forger.hello)
    with pytest.raises(HandshakeError, match="does not verify"):
        r.receive(forger.finish(reply, identity=CAROL.public, signer=CAROL, label=RESPONDER_LABEL))


def test_a_signature_with_the_other_role_s_label_fails_at_the_initiator() -> None:
    i = Handshake(ALICE, initiator=True, network=NET)
    hello = i.start()
    with pytest.raises(HandshakeError, match="does not verify"):
        i.receive(forged_reply(hello, identity=CAROL.public, signer=CAROL, label=INITIATOR_LABEL))


def test_a_forged_reply_with_the_right_label_is_accepted() -> None:
    # The control for the test above: only the label differs.
    i = Handshake(ALICE, initiator=True, network=NET)
    i.receive(forged_reply(i.start(), identity=CAROL.public, signer=CAROL))
    assert i.done and i.peer == CAROL.public


def test_someone_else_s_identity_cannot_be_claimed() -> None:
    i = Handshake(ALICE, initiator=True, network=NET)
    with pytest.raises(HandshakeError, match=f"{node_id_text(BOB.public)} does not verify"):
        i.receive(forged_reply(i.start(), identity=BOB.public, signer=CAROL))


def test_a_small_order_identity_is_refused_even_with_a_signature_openssl_accepts() -> None:
    forged_signature = SMALL_ORDER_KEY + bytes(32)
    i = Handshake(ALICE, initiator=True, network=NET)
    with pytest.raises(HandshakeError, match="small-order"):
        i.receive(
            forged_reply(
                i.start(), identity=SMALL_ORDER_KEY, signer=CAROL, signature=forged_signature
            )
        )
    forger = ForgedInitiator()
    r = Handshake(BOB, initiator=False, network=NET)
    reply = r.receive(forger.hello)
    with pytest.raises(HandshakeError, match="small-order"):
        r.receive(
            forger.finish(reply, identity=SMALL_ORDER_KEY, signer=CAROL, signature=forged_signature)
        )


def test_a_finish_from_another_connection_fails() -> None:
    i1, r1 = pair()
    i2, r2 = pair()
    _, _, finish1 = run(i1, r1)
    r2.receive(i2.start())
    with pytest.raises(HandshakeError, match="failed authentication"):
        r2.receive(finish1)


# -- the API's rules ----------------------------------------------------------------------------


def test_calls_out_of_order_are_local_errors() -> None:
    i, r = pair()
    with pytest.raises(LocalProtocolError, match="not started"):
        i.receive(b"x")
    for h in (i, r):
        with pytest.raises(LocalProtocolError):
            _ = h.peer
        with pytest.raises(LocalProtocolError):
            h.session()
    hello = i.start()
    with pytest.raises(LocalProtocolError, match="twice"):
        i.start()
    reply = r.receive(hello)
    with pytest.raises(LocalProtocolError, match="after the handshake began"):
        r.start()
    r.receive(i.receive(reply))
    for h in (i, r):
        with pytest.raises(LocalProtocolError, match="done"):
            h.receive(b"more")


def test_a_failed_handshake_cannot_be_continued() -> None:
    _, r = pair()
    with pytest.raises(HandshakeError):
        r.receive(b"garbage")
    with pytest.raises(LocalProtocolError, match="failed"):
        r.receive(pair()[0].start())
    assert not r.done
    with pytest.raises(LocalProtocolError):
        r.session()


def test_an_error_message_names_the_role_and_state() -> None:
    _, r = pair()
    with pytest.raises(HandshakeError, match=r"responder, awaiting the hello"):
        r.receive(b"garbage")


@pytest.mark.parametrize("network", [b"", b"n" * (MAX_NETWORK_TAG + 1)])
def test_network_tag_length_is_checked(network: bytes) -> None:
    with pytest.raises(ValueError, match="network tag"):
        Handshake(ALICE, initiator=True, network=network)


def test_expect_must_be_a_node_id() -> None:
    with pytest.raises(ValueError, match="expect"):
        Handshake(ALICE, initiator=True, network=NET, expect=b"short")
