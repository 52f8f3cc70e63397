"""A node's long-term identity: an Ed25519 key pair whose raw public key is the node id.

Theory of operation: a node generates its key once and keeps it in a small text file, so it
keeps its id (its ``PeerId``, the name in other nodes' trust lists) across restarts. The link
handshake (``overlay.runtime.handshake``) proves possession of the private key by signing the
handshake transcript; the 32 raw public-key bytes are the id itself, so there is no separate
certificate or id-to-key table to keep consistent.

The file, self-describing and readable with ``cat``::

    overlay-identity-v1
    node-id <52 base32 characters: the public key>
    private-key <44 base64 characters: the 32-byte Ed25519 private key (RFC 8032 seed)>

Invariants:

* A file is written whole or not at all: it is written to a temporary file in the same
  directory, flushed to disk and then linked (or, with ``overwrite=True``, renamed) into place.
* A written file has mode 0o600 whatever the umask: it holds a private key.
* An existing identity is never replaced by accident: without ``overwrite=True`` saving over an
  existing file fails, atomically (no check-then-write race).
* Loading trusts nothing in the file: a wrong header, a bad encoding, a key of the wrong
  length, or a ``node-id`` line that does not match the private key raises
  :class:`IdentityError` naming the path and the problem, never a library's stack trace.
  Loading does not judge the file's permissions: that is the operator's business, and refusing
  a readable key would only break a node whose files were copied by a careful tool.
* :func:`node_id_text` and :func:`parse_node_id` are exact inverses; only the canonical
  spelling (the one ``node_id_text`` produces, in either case) is accepted, so one id has one
  text form in configs and trust lists. It is the same base32 spelling as the key part of a
  signed stream's address (``keyspace.stream_key``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

# Every signature check goes through keyspace.ed25519, which refuses small-order keys (anyone
# can "sign" for those); re-exported here for the handshake and the tests.
from keyspace.ed25519 import (
    PUBLIC_KEY_SIZE,
    SIGNATURE_SIZE,
    KeyTextError,
    is_small_order,
    key_text,
    parse_key_text,
    verify,
)
from keyspace.id_work import MAX_ID_WORK, id_work

__all__ = [
    "PUBLIC_KEY_SIZE",
    "SIGNATURE_SIZE",
    "Identity",
    "IdentityError",
    "is_small_order",
    "node_id_text",
    "parse_node_id",
    "verify",
]

# The first line of every identity file. The version lets a later format (an encrypted key,
# another algorithm) be told apart from this one instead of being misread as it.
FILE_HEADER = "overlay-identity-v1"

# Ed25519 sizes (RFC 8032): the private key (seed) is 32 bytes, as is the public key.
PRIVATE_KEY_SIZE = 32

# 32 bytes are 52 base32 characters once the "====" padding is dropped.
NODE_ID_TEXT_LENGTH = 52

# Identity files are about 150 bytes; anything much longer is not one, and reading it whole
# (it could be a log file or a device given by mistake) would waste memory to say so.
_MAX_FILE_SIZE = 4096

# A private key file is for its owner alone.
FILE_MODE = 0o600


class IdentityError(ValueError):
    """An identity file or node id text that cannot be used. The message says which and why."""


class IdentityExists(IdentityError):
    """Saving would replace an existing identity file, and ``overwrite`` was not given."""


def node_id_text(public: bytes) -> str:
    """The printable form of a node id: lowercase, unpadded base32 of the 32 raw bytes."""
    if len(public) != PUBLIC_KEY_SIZE:
        raise IdentityError(f"a node id is {PUBLIC_KEY_SIZE} bytes, got {len(public)}")
    return key_text(public)


def parse_node_id(text: str) -> bytes:
    """The 32-byte node id that :func:`node_id_text` printed as ``text`` (in either case).

    Raises IdentityError saying what is wrong: the length, a character outside base32, or a
    non-canonical spelling (52 characters carry 260 bits; the 4 spare bits must be zero, or
    two texts would name the same id).
    """
    stripped = text.strip()
    try:
        return parse_key_text(stripped)
    except KeyTextError as error:
        if error.problem == "length":
            problem = (
                f"is {len(stripped)} characters; a node id is "
                f"{NODE_ID_TEXT_LENGTH} base32 characters (a-z, 2-7)"
            )
        elif error.problem == "alphabet":
            problem = "is not base32 (only letters a-z and digits 2-7)"
        else:
            problem = "is not canonical: its last character has stray low bits"
        raise IdentityError(f"node id {text!r} {problem}") from None


class Identity:
    """An Ed25519 private key and the node id (``public``) it stands for."""

    __slots__ = ("_private", "public")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public: bytes = private.public_key().public_bytes_raw()

    @classmethod
    def generate(cls, work: int = 0) -> Identity:
        """A fresh identity from the operating system's random source, whose id carries at
        least ``work`` bits of work (``keyspace.id_work``): about ``2**work`` tries."""
        if not 0 <= work <= MAX_ID_WORK:
            raise IdentityError(f"identity work must be in [0, {MAX_ID_WORK}] bits, got {work}")
        while True:
            identity = cls(Ed25519PrivateKey.generate())
            if id_work(identity.public) >= work:
                return identity

    @classmethod
    def from_private_bytes(cls, raw: bytes) -> Identity:
        """The identity of a known 32-byte private key (tests and simulations use fixed ones)."""
        if len(raw) != PRIVATE_KEY_SIZE:
            raise IdentityError(
                f"an Ed25519 private key is {PRIVATE_KEY_SIZE} bytes, got {len(raw)}"
            )
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    def sign(self, data: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``data``."""
        return self._private.sign(data)

    def private_bytes(self) -> bytes:
        """The raw 32-byte private key: for a signed stream's publisher, whose key file is
        an identity file (``overlay keygen --stream``)."""
        return self._private.private_bytes_raw()

    @property
    def text(self) -> str:
        """This identity's node id in printable form (:func:`node_id_text`)."""
        return node_id_text(self.public)

    def __repr__(self) -> str:
        # Never the private key: reprs end up in logs.
        return f"Identity({self.text})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Identity) and other.public == self.public

    def __hash__(self) -> int:
        return hash(self.public)

    # -- files --------------------------------------------------------------------------------

    def dumps(self) -> str:
        """The identity file's text (see the module docstring)."""
        private = base64.b64encode(self._private.private_bytes_raw()).decode("ascii")
        return f"{FILE_HEADER}\nnode-id {self.text}\nprivate-key {private}\n"

    @classmethod
    def loads(cls, text: str, *, source: str = "<string>") -> Identity:
        """Parse an identity file's text; ``source`` names it in errors (a path, usually)."""

        def bad(problem: str) -> IdentityError:
            return IdentityError(f"identity file {source}: {problem}")

        lines = text.splitlines()
        if not lines or lines[0].strip() != FILE_HEADER:
            first = lines[0][:40] if lines else ""
            raise bad(f"first line must be {FILE_HEADER!r}, found {first!r}")
        fields: dict[str, str] = {}
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            name, _, value = line.strip().partition(" ")
            if name not in ("node-id", "private-key") or not value.strip():
                raise bad(f"line {number} is not 'node-id <id>' or 'private-key <base64>'")
            if name in fields:
                raise bad(f"line {number} repeats {name!r}")
            fields[name] = value.strip()
        if "private-key" not in fields:
            raise bad("no 'private-key' line (the file is truncated?)")
        try:
            raw = base64.b64decode(fields["private-key"], validate=True)
        except (binascii.Error, ValueError):
            raise bad("the private key is not valid base64") from None
        if len(raw) != PRIVATE_KEY_SIZE:
            raise bad(f"the private key is {len(raw)} bytes, expected {PRIVATE_KEY_SIZE}")
        identity = cls.from_private_bytes(raw)
        if "node-id" in fields:
            try:
                claimed = parse_node_id(fields["node-id"])
            except IdentityError as error:
                raise bad(f"bad 'node-id' line: {error}") from None
            if claimed != identity.public:
                raise bad(
                    f"the 'node-id' line says {fields['node-id']} but the private key is "
                    f"that of {identity.text}: the file was edited or corrupted"
                )
        return identity

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Identity:
        """Read an identity file. Raises IdentityError (never OSError) naming ``path``."""
        path = Path(path)
        try:
            with path.open("rb") as file:
                data = file.read(_MAX_FILE_SIZE + 1)
        except FileNotFoundError:
            raise IdentityError(f"identity file {path}: does not exist") from None
        except OSError as error:
            raise IdentityError(f"identity file {path}: cannot be read: {error}") from None
        if len(data) > _MAX_FILE_SIZE:
            raise IdentityError(
                f"identity file {path}: longer than {_MAX_FILE_SIZE} bytes, so not an identity"
            )
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            raise IdentityError(f"identity file {path}: not ASCII text") from None
        return cls.loads(text, source=str(path))

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Write this identity to ``path`` atomically, mode 0o600.

        Raises IdentityExists if the file exists and ``overwrite`` is false (nothing is
        changed then), IdentityError if it cannot be written.
        """
        path = Path(path)
        try:
            self._write(path, overwrite=overwrite)
        except FileExistsError:
            raise IdentityExists(
                f"identity file {path}: already exists; refusing to overwrite a node's identity "
                f"(pass overwrite=True to replace it)"
            ) from None
        except OSError as error:
            raise IdentityError(f"identity file {path}: cannot be written: {_why(error)}") from None

    def _write(self, path: Path, *, overwrite: bool) -> None:
        directory = path.parent
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            # mkstemp already creates 0o600; fchmod states it and survives any umask oddity.
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, "wb") as file:
                file.write(self.dumps().encode("ascii"))
                file.flush()
                os.fsync(file.fileno())
            if overwrite:
                os.replace(temporary, path)
            else:
                # link() fails if path exists: the no-overwrite check and the write are one step.
                os.link(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        _fsync_directory(directory)

    @classmethod
    def load_or_create(cls, path: str | os.PathLike[str], work: int = 0) -> Identity:
        """The identity in ``path``, generating and saving a new one (carrying ``work`` bits,
        ``generate``) if there is no file.

        Two processes racing to create the same file end up with the same identity: the loser
        of the race loads the winner's file.
        """
        path = Path(path)
        if not path.exists():
            identity = cls.generate(work)
            try:
                identity._write(path, overwrite=False)
            except FileExistsError:
                pass  # created meanwhile by someone else: theirs counts
            except OSError as error:
                raise IdentityError(
                    f"identity file {path}: cannot be written: {_why(error)}"
                ) from None
            else:
                return identity
        return cls.load(path)


def _why(error: OSError) -> str:
    """The system's reason, without the temporary file's name: it is written beside the
    identity file and renamed, so a missing or read-only folder names a file nobody asked
    for."""
    return (error.strerror or str(error)).lower()


def _fsync_directory(directory: Path) -> None:
    """Make a rename or link in ``directory`` durable; best effort where unsupported."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the data itself is synced
    finally:
        os.close(fd)
