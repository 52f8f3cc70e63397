"""The link handshake: three messages that authenticate both nodes and key the link.

Theory of operation (SIGMA-I, the scheme behind IKEv2 and Noise XX's shape). Each side makes a
fresh X25519 key for this connection only; its Ed25519 identity (``overlay.runtime.identity``)
signs a hash of everything said so far, with a label naming its role::

    1 hello   I -> R   MAGIC | version | schema | len(network) | network | e_I
    2 reply   R -> I   e_R | seal(k_R, id_R | sign_R("responder" | H(hello, e_R, id_R)))
    3 finish  I -> R         seal(k_I, id_I | sign_I("initiator" | H(... id_R, sig_R, id_I)))

``H`` is one running SHA-256 over the protocol name and every field in order (the transcript).
``k_R`` and ``k_I`` come from HKDF-SHA256 over the X25519 secret ``DH(e_I, e_R)``, salted with
the transcript up to ``e_R``; each seals one message (nonce 0, the transcript so far as
associated data). The session keys come from HKDF over the same secret salted with the whole
transcript: one AES-256-GCM key per direction, which moves on to the next key of its chain
every ``REKEY_FRAMES`` frames (see ``Session``).

Why each part is there:

* Signatures over the transcript bind each identity to both ephemeral keys, so a recorded
  message is useless in another connection (its ``e`` differs). The role labels differ, so a
  node's reply signature cannot be reflected back at it as a finish, nor the other way round.
* Sealing the identities under the ephemeral secret is SIGMA's MAC: it proves the identity was
  sent by whoever holds the ephemeral key, which is what stops an attacker who owns an identity
  from relaying two honest nodes' ephemerals and passing their link off as its own (identity
  misbinding). It also hides both identities from a passive observer, as Noise XX does.
* The network tag travels in the clear in the hello, so two different testnets that meet by
  mistake fail at once with a message naming both tags; it is in the transcript, so it cannot
  be altered either. So does the wire schema's fingerprint (``overlay.schema``): nodes of
  two builds whose messages differ would otherwise link, then lose the link at the first
  message one of them cannot decode, without a word of why.
* A responder that refuses a hello for its version, schema or network answers with a
  *refusal* (``REFUSAL`` and a line of text) before it closes, so the node that dialled logs
  why instead of "closed during handshake". A refusal is unauthenticated, like the hello: a
  forged one achieves no more than closing the connection would. It is told apart from a
  reply by its prefix and its length (a reply is always ``REPLY_SIZE`` bytes; a refusal
  never is), and its text is shown only after replacing anything unprintable. A node in
  trust mode leaves its own network name and schema out of a refusal: a stranger learns
  only that it was refused.
* The keys are fresh each connection (forward secrecy): a stolen identity key later does not
  open recorded traffic.
* AES-256-GCM rather than ChaCha20-Poly1305, for speed where links spend it: most x86-64
  and ARMv8 server CPUs have AES instructions, and with them AES-GCM seals a 1 KB frame in
  about half the time and a 64 KB frame in about 40% (measured on an x86-64 machine
  through the same library: 0.73 against 1.38 us, 7.5 against 18.7 us). On a CPU without
  AES instructions it is the slower of the two.
* GCM bounds what one key may seal safely (RFC 8446 section 5.5: about 2**24.5 records of
  16 KiB for a 2**-57 margin), where ChaCha20-Poly1305 has no practical bound; a link may
  carry far more than that in its life. So each direction's key is replaced, every
  ``REKEY_FRAMES`` frames, by one derived from it (HKDF, ``REKEY_INFO``), on both sides at
  the same counter, with no message: 2**20 frames of at most ``MAX_PLAINTEXT`` (about 65
  KiB) are a little over 2**32 AES blocks, within that margin. A key is derived one way
  from the one before, so a key taken from a live link does not open the frames sealed
  under earlier ones.

Security invariants:

* ``done`` becomes true only after the peer proved possession of its identity's private key
  over this connection's transcript and both sides hold the same transcript; the peer is not
  our own identity, not a small-order key, is the one dialled (``expect``) and was accepted by
  the trust policy (``accept``).
* Any deviation from the protocol by the peer raises :class:`HandshakeError` (a
  RemoteProtocolError: drop this connection). The handshake cannot be resumed after an error;
  calling it out of order is a LocalProtocolError (our bug).
* :class:`Session` uses each key with each nonce once: nonces are per-direction counters, never
  sent (nor reset by a rekey), and the session refuses to go on rather than wrap. Because the
  transport is an ordered stream, the receiver expects exactly the next counter: a replayed,
  reordered, dropped or altered frame fails authentication (:class:`LinkAuthError`), and the
  receiving side refuses everything after a failure.

Ephemeral keys come from the operating system's random source, deliberately: unlike the core's
choices, they must not be reproducible. Handshake messages travel in ``overlay.runtime.framing``
frames of at most :data:`MAX_HANDSHAKE_MESSAGE` bytes.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.runtime.framing import MAX_PLAINTEXT
from overlay.runtime.identity import (
    PUBLIC_KEY_SIZE,
    SIGNATURE_SIZE,
    Identity,
    is_small_order,
    node_id_text,
    verify,
)
from overlay.schema import SCHEMA_SIZE, WIRE_SCHEMA

# The first bytes of a hello: something that is not an overlay link (an HTTP client, a port
# scanner, an old protocol) is told apart at once instead of failing obscurely later.
MAGIC = b"OVL\x00"
# Bumped when the handshake, a key derivation, the cipher or the sealed frames' layout changes;
# a mismatch is reported as such.
# Message changes are caught by the schema fingerprint instead, which nobody has to bump.
VERSION = 4
# Starts a refusal (see the docstring); its text is at most MAX_REFUSAL_TEXT bytes.
REFUSAL = b"OVL!"
MAX_REFUSAL_TEXT = 200

# Network tags are short names ("testnet-3", "prod"); one length byte bounds them anyway.
MAX_NETWORK_TAG = 64

EPHEMERAL_SIZE = 32  # X25519 public key (RFC 7748)
KEY_SIZE = 32  # AES-256-GCM key
TAG_SIZE = 16  # GCM tag

# Where each field of a hello starts: magic, version, schema, tag length, tag, then e_I.
_VERSION_AT = len(MAGIC)
_SCHEMA_AT = _VERSION_AT + 1
_TAG_LENGTH_AT = _SCHEMA_AT + SCHEMA_SIZE
_TAG_AT = _TAG_LENGTH_AT + 1
_HELLO_FIXED = _TAG_AT + EPHEMERAL_SIZE  # a hello without its tag
REPLY_SIZE = EPHEMERAL_SIZE + PUBLIC_KEY_SIZE + SIGNATURE_SIZE + TAG_SIZE  # 144
FINISH_SIZE = PUBLIC_KEY_SIZE + SIGNATURE_SIZE + TAG_SIZE  # 112
# The frame limit for the handshake phase: the largest of the three messages.
MAX_HANDSHAKE_MESSAGE = max(
    _HELLO_FIXED + MAX_NETWORK_TAG, REPLY_SIZE, FINISH_SIZE, len(REFUSAL) + MAX_REFUSAL_TEXT
)

# Starts the transcript: every hash and key is bound to this exact protocol and version, so
# nothing computed here can be confused with another protocol's values.
PROTOCOL_NAME = b"overlay-link-v2 X25519 Ed25519 AES256-GCM SHA256"
# Role labels for the two signatures: different, so neither can be reflected as the other. The
# NUL ends each label, so neither is a prefix of the other (nor of any signed-stream payload).
RESPONDER_LABEL = b"overlay-link-v2 responder signs\x00"
INITIATOR_LABEL = b"overlay-link-v2 initiator signs\x00"
# HKDF info strings: handshake and session keys come from the same secret and must differ.
HANDSHAKE_INFO = b"overlay-link-v2 handshake keys"
SESSION_INFO = b"overlay-link-v2 session keys"
# HKDF info for a direction's next key from its current one (``Session``).
REKEY_INFO = b"overlay-link-v2 next key"

# Session nonces: 4 zero bytes, then the 64-bit big-endian frame counter, which is simply the
# counter as a 12-byte big-endian integer (one int.to_bytes call, cheaper than packing and
# concatenating). Both directions may share the layout because each has its own key.
NONCE_SIZE = 12
# Each handshake key seals exactly one message, so a constant nonce is safe for it.
_ZERO_NONCE = bytes(NONCE_SIZE)
# 2**64 frames per direction; reaching it means the counter would wrap and repeat a nonce.
COUNTER_LIMIT = 2**64
# Frames a direction seals under one key before both sides move to its next (see the notes).
REKEY_FRAMES = 2**20


class HandshakeError(RemoteProtocolError):
    """The peer broke the handshake or is not acceptable. Drop the connection, after
    sending ``refusal`` if it is not empty (a responder's word on why)."""

    def __init__(self, message: str, refusal: bytes = b"") -> None:
        super().__init__(message)
        self.refusal = refusal


def refusal(reason: str) -> bytes:
    """A refusal carrying ``reason``, cut to MAX_REFUSAL_TEXT bytes and never REPLY_SIZE long."""
    text = reason.encode()[:MAX_REFUSAL_TEXT].decode(errors="ignore").encode()
    message = REFUSAL + text
    return message + b"." if len(message) == REPLY_SIZE else message


def refusal_text(message: bytes) -> str | None:
    """The reason a refusal gives, printable; None if ``message`` is not a refusal."""
    if not message.startswith(REFUSAL) or len(message) == REPLY_SIZE:
        return None
    text = message[len(REFUSAL) : len(REFUSAL) + MAX_REFUSAL_TEXT].decode(errors="replace")
    return "".join(c if c.isprintable() else "?" for c in text)


class LinkAuthError(RemoteProtocolError):
    """A sealed frame failed authentication: altered, replayed, reordered or dropped."""


def derive_keys(secret: bytes, salt: bytes, info: bytes) -> tuple[bytes, bytes]:
    """Two independent 32-byte keys from HKDF-SHA256 (first: the initiator's direction)."""
    okm = HKDF(algorithm=hashes.SHA256(), length=2 * KEY_SIZE, salt=salt, info=info).derive(secret)
    return okm[:KEY_SIZE], okm[KEY_SIZE:]


def next_key(key: bytes) -> bytes:
    """The key a direction of a session seals with after ``key`` (HKDF-SHA256 of it)."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_SIZE, salt=None, info=REKEY_INFO).derive(key)


class Session:
    """A keyed link after the handshake: ``seal`` frames to send, ``open`` frames received.

    Frames must be opened in the order they were sealed, each exactly once; anything else fails.
    Each direction's key is replaced by its next (``next_key``) before its frame number
    ``rekey_frames``, ``2 * rekey_frames`` ..., on both sides alike (see the notes).
    """

    __slots__ = (
        "_failed",
        "_open",
        "_open_key",
        "_open_until",
        "_received",
        "_rekey_frames",
        "_seal",
        "_seal_key",
        "_seal_until",
        "_sent",
    )

    def __init__(
        self, send_key: bytes, receive_key: bytes, rekey_frames: int = REKEY_FRAMES
    ) -> None:
        if rekey_frames < 1:
            raise ValueError(f"rekey_frames must be at least 1, got {rekey_frames}")
        # One AEAD object per direction and key, made once: constructing one costs as much
        # as sealing a small frame.
        self._seal_key = send_key
        self._open_key = receive_key
        self._seal = AESGCM(send_key).encrypt
        self._open = AESGCM(receive_key).decrypt
        self._rekey_frames = rekey_frames
        # The counter at which each direction next moves to a new key, or stops (a single
        # comparison per frame covers both).
        self._seal_until = self._open_until = min(rekey_frames, COUNTER_LIMIT)
        self._sent = 0
        self._received = 0
        self._failed = False

    @property
    def sent(self) -> int:
        """Frames sealed so far (the next send counter)."""
        return self._sent

    @property
    def received(self) -> int:
        """Frames opened so far (the counter the next frame must carry)."""
        return self._received

    def seal(self, plaintext: bytes) -> bytes:
        """The next frame body to send: ``plaintext`` encrypted, plus a 16-byte tag."""
        counter = self._sent
        if counter >= self._seal_until:
            if counter >= COUNTER_LIMIT:
                raise LocalProtocolError(
                    "send counter exhausted (2**64 frames): the link must be closed and redialled"
                )
            key = next_key(self._seal_key)
            seal = AESGCM(key).encrypt
            self._seal_key, self._seal = key, seal
            self._seal_until = min(counter + self._rekey_frames, COUNTER_LIMIT)
        if len(plaintext) > MAX_PLAINTEXT:
            raise LocalProtocolError(
                f"plaintext of {len(plaintext)} bytes exceeds MAX_PLAINTEXT ({MAX_PLAINTEXT}); "
                f"the peer would refuse the frame"
            )
        self._sent = counter + 1
        return self._seal(counter.to_bytes(NONCE_SIZE, "big"), plaintext, None)

    def open(self, ciphertext: bytes) -> bytes:
        """The plaintext of the next frame received; LinkAuthError if it is not that frame."""
        if self._failed:
            raise LocalProtocolError(
                "open() after an earlier frame failed authentication: the link must be dropped"
            )
        counter = self._received
        if counter >= self._open_until:
            if counter >= COUNTER_LIMIT:
                self._failed = True
                raise LinkAuthError("the peer sent more than 2**64 frames; its counter would wrap")
            key = next_key(self._open_key)
            open_ = AESGCM(key).decrypt
            self._open_key, self._open = key, open_
            self._open_until = min(counter + self._rekey_frames, COUNTER_LIMIT)
        try:
            plaintext = self._open(counter.to_bytes(NONCE_SIZE, "big"), ciphertext, None)
        except InvalidTag:
            self._failed = True
            raise LinkAuthError(
                f"frame {counter} ({len(ciphertext)} bytes) failed authentication: altered, "
                f"replayed, reordered or a frame before it was lost"
            ) from None
        self._received = counter + 1
        return plaintext


class _State(enum.Enum):
    START = "not started"  # initiator, before start()
    AWAIT_HELLO = "awaiting the hello"  # responder
    AWAIT_REPLY = "awaiting the reply"  # initiator, hello sent
    AWAIT_FINISH = "awaiting the finish"  # responder, reply sent
    DONE = "done"
    FAILED = "failed"


class Handshake:
    """One side of the handshake of one connection.

    ``initiator``: this side dialled and speaks first. ``network``: the tag both sides must
    share. ``accept(peer_public)``: the trust policy; None is open mode (any peer). ``expect``:
    the identity this side meant to reach (dialling a known node); any other fails.

    Drive it with ``start()`` (the initiator's hello; b"" for the responder) and ``receive()``
    for each handshake message, sending every non-empty result; once ``done``, take
    ``session()`` and ``peer``.
    """

    def __init__(
        self,
        identity: Identity,
        *,
        initiator: bool,
        network: bytes,
        accept: Callable[[bytes], bool] | None = None,
        expect: bytes | None = None,
    ) -> None:
        if not 1 <= len(network) <= MAX_NETWORK_TAG:
            raise ValueError(f"a network tag is 1 to {MAX_NETWORK_TAG} bytes, got {len(network)}")
        if expect is not None and len(expect) != PUBLIC_KEY_SIZE:
            raise ValueError(f"expect must be a {PUBLIC_KEY_SIZE}-byte node id, got {len(expect)}")
        self._identity = identity
        self.initiator = initiator
        self.network = bytes(network)
        self._accept = accept
        self._expect = expect
        self._state = _State.START if initiator else _State.AWAIT_HELLO
        self._ephemeral: X25519PrivateKey | None = None
        self._transcript = hashlib.sha256(PROTOCOL_NAME)
        self._secret = b""
        self._finish_key = b""  # k_I: seals the finish
        self._finish_ad = b""  # the transcript hash the finish is bound to
        self._peer: bytes | None = None
        self._session: Session | None = None
        self._keys: tuple[bytes, bytes] | None = None  # (to responder, to initiator) once done

    @property
    def done(self) -> bool:
        return self._state is _State.DONE

    @property
    def peer(self) -> bytes:
        """The peer's node id (its Ed25519 public key), proven and accepted."""
        if self._peer is None or self._state is not _State.DONE:
            raise LocalProtocolError(f"the peer is known only when the handshake is done ({self})")
        return self._peer

    def session(self) -> Session:
        """The link's Session. The same object on every call: two would reuse nonces."""
        if self._session is not None:
            return self._session
        if self._state is not _State.DONE or self._keys is None:
            raise LocalProtocolError(f"session() before the handshake is done ({self})")
        to_responder, to_initiator = self._keys
        self._keys = None  # the session holds the only copy
        self._session = (
            Session(to_responder, to_initiator)
            if self.initiator
            else Session(to_initiator, to_responder)
        )
        return self._session

    def start(self) -> bytes:
        """The initiator's hello, to send first; b"" for a responder, which waits for one."""
        if not self.initiator:
            if self._state is not _State.AWAIT_HELLO:
                raise LocalProtocolError(f"start() called after the handshake began ({self})")
            return b""
        if self._state is not _State.START:
            raise LocalProtocolError(f"start() called twice ({self})")
        self._ephemeral = X25519PrivateKey.generate()
        hello = (
            MAGIC
            + bytes((VERSION,))
            + WIRE_SCHEMA
            + bytes((len(self.network),))
            + self.network
            + self._ephemeral.public_key().public_bytes_raw()
        )
        self._transcript.update(hello)
        self._state = _State.AWAIT_REPLY
        return hello

    def receive(self, data: bytes) -> bytes:
        """Take one handshake message; return the message to send back (b"" if none)."""
        state = self._state
        if state in (_State.START, _State.DONE, _State.FAILED):
            raise LocalProtocolError(f"receive() called while the handshake is {state.value}")
        try:
            if state is _State.AWAIT_HELLO:
                return self._on_hello(bytes(data))
            if state is _State.AWAIT_REPLY:
                return self._on_reply(bytes(data))
            return self._on_finish(bytes(data))
        except BaseException:
            self._state = _State.FAILED
            self._forget()
            raise

    def __repr__(self) -> str:
        role = "initiator" if self.initiator else "responder"
        return f"Handshake({role}, {self._state.value}, network={self.network!r})"

    # -- the three messages -------------------------------------------------------------------

    def _on_hello(self, hello: bytes) -> bytes:
        if hello[: len(MAGIC)] != MAGIC:
            raise self._error(f"not an overlay link hello (it starts {hello[:8]!r})")
        # The version before the size: another version's hello has another layout.
        version = hello[_VERSION_AT] if len(hello) > _VERSION_AT else None
        if version is not None and version != VERSION:
            raise self._error(
                f"the peer speaks link protocol version {version}; we speak {VERSION}",
                f"this node speaks link protocol version {VERSION}, not {version}",
            )
        if len(hello) < _HELLO_FIXED:
            raise self._error(f"the hello is {len(hello)} bytes, at least {_HELLO_FIXED} expected")
        schema = hello[_SCHEMA_AT:_TAG_LENGTH_AT]
        tag_length = hello[_TAG_LENGTH_AT]
        if len(hello) != _HELLO_FIXED + tag_length:
            raise self._error(
                f"the hello is {len(hello)} bytes but its {tag_length}-byte network tag makes "
                f"{_HELLO_FIXED + tag_length}"
            )
        # A trust-listed node tells a stranger nothing of itself (its build, its network).
        private = self._accept is not None
        if schema != WIRE_SCHEMA:
            named = "" if private else f"{WIRE_SCHEMA.hex()}, yours "
            raise self._error(
                f"the peer's wire messages differ from ours (schema {schema.hex()}, ours "
                f"{WIRE_SCHEMA.hex()}): every node of a network must run the same build",
                f"this node's wire messages differ (schema {named}{schema.hex()}): every node "
                f"of a network must run the same build",
            )
        network = hello[_TAG_AT : _TAG_AT + tag_length]
        if network != self.network:
            raise self._error(
                f"the peer is on network {network!r}, we are on {self.network!r}",
                f"this node is not on network {network!r}"
                if private
                else f"this node is on network {self.network!r}, not {network!r}",
            )
        their_ephemeral = hello[_TAG_AT + tag_length :]

        self._ephemeral = X25519PrivateKey.generate()
        our_ephemeral = self._ephemeral.public_key().public_bytes_raw()
        self._secret = self._exchange(their_ephemeral)
        self._transcript.update(hello)
        self._transcript.update(our_ephemeral)
        reply_ad = self._transcript.digest()
        finish_key, reply_key = derive_keys(self._secret, reply_ad, HANDSHAKE_INFO)
        ours, signature = self._sign(RESPONDER_LABEL)
        self._finish_key = finish_key
        self._finish_ad = self._transcript.digest()
        sealed = AESGCM(reply_key).encrypt(_ZERO_NONCE, ours + signature, reply_ad)
        self._state = _State.AWAIT_FINISH
        return our_ephemeral + sealed

    def _on_reply(self, reply: bytes) -> bytes:
        refused = refusal_text(reply)
        if refused is not None:
            raise self._error(f"the peer refused the link: {refused}")
        if len(reply) != REPLY_SIZE:
            raise self._error(f"the reply is {len(reply)} bytes, expected {REPLY_SIZE}")
        their_ephemeral = reply[:EPHEMERAL_SIZE]
        self._secret = self._exchange(their_ephemeral)
        self._transcript.update(their_ephemeral)
        reply_ad = self._transcript.digest()
        finish_key, reply_key = derive_keys(self._secret, reply_ad, HANDSHAKE_INFO)
        content = self._unseal(reply_key, reply[EPHEMERAL_SIZE:], reply_ad, "reply")
        self._check_peer(content, RESPONDER_LABEL)
        finish_ad = self._transcript.digest()
        ours, signature = self._sign(INITIATOR_LABEL)
        finish = AESGCM(finish_key).encrypt(_ZERO_NONCE, ours + signature, finish_ad)
        self._complete()
        return finish

    def _on_finish(self, finish: bytes) -> bytes:
        if len(finish) != FINISH_SIZE:
            raise self._error(f"the finish is {len(finish)} bytes, expected {FINISH_SIZE}")
        content = self._unseal(self._finish_key, finish, self._finish_ad, "finish")
        self._check_peer(content, INITIATOR_LABEL)
        self._complete()
        return b""

    # -- steps shared by both roles -----------------------------------------------------------

    def _exchange(self, their_ephemeral: bytes) -> bytes:
        assert self._ephemeral is not None
        try:
            return self._ephemeral.exchange(X25519PublicKey.from_public_bytes(their_ephemeral))
        except ValueError:
            # OpenSSL refuses an all-zero result: the peer sent a low-order point, which would
            # make the "shared" secret public.
            raise self._error("the peer's ephemeral key is a low-order point") from None

    def _unseal(self, key: bytes, sealed: bytes, ad: bytes, what: str) -> bytes:
        try:
            return AESGCM(key).decrypt(_ZERO_NONCE, sealed, ad)
        except InvalidTag:
            raise self._error(
                f"the {what} failed authentication: altered in transit, or the peer did not see "
                f"the earlier messages as we sent them"
            ) from None

    def _sign(self, label: bytes) -> tuple[bytes, bytes]:
        """Our identity and its signature over the transcript; both enter the transcript."""
        ours = self._identity.public
        self._transcript.update(ours)
        signature = self._identity.sign(label + self._transcript.digest())
        self._transcript.update(signature)
        return ours, signature

    def _check_peer(self, content: bytes, label: bytes) -> None:
        """Check the peer's identity and signature, in the order that gives the truest reason."""
        public, signature = content[:PUBLIC_KEY_SIZE], content[PUBLIC_KEY_SIZE:]
        self._transcript.update(public)
        text = node_id_text(public)
        if is_small_order(public):
            raise self._error(f"peer identity {text} is a small-order key nobody can own")
        if not verify(public, signature, label + self._transcript.digest()):
            raise self._error(f"the signature of peer identity {text} does not verify")
        self._transcript.update(signature)
        if public == self._identity.public:
            raise self._error(
                f"the peer presents our own identity {text}: a connection to ourselves, or our "
                f"own handshake reflected back"
            )
        if self._expect is not None and public != self._expect:
            raise self._error(f"dialled {node_id_text(self._expect)} but the peer is {text}")
        if self._accept is not None and not self._accept(public):
            raise self._error(f"peer identity {text} is not in the trust list")
        self._peer = public

    def _complete(self) -> None:
        self._keys = derive_keys(self._secret, self._transcript.digest(), SESSION_INFO)
        self._state = _State.DONE
        self._forget()

    def _forget(self) -> None:
        """Drop the ephemeral secrets as soon as they are not needed (forward secrecy)."""
        self._ephemeral = None
        self._secret = b""
        self._finish_key = b""

    def _error(self, reason: str, tell_peer: str = "") -> HandshakeError:
        """The error to raise; ``tell_peer``: the refusal's reason, worded for the peer."""
        role = "initiator" if self.initiator else "responder"
        return HandshakeError(
            f"link handshake ({role}, {self._state.value}): {reason}",
            refusal(tell_peer) if tell_peer else b"",
        )
