"""Length-prefixed frames on a byte stream: a 4-byte big-endian length, then the body.

Theory of operation: TCP delivers an ordered stream of bytes with no boundaries, in chunks of
any size. :func:`frame` puts a length in front of each body; a :class:`FrameReader` buffers
what arrives and hands back each complete body, however the stream was split: one frame over
many reads, many frames in one read, or a length prefix itself split in two.

Both phases of a link use this framing: the handshake messages first (a reader whose limit is
``overlay.runtime.handshake.MAX_HANDSHAKE_MESSAGE``), then sealed frames (``SEALED_MAX``),
whose plaintexts are records framed the same way (:func:`split_records`). The
limit is a mutable attribute because the two phases share one stream: the initiator may send
its last handshake message and its first sealed frames in one write, so the responder reads
them in one chunk. It pulls the handshake body alone with :meth:`FrameReader.pop`, finishes the
handshake, raises ``max_body`` and only then takes the rest::

    reader = FrameReader(MAX_HANDSHAKE_MESSAGE)
    reader.push(data)
    while not handshake.done and (body := reader.pop()) is not None:
        send(handshake.receive(body))
    reader.max_body = SEALED_MAX
    first = reader.feed(b"")  # sealed frames that came with the end of the handshake

Invariants:

* Memory is bounded by the limit, not by the peer: a length prefix above ``max_body`` raises
  :class:`FrameTooLarge` as soon as its 4 bytes are in, before any of the body is waited for,
  so a peer cannot make the reader hold more than ``4 + max_body`` bytes plus one read.
* Work is linear in the bytes received: consumed frames advance an offset into one bytearray,
  which is compacted (only the unconsumed tail is moved) once per read, never once per frame.
* A body is returned once, in order, and never as a partial frame.
"""

from __future__ import annotations

import struct

from overlay.errors import LocalProtocolError, RemoteProtocolError
from overlay.messages import MAX_FRAME

# The length prefix: an unsigned 32-bit big-endian count of body bytes. Four bytes bound any
# body at 4 GiB, far above any limit a reader accepts, so the prefix never limits us.
_LENGTH = struct.Struct(">I")
PREFIX_SIZE = _LENGTH.size
MAX_ENCODABLE = 2**32 - 1

# After the handshake every frame is sealed: its plaintext is one or more *records*, each a
# 4-byte length and one encoded message (at most MAX_FRAME bytes, the codec's bound), and it
# travels with a 16-byte AES-GCM tag (the nonce is a counter both sides keep, never
# sent). A writer packs what is queued for a link into as few sealed frames as fit: sealing
# 64 KB at once costs about a sixth per byte of sealing 1 KB frames one by one, and opening alike.
# A plaintext holds at most one largest message, so a message never waits for a bigger frame.
AEAD_TAG_SIZE = 16
MAX_PLAINTEXT = PREFIX_SIZE + MAX_FRAME
SEALED_MAX = MAX_PLAINTEXT + AEAD_TAG_SIZE


class FrameTooLarge(RemoteProtocolError):
    """The peer announced a frame longer than this reader accepts."""


def frame(body: bytes) -> bytes:
    """``body`` with its length prefix, ready for the stream.

    Raises LocalProtocolError for a body the 4-byte prefix cannot describe; a body the peer's
    reader would refuse as too large is the caller's to avoid (``Session.seal`` does).
    """
    if len(body) > MAX_ENCODABLE:
        raise LocalProtocolError(f"a frame body of {len(body)} bytes does not fit a 4-byte length")
    return _LENGTH.pack(len(body)) + body


def record(body: bytes) -> bytes:
    """``body`` as the one record of a plaintext: what a test or a tool seals by hand."""
    return _LENGTH.pack(len(body)) + body


def split_records(plaintext: bytes) -> list[bytes]:
    """The message bodies of an opened sealed frame, in order.

    Raises RemoteProtocolError for a plaintext that is empty or is not whole records: the
    peer sealed it, so it is the peer's fault, and the link is dropped."""
    end = len(plaintext)
    if end <= PREFIX_SIZE:
        raise RemoteProtocolError(f"a sealed frame of {end} bytes holds no message")
    bodies: list[bytes] = []
    start = 0
    unpack = _LENGTH.unpack_from
    while start < end:
        if end - start < PREFIX_SIZE:
            raise RemoteProtocolError(f"{end - start} bytes after the last record of a frame")
        (length,) = unpack(plaintext, start)
        start += PREFIX_SIZE
        if length > end - start:
            raise RemoteProtocolError(
                f"a record of {length} bytes where the frame has {end - start} left"
            )
        bodies.append(plaintext[start : start + length])
        start += length
    return bodies


class FrameReader:
    """Reassembles frames from stream chunks; bodies of more than ``max_body`` bytes are refused.

    Two ways to use it: :meth:`feed` (push a chunk, get every complete body), or :meth:`push`
    and :meth:`pop` (one body at a time, for the moment ``max_body`` changes between frames).
    """

    def __init__(self, max_body: int) -> None:
        if max_body < 0 or max_body > MAX_ENCODABLE:
            raise ValueError(f"max_body must be in [0, {MAX_ENCODABLE}], got {max_body}")
        self.max_body = max_body
        self._buffer = bytearray()
        self._offset = 0  # bytes of _buffer already handed out

    @property
    def pending(self) -> int:
        """Bytes received and not yet returned as part of a body (a partial frame)."""
        return len(self._buffer) - self._offset

    def push(self, data: bytes | bytearray) -> None:
        """Buffer ``data``; take the bodies with :meth:`pop` until it returns None."""
        self._buffer += data

    def pop(self) -> bytes | None:
        """The next complete body, or None if the buffer holds no whole frame yet.

        Raises FrameTooLarge as soon as the next frame's prefix exceeds ``max_body``. After
        that the stream is out of step for good; the reader must not be used again.
        """
        buffer = self._buffer
        start = self._offset
        available = len(buffer) - start
        if available >= PREFIX_SIZE:
            (length,) = _LENGTH.unpack_from(buffer, start)
            if length > self.max_body:
                raise FrameTooLarge(
                    f"the peer announced a frame of {length} bytes; at most {self.max_body} "
                    f"are accepted here"
                )
            end = start + PREFIX_SIZE + length
            if end <= len(buffer):
                self._offset = end
                # Slicing a bytearray then copying measured faster than a memoryview here.
                return bytes(buffer[start + PREFIX_SIZE : end])
        # No whole frame left: drop the consumed head now, so the copy moves only the partial
        # tail (less than one frame plus one read) and happens once per read, not per frame.
        if start:
            del buffer[:start]
            self._offset = 0
        return None

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """Buffer ``data`` and return every body now complete, in order (possibly none).

        Raises FrameTooLarge when a prefix exceeds ``max_body``; the bodies before it in the
        same call are lost with the link, which the caller drops anyway.
        """
        if data:
            self._buffer += data
        bodies: list[bytes] = []
        while (body := self.pop()) is not None:
            bodies.append(body)
        return bodies
