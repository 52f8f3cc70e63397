"""How links come to be: accepting peers on the listener, and dialling configured peers.

Both sides run the same handshake (``overlay.runtime.handshake``) over the framed stream,
within ``handshake_timeout``; a peer that fails it (wrong network, bad signature, an
identity the trust list does not name, garbage) is logged and closed, and nothing else is
touched. A hello refused for its protocol version, build (wire schema) or network is first
answered with a refusal naming why, so the node that dialled logs the reason too. An
authenticated link is handed to the host (``NodeHost.link_opened``), which may refuse it as
the loser of a duplicate pair; otherwise the link runs until it closes.

A dialler keeps its peer linked for as long as the node runs: after a failed attempt or a
lost link it waits (``reconnect_min``, doubling up to ``reconnect_max``, with jitter so that
a restarted network does not redial in lockstep) and dials again. While the peer is linked
through a connection *it* dialled, the dialler only waits for that link to end.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from overlay.errors import RemoteProtocolError
from overlay.runtime.config import PeerAddress, RuntimeConfig
from overlay.runtime.framing import SEALED_MAX, FrameReader, frame
from overlay.runtime.handshake import Handshake, HandshakeError
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity, node_id_text
from overlay.runtime.link import READ_SIZE, Link

log = logging.getLogger("overlay.peering")

# A refusal is a courtesy: a peer that does not read it costs us at most this long.
REFUSAL_TIMEOUT = 1.0


@dataclass(frozen=True, slots=True)
class LinkParams:
    """What every link of one node shares."""

    identity: Identity
    network: bytes
    accept: Callable[[bytes], bool] | None
    handshake_timeout: float
    max_queue_bytes: int

    @classmethod
    def from_config(cls, identity: Identity, config: RuntimeConfig) -> LinkParams:
        trusted = config.trusted
        return cls(
            identity,
            config.network.encode(),
            trusted.__contains__ if config.trust_listed else None,
            config.handshake_timeout,
            config.send_queue_bytes,
        )


async def authenticate(
    stream: trio.abc.Stream, params: LinkParams, *, initiator: bool, expect: bytes | None = None
) -> tuple[Link, list[bytes]]:
    """Run the handshake on ``stream``; return the link and any sealed frames that came in
    with the handshake's last message. Raises RemoteProtocolError (HandshakeError), or
    trio.TooSlowError after ``handshake_timeout``, or the stream's own errors."""
    handshake = Handshake(
        params.identity,
        initiator=initiator,
        network=params.network,
        accept=params.accept,
        expect=expect,
    )
    reader = FrameReader(SEALED_MAX)
    leftover: list[bytes] = []
    with trio.fail_after(params.handshake_timeout):
        first = handshake.start()
        if first:
            await stream.send_all(frame(first))
        while not handshake.done:
            data = await stream.receive_some(READ_SIZE)
            if not data:
                raise trio.BrokenResourceError("the peer closed the connection during handshake")
            bodies = reader.feed(data)
            while bodies and not handshake.done:
                try:
                    reply = handshake.receive(bodies.pop(0))
                except HandshakeError as error:
                    await _refuse(stream, error.refusal)
                    raise
                if reply:
                    await stream.send_all(frame(reply))
            leftover = bodies
    me = params.identity.public
    link = Link(
        stream,
        handshake.session(),
        reader,
        peer=handshake.peer,
        initiator=me if initiator else handshake.peer,
        max_queue_bytes=params.max_queue_bytes,
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
    """Accept peers on ``listeners`` until cancelled."""

    async def handle(stream: trio.SocketStream) -> None:
        try:
            link, first = await authenticate(stream, params, initiator=False)
        except (RemoteProtocolError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
            log.info("refused an incoming link: %s", _why(e))
            await trio.aclose_forcefully(stream)
            return
        await run_link(host, link, first, stream)

    await trio.serve_listeners(handle, listeners, task_status=task_status)


async def keep_dialled(
    host: NodeHost,
    params: LinkParams,
    peer: PeerAddress,
    config: RuntimeConfig,
    rng: random.Random,
) -> None:
    """Keep a link to ``peer`` up until cancelled, redialling with backoff."""
    delay = config.reconnect_min
    known: bytes | None = peer.node_id
    while True:
        linked = host.links.get(known) if known is not None else None
        if isinstance(linked, Link) and not linked.closed:
            await linked.wait_closed()
            continue
        started = trio.current_time()
        try:
            stream = await trio.open_tcp_stream(peer.address.host, peer.address.port)
        except OSError as error:
            log.debug("dialling %s failed: %s", peer.address, error)
        else:
            try:
                link, first = await authenticate(stream, params, initiator=True, expect=known)
            except (RemoteProtocolError, trio.TooSlowError, trio.BrokenResourceError, OSError) as e:
                log.warning("link to %s failed: %s", peer.address, _why(e))
                await trio.aclose_forcefully(stream)
            else:
                known = link.peer
                await run_link(host, link, first, stream)
        if trio.current_time() - started > config.reconnect_max:
            delay = config.reconnect_min  # it stayed up a while: start over
        await trio.sleep(delay * (0.5 + rng.random()))
        delay = min(delay * 2, config.reconnect_max)


def _why(error: BaseException) -> str:
    if isinstance(error, trio.TooSlowError):
        return "handshake timed out"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
