"""A node's state file: how far each stream's numbering got, kept across restarts.

The core notes each stream's newest packet number as a ``Remember`` effect
(``overlay.core.memory``); a node started again hands what was kept back to its core, so a
stream whose every holder restarted numbers on instead of from 0.

Format: a sequence of CBOR arrays ``[key, number]``, appended one per effect; the last one
for a key wins. Appending costs one ``write`` per new number, and one written before the
packet it names goes out (the host carries effects out in order), so a killed process loses
nothing it sent. A file grows by one record per packet, so it is rewritten with one record
per key, through a temporary file and a rename, when it opens and whenever it holds four
times as many records as keys (and at least ``_MIN_COMPACT``).

A torn last record (the process died inside a write) is dropped; any other damage is a
``StateFileError`` that names the file and the offset, and the node does not start: a file
that says less than it should would let numbers be given twice, silently.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import cbor2

from overlay.messages import MAX_PACKET

_MIN_COMPACT = 4096


class StateFileError(ValueError):
    """The state file cannot be read; the message names it and what is wrong."""


def _read(path: Path) -> dict[bytes, int]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise StateFileError(f"{path}: {error.strerror or error}") from None
    kept: dict[bytes, int] = {}
    stream = io.BytesIO(data)
    decoder = cbor2.CBORDecoder(stream)
    while stream.tell() < len(data):
        at = stream.tell()
        try:
            record = decoder.decode()
        except cbor2.CBORDecodeEOF:
            break  # torn by a kill mid-write: everything before it was written whole
        except cbor2.CBORDecodeError as error:
            raise StateFileError(f"{path}: not a state file (at byte {at}: {error})") from None
        if (
            not isinstance(record, list)
            or len(record) != 2
            or not isinstance(record[0], bytes)
            or type(record[1]) is not int
            or not 0 <= record[1] < MAX_PACKET
        ):
            raise StateFileError(f"{path}: a record at byte {at} is not [key, packet number]")
        kept[record[0]] = max(record[1], kept.get(record[0], -1))
    return kept


class StateFile:
    """Open (or create) ``path``: ``kept`` is what it holds; ``remember`` appends to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.kept = _read(path)
        self._fd = -1
        self._records = 0
        self._compact()

    def remember(self, key: bytes, number: int) -> None:
        """Stream ``key`` has reached packet ``number`` (the core's ``Remember``)."""
        self.kept[key] = number
        os.write(self._fd, cbor2.dumps([key, number]))
        self._records += 1
        if self._records >= max(_MIN_COMPACT, 4 * len(self.kept)):
            self._compact()

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            with contextlib.suppress(OSError):  # (closing after a failed write)
                os.close(fd)

    def _compact(self) -> None:
        """Rewrite the file with one record per key; the rename makes it all or nothing."""
        self.close()
        temporary = self.path.with_name(self.path.name + ".new")
        try:
            with temporary.open("wb") as out:
                for key, number in self.kept.items():
                    out.write(cbor2.dumps([key, number]))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as error:
            raise StateFileError(f"{self.path}: {error.strerror or error}") from None
        self._records = len(self.kept)
