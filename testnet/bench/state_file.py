"""What a state file costs a relay, per packet it forwards, beside the same relay without one.

    python -m testnet.bench.state_file [--packets 20000] [--repeats 3] [--per-read 1,64]
                                       [--json]

Method. One process, no sockets: a real ``NodeHost`` (its core and its effects, frames
encoded for its links) relays one stream from its parent to one child. Its links are
stand-ins that keep the frames they are given (counted once the clock stops), so what is
timed is the node's own work for each packet: the core's ``receive``, the host carrying
out the effects (encoding the frame once, queueing it) and, in the variant, appending the
newest number to the state file (``overlay.runtime.state_file``): one ``write`` per read
of the parent's link, which hands over ``--per-read`` packets (one when packets come one at
a time; dozens when the stream is busy: a 256 KiB read holds some 230 sealed 1 KiB
packets), and a compaction with ``fsync`` every 4,096 records. The baseline is the same
relay with no state file. Runs alternate, ``--repeats`` times each, and the best of each
counts, so that load from elsewhere hits all alike.

Reported: microseconds per packet for each, and per ``--per-read`` the difference (the
state file's cost) and the ratio. Sockets and encryption, which a real link adds to each
packet, are not in either, so the ratio overstates the share of a real node's time.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overlay.codec import decode
from overlay.core.config import NodeConfig
from overlay.messages import (
    Hello,
    Message,
    PacketKind,
    SubscribeData,
    SubscribeRequest,
    SubscribeRun,
    SubscribeSucceeded,
)
from overlay.runtime.host import NodeHost
from overlay.runtime.refusals import Refusal
from overlay.runtime.state_file import StateFile

KEY = bytes(32)  # location 0.0
RELAY, PARENT, CHILD = b"r" * 32, b"p" * 32, b"c" * 32


@dataclass
class _Link:
    """A link stand-in: counts what the host gives it."""

    peer: bytes
    initiator: bytes
    refusal: Refusal | None = None
    address: str | None = None
    frames: list[bytes] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)

    @property
    def queued_bytes(self) -> int:
        return 0

    def send(self, message: Message) -> None:
        self.sent.append(message)

    def send_encoded(self, body: bytes) -> None:
        self.frames.append(body)

    def packets(self, start: int) -> int:
        """The packets in the frames given from the ``start``-th on (a run holds several)."""
        count = 0
        for body in self.frames[start:]:
            message = decode(body)
            count += len(message.packets) if isinstance(message, SubscribeRun) else 1
        return count

    def flush(self) -> None:
        pass

    def close(self, reason: str) -> None:
        raise AssertionError(f"the relay closed a link: {reason}")


def _relay(state: StateFile | None) -> tuple[NodeHost, _Link, _Link]:
    """A relay joined to the stream: its parent (closer to the key) and one child."""
    now = [0.0]
    host = NodeHost(
        RELAY,
        0.1,
        config=NodeConfig(),
        rng=random.Random(1),
        clock=lambda: now[0],
        state=state,
        vouched={PARENT, CHILD},  # (their ids are labels; the bench chooses where they sit)
    )
    parent, child = _Link(PARENT, RELAY), _Link(CHILD, CHILD)
    for link, location in ((parent, 0.01), (child, 0.3)):
        host.link_opened(link)
        host.received(link, Hello(location, 1))
    host.received(child, SubscribeRequest(7, KEY, 10, 0.3, None))
    host.received(parent, SubscribeSucceeded(7, KEY, None))
    stream = host.core.streams.get(KEY)
    if stream is None or stream.parent != PARENT or CHILD not in stream.children:
        raise RuntimeError("the relay did not join the stream under its parent")
    return host, parent, child


def _run(packets: int, state: StateFile | None, per_read: int = 1) -> float:
    """Seconds the relay takes for ``packets`` packets, ``per_read`` to a read of its
    parent's link (checked to reach the child)."""
    host, parent, child = _relay(state)
    payload = bytes(1024)
    data = [
        SubscribeData(KEY, n, payload, None, PacketKind.DATA, None, None, n) for n in range(packets)
    ]
    before = len(child.frames)
    gc.collect()  # (the runs before left their relays' windows to collect: not timed here)
    started = time.perf_counter()
    for start in range(0, packets, per_read):
        for packet in data[start : start + per_read]:
            host.received(parent, packet)
        host.read_done()
    took = time.perf_counter() - started
    got = child.packets(before)
    if got != packets:
        raise RuntimeError(f"the child got {got} of {packets} packets")
    return took


def measure(packets: int, repeats: int, per_read: tuple[int, ...] = (1,)) -> dict[str, Any]:
    best = {"without": float("inf")} | {n: float("inf") for n in per_read}
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(repeats):
            best["without"] = min(best["without"], _run(packets, None))
            for n in per_read:
                state = StateFile(Path(folder) / f"relay-{repeat}-{n}.state")
                try:
                    best[n] = min(best[n], _run(packets, state, n))
                    if state.kept != {KEY: packets - 1}:
                        raise RuntimeError(f"the state file kept {state.kept}")
                finally:
                    state.close()
    without = best["without"] / packets * 1e6
    with_ = {n: best[n] / packets * 1e6 for n in per_read}
    return {
        "parameters": {"packets": packets, "repeats": repeats, "per_read": list(per_read)},
        "us_per_packet": {"without": round(without, 2)}
        | {f"with, {n} per read": round(with_[n], 2) for n in per_read},
        "state_file_us": {str(n): round(with_[n] - without, 2) for n in per_read},
        "ratio": {str(n): round(with_[n] / without, 3) for n in per_read},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packets", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--per-read", default="1,64", help="packets a read hands over, comma-separated"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.packets < 1 or args.repeats < 1:
        parser.error("--packets and --repeats must be at least 1")
    try:
        per_read = tuple(int(n) for n in args.per_read.split(","))
    except ValueError:
        parser.error(f"--per-read: {args.per_read!r} is not a list of whole numbers")
    if min(per_read) < 1:
        parser.error("--per-read: each count must be at least 1")
    result = measure(args.packets, args.repeats, per_read)
    if args.json:
        print(json.dumps(result))
        return 0
    per = result["us_per_packet"]
    lines = [
        f"relay, {args.packets} packets of 1 KiB, best of {args.repeats}:",
        f"  without a state file              {per['without']:6.2f} us a packet",
    ]
    for n in per_read:
        lines.append(
            f"  with one, {n:3d} packets per read   {per[f'with, {n} per read']:6.2f} us a packet:"
            f" {result['state_file_us'][str(n)]:.2f} us more (x{result['ratio'][str(n)]:.3f})"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
