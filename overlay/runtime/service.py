"""One real node: identity, listeners, dialled peers and the client port, in one nursery.

``run_node`` owns every task of the node (structured concurrency): cancel the scope it runs
in, and every link, dialler and client session ends with it. It reports readiness through
``task_status.started(RunningNode)`` once both ports listen, so a launcher that hosts many
nodes in one process (``overlay testnet``) starts each with ``await nursery.start(...)``
and knows its real port numbers (port 0 in a config picks a free one).
"""

from __future__ import annotations

import functools
import logging
import random
from dataclasses import dataclass, replace

import trio

from keyspace.id_work import id_work
from keyspace.location import location_from_id
from overlay.codec import CANONICAL_BUILT
from overlay.compiled_checks import NATIVE_BUILT
from overlay.core.config import NodeConfig
from overlay.runtime.budget import QueueBudget
from overlay.runtime.client_port import ClientPortConfig, serve_client_port
from overlay.runtime.config import Address, RuntimeConfig
from overlay.runtime.cooldown import Cooldowns
from overlay.runtime.host import NodeHost
from overlay.runtime.identity import Identity, node_id_text
from overlay.runtime.location_file import LocationFile
from overlay.runtime.neighbour_vouches import NeighbourVouches
from overlay.runtime.peering import LinkParams, keep_dialled, serve_peers
from overlay.runtime.state_file import StateFile

log = logging.getLogger("overlay.node")


@functools.cache  # (once a process: a testnet worker hosts hundreds of nodes)
def _tell_uncompiled(missing: str) -> None:
    """Say that the install did not build a compiled module, so a user who meant to have it (or
    wonders at the CPU) learns why; forcing the pure path on purpose says nothing."""
    log.warning(
        "running in pure Python: this install did not build %s (that needs a C compiler"
        " and Python's headers at install time), so a node spends more CPU a packet",
        missing,
    )


@dataclass(frozen=True, slots=True)
class RunningNode:
    """What a started node tells its launcher."""

    host: NodeHost
    identity: Identity
    peer_address: Address  # where peers connect (the bound port)
    client_address: Address  # where local clients connect

    @property
    def node_id(self) -> str:
        return node_id_text(self.identity.public)


async def run_node(
    config: RuntimeConfig,
    *,
    identity: Identity | None = None,
    rng: random.Random | None = None,
    task_status: trio.TaskStatus[RunningNode] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a node until cancelled. ``identity`` overrides the config's identity file (a
    launcher that keeps identities itself); ``rng`` seeds the core and the dialler jitter."""
    built = (("overlay._slotted", NATIVE_BUILT), ("overlay._canonical", CANONICAL_BUILT))
    missing = " or ".join(name for name, present in built if not present)
    if missing:
        _tell_uncompiled(missing)
    if identity is None:
        identity = Identity.load_or_create(config.identity, config.identity_work)
    carried = id_work(identity.public)
    if carried < config.identity_work and not config.trusted:
        # Peers refuse it unless they vouch for it (a node with a trusted list is one of an
        # operator's own, whose peers do): say so once, at the start.
        log.warning(
            "this node's id %s carries %d bits of work and its network asks %d: peers that do"
            " not list it in [peers] trusted will refuse it (make a new identity with"
            " overlay keygen --work %d)",
            node_id_text(identity.public),
            carried,
            config.identity_work,
            config.identity_work,
        )
    rng = rng if rng is not None else random.Random()
    location = config.location if config.location is not None else location_from_id(identity.public)
    core = config.core
    if config.connect:
        # It has peers to dial: until one is up, its own searches wait (``searches``).
        core = replace(core, wait_for_peers=True)
    path = config.state_file
    # A node in listed trust starts where its last swap left it (``location_file``), even
    # with swapping since turned off: its old location may be another node's now.
    kept = None if path is None or not config.trust_listed else LocationFile.beside(path)
    if kept is not None and (swapped := kept.read()) is not None:
        if config.location is not None and config.location != swapped:
            log.warning(
                "starting at location %.6f, where this node's last swap left it, not at the"
                " configured %.6f (remove %s to start there)",
                swapped,
                config.location,
                kept.path,
            )
        location = swapped
    if core.swap_interval == 0:
        kept = None  # (it does not move: nothing to write)
    state = None if path is None else StateFile(path, config.core.remembered_streams)
    try:
        await _serve(config, identity, rng, location, core, state, kept, task_status)
    finally:
        if state is not None:
            state.close()


async def _serve(
    config: RuntimeConfig,
    identity: Identity,
    rng: random.Random,
    location: float,
    core: NodeConfig,
    state: StateFile | None,
    location_file: LocationFile | None,
    task_status: trio.TaskStatus[RunningNode],
) -> None:
    budget = QueueBudget(config.max_queued_bytes)
    host = NodeHost(
        identity.public,
        location,
        config=core,
        rng=rng,
        state=state,
        location_file=location_file,
        vouched=config.trusted,
        id_work=config.identity_work,
        budget=budget,
        cooldowns=Cooldowns(trio.current_time, capacity=config.max_cooldowns),
        vouches=NeighbourVouches(
            identity,
            config.network.encode(),
            config.identity_work,
            config.trusted,
            trio.current_time,
        ),
    )
    params = LinkParams.from_config(identity, config, budget)
    peer_listeners = await _listen(config.listen, "peers")
    try:
        client_listeners = await _listen(config.client, "clients")
    except OSError:
        for listener in peer_listeners:
            await listener.aclose()
        raise
    peer_address = _bound(config.listen, peer_listeners)
    client_address = _bound(config.client, client_listeners)
    async with trio.open_nursery() as nursery:
        await nursery.start(host.run)
        await nursery.start(serve_peers, host, params, peer_listeners)
        port_config = ClientPortConfig(
            max_queue_bytes=config.client_queue_bytes, max_clients=config.max_clients
        )
        await nursery.start(
            functools.partial(serve_client_port, config=port_config), host, client_listeners
        )
        for peer in config.connect:
            nursery.start_soon(keep_dialled, host, params, peer, config, rng)
        log.info(
            "node %s at location %.6f: peers on %s, clients on %s",
            node_id_text(identity.public),
            location,
            peer_address,
            client_address,
        )
        task_status.started(RunningNode(host, identity, peer_address, client_address))


class ListenError(OSError):
    """A port a node cannot listen on; its ``errno`` is the system's (EADDRINUSE, ...) and
    its message names the address and the port's role, without the ``[Errno n]`` prefix."""

    def __str__(self) -> str:
        return str(self.strerror)


async def _listen(address: Address, role: str) -> list[trio.SocketListener]:
    """Listeners on ``address``; an OSError that names it and what it is for (``role``):
    the system's own ("Address already in use") does not say which of a node's ports."""
    try:
        return await trio.open_tcp_listeners(address.port, host=address.host)
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise ListenError(error.errno, f"cannot listen for {role} on {address}: {reason}") from None


def _bound(asked: Address, listeners: list[trio.SocketListener]) -> Address:
    """The address actually listened on: the configured host, the kernel's port."""
    port = listeners[0].socket.getsockname()[1]
    return Address(asked.host, int(port))
