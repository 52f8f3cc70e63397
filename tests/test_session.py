"""The Session a handshake keys: sealed frames in order, each once, under per-direction
counter nonces, and each direction's key replaced by its next every REKEY_FRAMES frames."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from handshakes import flip, linked, pair, run
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.errors import LocalProtocolError
from overlay.runtime.framing import MAX_PLAINTEXT
from overlay.runtime.handshake import (
    COUNTER_LIMIT,
    REKEY_FRAMES,
    LinkAuthError,
    Session,
    next_key,
)


def test_sessions_work_in_both_directions() -> None:
    a, b = linked()
    assert b.open(a.seal(b"to bob")) == b"to bob"
    assert a.open(b.seal(b"to alice")) == b"to alice"


def test_many_frames_both_ways_interleaved() -> None:
    a, b = linked()
    for n in range(2000):
        assert b.open(a.seal(n.to_bytes(3, "big"))) == n.to_bytes(3, "big")
        if n % 3 == 0:
            assert a.open(b.seal(b"ack %d" % n)) == b"ack %d" % n
    assert a.sent == b.received == 2000


@settings(max_examples=50)
@given(st.lists(st.tuples(st.booleans(), st.binary(max_size=200)), max_size=50))
def test_any_sequence_of_frames_round_trips(frames: list[tuple[bool, bytes]]) -> None:
    a, b = linked()
    sealed_ab = [(a.seal(p), p) for to_b, p in frames if to_b]
    sealed_ba = [(b.seal(p), p) for to_b, p in frames if not to_b]
    assert all(b.open(c) == p for c, p in sealed_ab)
    assert all(a.open(c) == p for c, p in sealed_ba)


def test_sealed_frames_are_the_plaintext_plus_a_16_byte_tag_and_fit_max_plaintext() -> None:
    a, b = linked()
    empty = a.seal(b"")
    assert len(empty) == 16
    assert b.open(empty) == b""
    big = bytes(MAX_PLAINTEXT)
    assert b.open(a.seal(big)) == big
    with pytest.raises(LocalProtocolError, match="exceeds MAX_PLAINTEXT"):
        a.seal(bytes(MAX_PLAINTEXT + 1))


def test_each_connection_has_its_own_keys() -> None:
    a1, _ = linked()
    a2, b2 = linked()
    assert a1.seal(b"same") != a2.seal(b"same")
    with pytest.raises(LinkAuthError):
        b2.open(a1.seal(b"x"))


@pytest.mark.parametrize("mask", [0x01, 0x80])
def test_every_single_byte_change_of_a_sealed_frame_fails(mask: int) -> None:
    a, b = linked()
    sealed = a.seal(b"a plaintext of some length")
    for position in range(len(sealed)):
        fresh_a, fresh_b = linked()
        frame = fresh_a.seal(b"a plaintext of some length")
        with pytest.raises(LinkAuthError, match="frame 0"):
            fresh_b.open(flip(position, mask)(frame))
    assert b.open(sealed) == b"a plaintext of some length"


@pytest.mark.parametrize(
    "change", [lambda f: f[:-1], lambda f: f + b"\x00", lambda f: b"", lambda f: f[:15]]
)
def test_truncated_or_extended_sealed_frames_fail(change: Callable[[bytes], bytes]) -> None:
    a, b = linked()
    with pytest.raises(LinkAuthError):
        b.open(change(a.seal(b"payload")))


def test_a_replayed_frame_fails() -> None:
    a, b = linked()
    frame = a.seal(b"once")
    assert b.open(frame) == b"once"
    with pytest.raises(LinkAuthError, match="frame 1"):
        b.open(frame)


def test_reordered_frames_fail() -> None:
    a, b = linked()
    _first, second = a.seal(b"1"), a.seal(b"2")
    with pytest.raises(LinkAuthError, match="frame 0"):
        b.open(second)


def test_a_dropped_frame_makes_the_next_fail() -> None:
    a, b = linked()
    zero, _one, two = a.seal(b"0"), a.seal(b"1"), a.seal(b"2")
    assert b.open(zero) == b"0"
    with pytest.raises(LinkAuthError, match="frame 1"):
        b.open(two)


def test_a_frame_reflected_to_its_sender_fails() -> None:
    a, _ = linked()
    with pytest.raises(LinkAuthError):
        a.open(a.seal(b"echo"))


def test_after_a_failure_the_session_refuses_everything() -> None:
    a, b = linked()
    good = a.seal(b"good")
    with pytest.raises(LinkAuthError):
        b.open(b"\x00" * 20)
    with pytest.raises(LocalProtocolError, match="must be dropped"):
        b.open(good)


def test_the_send_counter_never_wraps() -> None:
    a, b = linked()
    a._sent = COUNTER_LIMIT - 1
    b._received = COUNTER_LIMIT - 1
    assert b.open(a.seal(b"last")) == b"last"
    with pytest.raises(LocalProtocolError, match="exhausted"):
        a.seal(b"one too many")
    with pytest.raises(LinkAuthError, match="wrap"):
        b.open(b"\x00" * 16)


def keyed_pair(rekey_frames: int) -> tuple[Session, Session]:
    """Two ends of a session on fixed keys, each moving to its next key every
    ``rekey_frames`` frames."""
    to_b, to_a = bytes(range(32)), bytes(range(32, 64))
    return Session(to_b, to_a, rekey_frames), Session(to_a, to_b, rekey_frames)


def test_both_ends_move_to_the_next_key_at_the_same_frame() -> None:
    a, b = keyed_pair(rekey_frames=3)
    for n in range(10):
        assert b.open(a.seal(b"a%d" % n)) == b"a%d" % n
        assert a.open(b.seal(b"b%d" % n)) == b"b%d" % n
    assert (a.sent, b.received) == (10, 10)


def key_chain(key: bytes, count: int) -> list[bytes]:
    """``key`` and the ``count - 1`` keys that follow it."""
    chain = [key]
    while len(chain) < count:
        chain.append(next_key(chain[-1]))
    return chain


def test_frame_c_is_sealed_under_key_c_div_r_of_the_chain() -> None:
    """With a rekey every 2 frames, frames 0 and 1 are sealed under the first key, 2 and 3
    under the next, 4 and 5 under the one after, each under its own counter nonce; an end
    that kept the first key opens frames 0 and 1 and fails at frame 2."""
    rekeying, _ = keyed_pair(rekey_frames=2)
    chain = key_chain(bytes(range(32)), 3)
    assert len(set(chain)) == 3
    frames = [rekeying.seal(b"frame %d" % c) for c in range(6)]
    for c, frame in enumerate(frames):
        key = AESGCM(chain[c // 2])
        assert key.decrypt(c.to_bytes(12, "big"), frame, None) == b"frame %d" % c
    _, steady_end = keyed_pair(rekey_frames=REKEY_FRAMES)
    steady_end.open(frames[0])
    steady_end.open(frames[1])
    with pytest.raises(LinkAuthError, match="frame 2"):
        steady_end.open(frames[2])


def test_a_linked_session_moves_to_the_next_key_at_rekey_frames() -> None:
    """A session from a real handshake: frame REKEY_FRAMES - 1 is sealed under the session
    key, frame REKEY_FRAMES under the next one; the other end opens both."""
    i, r = pair()
    run(i, r)
    a, b = i.session(), r.session()
    first = a._seal_key
    a._sent = b._received = REKEY_FRAMES - 1
    last_of_first, first_of_next = a.seal(b"before"), a.seal(b"after")
    nonce = (REKEY_FRAMES - 1).to_bytes(12, "big")
    assert AESGCM(first).decrypt(nonce, last_of_first, None) == b"before"
    nonce = REKEY_FRAMES.to_bytes(12, "big")
    assert AESGCM(next_key(first)).decrypt(nonce, first_of_next, None) == b"after"
    assert b.open(last_of_first) == b"before"
    assert b.open(first_of_next) == b"after"


def test_a_plaintext_refused_at_a_rekey_frame_leaves_both_ends_in_step() -> None:
    a, b = keyed_pair(rekey_frames=2)
    assert b.open(a.seal(b"0")) == b"0"
    assert b.open(a.seal(b"1")) == b"1"
    with pytest.raises(LocalProtocolError, match="MAX_PLAINTEXT"):
        a.seal(bytes(MAX_PLAINTEXT + 1))
    for c in range(2, 9):
        assert b.open(a.seal(b"%d" % c)) == b"%d" % c


def test_a_frame_failing_at_a_rekey_frame_ends_the_session() -> None:
    a, b = keyed_pair(rekey_frames=2)
    for c in range(2):
        b.open(a.seal(b"%d" % c))
    with pytest.raises(LinkAuthError, match="frame 2"):
        b.open(b"\x00" * 20)
    with pytest.raises(LocalProtocolError, match="must be dropped"):
        b.open(a.seal(b"2"))


def test_a_key_seals_no_more_than_gcm_s_margin_allows() -> None:
    """RFC 8446 section 5.5: about 2**24.5 records of 2**14 bytes (2**34.5 AES blocks) per
    AES-GCM key for a 2**-57 margin. A key here seals at most REKEY_FRAMES frames of at most
    MAX_PLAINTEXT bytes."""
    blocks_per_frame = -(-MAX_PLAINTEXT // 16) + 1  # and the block that makes the tag
    assert REKEY_FRAMES * blocks_per_frame <= 2**34
