"""Reading and writing a connection's socket directly, for the node's links and client
sessions, without the layers of trio's ``SocketStream`` (a conflict detector, a socket
wrapper, a non-blocking helper: several Python calls per read or write).

Writing: ``write_now`` writes what the socket takes at once and never waits, so a node
writes a step's frames in that step, with no task switch; the caller's writer task sends the
rest (``SocketStream.send_all``, which waits for the socket to drain). Reading: ``receive``
checkpoints first, as ``receive_some`` does, so a peer that keeps the socket full still
lets every other task run between its reads, and waits for the socket only when nothing is
there.

A descriptor is used only while its stream is open: the owner closes the stream only after
its tasks have ended and it has stopped calling ``write_now``, since a closed descriptor's
number can be given to the next connection. A stream that is not a socket (tests' memory
streams) has no descriptor (``NO_SOCKET``): the owner uses the stream's own methods.
"""

from __future__ import annotations

import errno
import os
import threading

import trio

NO_SOCKET = -1


def socket_of(stream: trio.abc.Stream) -> int:
    """The descriptor of ``stream``'s socket, or NO_SOCKET."""
    sock = getattr(stream, "socket", None)
    return sock.fileno() if sock is not None else NO_SOCKET


def write_now(fd: int, data: bytes) -> memoryview | None:
    """Write as much of ``data`` as the socket takes now; the rest it did not take, or None
    if it took everything. Raises OSError if the connection is broken."""
    try:
        written = os.write(fd, data)
    except BlockingIOError:
        written = 0
    return None if written == len(data) else memoryview(data)[written:]


# A read lands in a buffer kept per thread, and only the bytes that arrived are copied out.
# ``os.read(fd, size)`` allocates ``size`` bytes on every call and shrinks them after: on this
# machine, writing one 1 KiB frame over loopback TCP and reading it with ``os.read`` of the
# 256 KiB a link asks for took about 31 µs, and 12 µs reading into a kept buffer. (A thread,
# not the module, owns it: the read releases the GIL, and a process may run nodes in threads.)
_scratch = threading.local()


def _read(fd: int, size: int) -> bytearray:
    buffer: bytearray | None = getattr(_scratch, "buffer", None)
    if buffer is None or len(buffer) != size:
        buffer = _scratch.buffer = bytearray(size)
    count = os.readv(fd, (buffer,))
    return buffer[:count]


async def receive(stream: trio.abc.Stream, fd: int, size: int) -> bytes | bytearray:
    """At most ``size`` bytes from ``stream`` (empty at its end), after a checkpoint. A
    broken connection (a reset) raises ``trio.BrokenResourceError``, as ``receive_some``
    does, so callers handle both kinds of stream alike."""
    if fd == NO_SOCKET:
        return await stream.receive_some(size)
    # A checkpoint, then a read that may find nothing: not a wait for the socket first
    # after a read that emptied it. That wait saves a failed read a frame when frames come
    # one at a time, but under load it parks every reader on epoll where a read would
    # have found bytes: with it, 50 nodes in one process at 500 packets/s measured p50 331
    # to 2,895 ms, against 133 to 175 ms without (``testnet.bench.latency``).
    await trio.lowlevel.checkpoint()
    while True:
        try:
            return _read(fd, size)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(fd)
        except OSError as error:
            if error.errno == errno.EBADF:
                raise trio.ClosedResourceError("the connection was closed") from None
            raise trio.BrokenResourceError(f"the connection broke: {error}") from error
