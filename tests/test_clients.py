"""LocalClients (``overlay.core.clients``) built alone, without a Node: a local client's calls
are checked as input from outside (a bad one is answered, never raised, and touches no
state), join the tree through the node's search, and leave it through its prune."""

from __future__ import annotations

from corenet import key_at

from overlay.core.clients import LocalClients
from overlay.core.config import NodeConfig
from overlay.core.effects import Deliver, PeerId, Send
from overlay.core.events import PublishFailed, SubscribeFailed
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.publishing import PacketFlow
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream, new_stream
from overlay.core.timers import TimerQueue
from overlay.messages import PublishError

KEY = key_at(0.5)
KEY2 = key_at(0.7)


class Parts:
    """LocalClients with real tables and flow; the tree operations it calls recorded."""

    def __init__(self, room: bool = True) -> None:
        self.config = NodeConfig()
        self.stats = NodeStats()
        self.streams: dict[bytes, Stream] = {}
        self.timers = TimerQueue()
        self.out = Outbox(self.stats)
        config, out = self.config, self.out
        memory = Memory(config.remembered_streams, out.append, None)
        self.flow = PacketFlow(config, self.streams, self.timers, self.stats, out, memory)
        self.searches: list[tuple[bytes, float | None, int | None]] = []
        self.pruned: list[bytes] = []
        self.unkept: list[bytes] = []
        self.clients = LocalClients(
            0.3,
            config,
            self.streams,
            out,
            self.flow,
            self.new_stream,
            lambda now, stream, must_beat, uid: self.searches.append((stream.key, must_beat, uid)),
            lambda now, stream: self.pruned.append(stream.key),
            lambda stream: self.unkept.append(stream.key),
            lambda key: room,
        )

    def new_stream(
        self, key: bytes, state: State, parent: PeerId | None, descriptor: bytes | None
    ) -> Stream:
        stream = self.streams[key] = new_stream(key, state, parent, descriptor, self.config)
        return stream

    def delivered(self) -> list[tuple[int, object]]:
        effects = self.out.take()
        assert not any(isinstance(e, Send) for e in effects)
        return [(e.client, e.event) for e in effects if isinstance(e, Deliver)]


def test_a_subscribe_starts_the_node_s_search() -> None:
    parts = Parts()
    parts.clients.subscribe(1.0, KEY, 7, last_seen=4)
    stream = parts.streams[KEY]
    assert stream.state is State.JOINING and list(stream.local) == [7]
    assert stream.local[7].cursor == 5 and stream.local[7].receives
    assert parts.searches == [(KEY, None, None)]  # a fresh search: no must-beat, a new uid
    assert parts.delivered() == []  # told once the search ends


def test_a_second_client_rides_on_the_search_under_way() -> None:
    parts = Parts()
    parts.clients.subscribe(1.0, KEY, 7)
    parts.clients.subscribe(1.0, KEY, 8)
    assert parts.searches == [(KEY, None, None)] and list(parts.streams[KEY].local) == [7, 8]
    assert parts.unkept == [KEY]


def test_a_bad_subscribe_is_answered_and_changes_nothing() -> None:
    parts = Parts()
    parts.clients.subscribe(1.0, KEY, 7, last_seen=-2)
    assert parts.delivered() == [(7, SubscribeFailed(KEY, "last_seen -2 is out of range"))]
    assert parts.streams == {} and parts.searches == []


def test_a_node_at_its_stream_limit_refuses_a_new_stream() -> None:
    parts = Parts(room=False)
    parts.clients.subscribe(1.0, KEY, 7)
    limit = parts.config.max_streams
    reason = f"this node already carries its limit of {limit} streams"
    assert parts.delivered() == [(7, SubscribeFailed(KEY, reason))] and parts.streams == {}


def test_a_malformed_publish_is_answered_and_changes_nothing() -> None:
    parts = Parts()
    parts.clients.publish(1.0, b"short", 7, 1, b"x")
    [(client, event)] = parts.delivered()
    assert client == 7 and isinstance(event, PublishFailed)
    assert event.error is PublishError.INVALID and event.uid == 1
    assert parts.streams == {} and parts.flow.publishes.local == {}


def test_a_publish_joins_as_a_member_that_receives_nothing() -> None:
    parts = Parts()
    parts.clients.publish(1.0, KEY, 7, 1, b"x")
    stream = parts.streams[KEY]
    assert not stream.local[7].receives and parts.searches == [(KEY, None, None)]
    assert 1 in parts.flow.publishes.local  # waiting for the tree


def test_unsubscribe_and_a_client_going_away_prune_each_stream() -> None:
    parts = Parts()
    for key in (KEY, KEY2):
        parts.clients.subscribe(1.0, key, 7)
    parts.clients.subscribe(1.0, KEY, 8)
    parts.clients.unsubscribe(2.0, KEY, 8)
    assert parts.pruned == [KEY] and list(parts.streams[KEY].local) == [7]
    parts.clients.unsubscribe(2.0, KEY, 9)  # not a member: nothing
    assert parts.pruned == [KEY]
    parts.clients.remove_client(3.0, 7)
    assert parts.pruned == [KEY, KEY, KEY2]
    assert all(not stream.local for stream in parts.streams.values())
