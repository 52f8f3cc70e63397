"""A testnet worker process: hosts its share of the nodes until told to stop.

    python -m testnet.worker PLAN.json --ready-fd N

The launcher (``testnet.launcher``) writes the plan: the worker's nodes (index, identity,
location, ports, the indices of the neighbours each must dial), the peer addresses of
the nodes of earlier workers that they dial, and every node id of the testnet, which each
node vouches for (``[peers] trusted``), so that the locations the topology chose are
taken. Every edge of the topology is dialled from its higher-index end only, and workers
host contiguous index ranges started in order, so every address a worker needs is known
when it starts: its own nodes' (started in index order) and those of the workers before it.

Once every node listens, the worker opens its control port (``testnet.control``) and writes
one JSON line to the ready pipe the launcher gave it (``{"control": ..., "nodes": [...]}``, or
``{"error": ...}`` if a node could not listen) and closes it; from then on it runs detached
from the launcher, logging to the file its stdout and stderr were sent to. It stops on a
``shutdown`` request, SIGTERM or SIGINT, closing every node's sockets on the way out.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio

from overlay.core.config import NodeConfig
from overlay.runtime.collector import tune_for_nodes
from overlay.runtime.config import Address, PeerAddress, RuntimeConfig
from overlay.runtime.identity import Identity, parse_node_id
from testnet.control import serve_control
from testnet.pool import NodePool

LOOPBACK = "127.0.0.1"
log = logging.getLogger("testnet.worker")


@dataclass(frozen=True, slots=True)
class NodePlan:
    index: int
    identity: Identity
    location: float
    peer_port: int  # 0: the kernel picks
    client_port: int
    dial: tuple[int, ...]  # neighbour indices to dial (all lower than ``index``)
    state: Path | None = None  # its state file (None: it keeps none)


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    worker: int
    seed: int
    network: str
    core: NodeConfig
    runtime: dict[str, Any]  # RuntimeConfig fields (timings) beyond the addresses
    nodes: tuple[NodePlan, ...]
    known: dict[int, tuple[str, bytes]]  # index -> (peer address, node id), other workers
    # Every node id of the testnet: its nodes vouch for each other's chosen locations.
    trusted: frozenset[bytes]
    trust_listed: bool  # only those ids may link (a darknet: ``testnet.launcher``)

    @classmethod
    def load(cls, path: Path) -> WorkerPlan:
        data = json.loads(path.read_text())
        nodes = tuple(
            NodePlan(
                index=n["index"],
                identity=Identity.loads(n["identity"], source=f"{path} node {n['index']}"),
                location=n["location"],
                peer_port=n["peer_port"],
                client_port=n["client_port"],
                dial=tuple(n["dial"]),
                state=None if n.get("state") is None else Path(n["state"]),
            )
            for n in data["nodes"]
        )
        known = {
            int(i): (address, parse_node_id(node_id))
            for i, (address, node_id) in data["known"].items()
        }
        return cls(
            worker=data["worker"],
            seed=data["seed"],
            network=data["network"],
            core=NodeConfig(**data["core"]),
            runtime=dict(data["runtime"]),
            nodes=nodes,
            known=known,
            trusted=frozenset(parse_node_id(node_id) for node_id in data["trusted"]),
            trust_listed=data["trust_listed"],
        )


def _address(text: str) -> Address:
    host, _, port = text.rpartition(":")
    return Address(host, int(port))


async def host_nodes(
    plan: WorkerPlan, *, task_status: trio.TaskStatus[dict[str, Any]] = trio.TASK_STATUS_IGNORED
) -> None:
    """Start the plan's nodes and the control port, report ``{"control", "nodes"}`` through
    ``task_status``, and run until shut down. OSError (before reporting) if a node cannot
    listen; its message names the node and the port."""
    known = dict(plan.known)
    with trio.CancelScope() as shutdown:
        async with NodePool(seed=plan.seed * 1_000_003 + plan.worker) as pool:
            started = []
            for node in plan.nodes:
                config = replace(
                    RuntimeConfig(
                        location=node.location,
                        trusted=plan.trusted,
                        trust_listed=plan.trust_listed,
                        network=plan.network,
                        listen=Address(LOOPBACK, node.peer_port),
                        client=Address(LOOPBACK, node.client_port),
                        connect=tuple(
                            PeerAddress(_address(known[j][0]), known[j][1]) for j in node.dial
                        ),
                        core=plan.core,
                        keep_state=node.state is not None,
                        state=node.state,
                    ),
                    **plan.runtime,
                )
                try:
                    running = await pool.start(node.index, node.identity, config)
                except OSError as error:
                    raise _listen_error(node, error) from None
                known[node.index] = (str(running.peer_address), node.identity.public)
                started.append(
                    {
                        "index": node.index,
                        "peer": str(running.peer_address),
                        "client": str(running.client_address),
                    }
                )
            listeners = await trio.open_tcp_listeners(0, host=LOOPBACK)
            port = listeners[0].socket.getsockname()[1]
            task_status.started({"control": f"{LOOPBACK}:{port}", "nodes": started})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(serve_control, listeners, pool, shutdown)
                nursery.start_soon(_stop_on_signal, shutdown)


def _listen_error(node: NodePlan, error: OSError) -> OSError:
    ports = f"{node.peer_port} (peers) or {node.client_port} (clients)"
    if error.errno == errno.EADDRINUSE:
        return OSError(error.errno, f"node {node.index}: port {ports} is in use")
    return OSError(error.errno, f"node {node.index} cannot listen on {ports}: {error}")


async def _stop_on_signal(shutdown: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.warning("stopping on signal %d", signum)
            shutdown.cancel()
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testnet.worker", description=__doc__)
    parser.add_argument("plan", type=Path)
    parser.add_argument("--ready-fd", type=int, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    plan = WorkerPlan.load(args.plan)
    ready_fd: int = args.ready_fd

    def report(message: dict[str, Any]) -> None:
        nonlocal ready_fd
        if ready_fd >= 0:
            os.write(ready_fd, json.dumps(message).encode() + b"\n")
            os.close(ready_fd)
            ready_fd = -1

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            ready = await nursery.start(host_nodes, plan)
            report({"pid": os.getpid(), **ready})
            log.warning(
                "worker %d: %d nodes up, control on %s",
                plan.worker,
                len(plan.nodes),
                ready["control"],
            )

    failed: OSError | None = None
    tune_for_nodes()
    try:
        trio.run(run)
    except* OSError as group:
        failed = _leaves(group)[0]
    if failed is not None:
        report({"error": failed.strerror or str(failed)})
        return 2
    log.warning("worker %d stopped", plan.worker)
    return 0


def _leaves(group: BaseExceptionGroup[OSError]) -> list[OSError]:
    leaves: list[OSError] = []
    for error in group.exceptions:
        leaves.extend(_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return leaves


if __name__ == "__main__":
    sys.exit(main())
