"""The control port of a testnet worker: kill, restart, status and shutdown, one line each.

A worker (``python -m testnet.worker``) hosts many nodes; the ``overlay testnet`` commands
that act on one node (``kill``, ``restart``) or on the whole worker (``status``, ``down``)
run in other, short-lived processes. They reach the worker over a TCP port on 127.0.0.1
whose address the manifest records. The protocol is one JSON object per line each way,
request then answer, so it can be driven by hand (``nc 127.0.0.1 PORT``) when debugging:

    {"op": "status"}                 -> {"ok": true, "pid": 123, "alive": [...], "dead": [...]}
    {"op": "kill", "node": 5}        -> {"ok": true}
    {"op": "restart", "node": 5}     -> {"ok": true}
    {"op": "shutdown"}               -> {"ok": true}       (then the worker exits)
    {"op": "watch"}                  -> {"ok": true, "watch": {...}} and one such line each
                                        time its nodes change (``testnet.watch``), until
                                        the watcher hangs up

A bad request is answered ``{"ok": false, "error": "..."}`` and the connection stays usable;
the port listens on loopback only, so only local users can reach it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
from typing import Any

import trio

from testnet.pool import NodePool
from testnet.watch import WATCH_INTERVAL, PoolWatch

log = logging.getLogger("testnet.control")

# A request line is a few dozen bytes; anything this long is not a control request.
MAX_LINE = 4096

# A restart rebinds two ports and starts a node: milliseconds. A worker that takes 30 s to
# answer is wedged.
DEFAULT_TIMEOUT = 30.0

# The longest a watched worker stays silent (``_watch``).
WATCH_QUIET = 5.0


class ControlError(RuntimeError):
    """The worker could not be reached or refused the request; the message says which."""


async def serve_control(
    listeners: list[trio.SocketListener], pool: NodePool, shutdown: trio.CancelScope
) -> None:
    """Answer control requests until cancelled; ``shutdown`` is cancelled on request."""

    async def session(stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            while True:
                data = await stream.receive_some(MAX_LINE)
                if not data:
                    return
                buffer += data
                if len(buffer) > MAX_LINE and b"\n" not in buffer:
                    await stream.send_all(_line({"ok": False, "error": "request too long"}))
                    return
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    request = _parse(line)
                    if request is not None and request.get("op") == "watch":
                        await _watch(stream, pool)
                        return
                    answer = await _handle(request, line, pool)
                    await stream.send_all(_line(answer))
                    if answer.get("shutdown"):
                        shutdown.cancel()
                        return

    async def handler(stream: trio.SocketStream) -> None:
        # A caller that goes away mid-answer is its own problem, not the worker's.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await session(stream)

    await trio.serve_listeners(handler, listeners)


def _parse(line: bytes) -> dict[str, Any] | None:
    """The request object on ``line``, or None if it is not one. Any byte may come here:
    a line of 4,000 ``[`` makes the parser recurse past its limit, which must cost the
    caller an error answer, not the worker its nodes."""
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return request if isinstance(request, dict) else None


async def _watch(stream: trio.SocketStream, pool: NodePool) -> None:
    """Push this worker's node changes to ``stream`` until the watcher hangs up. Each line
    is a diff against the last line sent, so a slow watcher blocks only its own sends and
    then gets one larger step; nothing queues up for it. A quiet worker still sends an
    empty diff every ``WATCH_QUIET`` seconds: a watcher that hung up is noticed then (the
    send fails), and the watcher can tell a quiet worker from a wedged one."""
    watch = PoolWatch(pool)
    sent = -math.inf
    while True:
        changes = watch.look()
        now = trio.current_time()
        if changes["nodes"] or changes["highs"] or now - sent >= WATCH_QUIET:
            await stream.send_all(_line({"ok": True, "watch": changes}))
            sent = now
        await trio.sleep(WATCH_INTERVAL)


async def _handle(request: dict[str, Any] | None, line: bytes, pool: NodePool) -> dict[str, Any]:
    if request is None or "op" not in request:
        return {"ok": False, "error": f"not a control request: {line[:80]!r}"}
    op = request["op"]
    if op == "status":
        indices = pool.indices()
        return {
            "ok": True,
            "pid": os.getpid(),
            "alive": [i for i in indices if pool.alive(i)],
            "dead": [i for i in indices if not pool.alive(i)],
        }
    if op == "shutdown":
        return {"ok": True, "shutdown": True}
    if op not in ("kill", "restart"):
        return {"ok": False, "error": f"unknown op {op!r} (kill, restart, status, shutdown, watch)"}
    node = request.get("node")
    if not isinstance(node, int) or isinstance(node, bool) or node not in pool:
        return {"ok": False, "error": f"node {node!r} is not hosted by this worker"}
    try:
        if op == "kill":
            await pool.kill(node)
            log.warning("node %d killed on request", node)
        else:
            await pool.restart(node)
            log.warning("node %d restarted on request", node)
    except OSError as error:
        return {"ok": False, "error": f"node {node} cannot listen again: {error}"}
    except ValueError as error:  # (a state or location file it cannot use)
        return {"ok": False, "error": f"node {node} cannot start again: {error}"}
    return {"ok": True}


def _line(answer: dict[str, Any]) -> bytes:
    return json.dumps(answer).encode() + b"\n"


def call(address: str, op: str, *, timeout: float = DEFAULT_TIMEOUT, **args: Any) -> dict[str, Any]:
    """Send one request to the worker at ``address`` (host:port) and return its answer.
    ControlError if the worker cannot be reached or answers ``ok: false``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(_line({"op": op, **args}))
            buffer = b""
            while b"\n" not in buffer:
                data = sock.recv(MAX_LINE)
                if not data:
                    raise ControlError(f"the worker at {address} closed the connection")
                buffer += data
    except OSError as error:
        raise ControlError(f"cannot reach the testnet worker at {address}: {error}") from None
    answer: dict[str, Any] = json.loads(buffer.split(b"\n", 1)[0])
    if not answer.get("ok"):
        raise ControlError(str(answer.get("error", "the worker refused the request")))
    return answer


async def call_async(address: str, op: str, **args: Any) -> dict[str, Any]:
    """``call`` from trio code, in a worker thread (a control request is rare and short)."""
    return await trio.to_thread.run_sync(lambda: call(address, op, **args))
