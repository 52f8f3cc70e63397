"""``overlay subscribe STREAM``: print a stream's packets as they arrive, until Ctrl-C.

Each packet prints as ``<number> <data>`` (data as text when it is UTF-8, else hex), or with
``--json`` as one JSON object a line: ``{"packet": n, "data": ..., "epoch": e}`` for a
packet, ``{"missed": [first, last]}`` for packets that could not be had, and for atomic
subscribers ``{"epoch": e, "packets": [...]}`` per whole epoch. ``--last-seen N`` resumes
after packet N (-1: from the first packet still held); ``--count N`` exits after N packets.
``--rows`` unpacks packets the Spark sink published (many rows each, ``overlay.spark``)
into one line per row: ``<packet>.<row> [<key>: ]<value>``, or ``"rows": [...]`` in JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from keyspace.stream_key import StreamKey
from overlay.client import Client
from overlay.core.events import Epoch, EpochAborted, EpochSkipped, Missed, Packet
from overlay.messages import PacketKind
from overlay.spark.rows import PackingError, unpack
from tools.node_targets import add_node_argument, node_address


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "subscribe",
        help="print a stream's packets as they arrive",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("stream", help="stream address (ovl:open/NAME, ovl:KEY/NAME, or NAME)")
    add_node_argument(p)
    p.add_argument("--last-seen", type=int, help="resume after this packet number")
    p.add_argument("--atomic", action="store_true", help="whole epochs only (Strymon)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--count", type=int, help="exit after this many packets")
    p.add_argument("--rows", action="store_true", help="unpack the Spark sink's rows")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait to join")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.timeout > 0:  # (0 would make the socket non-blocking: no wait at all)
        raise ValueError(f"--timeout must be more than 0 seconds, got {args.timeout}")
    if args.count is not None and args.count < 1:
        raise ValueError(f"--count must be at least 1, got {args.count}")
    StreamKey.parse(args.stream)  # a bad address is the user's to fix before any connection
    seen = 0
    node = node_address(args)
    with Client(node, timeout=args.timeout, name="overlay subscribe") as client:
        subscription = client.subscribe(
            args.stream, last_seen=args.last_seen, atomic=args.atomic, timeout=args.timeout
        )
        joined = subscription.subscribed
        head = "none yet" if joined.last_packet is None else joined.last_packet
        print(f"subscribed; newest packet: {head}", file=sys.stderr, flush=True)
        for event in subscription:
            line, packets = _render(event, args.json, args.rows)
            print(line, flush=True)
            seen += packets
            if args.count is not None and seen >= args.count:
                break
    return 0


def _render(event: object, as_json: bool, rows: bool) -> tuple[str, int]:
    """The line(s) to print for ``event`` and how many packets it counts for."""
    if isinstance(event, Packet):
        if as_json:
            return json.dumps(_packet(event, rows)), 1
        return _packet_text(event, rows, ""), 1
    if isinstance(event, Epoch):
        if as_json:
            packets = [_packet(p, rows) for p in event.packets]
            return json.dumps({"epoch": event.epoch, "packets": packets}), len(event.packets)
        lines = [f"epoch {event.epoch} ({len(event.packets)} packets)"]
        lines += [_packet_text(p, rows, "  ") for p in event.packets]
        return "\n".join(lines), len(event.packets)
    if isinstance(event, Missed):
        if as_json:
            return json.dumps({"missed": [event.first, event.last]}), 0
        return f"missed packets {event.first}..{event.last}", 0
    if isinstance(event, EpochSkipped | EpochAborted):
        what = "skipped" if isinstance(event, EpochSkipped) else "aborted"
        if as_json:
            return json.dumps({f"epoch_{what}": event.epoch}), 0
        return f"epoch {event.epoch} {what}", 0
    return (json.dumps({"event": type(event).__name__}) if as_json else repr(event)), 0


def _packet_text(packet: Packet, rows: bool, indent: str) -> str:
    if packet.kind is not PacketKind.DATA:
        return f"{indent}{packet.number} [{packet.kind.name.lower()}]"
    if not rows:
        return f"{indent}{packet.number} {_text(packet.data)}"
    return "\n".join(
        f"{indent}{packet.number}.{i} " + ("" if key is None else f"{_text(key)}: ") + _text(value)
        for i, (key, value) in enumerate(_rows(packet))
    )


def _packet(packet: Packet, rows: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"packet": packet.number}
    if rows and packet.kind is PacketKind.DATA:
        out["rows"] = [{"key": _json(k), "value": _json(v)} for k, v in _rows(packet)]
    else:
        out["data"] = _json(packet.data)
    out["epoch"] = packet.epoch
    return out


def _rows(packet: Packet) -> list[tuple[bytes | None, bytes | None]]:
    try:
        return [(r.key, r.value) for r in unpack(packet.data)]
    except PackingError as error:
        raise ValueError(f"packet {packet.number} is not a packet of rows: {error}") from None


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"hex": data.hex()}


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode()
    except UnicodeDecodeError:
        return data.hex()
