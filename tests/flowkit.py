"""Small real collaborators for building ``PacketFlow``'s components alone, without a Node
or a flow: a config, stats, timers, an outbox, a streams table, the highest numbers seen
(``memory``), a signature check, and streams in a state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corenet import key_at

from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, Send
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.signatures import SignatureChecker
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream, new_stream
from overlay.core.timers import TimerQueue
from overlay.messages import Message, PacketKind, PublishData, SubscribeData

# The key the node tests use (``nodes.KEY``), so a file may hold both kinds of test; an
# unsigned stream: its last bit is clear.
KEY = key_at(0.5)


@dataclass
class Kit:
    config: NodeConfig = field(default_factory=NodeConfig)
    stats: NodeStats = field(default_factory=NodeStats)
    timers: TimerQueue = field(default_factory=TimerQueue)
    streams: dict[bytes, Stream] = field(default_factory=dict)
    out: Outbox = field(init=False)
    memory: Memory = field(init=False)
    signatures: SignatureChecker = field(init=False)

    def __post_init__(self) -> None:
        self.out = Outbox(self.stats)
        self.memory = Memory(self.config.remembered_streams, self.out.append)
        self.signatures = SignatureChecker(self.config.signature_cache)

    def stream(
        self,
        state: State = State.ROOT,
        parent: bytes | None = None,
        children: tuple[bytes, ...] = (),
    ) -> Stream:
        stream = new_stream(KEY, state, parent, None, self.config)
        for child in children:
            stream.children[child] = None
        self.streams[KEY] = stream
        return stream

    def sent(self) -> list[tuple[bytes, Message]]:
        return [(e.peer, e.message) for e in self.out.take() if isinstance(e, Send)]

    def delivered(self) -> list[Deliver]:
        return [e for e in self.out.take() if isinstance(e, Deliver)]


class Calls:
    """A fake for a callable a component is given: records each call's arguments."""

    def __init__(self, result: Any = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.result = result

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.result


def publish(uid: int, packet: int | None = None, data: bytes = b"x", **kw: Any) -> PublishData:
    return PublishData(uid, KEY, packet, 0.5, 10, data, None, PacketKind.DATA, None, **kw)


def packet(number: int, uid: int | None = None, data: bytes = b"x") -> SubscribeData:
    return SubscribeData(KEY, number, data, None, PacketKind.DATA, None, None, uid)


def store(stream: Stream, *numbers: int) -> None:
    """``stream`` holds and has processed packets ``numbers`` (in order, from its start)."""
    for number in numbers:
        stream.window.add(packet(number, uid=1000 + number))
        stream.next_in = number + 1
        if stream.contiguous_from is None:
            stream.contiguous_from = number
        stream.high = number
