"""``overlay testnet web``: a live view of a running testnet in a browser.

Theory of operation. The server follows each worker of the testnet (``testnet.control``'s
``watch``): every worker pushes its nodes' changes, a few times a second at most, and only
what changed. ``LiveView`` (``testnet.web.model``) keeps the whole picture and turns each
change into events, which go to every open page over server-sent events (``GET /events``):
first a snapshot, then the events as they come. A page that reads too slowly is cut off:
its queue (bounded) is dropped as soon as it is full, its stream ends once a send to it
returns, at most ``MAX_PAGES`` pages follow at once, and a browser reconnects by itself, to
a fresh snapshot. So the testnet pays for the view once per change, whatever the number of
pages, and never for a node that nothing changed on.

Parts, and why: Hypercorn serves the ASGI application below on trio, the testnet's own
event loop, so one process follows the workers, runs the page's clients and serves HTTP
without threads; it is maintained, speaks HTTP/1.1 and HTTP/2, and brings nothing else. The
application is a small router over plain ASGI: three static files, a state, a stream and
one action endpoint need no framework. The page is one HTML file, one script and one style
sheet, shipped in the package (``testnet/web/static``), drawn on canvas with no library and
no build step.

Safety. It listens on loopback only (``serve`` refuses anything else). A request whose Host
header is not a loopback name is refused, so a web page elsewhere cannot reach it by DNS
rebinding; the state and the stream refuse a browser's cross-site request (its
``Sec-Fetch-Site`` or ``Origin`` says so), so another site's page cannot hold streams open.
Every action (``POST /api/...``) needs the token printed at start, sent as the
``X-Overlay-Token`` header: another site's form cannot send one (no CORS answer lets it),
and another user of the machine does not know it. Every request body is bounded and
checked; a bad one gets a 4xx answer naming the field at fault, and anything else that goes
wrong in a request is a 500 and one warning line, within a budget. The testnet's workers
are only read (``watch``) and asked what ``overlay testnet kill`` and ``restart`` ask, so
the view cannot break one.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import trio

from overlay.runtime.log_budget import LogBudget
from testnet.control import ControlError
from testnet.manifest import Manifest
from testnet.web.activity import ACTIONS, Activity, ActivityError
from testnet.web.following import follow_worker
from testnet.web.model import Event, LiveView
from testnet.web.one_node import follow_node

log = logging.getLogger("testnet.web")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8780

# Event batches one page may have waiting; past that it is cut off and reconnects.
PAGE_QUEUE = 512

# Pages following at once: a page stuck in a send (a suspended tab that stays connected)
# holds its socket until the kernel gives up on it, so their number is bounded.
MAX_PAGES = 32

# The longest one send to a page may block (its socket full) before the page is cut off.
PAGE_SEND = 10.0

# The largest request body the actions take: a few small JSON fields.
MAX_BODY = 16 * 1024

# How long a page's stream stays silent before a comment line keeps proxies and the
# browser from timing it out.
KEEPALIVE = 15.0

STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/app.css": ("app.css", "text/css; charset=utf-8"),
}

# Hypercorn is an optional extra: a node needs none of it.
WEB_MISSING = "the web view needs Hypercorn: pip install 'overlay[web]' (or pip install hypercorn)"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Page:
    """A page following the events: its queue and the scope its stream runs in."""

    queue: trio.MemoryReceiveChannel[list[Event]]
    scope: trio.CancelScope


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
        self.workers_following = 0
        self._directory = directory
        self._pages: dict[trio.MemorySendChannel[list[Event]], _Page] = {}
        self._activity: Activity | None = None
        self._warnings = LogBudget(trio.current_time)
        self._static = {
            path: (resources.files("testnet.web").joinpath("static", name).read_bytes(), kind)
            for path, (name, kind) in STATIC.items()
        }

    @property
    def pages(self) -> int:
        """How many pages are following the events now."""
        return len(self._pages)

    async def run(self, nursery: trio.Nursery) -> None:
        """Start following the testnet (or the one node) and the page's activity, in
        ``nursery``."""
        self._activity = Activity(self.view, nursery, self.say, self.broadcast)
        if self.one_node is not None:
            nursery.start_soon(follow_node, self, self.one_node)
        for worker in self.view.manifest.workers:
            nursery.start_soon(follow_worker, self, worker)
        nursery.start_soon(self._rates)

    async def _rates(self) -> None:
        while True:
            await trio.sleep(1.0)
            self.broadcast(self.view.rates(trio.current_time()))

    # --- telling the pages (``testnet.web.following.Feed``) -------------------------------

    def say(self, kind: str, text: str, stream: str | None) -> None:
        event = {
            "type": "log",
            "t": trio.current_time(),
            "kind": kind,
            "node": None,
            "stream": stream,
            "text": text,
        }
        self.view.log.append(event)
        self.broadcast([event])

    def warn(self, text: str) -> None:
        left_out = self._warnings.allow()
        if left_out is not None:
            more = f" ({left_out} warnings left out before this one)" if left_out else ""
            log.warning("%s%s", text, more)

    def broadcast(self, events: list[Event]) -> None:
        if not events:
            return
        for sender, page in list(self._pages.items()):
            try:
                sender.send_nowait(events)
            except trio.WouldBlock:
                # Too slow: its queue is dropped now (a send stuck on a full socket cannot
                # be interrupted), and its browser reconnects to a fresh snapshot.
                page.queue.close()
                page.scope.cancel()
                del self._pages[sender]

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
        except Exception as error:  # no request may take the view down
            self.warn(f"{scope.get('method')} {scope.get('path')!r} failed: {error!r}")
            with contextlib.suppress(Exception):
                await _json(send, 500, {"ok": False, "error": "the web view failed: see its log"})

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
            _same_origin(headers)
            await self._events(receive, send)
        elif path == "/api/state":
            _allow(method, "GET")
            _same_origin(headers)
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
            action = path[len("/api/") :]
            if action not in ACTIONS:
                raise WebError(404, f"no such action: {action} ({', '.join(ACTIONS)})")
            request = await _body(receive)
            assert self._activity is not None
            try:
                answer = await self._activity.act(action, request, self._directory)
            except ActivityError as error:
                raise WebError(400, str(error)) from None
            except ControlError as error:
                raise WebError(502, str(error)) from None
            await _json(send, 200, answer)
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

    async def _events(self, receive: Receive, send: Send) -> None:
        """One page's event stream: a snapshot, then every batch of events, until the page
        goes or falls too far behind (its queue full, or one send blocked ``PAGE_SEND``)."""
        if len(self._pages) >= MAX_PAGES:
            raise WebError(503, f"{MAX_PAGES} pages follow this view already: close some")
        sender, receiver = trio.open_memory_channel[list[Event]](PAGE_QUEUE)

        async def body(data: bytes) -> None:
            with trio.fail_after(PAGE_SEND):
                await send({"type": "http.response.body", "body": data, "more_body": True})

        with trio.CancelScope() as scope:
            self._pages[sender] = _Page(receiver, scope)
            try:
                async with trio.open_nursery() as nursery:

                    async def gone() -> None:
                        while (await receive())["type"] != "http.disconnect":
                            pass
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(gone)
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
                    await body(_event([{**self._state(), "type": "snapshot"}]))
                    while True:
                        with trio.move_on_after(KEEPALIVE) as quiet:
                            batch = await receiver.receive()
                        await body(b": keepalive\n\n" if quiet.cancelled_caught else _event(batch))
            except* (trio.TooSlowError, trio.ClosedResourceError):
                pass  # cut off: a send blocked too long, or ``broadcast`` dropped its queue
            finally:
                self._pages.pop(sender, None)
                sender.close()
                receiver.close()


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
        try:
            binds = await nursery.start(hypercorn_serve, web, config)
        except* OSError as failed:  # (a port in use, say: named here, where it is known)
            error: BaseException = failed
            while isinstance(error, BaseExceptionGroup):  # (as nested as Hypercorn's tasks)
                error = error.exceptions[0]
            assert isinstance(error, OSError)
            reason = error.strerror or str(error)
            message = f"the web view cannot listen on {host}:{port}: {reason}"
            raise OSError(error.errno, message) from None
        task_status.started(f"{binds[0]}/#token={web.token}")


def _check_host(host: str) -> None:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]")
    try:
        loopback_only(name)
    except ValueError:
        raise WebError(403, f"Host {host!r} is not this machine's loopback: refused") from None


def _same_origin(headers: dict[str, str]) -> None:
    """Refuse a browser's request made by another site's page: the state and the stream are
    for this view's own page (and for tools, which send neither header)."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise WebError(403, f"a {site} request: the view answers its own page only")
    origin = headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != headers.get("host"):
        raise WebError(403, f"a request from {origin!r}: the view answers its own page only")


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
    except (ValueError, RecursionError):  # (4,000 ``[`` recurse past the parser's limit)
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
