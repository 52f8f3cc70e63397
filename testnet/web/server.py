"""``overlay testnet web``: a live view of a running testnet in a browser.

Theory of operation. The server follows each worker of the testnet (``testnet.control``'s
``watch``): every worker pushes its nodes' changes, a few times a second at most, and only
what changed. ``LiveView`` (``testnet.web.model``) keeps the whole picture and turns
each change into events, which go to every open page over server-sent events
(``GET /events``): first a snapshot, then the events as they come. A page that reads too
slowly is cut off (its queue is bounded) and its browser reconnects by itself, to a fresh
snapshot. So the testnet pays for the view once per change, whatever the number of pages,
and never for a node that nothing changed on.

Parts, and why: Hypercorn serves the ASGI application below on trio, the testnet's own
event loop, so one process follows the workers, runs the page's clients and serves HTTP
without threads; it is maintained, speaks HTTP/1.1 and HTTP/2, and brings nothing else.
The application is a small router over plain ASGI: five JSON endpoints and a stream need
no framework. The page is one HTML file, one script and one style sheet, shipped in the
package (``testnet/web/static``), drawn on canvas with no library and no build step.

Safety. It listens on loopback only (``serve`` refuses anything else). A request whose Host
header is not a loopback name is refused, so a web page elsewhere cannot reach it by DNS
rebinding. Every action (``POST /api/...``) needs the token printed at start, sent as the
``X-Overlay-Token`` header: another site's form cannot send one, and another user of the
machine does not know it. Every request body is bounded and checked; a bad one gets a 4xx
answer naming the field at fault. The testnet's workers are only read (``watch``) and
asked what ``overlay testnet kill`` and ``restart`` ask, so the view cannot break one.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import trio

from testnet.control import WATCH_QUIET, ControlError, call_async
from testnet.manifest import Manifest, WorkerEntry
from testnet.web.activity import Activity, ActivityError
from testnet.web.model import Event, LiveView
from testnet.web.one_node import follow_node

log = logging.getLogger("testnet.web")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8780

# Event batches one page may have waiting; past that it is cut off and reconnects.
PAGE_QUEUE = 512

# The largest request body the actions take: a few small JSON fields.
MAX_BODY = 16 * 1024

# How long a page's stream stays silent before a comment line keeps proxies and the
# browser from timing it out.
KEEPALIVE = 15.0

# A worker silent this long (it sends a line every WATCH_QUIET seconds) is wedged or gone.
WORKER_SILENT = 3 * WATCH_QUIET

# How soon to look for a worker again after losing it.
RETRY = 1.0

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


# Hypercorn is an optional extra: a node needs none of it.
WEB_MISSING = "the web view needs Hypercorn: pip install 'overlay[web]' (or pip install hypercorn)"


class WebMissing(ValueError):
    """Hypercorn is not installed; the message says how to install it."""


class WebError(ValueError):
    """A request refused; ``status`` is its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def loopback_only(host: str) -> str:
    """``host`` if it is a loopback address or ``localhost``; ValueError otherwise."""
    if host == "localhost":
        return host
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise ValueError(
        f"--host {host}: the web view listens on loopback only (127.0.0.1, ::1 or localhost)"
    )


class WebView:
    """The ASGI application and the tasks that keep it current (see the module notes)."""

    def __init__(
        self,
        manifest: Manifest,
        directory: str,
        token: str | None = None,
        *,
        one_node: str | None = None,
    ) -> None:
        """A view of the testnet ``manifest`` names (launched in ``directory``), or with
        ``one_node`` (a client address) a read-only view of that node alone
        (``testnet.web.one_node``; ``manifest`` from its ``manifest_of``)."""
        self.view = LiveView(manifest)
        self.one_node = one_node
        self.token = token or secrets.token_urlsafe(24)
        self._directory = directory
        self._pages: set[trio.MemorySendChannel[list[Event]]] = set()
        self._activity: Activity | None = None
        self.workers_following = 0
        self._static = {
            path: (resources.files("testnet.web").joinpath("static", name).read_bytes(), kind)
            for path, (name, kind) in STATIC.items()
        }

    async def run(self, nursery: trio.Nursery) -> None:
        """Start following the workers and the page's activity, in ``nursery``."""
        self._activity = Activity(self.view, nursery, self._say, self._broadcast)
        if self.one_node is not None:
            say = functools.partial(self._say, "node", stream=None)
            nursery.start_soon(follow_node, self.view, self.one_node, self._broadcast, say)
        for worker in self.view.manifest.workers:
            nursery.start_soon(self._follow, worker)
        nursery.start_soon(self._rates)

    # --- following the testnet ----------------------------------------------------------

    async def _follow(self, worker: WorkerEntry) -> None:
        """Apply ``worker``'s watch lines for as long as the server runs, reconnecting
        when it goes away; meanwhile its nodes show dead."""
        host, _, port = worker.control.rpartition(":")
        lost = False
        while True:
            try:
                stream = await trio.open_tcp_stream(host, int(port))
            except OSError:
                stream = None
            if stream is not None:
                async with stream:
                    try:
                        await stream.send_all(b'{"op": "watch"}\n')
                        self.workers_following += 1
                        if lost:
                            self._say("worker", f"worker {worker.index} answers again", None)
                        lost = False
                        try:
                            await self._read_watch(stream)
                        finally:
                            self.workers_following -= 1
                    except (OSError, trio.BrokenResourceError):
                        pass
                    except ValueError as error:  # (a worker of another version, say)
                        log.warning("worker %d sent a bad watch line: %s", worker.index, error)
            if not lost:
                lost = True
                first, last = worker.nodes
                self._broadcast(self.view.mark_dead(trio.current_time(), range(first, last)))
                self._say("worker", f"worker {worker.index} does not answer", None)
            await trio.sleep(RETRY)

    async def _read_watch(self, stream: trio.SocketStream) -> None:
        buffer = b""
        while True:
            with trio.move_on_after(WORKER_SILENT):
                data = await stream.receive_some(1 << 20)
                if not data:
                    return
                buffer += data
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    answer = json.loads(line)
                    watch = answer.get("watch") if isinstance(answer, dict) else None
                    self._broadcast(self.view.apply(trio.current_time(), watch))
                # A line can be long (a worker's first look), but not endless.
                if len(buffer) > (64 << 20):
                    raise ValueError("a watch line longer than 64 MiB")
                continue
            return  # silent past WORKER_SILENT

    async def _rates(self) -> None:
        while True:
            await trio.sleep(1.0)
            rates = self.view.rates(trio.current_time())
            if rates["rates"]:
                self._broadcast([rates])

    def _say(self, kind: str, text: str, stream: str | None) -> None:
        event = {
            "type": "log",
            "t": trio.current_time(),
            "kind": kind,
            "node": None,
            "stream": stream,
            "text": text,
        }
        self.view.log.append(event)
        self._broadcast([event])

    def _broadcast(self, events: list[Event]) -> None:
        if not events:
            return
        for page in list(self._pages):
            try:
                page.send_nowait(events)
            except trio.WouldBlock:
                page.close()  # too slow: its browser reconnects to a fresh snapshot
                self._pages.discard(page)
            except trio.ClosedResourceError:
                self._pages.discard(page)

    # --- HTTP ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                kind = (await receive())["type"]
                if kind == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif kind == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            await self._route(scope, receive, send)
        except WebError as error:
            await _json(send, error.status, {"ok": False, "error": str(error)})

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        _check_host(headers.get("host", ""))
        method, path = scope["method"], scope["path"]
        if path in self._static:
            _allow(method, "GET")
            body, kind = self._static[path]
            await _reply(send, 200, kind, body)
        elif path == "/events":
            _allow(method, "GET")
            await self._events(receive, send)
        elif path == "/api/state":
            _allow(method, "GET")
            await _json(send, 200, self._state())
        elif path.startswith("/api/"):
            _allow(method, "POST")
            if self.one_node is not None:
                raise WebError(
                    403, f"a read-only view of the node at {self.one_node}: it takes no actions"
                )
            supplied = headers.get("x-overlay-token", "")
            if not secrets.compare_digest(supplied.encode(), self.token.encode()):
                raise WebError(
                    403,
                    "a missing or wrong X-Overlay-Token: use the page's link "
                    "printed by `overlay testnet web`",
                )
            request = await _body(receive)
            await _json(send, 200, await self._act(path[len("/api/") :], request))
        else:
            raise WebError(404, f"no such page: {path}")

    def _state(self) -> dict[str, Any]:
        activity = self._activity
        return {
            **self.view.snapshot(),
            "workers_following": self.workers_following,
            "one_node": self.one_node,
            "subscribers": 0 if activity is None else len(activity.subscribers),
        }

    async def _act(self, action: str, request: dict[str, Any]) -> dict[str, Any]:
        activity = self._activity
        assert activity is not None
        where = "" if self._directory == "testnet-data" else f" --dir {self._directory}"
        try:
            if action in ("kill", "restart"):
                node = request.get("node")
                manifest = self.view.manifest
                if (
                    not isinstance(node, int)
                    or isinstance(node, bool)
                    or not (0 <= node < len(manifest.nodes))
                ):
                    raise ActivityError(
                        f"node: a node index from 0 to {len(manifest.nodes) - 1}, got {node!r}"
                    )
                try:
                    await call_async(manifest.worker_of(node).control, action, node=node)
                except ControlError as error:
                    raise WebError(502, f"{action} node {node}: {error}") from None
                self._say(action, f"node {node}: {action} asked from the page", None)
                return {"ok": True, "command": f"overlay testnet {action} {node}{where}"}
            if action == "subscribe":
                name, count = request.get("stream"), request.get("count", 1)
                nodes = activity.subscribe(name, count)
                self._say(
                    "client",
                    f"{len(nodes)} subscribers of '{name}' started on nodes {_some(nodes)}",
                    activity.stream(name).key.hex(),
                )
                commands = [
                    f"overlay subscribe {name} --node $(overlay testnet client {n}{where}) &"
                    for n in nodes
                ]
                return {"ok": True, "nodes": nodes, "command": "\n".join(commands)}
            if action == "publish":
                name, rate = request.get("stream"), request.get("rate", 10)
                node = activity.publish(name, rate, request.get("count", 0), request.get("node"))
                self._say(
                    "client",
                    f"publishing to '{name}' at {rate}/s through node {node}",
                    activity.stream(name).key.hex(),
                )
                return {
                    "ok": True,
                    "node": node,
                    "command": (
                        f"while sleep {1 / rate:.3g}; do date; done | overlay publish {name} "
                        f"--node $(overlay testnet client {node}{where})"
                    ),
                }
            if action == "stop":
                stopped = activity.stop()
                self._say("client", f"{stopped} publishers stopped from the page", None)
                return {"ok": True, "stopped": stopped, "command": "(Ctrl-C the publishers)"}
        except ActivityError as error:
            raise WebError(400, str(error)) from None
        raise WebError(404, f"no such action: {action} (kill, restart, subscribe, publish, stop)")

    async def _events(self, receive: Receive, send: Send) -> None:
        """One page's event stream: a snapshot, then every batch of events, until the page
        goes or falls too far behind."""
        sender, receiver = trio.open_memory_channel[list[Event]](PAGE_QUEUE)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        self._pages.add(sender)
        try:
            async with trio.open_nursery() as nursery:

                async def gone() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    nursery.cancel_scope.cancel()

                nursery.start_soon(gone)
                snapshot = _event([{**self._state(), "type": "snapshot"}])
                await send({"type": "http.response.body", "body": snapshot, "more_body": True})
                while True:
                    with trio.move_on_after(KEEPALIVE) as quiet:
                        try:
                            batch = await receiver.receive()
                        except trio.EndOfChannel:
                            break  # cut off as too slow
                    body = b": keepalive\n\n" if quiet.cancelled_caught else _event(batch)
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                nursery.cancel_scope.cancel()
        finally:
            self._pages.discard(sender)
            sender.close()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def serve(
    web: WebView,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``web`` on ``host:port`` (loopback only) until cancelled; reports the page's
    address (with its token) through ``task_status``. OSError if the port is taken."""
    loopback_only(host)
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve
    except ImportError:
        raise WebMissing(WEB_MISSING) from None
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("testnet.web.http")
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        await web.run(nursery)
        binds = await nursery.start(hypercorn_serve, web, config)
        task_status.started(f"{binds[0]}/#token={web.token}")


def _check_host(host: str) -> None:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]")
    try:
        loopback_only(name)
    except ValueError:
        raise WebError(403, f"Host {host!r} is not this machine's loopback: refused") from None


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise WebError(405, f"{method} is not allowed here: use {allowed}")


async def _body(receive: Receive) -> dict[str, Any]:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_BODY:
            raise WebError(413, f"a request body over {MAX_BODY} bytes")
        if not message.get("more_body"):
            break
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        raise WebError(400, "the request body is not JSON") from None
    if not isinstance(request, dict):
        raise WebError(400, "the request body must be a JSON object")
    return request


async def _reply(send: Send, status: int, kind: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", kind.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                (b"x-content-type-options", b"nosniff"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _json(send: Send, status: int, value: dict[str, Any]) -> None:
    await _reply(send, status, "application/json", json.dumps(value).encode())


def _event(batch: list[Event]) -> bytes:
    return b"data: " + json.dumps(batch, separators=(",", ":")).encode() + b"\n\n"


def _some(nodes: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, nodes[:limit]))
    return shown + (f" (+{len(nodes) - limit})" if len(nodes) > limit else "")
