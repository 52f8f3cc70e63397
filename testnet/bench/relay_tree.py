"""A plain relay tree: the overlay tree's shape with none of its protocol, the floor under a
one-process benchmark of real nodes (``testnet.bench.latency`` runs it as a baseline).

What it is. One loopback TCP connection per tree edge, all in this process, and one trio
task per member below the root that reads what its parent sends and writes those same bytes
on to each of its children the way a node's link moves frames (``overlay.runtime.direct_io``:
a checkpoint, then a read into a kept buffer; a write at once, and what the socket did not
take by a writer task that joins everything queued into one ``send_all``). A member with a
sink also splits what it reads into frames and records each frame's latency: a frame's body
starts with the time it was due, as the overlay benchmark's payloads do. Frames are the size
of one packet as a node sends it alone (``forwarding.plain_body_size``). Nothing else runs:
no handshake or sealing, no decoding, ordering, window or commit, no publish path up to
the root, no acknowledgement. So its CPU per delivery is what any Python program pays to
move the same frames over the same edges in one process, and the overlay's figure beside it
shows what the protocol adds.

Why it matters. At a steady rate most of the overlay's frames carry one packet, and a
frame's fixed costs (a write and two reads, one of which finds the socket empty, an epoll
registration, a task's wakeup, the loopback stack's work) outweigh its bytes. A single TCP
hop gives one hop's latency; this gives the whole tree's cost at the same rate.

Pacing. At ``rate``, frame i is due at start + i / rate; a root that wakes late sends every
frame due then, as one write per child (the overlay's publisher publishes what is due as
one batch, which its root sends down as runs). At saturation (``rate`` None) the root keeps
at most ``window`` frames that some sink has not read, as the overlay's publisher keeps its
publishes unanswered, for ``duration`` seconds.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import Any

import trio

from overlay.runtime.direct_io import receive, socket_of, write_now
from overlay.runtime.framing import FrameReader, frame
from overlay.runtime.link import READ_SIZE
from testnet.local import LOOPBACK

# The due time at the front of every frame's body: a big-endian double of trio's clock.
_STAMP = struct.Struct(">d")
SETUP_TIMEOUT = 60.0
DRAIN_TIMEOUT = 10.0  # after the last frame is sent, for it to reach every sink


class _Child:
    """The connection to one child: bytes go at once while nothing waits before them, the
    rest to a writer task in one ``send_all``, in order."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._fd = socket_of(stream)
        self._queue: list[bytes] = []
        self._ready = trio.Event()

    def send(self, data: bytes) -> None:
        if self._queue:
            self._queue.append(data)  # (behind what the writer has yet to send)
            return
        rest = write_now(self._fd, data)
        if rest is not None:
            self._queue.append(bytes(rest))
            self._ready.set()

    async def write_rest(self) -> None:
        while True:
            await self._ready.wait()
            self._ready = trio.Event()
            while self._queue:
                # Taken off the queue only once sent: ``send`` queues behind it meanwhile.
                count = len(self._queue)
                await self.stream.send_all(b"".join(self._queue))
                del self._queue[:count]


class _Sinks:
    """What every sink has read: frames counted per sink, every latency, and an event the
    saturating root waits on."""

    def __init__(self, count: int) -> None:
        self.counts = [0] * count
        self.latencies: list[float] = []
        self.progress = trio.Event()
        # Trio's clock is ``perf_counter()`` plus a fixed offset (as ``latency.Subscriber``).
        self._offset = trio.current_time() - time.perf_counter()

    def read(self, sink: int, bodies: Sequence[bytes]) -> None:
        if not bodies:
            return
        now = time.perf_counter() + self._offset
        self.latencies.extend(now - _STAMP.unpack_from(body)[0] for body in bodies)
        self.counts[sink] += len(bodies)
        self.progress.set()

    async def changed(self) -> None:
        await self.progress.wait()
        self.progress = trio.Event()


class _Local:
    """A sink at the root: it reads every frame as the root sends it."""

    def __init__(self, sink: int, sinks: _Sinks, body: int) -> None:
        self._sink = sink
        self._sinks = sinks
        self._reader = FrameReader(body)

    def send(self, data: bytes) -> None:
        self._sinks.read(self._sink, self._reader.feed(data))


async def _relay(
    stream: trio.SocketStream, children: list[_Child], sink: int | None, sinks: _Sinks, body: int
) -> None:
    fd = socket_of(stream)
    reader = FrameReader(body)
    while data := await receive(stream, fd, READ_SIZE):
        chunk = bytes(data)
        for child in children:
            child.send(chunk)
        if sink is not None:
            sinks.read(sink, reader.feed(chunk))


async def measure_relay_tree(
    *,
    edges: Sequence[tuple[int, int]],
    root: int,
    sinks: Sequence[int],
    rate: float | None,
    duration: float,
    body: int,
    window: int = 256,
) -> dict[str, Any]:
    """Relay frames of ``body`` bytes from ``root`` down ``edges`` (parent, child) to the
    members ``sinks``, at ``rate`` frames a second (None: saturation, at most ``window``
    unread) for ``duration`` s; the latencies, deliveries and CPU (module docstring)."""
    below: dict[int, list[int]] = {}
    for parent, child in edges:
        below.setdefault(parent, []).append(child)
    state = _Sinks(len(sinks))
    (listener,) = await trio.open_tcp_listeners(0, host=LOOPBACK)
    port = listener.socket.getsockname()[1]
    writing: dict[int, _Child] = {}  # the connection into each member, its parent's end
    reading: dict[int, trio.SocketStream] = {}  # and the member's end
    with trio.fail_after(SETUP_TIMEOUT):
        # One connection at a time, each accepted before the next is made, so the two ends
        # pair up.
        order = [root]
        for member in order:
            for child in below.get(member, []):
                writing[child] = _Child(await trio.open_tcp_stream(LOOPBACK, port))
                reading[child] = await listener.accept()
                order.append(child)
    await listener.aclose()
    sink_of = {member: i for i, member in enumerate(sinks)}
    top: list[_Child | _Local] = [writing[child] for child in below.get(root, [])]
    if root in sink_of:
        top.append(_Local(sink_of[root], state, body))  # a sink at the root reads as it sends
    async with trio.open_nursery() as nursery:
        for member, stream in reading.items():
            nursery.start_soon(
                _relay,
                stream,
                [writing[child] for child in below.get(member, [])],
                sink_of.get(member),
                state,
                body,
            )
        for connection in writing.values():
            nursery.start_soon(connection.write_rest)
        start = trio.current_time()
        cpu_start = time.process_time()
        sent = await (
            _paced(top, rate, duration, body, start)
            if rate is not None
            else _saturate(top, state, window, duration, body)
        )
        with trio.move_on_after(DRAIN_TIMEOUT):
            while min(state.counts, default=sent) < sent:
                await state.changed()
        elapsed = trio.current_time() - start
        cpu = time.process_time() - cpu_start
        nursery.cancel_scope.cancel()
    for end in (*reading.values(), *(connection.stream for connection in writing.values())):
        await trio.aclose_forcefully(end)
    delivered = sum(state.counts)
    return {
        "edges": len(edges),
        "sinks": len(sinks),
        "frames": sent,
        "expected": sent * len(sinks),
        "delivered": delivered,
        "elapsed": elapsed,
        "deliveries_per_s": delivered / elapsed,
        "cpu_s": cpu,
        "cpu_share": cpu / elapsed,
        "cpu_us_per_delivery": 1e6 * cpu / max(1, delivered),
        "latencies": state.latencies,
    }


async def _paced(
    top: Sequence[_Child | _Local], rate: float, duration: float, body: int, start: float
) -> int:
    """Frame i due at ``start + i / rate``; what is due when the root wakes goes at once."""
    count = max(1, round(rate * duration))
    sent = 0
    while sent < count:
        await trio.sleep_until(start + sent / rate)
        due = min(count, max(sent + 1, int((trio.current_time() - start) * rate) + 1))
        data = b"".join(_frame(start + i / rate, body) for i in range(sent, due))
        for child in top:
            child.send(data)
        sent = due
    return sent


async def _saturate(
    top: Sequence[_Child | _Local], state: _Sinks, window: int, duration: float, body: int
) -> int:
    """As many frames as every sink reads, at most ``window`` unread, for ``duration`` s."""
    sent = 0
    with trio.move_on_after(duration):
        while True:
            room = window - (sent - min(state.counts, default=sent))
            if room <= 0:
                await state.changed()
                continue
            data = _frame(trio.current_time(), body) * room
            for child in top:
                child.send(data)
            sent += room
            await trio.lowlevel.checkpoint()
    return sent


def _frame(at: float, body: int) -> bytes:
    """One frame of ``body`` bytes, stamped ``at``."""
    return frame(_STAMP.pack(at) + bytes(body - _STAMP.size))
