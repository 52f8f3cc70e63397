"""SignatureChecker: each good signature verified once, any changed field verified and refused."""

from __future__ import annotations

from collections import OrderedDict

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from keyspace.stream_key import StreamKey, sign_packet, verify_packet
from overlay.core.signatures import SignatureChecker
from overlay.messages import PacketKind

PRIVATE = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
PUBLIC = PRIVATE.public_key().public_bytes_raw()
OTHER_PUBLIC = Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key().public_bytes_raw()
KEY = StreamKey.signed(PUBLIC, "news").key
OTHER_KEY = StreamKey.signed(PUBLIC, "weather").key

Fields = tuple[bytes, bytes, int, int | None, PacketKind, bytes]


def fields(
    packet: int = 7, epoch: int | None = 2, kind: PacketKind = PacketKind.DATA, data: bytes = b"hi"
) -> Fields:
    return (PUBLIC, KEY, packet, epoch, kind, data)


def signed(packet: Fields) -> bytes:
    _, key, number, epoch, kind, data = packet
    return sign_packet(PRIVATE, key, number, epoch, int(kind), data)


def check(checker: SignatureChecker, signature: bytes | None, packet: Fields) -> bool:
    return checker.check(packet[0], signature, *packet[1:])


def test_a_good_signature_is_verified_once() -> None:
    checker = SignatureChecker(capacity=8)
    packet = fields()
    signature = signed(packet)
    assert check(checker, signature, packet)
    assert checker.verified == 1
    assert check(checker, signature, packet)  # the second meeting, as SubscribeData
    assert check(checker, signature, packet)
    assert checker.verified == 1


def test_no_signature_is_refused_without_verifying() -> None:
    checker = SignatureChecker(capacity=8)
    assert not check(checker, None, fields())
    assert checker.verified == 0


def test_every_changed_field_is_verified_again_and_refused() -> None:
    checker = SignatureChecker(capacity=8)
    packet = fields()
    signature = signed(packet)
    assert check(checker, signature, packet)
    changed = [
        (OTHER_PUBLIC, *packet[1:]),
        (PUBLIC, OTHER_KEY, *packet[2:]),
        fields(packet=8),
        fields(epoch=None),
        fields(epoch=3),
        fields(kind=PacketKind.EPOCH_CLOSED),
        fields(data=b"ho"),
        fields(data=b"hi\0"),
    ]
    for number, other in enumerate(changed, start=2):
        assert not check(checker, signature, other), f"{other} passed with another's signature"
        assert checker.verified == number
    assert check(checker, signature, packet)  # the good entry is still there
    assert checker.verified == 1 + len(changed)


def test_a_signature_for_no_epoch_is_not_one_for_epoch_zero() -> None:
    checker = SignatureChecker(capacity=8)
    packet = fields(epoch=None)
    signature = signed(packet)
    assert check(checker, signature, packet)
    assert not check(checker, signature, fields(epoch=0))


def test_bad_signatures_are_never_cached() -> None:
    checker = SignatureChecker(capacity=8)
    packet = fields()
    good = signed(packet)
    flipped = bytes([good[0] ^ 1]) + good[1:]
    for bad in (flipped, good[:-1], b"", bytes(64), signed(fields(packet=8))):
        for attempt in range(2):
            before = checker.verified
            assert not check(checker, bad, packet), f"{bad!r} accepted (attempt {attempt})"
            assert checker.verified == before + 1, "a bad signature must be checked every time"
    assert not checker._good


def test_a_malformed_public_key_is_refused_without_raising() -> None:
    checker = SignatureChecker(capacity=8)
    packet = fields()
    assert not checker.check(PUBLIC[:31], signed(packet), *packet[1:])
    assert not checker.check(b"", signed(packet), *packet[1:])


def test_forgeries_cannot_push_good_signatures_out() -> None:
    checker = SignatureChecker(capacity=1)
    packet = fields()
    signature = signed(packet)
    assert check(checker, signature, packet)
    for number in range(20):
        assert not check(checker, bytes([number]) * 64, fields(packet=number))
    assert check(checker, signature, packet)
    assert checker.verified == 21


def test_the_cache_is_bounded_forgetting_the_oldest() -> None:
    checker = SignatureChecker(capacity=2)
    packets = [fields(packet=n) for n in range(3)]
    signatures = [signed(p) for p in packets]
    for signature, packet in zip(signatures, packets, strict=True):
        assert check(checker, signature, packet)
    assert checker.verified == 3
    assert len(checker._good) == 2
    assert check(checker, signatures[2], packets[2])
    assert check(checker, signatures[1], packets[1])
    assert checker.verified == 3
    assert check(checker, signatures[0], packets[0])  # forgotten: verified again, still good
    assert checker.verified == 4


def test_a_zero_capacity_cache_still_answers_correctly() -> None:
    checker = SignatureChecker(capacity=0)
    packet = fields()
    assert check(checker, signed(packet), packet)
    assert check(checker, signed(packet), packet)
    assert checker.verified == 2
    assert not check(checker, signed(packet), fields(data=b"x"))


# --- against the plain verification and a model of the cache ---------------------------------

POOL = [fields(packet=n % 3, epoch=None if n % 2 else n, data=bytes([n])) for n in range(4)]
POOL_SIGNATURES = [signed(p) for p in POOL]


@settings(max_examples=150, deadline=None)
@given(
    capacity=st.integers(0, 3),
    checks=st.lists(
        st.tuples(st.integers(0, len(POOL) - 1), st.integers(0, len(POOL) - 1), st.booleans()),
        max_size=25,
    ),
)
def test_answers_match_full_verification_and_verify_only_on_a_miss(
    capacity: int, checks: list[tuple[int, int, bool]]
) -> None:
    # Each check presents the signature of one pool packet (maybe with a bit flipped) with
    # the fields of another, or the same.
    checker = SignatureChecker(capacity)
    cache: OrderedDict[bytes, Fields] = OrderedDict()
    for signer, presented, flip in checks:
        signature = POOL_SIGNATURES[signer]
        if flip:
            signature = signature[:-1] + bytes([signature[-1] ^ 0x40])
        packet = POOL[presented]
        public_key, key, number, epoch, kind, data = packet
        truth = verify_packet(public_key, signature, key, number, epoch, int(kind), data)
        assert truth == (signer == presented and not flip)
        before = checker.verified
        assert check(checker, signature, packet) == truth
        hit = cache.get(signature) == packet
        assert checker.verified == before + (0 if hit else 1)
        if truth and not hit:
            cache[signature] = packet
            if len(cache) > capacity:
                cache.popitem(last=False)
        assert len(checker._good) <= capacity
