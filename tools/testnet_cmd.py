"""``overlay testnet``: launch a testnet of real nodes on this machine, inspect it, break it.

    overlay testnet up --nodes 100          # start 100 nodes, return when all are linked
    overlay testnet status                  # alive nodes, links, streams
    overlay testnet client 17               # node 17's client address, for scripts:
    overlay subscribe demo --node $(overlay testnet client 17)
    overlay testnet kill 17                 # kill node 17 (its worker keeps the others)
    overlay testnet restart 17              # bring it back: same id and ports, new boot id
    overlay testnet down                    # stop everything
    overlay testnet demo                    # the whole story in one command (own testnet)
    overlay testnet chaos --rate 1 --duration 20    # kill/restart nodes while publishing
    overlay testnet up --nodes 200 --darknet        # links by trust; nodes swap locations
    overlay testnet routing --every 10 --count 6    # greedy routing as the locations move
    overlay testnet web --open              # a live view in the browser: ring, trees, events

Every command finds the testnet through ``--dir`` (default ``./testnet-data``), where ``up``
writes the manifest and the workers' logs. ``overlay tree`` and ``overlay stats`` read the
same manifest.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import trio

from overlay.client.connection import ClientError
from overlay.runtime.identity import node_id_text
from testnet import launcher
from testnet.arguments import positive, seconds
from testnet.churn import ChaosOptions, ChaosResult
from testnet.churn import run_chaos as chaos
from testnet.demo import DemoOptions
from testnet.demo import run_demo as demo
from testnet.handle import Launched, local_testnet
from testnet.manifest import DEFAULT_DIR, Manifest, manifest_path, read_manifest
from testnet.ring_plot import plot_rings, png_problem
from testnet.routing import Look, as_launched, launched, watch
from testnet.survey import Answer, survey
from testnet.web import server as web
from tools import web_cmd
from tools.stopping import Signalled, until_signal

T = TypeVar("T")

# A darknet testnet's nodes swap this often: on loopback a swap takes milliseconds, so the
# locations settle within minutes, and a node is rarely busy when asked to be a partner.
DARKNET_SWAP_INTERVAL = 1.0

SEED_HELP = "seed of the topology, identities and random choices (default: %(default)s)"


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "testnet",
        help="launch and drive a local testnet of many nodes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="testnet_command", metavar="ACTION", required=True)

    def action(name: str, help: str, run: Any) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = sub.add_parser(name, help=help, description=help)
        q.add_argument(
            "--dir",
            type=Path,
            default=DEFAULT_DIR,
            help=f"the testnet's folder: manifest and logs (default ./{DEFAULT_DIR})",
        )
        q.set_defaults(run=run)
        return q

    q = action("up", "start N nodes and wait until every one is linked", run_up)
    q.add_argument("--nodes", type=int, default=100, help="how many nodes (default 100)")
    q.add_argument(
        "--processes",
        type=int,
        help=f"worker processes (default: 1 up to {launcher.SINGLE_PROCESS_MAX} nodes, else "
        f"one per {launcher.NODES_PER_PROCESS})",
    )
    q.add_argument("--seed", type=int, default=0, help="topology and identity seed")
    q.add_argument(
        "--degree", type=int, default=launcher.DEFAULT_DEGREE, help="mean links per node"
    )
    q.add_argument(
        "--base-port",
        type=int,
        default=0,
        help="fixed ports: node i listens on BASE+2i (peers) and BASE+2i+1 (clients); "
        "default: the kernel picks free ports",
    )
    q.add_argument("--timeout", type=float, help="give up if not linked by then (seconds)")
    q.add_argument(
        "--darknet",
        action="store_true",
        help="links follow trust (Sandberg's darknet: random starting locations), nodes "
        "accept only the testnet's ids and swap locations (see --swap-interval); watch "
        "routing improve with `overlay testnet routing`",
    )
    q.add_argument(
        "--swap-interval",
        type=seconds,
        help=f"with --darknet: seconds between a node's swaps (default: {DARKNET_SWAP_INTERVAL})",
    )
    q.add_argument(
        "--no-state",
        action="store_true",
        help="nodes keep no state files (DIR/state/): a restarted node forgets how far "
        "each stream's numbering got",
    )
    q = action(
        "routing",
        "how well the testnet's locations route now: greedy routing success and steps, "
        "link lengths, swaps so far",
        run_routing,
    )
    q.add_argument(
        "--samples", type=positive, default=2000, help="greedy walks a look (default 2000)"
    )
    q.add_argument("--every", type=seconds, default=10.0, help="seconds between looks (10)")
    q.add_argument("--count", type=positive, default=1, help="looks to take (default 1)")
    q.add_argument("--seed", type=int, default=0, help="seed of the walks (default 0)")
    q.add_argument("--json", action="store_true", help="one JSON object a look, a line each")
    q.add_argument(
        "--png",
        type=Path,
        help="draw the ring as launched and at the last look, links as chords, into this PNG "
        "(pip install -e '.[viz]')",
    )
    q = action(
        "web",
        "serve a live view of the running testnet to a browser: the ring, each stream's "
        "tree, events as they happen, and controls (loopback only; the printed link carries "
        "the controls' token)",
        run_web,
    )
    web_cmd.add_serving_arguments(q)
    q = action("status", "alive nodes, links and streams of the running testnet", run_status)
    q.add_argument(
        "--json",
        action="store_true",
        help="one JSON object: each node's addresses, whether it answered, whether it was "
        "killed, its links; the testnet's links and streams",
    )
    action(
        "down",
        "stop every node and remove the manifest (logs stay); with no testnet running "
        "there, says so and exits 0",
        run_down,
    )
    q = action(
        "client", "print a node's client address (for --node of publish/subscribe)", run_client
    )
    q.add_argument("node", help="node index")
    for name, text in (
        ("kill", "kill one node (a crash: its peers see the links drop)"),
        ("restart", "restart one node: same id and ports, new boot id"),
    ):
        q = action(name, text, run_kill if name == "kill" else run_restart)
        q.add_argument("node", help="node index (see `overlay testnet status`)")
    q = action(
        "demo", "the whole story: a testnet, a tree, the root killed, all delivered", run_demo
    )
    q.description = (
        "The whole story: a testnet, a tree, the root killed, all delivered. Exit status: 0 "
        "if every check passed, 1 if one failed; Ctrl-C (SIGINT) or SIGTERM stops it "
        "cleanly, with status 130 or 143 (128 + the signal's number)."
    )
    defaults = DemoOptions()
    q.add_argument(
        "--nodes", type=int, default=defaults.nodes, help="testnet size (default: %(default)s)"
    )
    q.add_argument(
        "--subscribers",
        type=int,
        default=defaults.subscribers,
        help="subscribers, each on its own node (default: %(default)s)",
    )
    q.add_argument(
        "--packets",
        type=int,
        default=defaults.packets,
        help="packets published; the root is killed a third of the way in (default: %(default)s)",
    )
    q.add_argument(
        "--rate",
        type=float,
        default=defaults.rate,
        help="packets per second (default: %(default)s)",
    )
    q.add_argument("--seed", type=int, default=defaults.seed, help=SEED_HELP)
    q = action("chaos", "kill and restart random nodes while publishing; count losses", run_chaos)
    chaos = ChaosOptions()
    for flag, kind, default, text in (
        ("--rate", float, chaos.rate, "kills per second, Poisson (0: none, a benchmark)"),
        ("--duration", float, chaos.duration, "seconds of publishing and killing"),
        ("--downtime", float, chaos.downtime, "seconds a killed node stays down"),
        ("--subscribers", int, chaos.subscribers, "subscribing clients"),
        ("--publish-rate", float, chaos.publish_rate, "packets published per second"),
    ):
        q.add_argument(flag, type=kind, default=default, help=f"{text} (default: %(default)s)")
    q.add_argument("--seed", type=int, default=chaos.seed, help=SEED_HELP)
    q.add_argument(
        "--in-tree",
        action="store_true",
        help="kill only nodes of the stream's tree (the root included): every kill a repair",
    )
    q.add_argument(
        "--nodes",
        type=int,
        help="run on a new in-process testnet of this many nodes instead of the one in --dir",
    )


def node_index(text: str) -> int:
    """A node index from the command line; ValueError (one line, exit 2) if not one."""
    try:
        index = int(text)
    except ValueError:
        raise ValueError(f"node index must be a number, got {text!r}") from None
    if index < 0:
        raise ValueError(f"node index must not be negative, got {index}")
    return index


def run_up(args: argparse.Namespace) -> int:
    if args.swap_interval is not None and not args.darknet:
        print("overlay testnet up: --swap-interval needs --darknet", file=sys.stderr)
        return 2
    swap_interval = args.swap_interval or DARKNET_SWAP_INTERVAL
    launcher.up(
        args.nodes,
        args.dir,
        processes=args.processes,
        seed=args.seed,
        degree=args.degree,
        base_port=args.base_port,
        timeout=args.timeout,
        keep_state=not args.no_state,
        swap_interval=swap_interval if args.darknet else None,
        progress=_say,
    )
    print(
        f"try: overlay testnet status --dir {args.dir}; "
        f"overlay tree STREAM --manifest {args.dir}; overlay testnet down --dir {args.dir}"
    )
    return 0


def run_down(args: argparse.Namespace) -> int:
    if not manifest_path(args.dir).exists():
        # Nothing to stop is not a failure: after ``down`` no testnet runs there, as asked
        # (so a cleanup script may run it unconditionally).
        print(
            f"overlay testnet: no testnet running in {args.dir}: nothing to stop", file=sys.stderr
        )
        return 0
    stopped = launcher.down(args.dir, progress=_say)
    print(f"testnet in {args.dir} is down ({stopped} worker{'s' if stopped != 1 else ''} stopped)")
    return 0


def run_client(args: argparse.Namespace) -> int:
    print(read_manifest(args.dir).node(node_index(args.node)).client)
    return 0


def run_kill(args: argparse.Namespace) -> int:
    index = node_index(args.node)
    launcher.kill(args.dir, index)
    print(f"node {index} killed")
    return 0


def run_restart(args: argparse.Namespace) -> int:
    index = node_index(args.node)
    launcher.restart(args.dir, index)
    print(f"node {index} restarted and linked to its live neighbours")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    if args.nodes < 4 or not 1 <= args.subscribers <= args.nodes - 3:
        raise ValueError("the demo needs --nodes >= 4 and 1 <= --subscribers <= nodes - 3")
    if args.packets < 2 or args.rate <= 0:
        raise ValueError("the demo needs --packets >= 2 and --rate > 0")
    options = DemoOptions(
        nodes=args.nodes,
        subscribers=args.subscribers,
        packets=args.packets,
        rate=args.rate,
        kill_at=max(1, args.packets // 3),
        seed=args.seed,
    )
    passed = _trio(until_signal, demo, options, _say)
    if isinstance(passed, Signalled):
        return passed.status
    return 0 if passed else 1


def run_chaos(args: argparse.Namespace) -> int:
    if args.rate < 0 or args.duration <= 0 or args.downtime < 0 or args.publish_rate <= 0:
        raise ValueError("need --rate >= 0, --duration > 0, --downtime >= 0, --publish-rate > 0")
    if args.subscribers < 1:
        raise ValueError(f"--subscribers must be at least 1, got {args.subscribers}")
    options = ChaosOptions(
        rate=args.rate,
        duration=args.duration,
        downtime=args.downtime,
        subscribers=args.subscribers,
        publish_rate=args.publish_rate,
        seed=args.seed,
        in_tree=args.in_tree,
    )
    if args.nodes is not None:

        async def local() -> ChaosResult:
            _say(f"starting {args.nodes} nodes in this process ...")
            async with local_testnet(args.nodes, seed=args.seed) as net:
                return await chaos(net, options, _say)

        result = _trio(until_signal, local)
    else:
        manifest = read_manifest(args.dir)

        async def launched() -> ChaosResult:
            net = Launched(manifest)
            await net.refresh()
            return await chaos(net, options, _say)

        result = _trio(until_signal, launched)
    if isinstance(result, Signalled):
        return result.status
    return 0 if result.ok else 1


def run_routing(args: argparse.Namespace) -> int:
    manifest = read_manifest(args.dir)
    if args.png is not None:
        # Before the looks, not after them: a picture that cannot be made must not cost them.
        problem = png_problem(args.png)
        if problem is not None:
            print(f"overlay testnet routing: {problem}", file=sys.stderr)
            return 2

    def emit(look: Look, when: str | None = None) -> None:
        if args.json:
            print(json.dumps({**look.as_dict(), "launched": when is not None}), flush=True)
        else:
            print(look.line(when), flush=True)

    first = as_launched(manifest, args.samples, args.seed)
    emit(first, "launched")
    looks = _trio(
        until_signal,
        functools.partial(
            watch,
            manifest,
            samples=args.samples,
            seed=args.seed,
            every=args.every,
            count=args.count,
            emit=emit,
        ),
    )
    if isinstance(looks, Signalled):
        return looks.status
    if args.png is not None:
        made, now = looks
        last = made[-1]
        plot_rings(
            [(_caption("as launched", first), launched(manifest)), (_caption("now", last), now)],
            args.png,
        )
        print(f"wrote {args.png}")
    return 0


def _caption(when: str, look: Look) -> str:
    return (
        f"{when}: greedy routing reaches the closest node {look.greedy_pct:.1f}%, "
        f"{look.swaps:,} swaps"
    )


def run_web(args: argparse.Namespace) -> int:
    web.loopback_only(args.host)
    manifest = read_manifest(args.dir)
    view = web.WebView(manifest, str(args.dir))
    return web_cmd.serve_view(
        view, args, f"the testnet in {args.dir} ({len(manifest.nodes)} nodes)"
    )


def run_status(args: argparse.Namespace) -> int:
    manifest = read_manifest(args.dir)
    answers = _trio(until_signal, _survey_all, manifest)
    if isinstance(answers, Signalled):
        return answers.status
    if args.json:
        print(json.dumps(status_json(manifest, answers, launcher.killed_nodes(manifest))))
    else:
        print(status_text(manifest, answers))
    return 0 if all(a.description is not None for a in answers) else 1


async def _survey_all(manifest: Manifest) -> list[Answer]:
    return await survey([n.client for n in manifest.nodes], indices=range(len(manifest.nodes)))


def status_text(manifest: Manifest, answers: list[Answer]) -> str:
    """The status report: workers, alive nodes, links (and missing ones), streams."""
    alive = {a.index: a.description for a in answers if a.description is not None}
    lines = [
        f"testnet: {len(manifest.nodes)} nodes in {len(manifest.workers)} worker "
        f"process{'es' if len(manifest.workers) != 1 else ''} (seed {manifest.seed}, "
        f"degree {manifest.degree}); came up in {manifest.up_seconds:.1f} s"
    ]
    for w in manifest.workers:
        state = "running" if launcher.worker_alive(w.pid) else "NOT RUNNING"
        lines.append(
            f"  worker {w.index}: pid {w.pid}, nodes {w.nodes[0]}..{w.nodes[1] - 1}, "
            f"control {w.control}, {state}"
        )
    dead = sorted(i for i in range(len(manifest.nodes)) if i not in alive)
    lines.append(
        f"nodes: {len(alive)} alive"
        + (f", {len(dead)} not answering: {_some(dead)}" if dead else "")
    )
    links = 0
    lacking = []
    for i, description in alive.items():
        assert description is not None and i is not None
        peers = {_text(p["id"]) for p in description["peers"]}
        links += len(peers)
        want = {manifest.nodes[j].id for j in manifest.nodes[i].neighbours if j in alive}
        if not want <= peers:
            lacking.append(i)
    lines.append(
        f"links: {links // 2} (mean degree {links / max(len(alive), 1):.1f})"
        + (
            f"; {len(lacking)} nodes lack a link to a live neighbour: {_some(lacking)}"
            if lacking
            else "; every live node is linked to all its live neighbours"
        )
    )
    members: Counter[bytes] = Counter()
    roots: dict[bytes, list[int]] = {}
    for i, description in alive.items():
        assert description is not None and i is not None
        for view in description["streams"]:
            key = bytes(view["key"])
            members[key] += 1
            if view["state"] == "root":
                roots.setdefault(key, []).append(i)
    lines.append(f"streams: {len(members)}")
    for key, count in members.most_common(20):
        root_list = roots.get(key, [])
        root_text = ", ".join(f"node {r}" for r in root_list) or "none"
        lines.append(f"  key {key.hex()[:16]}: {count} members, root {root_text}")
    return "\n".join(lines)


def status_json(manifest: Manifest, answers: list[Answer], killed: set[int]) -> dict[str, Any]:
    """The status report as data: every node (index, id, location: where it is now if it
    answered, else where it was launched; peer and client addresses,
    worker, ``alive``: it answered, ``killed``: its worker says it was killed, ``links``: the
    testnet nodes it is linked to), the links once each as ``[i, j]`` with i < j, the
    workers, and the streams with their member count and roots."""
    by_id = {n.id: n.index for n in manifest.nodes}
    alive = {a.index: a.description for a in answers if a.description is not None}
    nodes = []
    links: set[tuple[int, int]] = set()
    members: Counter[bytes] = Counter()
    roots: dict[bytes, list[int]] = {}
    for n in manifest.nodes:
        description = alive.get(n.index)
        linked: list[int] = []
        if description is not None:
            peer_ids = (_text(p["id"]) for p in description["peers"])
            linked = sorted(by_id[p] for p in peer_ids if p in by_id)
            links.update((min(n.index, j), max(n.index, j)) for j in linked)
            for view in description["streams"]:
                key = bytes(view["key"])
                members[key] += 1
                if view["state"] == "root":
                    roots.setdefault(key, []).append(n.index)
        nodes.append(
            {
                "index": n.index,
                "id": n.id,
                "location": n.location if description is None else description["location"],
                "peer": n.peer,
                "client": n.client,
                "worker": n.worker,
                "alive": description is not None,
                "killed": n.index in killed,
                "links": linked,
            }
        )
    return {
        "nodes": nodes,
        "links": sorted([i, j] for i, j in links),
        "workers": [
            {
                "index": w.index,
                "pid": w.pid,
                "control": w.control,
                "running": launcher.worker_alive(w.pid),
            }
            for w in manifest.workers
        ],
        "streams": [
            {"key": key.hex(), "members": count, "roots": roots.get(key, [])}
            for key, count in members.most_common()
        ],
    }


def _text(node_id: Any) -> str:
    return node_id_text(bytes(node_id))


def _some(indices: list[int], limit: int = 12) -> str:
    shown = ", ".join(map(str, indices[:limit]))
    return shown + (f" ... (+{len(indices) - limit})" if len(indices) > limit else "")


def _trio(function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``trio.run``, with a user's error (a bad option found inside a nursery) unwrapped
    from its exception group so that the command line shows it as one line."""
    try:
        return trio.run(function, *args)
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1 and isinstance(leaves[0], ValueError | OSError | ClientError):
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for error in group.exceptions:
        out.extend(_leaves(error) if isinstance(error, BaseExceptionGroup) else [error])
    return out


def _say(line: str) -> None:
    print(line, flush=True)
