"""Identity: signing, node id text, small-order keys, and the identity file."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overlay.runtime.identity import (
    FILE_HEADER,
    Identity,
    IdentityError,
    node_id_text,
    parse_node_id,
    verify,
)

ALICE = Identity.from_private_bytes(bytes(range(32)))
BOB = Identity.from_private_bytes(bytes(range(1, 33)))

# -- signing ------------------------------------------------------------------------------------


def test_public_is_the_32_byte_raw_public_key() -> None:
    assert len(ALICE.public) == 32
    assert ALICE.public != BOB.public
    assert Identity.from_private_bytes(bytes(range(32))).public == ALICE.public


def test_generated_identities_differ() -> None:
    assert Identity.generate().public != Identity.generate().public


def test_a_signature_verifies_for_its_key_and_data_only() -> None:
    sig = ALICE.sign(b"data")
    assert verify(ALICE.public, sig, b"data")
    assert not verify(ALICE.public, sig, b"datA")
    assert not verify(BOB.public, sig, b"data")
    assert not verify(ALICE.public, bytes([sig[0] ^ 1]) + sig[1:], b"data")


@pytest.mark.parametrize(
    ("public", "sig"),
    [(b"short", bytes(64)), (bytes(32), b"short"), (b"", b""), (bytes(33), bytes(64))],
)
def test_verify_never_raises_on_garbage(public: bytes, sig: bytes) -> None:
    assert verify(public, sig, b"data") is False


def test_from_private_bytes_refuses_a_wrong_length() -> None:
    with pytest.raises(IdentityError, match="32 bytes, got 31"):
        Identity.from_private_bytes(bytes(31))


def test_repr_shows_the_node_id_and_not_the_private_key() -> None:
    text = repr(ALICE)
    assert node_id_text(ALICE.public) in text
    assert base64.b64encode(bytes(range(32))).decode() not in text


# -- node id text -------------------------------------------------------------------------------


@given(st.binary(min_size=32, max_size=32))
def test_node_id_text_round_trips(public: bytes) -> None:
    text = node_id_text(public)
    assert len(text) == 52 and text == text.lower() and "=" not in text
    assert parse_node_id(text) == public
    assert parse_node_id(text.upper()) == public


def test_node_id_text_refuses_a_wrong_length() -> None:
    with pytest.raises(IdentityError, match="32 bytes, got 3"):
        node_id_text(b"abc")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "0 characters"),
        ("abc", "3 characters"),
        ("a" * 53, "53 characters"),
        ("1" * 52, "not base32"),
        ("a" * 51 + "!", "not base32"),
        # The last character carries 4 spare bits; "b" sets one of them.
        ("a" * 51 + "b", "not canonical"),
    ],
)
def test_parse_node_id_says_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(IdentityError, match=problem):
        parse_node_id(text)


# -- the identity file ----------------------------------------------------------------------------


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    ALICE.save(path)
    loaded = Identity.load(path)
    assert loaded.public == ALICE.public
    assert verify(ALICE.public, loaded.sign(b"x"), b"x")
    lines = path.read_text().splitlines()
    assert lines[0] == FILE_HEADER
    assert lines[1] == f"node-id {node_id_text(ALICE.public)}"


def test_saved_file_is_mode_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        ALICE.save(tmp_path / "node.key")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "node.key").stat().st_mode) == 0o600


def test_save_refuses_to_overwrite_and_leaves_the_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    ALICE.save(path)
    before = path.read_bytes()
    with pytest.raises(IdentityError, match=r"node\.key.*already exists.*overwrite=True"):
        BOB.save(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["node.key"]  # no temporary file left behind


def test_save_with_overwrite_replaces(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    ALICE.save(path)
    BOB.save(path, overwrite=True)
    assert Identity.load(path).public == BOB.public
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["node.key"]


def test_save_into_a_missing_directory_is_an_identity_error(tmp_path: Path) -> None:
    with pytest.raises(IdentityError, match="cannot be written"):
        ALICE.save(tmp_path / "missing" / "node.key")


def test_load_or_create_creates_once_then_loads(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    first = Identity.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = Identity.load_or_create(path)
    assert first.public == second.public


def test_load_or_create_does_not_replace_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    path.write_text("garbage\n")
    with pytest.raises(IdentityError, match="first line"):
        Identity.load_or_create(path)
    assert path.read_text() == "garbage\n"


def test_load_ignores_permissions(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    ALICE.save(path)
    path.chmod(0o644)
    assert Identity.load(path).public == ALICE.public


def test_loads_accepts_blank_lines_and_a_missing_node_id_line() -> None:
    private = base64.b64encode(bytes(range(32))).decode()
    assert Identity.loads(f"{FILE_HEADER}\n\nprivate-key {private}\n\n").public == ALICE.public


GOOD_KEY = base64.b64encode(bytes(range(32))).decode()
GOOD_ID = node_id_text(ALICE.public)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "first line must be"),
        (b"overlay-identity-v2\n", "first line must be"),
        (b"-----BEGIN PRIVATE KEY-----\n", "first line must be"),
        (FILE_HEADER.encode() + b"\n", "no 'private-key' line"),
        (f"{FILE_HEADER}\nnode-id {GOOD_ID}\n".encode(), "truncated"),
        (f"{FILE_HEADER}\nprivate-key {GOOD_KEY[:20]}\n".encode(), "15 bytes, expected 32"),
        (f"{FILE_HEADER}\nprivate-key {GOOD_KEY[:21]}\n".encode(), "not valid base64"),
        (f"{FILE_HEADER}\nprivate-key {GOOD_KEY}!\n".encode(), "not valid base64"),
        (
            f"{FILE_HEADER}\nprivate-key {base64.b64encode(bytes(31)).decode()}\n".encode(),
            "31 bytes, expected 32",
        ),
        (f"{FILE_HEADER}\nprivate-key\n".encode(), "line 2 is not"),
        (f"{FILE_HEADER}\nsecret {GOOD_KEY}\n".encode(), "line 2 is not"),
        (f"{FILE_HEADER}\nprivate-key {GOOD_KEY}\nprivate-key {GOOD_KEY}\n".encode(), "repeats"),
        (
            f"{FILE_HEADER}\nnode-id {node_id_text(BOB.public)}\nprivate-key {GOOD_KEY}\n".encode(),
            "edited or corrupted",
        ),
        (f"{FILE_HEADER}\nnode-id xyz\nprivate-key {GOOD_KEY}\n".encode(), "bad 'node-id' line"),
        (FILE_HEADER.encode() + b"\n\xff\xfe\n", "not ASCII"),
        (FILE_HEADER.encode() + b"\n" + b"#" * 5000, "longer than 4096 bytes"),
    ],
)
def test_malformed_files_say_which_file_and_what_is_wrong(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "node.key"
    path.write_bytes(content)
    with pytest.raises(IdentityError) as caught:
        Identity.load(path)
    message = str(caught.value)
    assert str(path) in message
    assert problem in message
    assert caught.value.__cause__ is None or isinstance(caught.value.__cause__, IdentityError)


def test_truncated_file_at_every_length_is_refused_or_loads_the_same_key(tmp_path: Path) -> None:
    path = tmp_path / "node.key"
    ALICE.save(path)
    whole = path.read_bytes()
    for length in range(len(whole)):
        path.write_bytes(whole[:length])
        try:
            loaded = Identity.load(path)
        except IdentityError as error:
            assert str(path) in str(error)
        else:
            # Only the final newline may go missing without harm.
            assert length == len(whole) - 1 and loaded.public == ALICE.public


def test_missing_file_and_a_directory_are_identity_errors(tmp_path: Path) -> None:
    with pytest.raises(IdentityError, match="does not exist"):
        Identity.load(tmp_path / "absent.key")
    with pytest.raises(IdentityError, match="cannot be read"):
        Identity.load(tmp_path)
