"""A node's state file: how far each stream's numbering got, kept across restarts.

The core notes each stream's newest packet number as a ``Remember`` effect
(``overlay.core.memory``); a node started again hands what was kept back to its core, so a
stream whose every holder restarted numbers on instead of from 0.

Format: a sequence of CBOR arrays ``[key, number]``; the highest number for a key wins.
The host appends what one core call remembered with one ``write``, before any packet that
call sent has left (links write later, from their own tasks), so a killed process (kill
-9) loses nothing it sent. A power cut can lose what the operating system had not yet put
on disk: only a compaction is flushed with ``fsync``. A file grows by a record per new
number, so it is rewritten with one record per key, through a temporary file and a rename,
when it opens (unless it is new or empty) and whenever it holds four times as many records
as keys (and at least ``_MIN_COMPACT``). It keeps the ``capacity`` most recently raised
keys, as the core does.

A torn tail (the process died inside a write, or a power cut left zeros) is dropped; any
other damage is a ``StateFileError`` that names the file and the offset, and the node does
not start: a file that says less than it should would let numbers be given twice,
silently. One node at a time: the file is locked (``<file>.lock``) while a node has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path

import cbor2

from overlay.messages import MAX_PACKET

_MIN_COMPACT = 4096


class StateFileError(ValueError):
    """The state file cannot be used; the message names it and what is wrong."""


def _read(path: Path) -> OrderedDict[bytes, int]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return OrderedDict()
    except OSError as error:
        raise StateFileError(f"{path}: {error.strerror or error}") from None
    kept: OrderedDict[bytes, int] = OrderedDict()
    stream = io.BytesIO(data)
    decoder = cbor2.CBORDecoder(stream)
    while stream.tell() < len(data):
        at = stream.tell()
        if not data[at:].strip(b"\0"):
            break  # zeros a power cut left past the last whole write
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
        key, number = record
        kept[key] = max(number, kept.pop(key, -1))  # (to the end: read order is recency)
    return kept


def _record(key: bytes, number: int) -> bytes:
    """``cbor2.dumps([key, number])``, three times as fast for the usual key: a relay
    writes one per packet it forwards."""
    if len(key) >= 256 or number >= 2**32:
        return cbor2.dumps([key, number])
    if number < 24:
        tail = bytes((number,))
    elif number < 256:
        tail = bytes((0x18, number))
    elif number < 65536:
        tail = b"\x19" + number.to_bytes(2, "big")
    else:
        tail = b"\x1a" + number.to_bytes(4, "big")
    head = bytes((0x82, 0x40 + len(key))) if len(key) < 24 else bytes((0x82, 0x58, len(key)))
    return head + key + tail


class StateFile:
    """Open (or create) ``path`` and lock it: ``kept`` is what it holds, oldest raised
    first; ``remember`` appends to it."""

    def __init__(self, path: Path, capacity: int = 65_536) -> None:
        self.path = path
        self._capacity = capacity
        self._fd = -1
        self._records = 0
        self._lock = self._take_lock()
        try:
            self.kept = _read(path)
            self._trim()
            if self.kept or _size(path):
                self._compact()
            else:
                # Nothing to keep and nothing to cut (a new node): no rewrite, and no
                # fsync, which a testnet of a thousand nodes would pay a thousand times.
                self._fd = _append_to(path)
        except BaseException:
            self.close()
            raise

    def remember(self, numbers: Mapping[bytes, int]) -> None:
        """Streams have reached these numbers (the core's ``Remember`` effects of one call).
        OSError or StateFileError if the disk fails: the caller decides what that costs."""
        kept = self.kept
        records = []
        for key, number in numbers.items():
            if number > kept.get(key, -1):
                kept[key] = number
                kept.move_to_end(key)
                records.append(_record(key, number))
        if len(kept) > self._capacity:
            self._trim()
        if not records:
            return
        data = b"".join(records)
        written = os.write(self._fd, data)
        while written < len(data):  # (a short write goes on where it ended)
            written += os.write(self._fd, data[written:])
        self._records += len(records)
        if self._records >= max(_MIN_COMPACT, 4 * len(kept)):
            self._compact()

    def close(self) -> None:
        for fd in (self._fd, self._lock):
            if fd >= 0:
                with contextlib.suppress(OSError):  # (closing after a failed write)
                    os.close(fd)
        self._fd = self._lock = -1

    def _take_lock(self) -> int:
        lock = self.path.with_name(self.path.name + ".lock")
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError as error:
            raise StateFileError(f"{lock}: {error.strerror or error}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StateFileError(
                f"{self.path}: in use by another running node (it holds {lock}); give each "
                "node its own state file"
            ) from None
        return fd

    def _trim(self) -> None:
        while len(self.kept) > self._capacity:
            self.kept.popitem(last=False)

    def _compact(self) -> None:
        """Rewrite the file with one record per key; the rename makes it all or nothing."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        temporary = self.path.with_name(self.path.name + ".new")
        try:
            with temporary.open("wb") as out:
                out.write(b"".join(_record(k, n) for k, n in self.kept.items()))
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except OSError as error:
            raise StateFileError(f"{self.path}: {error.strerror or error}") from None
        self._fd = _append_to(self.path)
        self._records = len(self.kept)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
    except OSError as error:
        raise StateFileError(f"{path}: {error.strerror or error}") from None


def _append_to(path: Path) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as error:
        raise StateFileError(f"{path}: {error.strerror or error}") from None
