"""Start, inspect and stop a testnet of real nodes on loopback, spread over worker processes.

``up`` builds a seeded small-world topology (``keyspace.topology.small_world``) and seeded
node identities, so the same seed gives the same network; splits the node indices into
contiguous ranges, one per worker process (``python -m testnet.worker``); and starts the
workers one after the other. Every edge is dialled from its higher-index end, so a worker's
nodes dial only nodes of its own or of earlier workers, whose addresses it is handed in its
plan: no port has to be guessed or reserved in advance (``--base-port`` fixes them instead,
for firewalls or repeatable addresses). Each worker reports through a pipe once its nodes
listen and then runs detached, logging to ``DIR/worker-K.log``; ``up`` then asks every node's
client port for ``describe`` until each has a link to every one of its neighbours, printing
progress, and writes the manifest (``testnet.manifest``) only then: a manifest means a
ready testnet.

Processes: one worker up to ``SINGLE_PROCESS_MAX`` nodes, else enough workers that each hosts
at most ``NODES_PER_PROCESS``: a node costs a few descriptors (two listeners, ~degree links),
far below the 20,000 a process may open, but one trio loop runs on one core, so 1,000 nodes
in four processes use both cores of a small machine.

Locations: the topology chooses them, and a peer takes a location that a node's id does not
give only from a node it vouches for (``overlay.runtime.vouching``). A testnet is one
operator's nodes, so each worker's plan lists every node id of the testnet and every node
vouches for all of them (``[peers] trusted``), in open mode: an outside node may still link,
at the location its id gives.

Darknet (``swap_interval``): the links are Sandberg's darknet (``keyspace.darknet``: a
small world whose nodes start at a random permutation of its locations, as people who link
to friends start at locations that have nothing to do with them), the nodes run in listed
trust (only the testnet's ids), and each starts a location swap every ``swap_interval``
(``overlay.core.swaps``). ``overlay testnet routing`` shows greedy routing improving as the
locations move.

State: each node keeps its state file (``overlay.runtime.state_file``) as
``DIR/state/node-I.state``, so a node that ``overlay testnet restart`` brings back numbers
its streams on, as an ``overlay node`` would; ``up`` clears the folder (the identities are
new), and ``--no-state`` keeps nothing on disk.

Timers: loopback delivers in microseconds and a killed node's sockets close at once, so
testnets run with ``LOOPBACK_CORE`` (takeover grace 0.5 s, publishes retried after 1 s,
shorter search timeouts) rather than the defaults meant for wide-area links; repairs then take
about a second, which is what the demo and the chaos run show.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import trio

import testnet
from keyspace.darknet import darknet
from keyspace.topology import Topology, small_world
from overlay.core.config import NodeConfig
from overlay.runtime.identity import Identity, node_id_text
from testnet.control import ControlError, call
from testnet.manifest import (
    Manifest,
    ManifestError,
    NodeEntry,
    WorkerEntry,
    manifest_path,
    read_manifest,
    write_manifest,
)
from testnet.survey import survey

SINGLE_PROCESS_MAX = 200
NODES_PER_PROCESS = 250
DEFAULT_DEGREE = 8  # mean links per node: greedy paths of a few hops at 1,000 nodes
NETWORK = "testnet"

LOOPBACK_CORE = NodeConfig(
    # Heartbeats keep the wide-area default (every 5 s): a killed node's sockets close at
    # once, so they only matter for a frozen process, and at 1,000 nodes heartbeats every
    # 2 s cost 80% of a core on an idle testnet (measured), every 5 s about a third of that.
    accept_timeout=2.0,
    request_timeout=20.0,
    confirm_timeout=2.0,
    takeover_grace=0.5,
    announce_delay=0.1,
    publish_timeout=1.0,
    publish_attempts=10,
)
# Redials of a lost peer start at 0.2 s and back off to 2 s at most: a restarted node is
# linked again within a couple of seconds, not the 30 s a wide-area default allows.
LOOPBACK_RUNTIME: dict[str, Any] = {"reconnect_min": 0.2, "reconnect_max": 2.0}

# A worker imports trio and cryptography and binds two ports per node: seconds at most.
WORKER_START_TIMEOUT = 60.0

Progress = Callable[[str], None]


class LaunchError(ValueError):
    """The testnet cannot be started or acted on; the message says why and what to do."""


def default_processes(nodes: int) -> int:
    return 1 if nodes <= SINGLE_PROCESS_MAX else math.ceil(nodes / NODES_PER_PROCESS)


def identities(nodes: int, seed: int) -> list[Identity]:
    """Seeded identities: the same seed names the same nodes (an Ed25519 private key is
    any 32 bytes). For testnets only: anyone who knows the seed has the keys."""
    rng = random.Random(f"testnet-identities-{seed}")
    return [Identity.from_private_bytes(rng.randbytes(32)) for _ in range(nodes)]


def split(nodes: int, processes: int) -> list[tuple[int, int]]:
    """Contiguous index ranges, one per process, sizes differing by at most one."""
    bounds = [round(k * nodes / processes) for k in range(processes + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(processes)]


# --- up ----------------------------------------------------------------------------------


def up(
    nodes: int,
    directory: Path,
    *,
    processes: int | None = None,
    seed: int = 0,
    degree: int = DEFAULT_DEGREE,
    base_port: int = 0,
    core: NodeConfig = LOOPBACK_CORE,
    timeout: float | None = None,
    keep_state: bool = True,
    swap_interval: float | None = None,
    progress: Progress = print,
) -> Manifest:
    """Start a testnet and return its manifest once every node is linked to its neighbours.
    LaunchError if one runs there already, a port is in use, or it is not ready in time.
    ``keep_state``: each node keeps a state file in ``directory/state`` (see above).
    ``swap_interval``: a darknet whose nodes swap locations that often (see above)."""
    if nodes < 2:
        raise LaunchError(f"--nodes must be at least 2, got {nodes}")
    processes = processes or default_processes(nodes)
    if not 1 <= processes <= nodes:
        raise LaunchError(f"--processes must be in 1..{nodes}, got {processes}")
    if swap_interval is not None and not 0 < swap_interval < math.inf:
        raise LaunchError(
            f"--swap-interval must be a positive number of seconds, got {swap_interval}"
        )
    if base_port and not 1024 <= base_port <= 65535 - 2 * nodes:
        raise LaunchError(f"--base-port must leave room for {2 * nodes} ports below 65536")
    _refuse_if_running(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = state_dir(directory)
    try:
        if state.exists():
            shutil.rmtree(state)  # an earlier testnet's: other identities
        if keep_state:
            state.mkdir()
    except OSError as error:
        raise LaunchError(f"cannot clear {state}: {error.strerror or error}") from None
    began = time.monotonic()
    if swap_interval is None:
        topology = small_world(nodes, degree, random.Random(seed))
    else:
        topology = darknet(nodes, degree, random.Random(seed)).topology
        core = replace(core, swap_interval=swap_interval)
    ids = identities(nodes, seed)
    kind = "" if swap_interval is None else f", a darknet swapping every {swap_interval:g} s"
    progress(
        f"starting {nodes} nodes in {processes} process{'es' if processes > 1 else ''} "
        f"(seed {seed}, degree {degree}{kind}) in {directory}"
    )
    addresses: dict[int, dict[str, str]] = {}
    workers: list[WorkerEntry] = []
    try:
        for k, (first, end) in enumerate(split(nodes, processes)):
            plan = _plan(
                k,
                first,
                end,
                topology,
                ids,
                addresses,
                seed,
                core,
                base_port,
                state if keep_state else None,
            )
            pid, ready = _spawn(directory, k, plan)
            for entry in ready["nodes"]:
                addresses[entry["index"]] = entry
            workers.append(
                WorkerEntry(k, pid, ready["control"], str(_log(directory, k)), (first, end))
            )
            progress(f"  worker {k} (pid {pid}): nodes {first}..{end - 1} listening")
        entries = tuple(
            NodeEntry(
                index=i,
                id=node_id_text(ids[i].public),
                location=topology.locations[i],
                peer=addresses[i]["peer"],
                client=addresses[i]["client"],
                worker=next(w.index for w in workers if w.nodes[0] <= i < w.nodes[1]),
                neighbours=topology.neighbours[i],
            )
            for i in range(nodes)
        )
        limit = timeout if timeout is not None else 60.0 + 0.1 * nodes
        clients = {e.index: e.client for e in entries}
        want = {e.index: {entries[j].id for j in e.neighbours} for e in entries}
        trio.run(_wait_linked, clients, want, limit, progress)
    except BaseException:
        # (Ctrl-C included: the workers run in their own sessions and outlive the launcher
        # unless stopped here; their plans hold the nodes' private keys)
        _stop_workers(workers, _quiet)
        for k in range(processes):
            _plan_path(directory, k).unlink(missing_ok=True)
        raise
    elapsed = time.monotonic() - began
    manifest = Manifest(seed, degree, NETWORK, entries, tuple(workers), time.time(), elapsed)
    path = write_manifest(directory, manifest)
    progress(f"ready: {nodes} nodes linked in {elapsed:.1f} s; manifest {path}")
    return manifest


def _refuse_if_running(directory: Path) -> None:
    try:
        old = read_manifest(directory)
    except ManifestError:
        return
    alive = [w.pid for w in old.workers if worker_alive(w.pid)]
    if alive:
        raise LaunchError(
            f"a testnet of {len(old.nodes)} nodes is already running in {directory} "
            f"(worker pids {', '.join(map(str, alive))}): stop it with `overlay testnet down`"
        )
    manifest_path(directory).unlink()  # a stale manifest: its workers are gone


def _plan(
    worker: int,
    first: int,
    end: int,
    topology: Topology,
    ids: Sequence[Identity],
    addresses: dict[int, dict[str, str]],
    seed: int,
    core: NodeConfig,
    base_port: int,
    state: Path | None,
) -> dict[str, Any]:
    nodes = []
    known: dict[str, tuple[str, str]] = {}
    for i in range(first, end):
        dial = [j for j in topology.neighbours[i] if j < i]
        for j in dial:
            if j < first:
                known[str(j)] = (addresses[j]["peer"], node_id_text(ids[j].public))
        nodes.append(
            {
                "index": i,
                "identity": ids[i].dumps(),
                "location": topology.locations[i],
                "peer_port": base_port + 2 * i if base_port else 0,
                "client_port": base_port + 2 * i + 1 if base_port else 0,
                "dial": dial,
                "state": None if state is None else str(state / f"node-{i}.state"),
            }
        )
    return {
        "worker": worker,
        "seed": seed,
        "network": NETWORK,
        "core": asdict(core),
        "runtime": LOOPBACK_RUNTIME,
        "nodes": nodes,
        "known": known,
        "trusted": [node_id_text(identity.public) for identity in ids],
        # A darknet's nodes link only within the testnet (``[peers] trust = "listed"``),
        # as swapping needs: every peer must take the locations a swap gives.
        "trust_listed": core.swap_interval > 0,
    }


def state_dir(directory: Path) -> Path:
    """Where a testnet's nodes keep their state files."""
    return directory / "state"


def _log(directory: Path, worker: int) -> Path:
    return directory / f"worker-{worker}.log"


def _plan_path(directory: Path, worker: int) -> Path:
    return directory / f"worker-{worker}.plan.json"


def _spawn(directory: Path, worker: int, plan: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Start worker ``worker`` detached (own session, output to its log) and wait for its
    ready line. LaunchError with the worker's reason (a port in use) if it fails."""
    plan_file = _plan_path(directory, worker)
    # The plan holds the nodes' private keys: readable by the user only.
    fd = os.open(plan_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(plan, f)
    read_end, write_end = os.pipe()
    root = str(Path(testnet.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    with open(_log(directory, worker), "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "testnet.worker", str(plan_file), "--ready-fd", str(write_end)],
            pass_fds=(write_end,),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # survives the launcher and its terminal's Ctrl-C
            env=env,
        )
    os.close(write_end)
    try:
        line = _read_line(read_end, WORKER_START_TIMEOUT)
    except BaseException:
        # Ctrl-C or SIGTERM while it starts: it is in no list ``up`` cleans up yet, and in
        # its own session no signal reaches it, so it goes down here with the launcher.
        process.kill()
        process.wait()
        raise
    finally:
        os.close(read_end)
    message: dict[str, Any] | None = json.loads(line) if line else None
    if message is None or "error" in message:
        process.kill()
        process.wait()
        reason = message["error"] if message else f"it exited; see {_log(directory, worker)}"
        raise LaunchError(f"worker {worker} could not start its nodes: {reason}")
    return process.pid, message


def _read_line(fd: int, timeout: float) -> bytes:
    """One line from the pipe, b"" if the writer closed it first or time ran out."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return b""
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        data += chunk
    return data.split(b"\n", 1)[0]


async def _wait_linked(
    clients: dict[int, str], want: dict[int, set[str]], limit: float, progress: Progress
) -> None:
    """Ask every node (index -> client address) not yet linked to all the node ids it
    should be (``want``) again, until all are or the time is up (LaunchError naming the
    laggards). A bounded poll: the nodes are in other processes, no event to wait on."""
    began = shown = time.monotonic()
    pending = set(clients)
    while pending:
        indices = sorted(pending)
        answers = await survey([clients[i] for i in indices], indices=indices)
        for i, answer in zip(indices, answers, strict=True):
            if answer.description is None:
                continue
            linked = {node_id_text(bytes(p["id"])) for p in answer.description["peers"]}
            if want[i] <= linked:
                pending.discard(i)
        now = time.monotonic()
        if pending and now - began > limit:
            raise LaunchError(
                f"not ready after {limit:.0f} s: {len(pending)} nodes still lack links "
                f"(e.g. node {min(pending)}); see the worker logs"
            )
        if pending and now - shown >= 2.0:
            shown = now
            done = len(clients) - len(pending)
            progress(f"  linking: {done}/{len(clients)} nodes linked ({now - began:.1f} s)")
        if pending:
            await trio.sleep(0.2)


# --- the running testnet -------------------------------------------------------------------


def worker_alive(pid: int) -> bool:
    """Whether ``pid`` is a live testnet worker (not a zombie, not a reused pid)."""
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            return False
        state = stat.rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X") and b"testnet.worker" in cmdline
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return sys.platform != "linux"


def kill(directory: Path, index: int) -> None:
    """Kill node ``index`` (its worker keeps running; ``restart`` brings it back)."""
    manifest = read_manifest(directory)
    _control(manifest, index, "kill")


def restart(directory: Path, index: int, *, timeout: float = 30.0) -> None:
    """Restart node ``index`` (same identity and ports, new boot id) and wait until it is
    linked again to every neighbour that is alive."""
    manifest = read_manifest(directory)
    _control(manifest, index, "restart")
    dead = killed_nodes(manifest, unreachable_worker_counts=True)
    entry = manifest.node(index)
    want = {manifest.nodes[j].id for j in entry.neighbours if j not in dead}
    trio.run(_wait_linked, {index: entry.client}, {index: want}, timeout, _quiet)


def killed_nodes(manifest: Manifest, *, unreachable_worker_counts: bool = False) -> set[int]:
    """The nodes their workers say are down (killed by ``kill`` and not restarted). A worker
    that does not answer says nothing: its nodes count as killed only if
    ``unreachable_worker_counts`` (a caller that must not wait for them), since otherwise a
    node that should be up would be excused for not answering."""
    dead: set[int] = set()
    for worker in manifest.workers:
        try:
            dead.update(call(worker.control, "status")["dead"])
        except ControlError:
            if unreachable_worker_counts:
                dead.update(range(*worker.nodes))
    return dead


def _quiet(_: str) -> None:
    pass


def _control(manifest: Manifest, index: int, op: str) -> dict[str, Any]:
    worker = manifest.worker_of(index)
    if not worker_alive(worker.pid):
        raise LaunchError(
            f"worker {worker.index} (pid {worker.pid}) hosting node {index} is not running; "
            "see `overlay testnet status`"
        )
    try:
        return call(worker.control, op, node=index)
    except ControlError as error:
        raise LaunchError(f"{op} node {index}: {error}") from None


def down(directory: Path, progress: Progress = print) -> int:
    """Stop every worker of the testnet and remove its manifest and plans (the logs stay).
    Returns how many workers were running."""
    manifest = read_manifest(directory)
    running = _stop_workers(list(manifest.workers), progress)
    manifest_path(directory).unlink(missing_ok=True)
    for worker in manifest.workers:
        _plan_path(directory, worker.index).unlink(missing_ok=True)
    return running


def _stop_workers(workers: Sequence[WorkerEntry], progress: Progress) -> int:
    """Ask each worker to shut down; SIGTERM, then SIGKILL, those that do not."""
    running = [w for w in workers if worker_alive(w.pid)]
    for worker in running:
        try:
            call(worker.control, "shutdown", timeout=5.0)
        except ControlError:
            _signal(worker.pid, signal.SIGTERM)
    for worker in running:
        if not _wait_gone(worker.pid, 10.0):
            _signal(worker.pid, signal.SIGTERM)
            if not _wait_gone(worker.pid, 5.0):
                _signal(worker.pid, signal.SIGKILL)
                _wait_gone(worker.pid, 5.0)
        progress(f"  worker {worker.index} (pid {worker.pid}) stopped")
    return len(running)


def _signal(pid: int, signum: int) -> None:
    if worker_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _wait_gone(pid: int, limit: float) -> bool:
    """A bounded poll for another process's exit (it is not our child: no waitpid)."""
    deadline = time.monotonic() + limit
    while worker_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
