"""The web view's server over real TCP: a worker's ``watch`` on its control port, the HTTP
endpoints a page uses, and the read-only view of one node, against real nodes in a
``NodePool`` in this process."""

from __future__ import annotations

import dataclasses
import itertools
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
import trio
from loopback_nets import FAST, LIMIT

from keyspace.location import distance
from keyspace.stream_key import StreamKey
from overlay.client.aio import open_client
from overlay.runtime.config import Address, PeerAddress, RuntimeConfig
from overlay.runtime.identity import Identity, node_id_text
from testnet.control import serve_control
from testnet.manifest import Manifest, NodeEntry, WorkerEntry
from testnet.pool import NodePool
from testnet.survey import describe_one
from testnet.web import following, one_node
from testnet.web import server as web
from testnet.web.model import LiveView
from testnet.web.one_node import NodeFollower, manifest_of


@dataclasses.dataclass
class Net:
    pool: NodePool
    manifest: Manifest
    nursery: trio.Nursery
    control: trio.CancelScope = dataclasses.field(default_factory=trio.CancelScope)
    control_closed: trio.Event = dataclasses.field(default_factory=trio.Event)

    async def control_port(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Serve the worker's control port, on the manifest's port, until ``stop_control``."""
        port = int(self.manifest.workers[0].control.rpartition(":")[2])
        listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
        try:
            with trio.CancelScope() as self.control:
                task_status.started()
                await serve_control(listeners, self.pool, trio.CancelScope())
        finally:
            for listener in listeners:
                listener.socket.close()
            self.control_closed.set()

    async def stop_control(self) -> None:
        """The worker's control port goes away (its watch connections with it), and its
        port is free once this returns."""
        self.control.cancel()
        await self.control_closed.wait()


@asynccontextmanager
async def three_nodes() -> AsyncIterator[Net]:
    """Nodes 1 and 2 linked to node 0, in one pool whose control port listens as a
    worker's does; the manifest names them as ``overlay testnet up`` would."""
    async with NodePool() as pool, trio.open_nursery() as nursery:
        ids = [Identity.generate() for _ in range(3)]
        base = RuntimeConfig(
            network="testnet",
            identity_work=0,
            listen=Address("127.0.0.1", 0),
            client=Address("127.0.0.1", 0),
            core=FAST,
        )
        hub = await pool.start(0, ids[0], base)
        to_hub = (PeerAddress(hub.peer_address, ids[0].public),)
        nodes = [hub] + [
            await pool.start(i, ids[i], dataclasses.replace(base, connect=to_hub)) for i in (1, 2)
        ]
        await hub.host.wait_until(lambda: len(list(hub.host.core.peers)) == 2)
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            control = f"127.0.0.1:{free.getsockname()[1]}"
        entries = tuple(
            NodeEntry(
                i,
                node_id_text(ids[i].public),
                n.host.core.location,
                str(n.peer_address),
                str(n.client_address),
                0,
                (),
            )
            for i, n in enumerate(nodes)
        )
        worker = WorkerEntry(0, 0, control, "log", (0, 3))
        net = Net(pool, Manifest(0, 2, "testnet", entries, (worker,), 0.0, 0.0), nursery)
        await nursery.start(net.control_port)
        yield net
        nursery.cancel_scope.cancel()


class Lines:
    """Newline-separated JSON from a stream, one object at a time."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> dict[str, object]:
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some(1 << 16)
            assert data, "the worker closed the watch"
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer: dict[str, object] = json.loads(line)
        return answer


async def test_a_watch_sends_every_node_first_then_only_what_changed() -> None:
    """A watcher's first line carries all three nodes, linked; when node 2 is killed the
    next line that names node 2 says it is dead, and names no node that did not change."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net:
            host, _, port = net.manifest.workers[0].control.rpartition(":")
            async with await trio.open_tcp_stream(host, int(port)) as stream:
                await stream.send_all(b'{"op": "watch"}\n')
                lines = Lines(stream)
                first = await lines.next()
                assert first["ok"] is True
                look = first["watch"]
                assert isinstance(look, dict)
                nodes = {n["node"]: n for n in look["nodes"]}
                assert sorted(nodes) == [0, 1, 2]
                assert all(n["alive"] for n in nodes.values())
                assert len(nodes[0]["peers"]) == 2
                await net.pool.kill(2)
                while True:
                    look = (await lines.next())["watch"]
                    assert isinstance(look, dict)
                    named = {n["node"]: n for n in look["nodes"]}
                    if 2 in named:
                        break
                assert named[2] == {"node": 2, "alive": False}
                # Node 0 lost a peer, so it changed too; node 1 did not (it still has its one).
                assert 1 not in named or named[1]["peers"] != nodes[1]["peers"]


async def _open_events(address: str) -> trio.SocketStream:
    """A connection that has asked the view at ``address`` for its event stream (HTTP/1.0:
    the body is the stream itself, no chunking)."""
    host, port = address.removeprefix("http://").split("/")[0].rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(f"GET /events HTTP/1.0\r\nHost: {host}:{port}\r\n\r\n".encode())
    return stream


async def _http(
    address: str,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, object]]:
    """One HTTP/1.0 request (the answer ends with the connection); its status and JSON."""
    host, port = address.removeprefix("http://").split("/")[0].rsplit(":", 1)
    sent = {"Host": f"{host}:{port}", "Content-Length": str(len(body)), **(headers or {})}
    head = f"{method} {path} HTTP/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items())
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(head.encode() + b"\r\n" + body)
        answer = b""
        while data := await stream.receive_some(1 << 16):
            answer += data
    status_line, _, rest = answer.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    status = int(status_line.split()[1])
    kind = rest.lower()
    return status, json.loads(payload) if b"application/json" in kind else {"body": payload}


async def test_the_server_answers_reads_and_refuses_bad_actions_with_a_reason() -> None:
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            view = web.WebView(net.manifest, "testnet-data", token="secret")
            address = await nursery.start(web.serve, view, "127.0.0.1", 0)
            assert address.endswith("/#token=secret")
            token = {"X-Overlay-Token": "secret"}

            status, page = await _http(address, "GET", "/")
            assert status == 200 and b'<canvas id="ring"' in page["body"]  # type: ignore[operator]
            status, state = await _http(address, "GET", "/api/state")
            assert status == 200 and len(state["nodes"]) == 3  # type: ignore[arg-type]

            refusals = [
                (("POST", "/api/kill", b'{"node": 1}', {}), 403, "X-Overlay-Token"),
                (("POST", "/api/kill", b'{"node": 1}', {"X-Overlay-Token": "guess"}), 403, "Token"),
                (("POST", "/api/kill", b"{node", token), 400, "not JSON"),
                (("POST", "/api/kill", b"[1]", token), 400, "JSON object"),
                (("POST", "/api/kill", b'{"node": 3}', token), 400, "from 0 to 2"),
                (("POST", "/api/kill", b'{"node": true}', token), 400, "from 0 to 2"),
                (("POST", "/api/kill", b" " * 20000, token), 413, "over"),
                (("POST", "/api/launch", b"{}", token), 404, "no such action"),
                (("GET", "/api/kill", b"", token), 405, "use POST"),
                (("POST", "/api/publish", b'{"stream": "s", "rate": 0}', token), 400, "rate"),
                (("POST", "/api/publish", b'{"stream": "", "rate": 1}', token), 400, "stream"),
                (("POST", "/api/subscribe", b'{"stream": "s", "count": 9}', token), 400, "count"),
                (("GET", "/api/state", b"", {"Host": "attacker.example:80"}), 403, "loopback"),
                (("POST", "/api/kill", b"[" * 4000, token), 400, "not JSON"),
                (("GET", "/api/state", b"", {"Sec-Fetch-Site": "cross-site"}), 403, "own page"),
                (("GET", "/events", b"", {"Origin": "http://attacker.example"}), 403, "own page"),
            ]
            for (method, path, body, headers), code, reason in refusals:
                status, answer = await _http(address, method, path, body, headers)
                assert (status, answer["ok"]) == (code, False), (path, body, answer)
                assert reason in str(answer["error"]), answer
            assert net.pool.alive(1), "a refused request changed the testnet"

            status, answer = await _http(address, "POST", "/api/kill", b'{"node": 1}', token)
            assert (status, answer) == (200, {"ok": True, "command": "overlay testnet kill 1"})
            assert not net.pool.alive(1)
            nursery.cancel_scope.cancel()


async def test_a_page_gets_a_snapshot_then_the_events_of_a_kill() -> None:
    """The event stream starts with a snapshot of all three nodes; a kill asked through the
    API then arrives on it as node 2's dead record and a log line."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            view = web.WebView(net.manifest, "testnet-data", token="t")
            address = await nursery.start(web.serve, view, "127.0.0.1", 0)
            async with await _open_events(address) as stream:
                buffer = b""

                async def event_batches() -> AsyncIterator[list[dict[str, object]]]:
                    nonlocal buffer
                    while True:
                        while b"\n\n" not in buffer:
                            data = await stream.receive_some(1 << 16)
                            assert data, "the event stream ended"
                            buffer += data
                        chunk, buffer = buffer.split(b"\n\n", 1)
                        if b"data: " in chunk:
                            yield json.loads(chunk.split(b"data: ", 1)[1])

                batches = event_batches()
                first = await anext(batches)
                assert first[0]["type"] == "snapshot"
                while view.workers_following == 0:
                    await trio.sleep(0.01)
                await _http(address, "POST", "/api/kill", b'{"node": 2}', {"X-Overlay-Token": "t"})
                dead = said = False
                async for batch in batches:
                    for event in batch:
                        dead |= event.get("node") == 2 and event.get("alive") is False
                        said |= event.get("text") == "node 2 died"
                    if dead and said:
                        break
            nursery.cancel_scope.cancel()


async def test_a_view_of_one_node_shows_it_its_peers_and_its_part_of_a_tree() -> None:
    """``overlay web --node``: node 1 subscribes a client to a stream; the view of node 1
    alone shows node 1 (index 0) linked to its one peer, carrying the stream with that
    peer as its parent, and refuses every action as read-only."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            address = net.manifest.nodes[1].client
            where = [n.location for n in net.manifest.nodes]
            # A stream whose key is closest to node 0, node 1's one peer: its tree's root.
            name = next(
                f"seen-{i}"
                for i in itertools.count()
                if min(range(3), key=lambda n: distance(where[n], _location(f"seen-{i}"))) == 0
            )
            async with open_client(address) as client, await client.subscribe(name):
                description = await describe_one(address)
                view = web.WebView(manifest_of(address, description), "", one_node=address)
                page = await nursery.start(web.serve, view, "127.0.0.1", 0)

                def streams_of_node_0(state: dict[str, object]) -> dict[str, dict[str, object]]:
                    nodes = state["nodes"]
                    assert isinstance(nodes, list)
                    return dict(nodes[0]["streams"])

                while True:
                    _, state = await _http(page, "GET", "/api/state")
                    if streams_of_node_0(state):
                        break
                    await trio.sleep(0.05)
                assert state["one_node"] == address
                nodes = state["nodes"]
                assert isinstance(nodes, list) and len(nodes) == 2
                (stream,) = streams_of_node_0(state).values()
                assert stream["state"] == "joined" and stream["parent"] == 1
                assert nodes[0]["peers"] == [1] and nodes[1]["location"] == pytest.approx(
                    net.manifest.nodes[0].location
                )
                status, answer = await _http(page, "POST", "/api/kill", b'{"node": 0}')
                assert status == 403 and "read-only" in str(answer["error"])
                assert net.pool.alive(1)
            nursery.cancel_scope.cancel()


def _location(name: str) -> float:
    return StreamKey.parse(name).location


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"id": b"x" * 31, "location": 0.5, "peers": [], "streams": []},
        {"id": b"x" * 32, "location": 1.0, "peers": [], "streams": []},
        {"id": b"x" * 32, "location": 0.5, "peers": [{"id": b"y" * 32}], "streams": []},
        {"id": b"x" * 32, "location": 0.5, "peers": [], "streams": [{"key": b"k"}]},
        {
            "id": b"x" * 32,
            "location": 0.5,
            "peers": [],
            "streams": [{"key": b"k" * 32, "state": "joined", "parent": None, "children": [b"c"]}],
        },
    ],
)
def test_a_description_that_is_not_a_nodes_is_refused(bad: dict[str, object]) -> None:
    manifest = manifest_of("127.0.0.1:1", {"id": b"x" * 32, "location": 0.5})
    view = LiveView(manifest)
    before = view.snapshot()
    with pytest.raises(ValueError):
        NodeFollower(view).diff(bad)
    assert view.snapshot() == before


async def test_a_line_that_nests_too_deep_is_refused_and_the_worker_goes_on() -> None:
    """A control line of 4,000 ``[`` makes the JSON parser recurse past its limit: the
    worker answers that it is no request and keeps its nodes and its port."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net:
            host, _, port = net.manifest.workers[0].control.rpartition(":")
            async with await trio.open_tcp_stream(host, int(port)) as stream:
                lines = Lines(stream)
                await stream.send_all(b"[" * 4000 + b"\n")
                answer = await lines.next()
                assert answer["ok"] is False and "not a control request" in str(answer["error"])
                await stream.send_all(b'{"op": "status"}\n')
                assert (await lines.next())["alive"] == [0, 1, 2]


async def test_a_page_that_does_not_read_is_cut_off() -> None:
    """A page that opens the event stream and never reads: once its queue is full it is
    cut off, and the view keeps no task, socket or queue for it."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            view = web.WebView(net.manifest, "testnet-data")
            address = await nursery.start(web.serve, view, "127.0.0.1", 0)
            async with await _open_events(address):
                while view.pages == 0:
                    await trio.sleep(0.01)
                big = {"type": "log", "text": "x" * 10_000}
                while view.pages:
                    view.broadcast([big])
                    await trio.sleep(0)
            nursery.cancel_scope.cancel()


async def test_a_lost_worker_is_said_once_and_its_return_too() -> None:
    """The worker's control port goes away: the page is told once that the worker does not
    answer (not once per node) and sees its nodes dead; when the port is back, it is told
    so and sees them alive again."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            view = web.WebView(net.manifest, "testnet-data")
            await nursery.start(web.serve, view, "127.0.0.1", 0)

            async def until(condition: Callable[[], bool]) -> None:
                while not condition():
                    await trio.sleep(0.01)

            def alive() -> list[bool]:
                return [record["alive"] for record in view.view.nodes.values()]

            await until(lambda: view.workers_following == 1 and all(alive()))
            await net.stop_control()
            await until(lambda: not any(alive()))
            said = [e["text"] for e in view.view.log]
            assert [t for t in said if "worker 0" in t] == [
                "worker 0 does not answer: its nodes 0 to 2 are shown dead until it does"
            ]
            assert not any("died" in t for t in said)
            await net.nursery.start(net.control_port)
            await until(lambda: all(alive()))
            assert view.view.log[-1]["text"] == "worker 0 answers again"
            nursery.cancel_scope.cancel()


def test_a_peer_no_longer_linked_leaves_the_nodes_trees_and_the_view_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    own, a, b = b"o" * 32, b"a" * 32, b"b" * 32
    view = LiveView(manifest_of("127.0.0.1:1", {"id": own, "location": 0.5}))
    follower = NodeFollower(view)
    key = b"k" * 32
    stream = {"key": key, "state": "joined", "parent": a, "children": [b], "high": 3}
    first = {
        "id": own,
        "location": 0.5,
        "peers": [{"id": a, "location": 0.1}, {"id": b, "location": 0.2}],
        "streams": [stream],
    }
    view.apply(1.0, follower.diff(first))
    assert view.nodes[2]["streams"][key.hex()]["parent"] == 0  # b, our child
    second = {
        **first,
        "peers": [{"id": a, "location": 0.1}],
        "streams": [{**stream, "children": []}],
    }
    view.apply(2.0, follower.diff(second))
    assert (
        view.nodes[2]["alive"] and view.nodes[2]["streams"] == {} and view.nodes[2]["peers"] == []
    )
    assert view.nodes[0]["peers"] == [1]
    monkeypatch.setattr(one_node, "MAX_KNOWN", 4)
    many = [{"id": bytes([i]) * 32, "location": i / 100} for i in range(10, 20)]
    view.apply(3.0, follower.diff({**second, "peers": many}))
    assert len(view.nodes) == 4


async def test_page_clients_whose_node_dies_end_with_a_line_each() -> None:
    """A publisher and a subscriber the page started on node 2: node 2 is killed under
    them; each ends and says so on the page's log, and the view goes on."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            view = web.WebView(net.manifest, "testnet-data", token="t")
            address = await nursery.start(web.serve, view, "127.0.0.1", 0)
            token = {"X-Overlay-Token": "t"}
            body = b'{"stream": "s", "rate": 50, "node": 2}'
            status, answer = await _http(address, "POST", "/api/publish", body, token)
            assert status == 200 and answer["node"] == 2, answer
            assert "overlay publish s --node $(overlay testnet client 2)" in str(answer["command"])
            await _http(address, "POST", "/api/subscribe", b'{"stream": "s", "count": 3}', token)
            while view.view.nodes[2]["streams"] == {}:
                await trio.sleep(0.01)
            await net.pool.kill(2)

            def said() -> list[str]:
                return [str(e["text"]) for e in view.view.log]

            while not any("the publisher on node 2 ended" in t for t in said()):
                await trio.sleep(0.01)
            while not any("the subscriber on node 2 ended" in t for t in said()):
                await trio.sleep(0.01)
            status, _ = await _http(address, "GET", "/api/state")
            assert status == 200
            nursery.cancel_scope.cancel()


async def test_a_wedged_worker_is_said_once_and_never_taken_for_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker whose kernel accepts connections but which never sends a line (stopped, or
    another program on its port): the view says once that it does not answer, and does not
    say it answers again each time a connection opens."""
    monkeypatch.setattr(following, "WORKER_SILENT", 0.2)
    monkeypatch.setattr(following, "RETRY", 0.05)
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            await net.stop_control()
            port = int(net.manifest.workers[0].control.rpartition(":")[2])
            mute = await trio.open_tcp_listeners(port, host="127.0.0.1")
            accepted: list[trio.SocketStream] = []

            async def hold(stream: trio.SocketStream) -> None:
                accepted.append(stream)
                await trio.sleep_forever()

            nursery.start_soon(trio.serve_listeners, hold, mute)
            view = web.WebView(net.manifest, "testnet-data")
            await nursery.start(web.serve, view, "127.0.0.1", 0)
            while len(accepted) < 5:  # five connections, each silent past WORKER_SILENT
                await trio.sleep(0.01)
            said = [str(e["text"]) for e in view.view.log]
            assert [t for t in said if "worker 0" in t] == [
                "worker 0 does not answer: its nodes 0 to 2 are shown dead until it does"
            ]
            assert view.workers_following == 0
            nursery.cancel_scope.cancel()


async def test_pages_past_the_limit_are_refused_and_stopping_publishers_stops_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(web, "MAX_PAGES", 1)
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            view = web.WebView(net.manifest, "testnet-data", token="t")
            address = await nursery.start(web.serve, view, "127.0.0.1", 0)
            async with await _open_events(address):
                while view.pages == 0:
                    await trio.sleep(0.01)
                status, answer = await _http(address, "GET", "/events")
                assert status == 503 and "close some" in str(answer["error"])

            token = {"X-Overlay-Token": "t"}
            body = b'{"stream": "s", "rate": 200, "node": 1}'
            assert (await _http(address, "POST", "/api/publish", body, token))[0] == 200
            key = StreamKey.parse("s").key.hex()
            activity = view._activity
            assert activity is not None
            while activity.published.get(key, 0) < 5:
                await trio.sleep(0.01)
            status, answer = await _http(address, "POST", "/api/stop", b"{}", token)
            assert (status, answer["stopped"]) == (200, 1)
            # The publisher's client leaves node 1: nothing more is published.
            host_1 = net.pool.node(1).host
            while host_1.describe()["clients"]:
                await trio.sleep(0.01)
            assert view._activity is activity and not activity.subscribers
            nursery.cancel_scope.cancel()


async def test_a_node_that_does_not_answer_in_time_is_said_once_and_shown_dead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one-node view waits ``ANSWER_WITHIN`` for each describe: a node slower than that
    is said once not to answer and shown dead, and the view goes on asking."""
    with trio.fail_after(LIMIT):
        async with three_nodes() as net, trio.open_nursery() as nursery:
            address = net.manifest.nodes[1].client
            description = await describe_one(address)
            monkeypatch.setattr(one_node, "ANSWER_WITHIN", 0.0)
            view = web.WebView(manifest_of(address, description), "", one_node=address)
            await nursery.start(web.serve, view, "127.0.0.1", 0)
            while not view.view.log:
                await trio.sleep(0.01)
            (line,) = [str(e["text"]) for e in view.view.log]
            assert line == f"the node at {address} does not answer: no answer within 0.0 s"
            assert view.view.nodes[0]["alive"] is False
            nursery.cancel_scope.cancel()
