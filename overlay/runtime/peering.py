"""How links come to be: accepting peers on the listener, and dialling configured peers.

Both sides run the same handshake (``overlay.runtime.handshake``) over the framed stream,
within ``handshake_timeout``; a peer that fails it (wrong network, bad signature, an
identity the trust list does not name, garbage) is logged and closed, and nothing else is
touched. A hello refused for its protocol version, build (wire schema) or network is first
answered with a refusal naming why, so the node that dialled logs the reason too. An
authenticated link is handed to the host (``NodeHost.link_opened``), which may refuse it as
the loser of a duplicate pair; otherwise the link runs until it closes.

Accepting is bounded per node (``[limits]``): connections still in their handshake take
``HandshakeSlots`` (per address, and in total, where an older one makes room: a silent one
before one whose first message is in; under a flood, silent newcomers are refused at
accept, in bursts that keep the listen backlog short), and an authenticated newcomer is
refused once the node has ``max_links`` links. A peer, or an address, in its cooldown after
a fault is refused too (``overlay.runtime.cooldown``): the address at accept, the peer once
its handshake proves its id. Each handshake reads with the handshake's own frame limit
(``MAX_HANDSHAKE_MESSAGE``, a few hundred bytes), so a connection that never finishes pins
a few hundred bytes of buffer, not a sealed frame's 64 KiB. Every refusal is counted and
logged (``overlay.runtime.refusals``).

A dialler keeps its peer linked for as long as the node runs: after a failed attempt or a
lost link it waits (``reconnect_min``, doubling up to ``reconnect_max``, with jitter so that
a restarted network does not redial in lockstep) and dials again. While the peer is linked
through a connection *it* dialled, the dialler only waits for that link to end.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import math
import os
import random
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass

import trio

from overlay.errors import RemoteProtocolError
from overlay.runtime.budget import QueueBudget
from overlay.runtime.config import PeerAddress, RuntimeConfig
from overlay.runtime.framing import PREFIX_SIZE, SEALED_MAX, FrameReader, frame
from overlay.runtime.handshake import MAX_HANDSHAKE_MESSAGE, Handshake, HandshakeError
from overlay.runtime.handshake_slots import HandshakeSlots, Slot
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity, node_id_text
from overlay.runtime.link import Link
from overlay.runtime.log_budget import LogBudget
from overlay.runtime.refusals import Refusal

log = logging.getLogger("overlay.peering")

# A refusal is a courtesy: a peer that does not read it costs us at most this long.
REFUSAL_TIMEOUT = 1.0

# Failed dials warned about per peer: the first at once (a mistyped --connect shows on
# start), then one each ten minutes while the peer stays unreachable; backoff redials about
# every reconnect_max (30 s), so the log keeps saying it without repeating every redial.
DIAL_WARNINGS = 1
DIAL_WARNING_PERIOD = 600.0
# A peer that was linked and went away is most often restarting (a testnet's kill, an
# upgrade): its failed redials are debug lines until it has stayed away this long.
DIAL_QUIET_AFTER_LINK = 60.0
# A handshake reads at most one of its messages at a time: the bytes a connection that has
# not authenticated can make us hold are two of them, whatever it sends. Sealed frames that
# follow the last message are read by the link, in its own larger reads.
HANDSHAKE_READ_SIZE = PREFIX_SIZE + MAX_HANDSHAKE_MESSAGE
# accept() failing for want of a resource (file descriptors, memory) is the system telling
# us to slow down, not a bug: wait this long and accept again, as trio.serve_listeners does.
ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY = 0.1
# The accept loop takes up to ACCEPT_BURST connections a scheduler pass, without trio's
# trip through the scheduler for each, so the listen backlog drains faster than a flood
# fills it: an honest peer's connection neither waits behind thousands nor finds the backlog
# full and its SYN dropped (a second to its retransmission). Few enough a pass that the
# node's other tasks (its links' frames, its clients' publishes), which run a step a pass,
# wait a fraction of a millisecond for them: measured against 5,000 connecting attackers
# (``testnet.bench.hostile_connections``), 8 a pass doubled the publish latency of 4, and
# 1 a pass let the backlog overflow.
ACCEPT_BURST = 4
# Passes between accepting a connection and judging whether its first handshake message is
# in (``HandshakeSlots``): its first bytes are in at accept (DEFER_ACCEPT), but a message
# may come in more than one segment; without DEFER_ACCEPT, a remote peer sends it as soon
# as it connects, and a dialler in this very process (a testnet's node) a task switch or
# two later (``trio.open_tcp_stream``'s nursery). At most ACCEPT_BURST x JUDGING_PASSES
# connections wait, holding no task.
JUDGING_PASSES = 3
# A connection is handed to accept() once its first bytes are in (Linux's TCP_DEFER_ACCEPT):
# the dialler speaks first, so an honest peer's hello is there when it is judged, however
# late its first segment follows its connect. One that sends nothing waits in the kernel,
# costing us nothing, until the deferral ends (the handshake timeout, rounded up to the
# kernel's SYN-ACK retries), or until a full SYN queue turns to SYN cookies; then it comes
# to accept() silent, and the slots judge it as before. Elsewhere, JUDGING_PASSES is all
# the wait there is.
DEFER_ACCEPT = getattr(socket, "TCP_DEFER_ACCEPT", None)
MAX_DEFER = 3600  # seconds: a handshake timeout beyond it (or infinite) defers this long
# Closing a refused connection with a reset (SO_LINGER 0) leaves no TIME_WAIT socket behind
# on our side, so a flood of refused connections costs the kernel nothing that lingers.
_RESET_ON_CLOSE = struct.pack("ii", 1, 0)


@dataclass(frozen=True, slots=True)
class LinkParams:
    """What every link of one node shares."""

    identity: Identity
    network: bytes
    accept: Callable[[bytes], bool] | None
    handshake_timeout: float
    max_queue_bytes: int
    # Per-node bounds on accepting (``RuntimeConfig``'s fields of the same names).
    max_handshakes: int = 256
    max_handshakes_per_address: int = 32
    max_links: int = 256
    budget: QueueBudget | None = None  # shared by every link and client session

    @classmethod
    def from_config(
        cls, identity: Identity, config: RuntimeConfig, budget: QueueBudget | None = None
    ) -> LinkParams:
        trusted = config.trusted
        return cls(
            identity,
            config.network.encode(),
            trusted.__contains__ if config.trust_listed else None,
            config.handshake_timeout,
            config.send_queue_bytes,
            config.max_handshakes,
            config.max_handshakes_per_address,
            config.max_links,
            budget,
        )


async def authenticate(
    stream: trio.abc.Stream,
    params: LinkParams,
    *,
    initiator: bool,
    expect: bytes | None = None,
    heard: Callable[[], None] | None = None,
) -> tuple[Link, list[bytes]]:
    """Run the handshake on ``stream``; return the link and any sealed frames that came in
    with the handshake's last message. Raises RemoteProtocolError (HandshakeError), or
    trio.TooSlowError after ``handshake_timeout``, or the stream's own errors. ``heard``:
    called once the peer's first handshake message is in, before it is handled."""
    handshake = Handshake(
        params.identity,
        initiator=initiator,
        network=params.network,
        accept=params.accept,
        expect=expect,
    )
    reader = FrameReader(MAX_HANDSHAKE_MESSAGE)
    with trio.fail_after(params.handshake_timeout):
        first = handshake.start()
        if first:
            await stream.send_all(frame(first))
        while not handshake.done:
            data = await stream.receive_some(HANDSHAKE_READ_SIZE)
            if not data:
                raise trio.BrokenResourceError("the peer closed the connection during handshake")
            reader.push(data)
            while not handshake.done and (body := reader.pop()) is not None:
                if heard is not None:
                    heard()
                    heard = None
                try:
                    reply = handshake.receive(body)
                except HandshakeError as error:
                    await _refuse(stream, error.refusal)
                    raise
                if reply:
                    await stream.send_all(frame(reply))
    reader.max_body = SEALED_MAX  # authenticated: sealed frames from here on
    leftover = reader.feed(b"")
    me = params.identity.public
    link = Link(
        stream,
        handshake.session(),
        reader,
        peer=handshake.peer,
        initiator=me if initiator else handshake.peer,
        max_queue_bytes=params.max_queue_bytes,
        budget=params.budget,
    )
    return link, leftover


async def _refuse(stream: trio.abc.Stream, refusal: bytes) -> None:
    """Tell the dialler why we refuse it, before the caller closes the connection; a peer
    that hung up first or does not read leaves the reason in our log only."""
    if not refusal:
        return
    with (
        trio.move_on_after(REFUSAL_TIMEOUT),
        contextlib.suppress(trio.BrokenResourceError, OSError),
    ):
        await stream.send_all(frame(refusal))


async def run_link(host: NodeHost, link: Link, first: list[bytes], stream: trio.abc.Stream) -> None:
    if not host.link_opened(link):
        log.debug("duplicate link to %s closed", node_id_text(link.peer))
        await trio.aclose_forcefully(stream)
        return
    log.info("linked to %s", node_id_text(link.peer))
    await link.run(host, first)


async def serve_peers(
    host: NodeHost,
    params: LinkParams,
    listeners: list[trio.SocketListener],
    *,
    task_status: trio.TaskStatus[list[trio.SocketListener]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Accept peers on ``listeners`` until cancelled, within the node's bounds (module
    notes); reports the listeners once they accept."""
    slots = HandshakeSlots(params.max_handshakes, params.max_handshakes_per_address)
    refuse = host.refusals

    async def handle(stream: trio.SocketStream, slot: Slot, who: str) -> None:
        try:
            with slot.scope:
                link, first = await authenticate(
                    stream, params, initiator=False, heard=lambda: slots.hear(slot)
                )
        except (RemoteProtocolError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
            refuse(Refusal.HANDSHAKE, who, f"handshake failed: {_why(e)}")
            await trio.aclose_forcefully(stream)
            return
        finally:
            slots.release(slot)
        if slot.evicted:
            refuse(
                Refusal.HANDSHAKES_FULL,
                who,
                f"not authenticated when a newer connection needed its slot, all "
                f"{slots.total} being held (max_handshakes)",
            )
            await trio.aclose_forcefully(stream)
            return
        cooling = host.cooldowns.peer_remaining(link.peer)
        if cooling > 0:
            refuse(
                Refusal.COOLDOWN,
                f"{node_id_text(link.peer)} at {who}",
                f"cut off for a fault; refused for {cooling:.0f} s more",
            )
            await trio.aclose_forcefully(stream)
            return
        link.address = who.rpartition(":")[0]
        if link.peer not in host.links and len(host.links) >= params.max_links:
            refuse(
                Refusal.LINKS_FULL,
                f"{node_id_text(link.peer)} at {who}",
                f"the node has {len(host.links)} links (max_links)",
            )
            await trio.aclose_forcefully(stream)
            return
        await run_link(host, link, first, stream)

    def admit(conn: socket.socket, who: str, nursery: trio.Nursery) -> None:
        """A connection just accepted from ``who`` (host:port): refused at once, or given
        a slot and a task."""
        address = who.rpartition(":")[0]
        cooling = host.cooldowns.address_remaining(address)
        if cooling > 0:
            refuse(
                Refusal.COOLDOWN,
                who,
                f"peers from that address were cut off for faults; refused for "
                f"{cooling:.0f} s more",
            )
            _reset(conn)
            return
        heard = slots.full and _first_message_in(conn)
        slot = slots.take(address, trio.current_time(), heard=heard)
        if slot is Refusal.ADDRESS_FULL:
            refuse(
                slot,
                who,
                f"{slots.per_address} connections from that address are already "
                f"authenticating (max_handshakes_per_address)",
            )
        elif slot is Refusal.HANDSHAKES_FULL:
            refuse(
                slot,
                who,
                f"{slots.total} connections are authenticating (max_handshakes), none for "
                f"{slots.grace:.0f} s yet, and this one had not sent its first message",
            )
        if isinstance(slot, Refusal):
            _reset(conn)
            return
        nursery.start_soon(
            handle, trio.SocketStream(trio.socket.from_stdlib_socket(conn)), slot, who
        )

    async def accept(listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        # A second descriptor of the listening socket, for accept() without trio's
        # checkpoint per call; it shares the listener's non-blocking mode.
        with socket.socket(fileno=os.dup(listener.socket.fileno())) as raw:
            raw.setblocking(False)
            # Accepted, waiting JUDGING_PASSES passes to be judged: (pass, socket, who).
            judging: collections.deque[tuple[int, socket.socket, str]] = collections.deque()
            passes = 0
            try:
                while True:
                    if judging:
                        await trio.lowlevel.checkpoint()
                    else:
                        await trio.lowlevel.wait_readable(raw)
                    passes += 1
                    for _ in range(ACCEPT_BURST):
                        try:
                            conn, name = raw.accept()
                        except BlockingIOError:
                            break
                        except OSError as error:
                            if error.errno not in ACCEPT_CAPACITY_ERRNOS:
                                raise
                            refuse(Refusal.HANDSHAKE, "(accept)", f"accept failed: {error}")
                            await trio.sleep(ACCEPT_RETRY)
                            break
                        judging.append((passes, conn, f"{name[0]}:{name[1]}"))
                    while judging and judging[0][0] <= passes - JUDGING_PASSES:
                        _, conn, who = judging.popleft()
                        admit(conn, who, nursery)
            finally:
                for _, conn, _ in judging:  # cancelled before their turn
                    conn.close()

    if DEFER_ACCEPT is not None:
        timeout = params.handshake_timeout
        defer = max(1, math.ceil(timeout)) if timeout < MAX_DEFER else MAX_DEFER
        for listener in listeners:
            try:
                listener.socket.setsockopt(socket.IPPROTO_TCP, DEFER_ACCEPT, defer)
            except OSError as error:
                log.warning("connections are accepted before they speak: %s", error)
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            nursery.start_soon(accept, listener, nursery)
        task_status.started(listeners)


async def keep_dialled(
    host: NodeHost,
    params: LinkParams,
    peer: PeerAddress,
    config: RuntimeConfig,
    rng: random.Random,
) -> None:
    """Keep a link to ``peer`` up until cancelled, redialling with backoff. A failed dial is
    a WARNING (a node whose peers are all unreachable joins nothing, and its operator must
    see why at the default level), at most ``DIAL_WARNINGS`` a ``DIAL_WARNING_PERIOD`` per
    peer, and for a peer that was linked only once it has been away
    ``DIAL_QUIET_AFTER_LINK``: the rest are debug lines, and the next warning says how many
    there were."""
    delay = config.reconnect_min
    known: bytes | None = peer.node_id
    warnings = LogBudget(trio.current_time, DIAL_WARNINGS, DIAL_WARNING_PERIOD)
    was_linked = False
    failing_since: float | None = None
    while True:
        linked = host.links.get(known) if known is not None else None
        if isinstance(linked, Link) and not linked.closed:
            await linked.wait_closed()
            continue
        if known is not None and (cooling := host.cooldowns.peer_remaining(known)) > 0:
            # Cut off for a fault: this side keeps it out too, rather than dial it back.
            log.info("not dialling %s for %.0f s: cut off for a fault", peer.address, cooling)
            await trio.sleep(cooling)
        started = trio.current_time()
        try:
            stream = await trio.open_tcp_stream(peer.address.host, peer.address.port)
        except OSError as error:
            if failing_since is None:
                failing_since = started
            quiet = was_linked and started - failing_since < DIAL_QUIET_AFTER_LINK
            left_out = None if quiet else warnings.allow()
            if left_out is None:
                log.debug("dialling %s failed: %s", peer.address, error)
            else:
                more = f" ({left_out} more failures since the last warning)" if left_out else ""
                log.warning("cannot dial peer %s: %s%s", peer.address, _dial_error(error), more)
        else:
            try:
                link, first = await authenticate(stream, params, initiator=True, expect=known)
            except (RemoteProtocolError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
                log.warning("link to %s failed: %s", peer.address, _why(e))
                await trio.aclose_forcefully(stream)
            else:
                known = link.peer
                was_linked, failing_since = True, None
                await run_link(host, link, first, stream)
        if trio.current_time() - started > config.reconnect_max:
            delay = config.reconnect_min  # it stayed up a while: start over
        await trio.sleep(delay * (0.5 + rng.random()))
        delay = min(delay * 2, config.reconnect_max)


def _first_message_in(sock: socket.socket) -> bool:
    """Whether a whole handshake message has come in on ``sock`` already (read without
    taking it). A prefix announcing more than a handshake message is never whole."""
    try:
        data = sock.recv(HANDSHAKE_READ_SIZE, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return False
    if len(data) < PREFIX_SIZE:
        return False
    size = int.from_bytes(data[:PREFIX_SIZE], "big")
    return size <= MAX_HANDSHAKE_MESSAGE and len(data) >= PREFIX_SIZE + size


def _reset(conn: socket.socket) -> None:
    """Close a refused connection at once, with a reset (no TIME_WAIT on our side)."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET_ON_CLOSE)
    conn.close()


def _dial_error(error: OSError) -> str:
    """What went wrong in a dial, in the OS's words: trio's "all attempts to connect
    failed" keeps each address's own error (refused, unreachable, ...) in its cause."""
    cause = error.__cause__
    if isinstance(cause, ExceptionGroup) and cause.exceptions:
        reasons = dict.fromkeys(
            os.strerror(e.errno) if isinstance(e, OSError) and e.errno else str(e)
            for e in cause.exceptions
        )
        return "; ".join(reason for reason in reasons)
    return str(error)


def _why(error: BaseException) -> str:
    if isinstance(error, trio.TooSlowError):
        return "handshake timed out"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
