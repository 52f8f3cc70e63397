"""``overlay stats``: per-node figures of a testnet or of any nodes, one line each.

    overlay stats                       # the testnet in ./testnet-data
    overlay stats --nodes 127.0.0.1:7702 --json

Columns: links (open peer links), bytes queued to be sent on them (all links, and the
fullest one), streams carried, children (summed over streams), local clients (not the one
asking), packets stored (taken into a window once each) and delivered to local clients,
messages received and sent, frames in and out on the links, duplicates and gaps seen,
restarts, peers and clients refused or cut off (``refused``), faults (bugs of the node it
contained: a core call that raised on a peer's message or in a timer, a message it built
that did not encode; each logged with its traceback, and ``--json`` splits them), and
uptime. Totals come last (each link once, though both its ends list it), then the
refusals by reason summed over the nodes (``--json`` has each node's). Nodes that do not
answer are listed as such (exit status 1).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import trio

from testnet.survey import Answer, survey
from tools.node_targets import add_target_arguments, targets
from tools.stopping import Signalled, until_signal

# Bugs of the node a host contained (``overlay.runtime.host``): each should be 0.
_FAULTS = ("receive", "timer", "encode")

# The survey asks each node over a client connection of its own, which the node counts
# among its clients while it answers: the column shows the others.
_ASKING = 1

# (column title, how to read it from a describe answer)
_COLUMNS: list[tuple[str, Any]] = [
    ("links", lambda d: d["links"]),
    ("queued", lambda d: d.get("queued", 0)),  # bytes waiting on all links
    ("q_max", lambda d: d.get("queued_max", 0)),  # on the fullest link
    ("streams", lambda d: len(d["streams"])),
    ("children", lambda d: sum(len(s["children"]) for s in d["streams"])),
    ("clients", lambda d: max(0, d["clients"] - _ASKING)),
    ("stored", lambda d: d["stats"]["stored"]),
    ("delivered", lambda d: d["stats"]["delivered"]),
    ("recv", lambda d: d["stats"]["received"]),
    ("sent", lambda d: d["stats"]["sent"]),
    ("frames_in", lambda d: d["stats"]["frames_in"]),
    ("frames_out", lambda d: d["stats"]["frames_out"]),
    ("dups", lambda d: d["stats"]["duplicates"]),
    ("gaps", lambda d: d["stats"]["gaps"]),
    ("restarts", lambda d: d["stats"]["restarts"]),
    ("refused", lambda d: sum(d.get("refusals", {}).values())),
    ("faults", lambda d: sum(d["stats"].get(f"{k}_faults", 0) for k in _FAULTS)),
]


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "stats",
        help="per-node figures: links, streams, children, packets, counters",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(p)
    p.add_argument("--json", action="store_true", help="every node's describe() as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    nodes = targets(args)
    answered = trio.run(until_signal, lambda: survey(nodes.addresses, indices=nodes.indices))
    if isinstance(answered, Signalled):
        return answered.status
    answers: list[Answer] = answered
    if args.json:
        print(json.dumps([_jsonable(a) for a in answers], indent=1))
    else:
        print(stats_table(answers))
    return 0 if all(a.description is not None for a in answers) else 1


def stats_table(answers: list[Answer]) -> str:
    width = max((len(a.label) for a in answers), default=4)
    head = (
        f"{'node':<{width}}  {'location':>8}  "
        + "  ".join(f"{title:>{max(len(title), 6)}}" for title, _ in _COLUMNS)
        + f"  {'uptime':>7}"
    )
    lines = [head]
    totals = [0] * len(_COLUMNS)
    for a in answers:
        d = a.description
        if d is None:
            lines.append(f"{a.label:<{width}}  not answering: {a.error}")
            continue
        values = [int(get(d)) for _, get in _COLUMNS]
        totals = [t + v for t, v in zip(totals, values, strict=True)]
        lines.append(
            f"{a.label:<{width}}  {float(d['location']):8.6f}  "
            + "  ".join(
                f"{v:>{max(len(title), 6)}}" for (title, _), v in zip(_COLUMNS, values, strict=True)
            )
            + f"  {float(d['uptime']):6.0f}s"
        )
    reasons: dict[str, int] = {}
    for a in answers:
        for reason, count in (a.description or {}).get("refusals", {}).items():
            reasons[reason] = reasons.get(reason, 0) + int(count)
    answered = sum(a.description is not None for a in answers)
    # A link between two nodes asked shows at both ends: the total counts it once.
    totals[[title for title, _ in _COLUMNS].index("links")] = len(
        {
            frozenset((bytes(d["id"]), bytes(p["id"])))
            for a in answers
            if (d := a.description) is not None
            for p in d["peers"]
        }
    )
    lines.append(
        f"{'total':<{width}}  {answered:>4}/{len(answers):<3} "
        + "  ".join(
            f"{v:>{max(len(title), 6)}}" for (title, _), v in zip(_COLUMNS, totals, strict=True)
        )
    )
    if reasons:
        lines.append(
            "refused by reason: "
            + ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
        )
    return "\n".join(lines)


def _jsonable(answer: Answer) -> dict[str, Any]:
    def plain(value: Any) -> Any:
        if isinstance(value, bytes):
            return value.hex()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        return value

    return {
        "node": answer.index if answer.index is not None else answer.address,
        "address": answer.address,
        "describe": plain(answer.description),
        "error": answer.error,
    }
