"""The sans-IO protocol core of one node: a facade over the components that own its parts.

Inputs: ``link_up``/``link_down`` (a driver opened or lost a link), ``receive`` (a decoded
message from a peer), ``handle_timer`` (a deadline passed), and the local client calls
(``overlay.core.clients``: subscribe, publish, unsubscribe, remove_client). Each takes ``now``
(seconds, any epoch) and returns the list of effects the driver must carry out. The core
imports no I/O, reads no clock and draws every random number from the ``random.Random`` it
was handed, so a seeded simulator replays it exactly and the trio runtime runs the very same
code.

The node holds the shared tables (peers, streams, timers, the outbox), has
``overlay.core.assembly`` build the components over them, and dispatches each message to
the one that handles it: a peer's Hello to ``overlay.core.links``, subscribe searches to
``overlay.core.subscribing`` (the tree they join is ``overlay.core.membership``'s), packets
to ``overlay.core.publishing``. A packet from a parent skips the dispatch (``receive``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from overlay.core.assembly import Components
from overlay.core.catch_up_budget import CatchUpBudget
from overlay.core.child_drops import ChildDrops
from overlay.core.config import NodeConfig
from overlay.core.effects import ClientId, Effect, PeerId, SetTimer
from overlay.core.memory import Memory
from overlay.core.outbox import Outbox
from overlay.core.pace import first_window
from overlay.core.peers import PeerTable
from overlay.core.publishing import PacketFlow
from overlay.core.routing import Route
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.core.swaps import MAX_AWAY, Swaps, away_cell
from overlay.core.timers import TimerQueue
from overlay.messages import (
    Accepted,
    Bundle,
    Committed,
    DataNotFound,
    FillRequest,
    Heartbeat,
    Held,
    HeldQuery,
    Hello,
    Message,
    Neighbours,
    PacketKind,
    PacketsMissed,
    PastQuery,
    ProbeAnswer,
    PublishCollision,
    PublishConfirmed,
    PublishData,
    PublishNumbered,
    PublishRejected,
    PublishSucceeded,
    PublishWitness,
    RejectedLoop,
    RejectOverload,
    RestartConfirmed,
    RestartEnded,
    ResubscribeRequest,
    RootProbe,
    SubscribeData,
    SubscribeRequest,
    SubscribeRestarted,
    SubscribeRun,
    SubscribeSucceeded,
    SubscribeSucceededNewRoot,
    SwapCommit,
    SwapComplete,
    SwapRejected,
    SwapReply,
    SwapRequest,
    Unsubscribe,
)
from overlay.run_packing import unrun


class Node:
    """One node's protocol state. Not thread-safe; a driver calls it from one task."""

    __slots__ = (
        "_announced",
        "_introduced",
        "_publish_path",
        "_timers",
        "admission",
        "boot_id",
        "catch_ups",
        "child_drops",
        "clients",
        "config",
        "flow",
        "id",
        "keeping",
        "leaving",
        "links",
        "liveness",
        "location",
        "membership",
        "memory",
        "merges",
        "out",
        "peers",
        "probes",
        "refills",
        "restarts",
        "rng",
        "searches",
        "stats",
        "streams",
        "subscribing",
        "swaps",
    )

    def __init__(
        self,
        node_id: PeerId,
        location: float,
        rng: random.Random,
        config: NodeConfig | None = None,
        boot_id: int | None = None,
        remembered: Mapping[bytes, int] | None = None,  # ``Remember`` effects a driver kept
        entropy: Callable[[int], bytes] | None = None,  # swap nonces; default: ``rng``
    ) -> None:
        self.id = node_id
        self.location = location
        self.config = config = config if config is not None else NodeConfig()
        self.rng = rng
        # A fresh boot id per start tells peers that our stream state is gone (spec).
        self.boot_id = boot_id if boot_id is not None else rng.getrandbits(64)
        self.peers = peers = PeerTable(location)
        self.streams: dict[bytes, Stream] = {}
        streams = self.streams
        self.stats = stats = NodeStats()
        self.child_drops = drops = ChildDrops()  # (``merges``: a root's lost children, per peer)
        # What each peer may draw in catch-ups, in the config's windows (``config``).
        self.catch_ups = catch_ups = CatchUpBudget(
            config.catch_up_rate * config.window_packets,
            config.catch_up_rate * config.window_bytes,
            config.catch_up_burst * config.window_packets,
            config.catch_up_burst * config.window_bytes,
        )
        self._timers = timers = TimerQueue()
        self._announced: float | None = None
        # Links up whose peer's Hello has not come yet: a move tells them too (``relocate``).
        self._introduced: set[PeerId] = set()
        self.out = out = Outbox(stats)
        self.memory = Memory(config.remembered_streams, out.append, remembered)
        # (``peers``: whom a publisher's node tells, ``peer_witnesses``)
        self.flow = flow = PacketFlow(config, streams, timers, stats, out, self.memory, peers)
        # The components, each built with what it uses (``assembly``); the node keeps each
        # as an attribute of its own, so a message reaches its handler in one lookup.
        parts = Components(
            location, config, rng, stats, streams, peers, timers, out, flow, catch_ups, drops
        )
        self.keeping, self.refills, self.restarts = parts.keeping, parts.refills, parts.restarts
        self.probes, self.liveness, self.searches = parts.probes, parts.liveness, parts.searches
        self.leaving, self.admission, self.merges = parts.leaving, parts.admission, parts.merges
        self.membership, self.subscribing = parts.membership, parts.subscribing
        self.links, self.clients = parts.links, parts.clients
        self.swaps = Swaps(
            config,
            rng,
            entropy if entropy is not None else rng.randbytes,
            stats,
            peers,
            timers,
            out,
            self.relocate,
            self._swap_bounds,
        )
        # Each type a Bundle may carry (``messages.BUNDLED``) and its handler (``_dispatch``).
        self._publish_path: dict[type[Message], Callable[[float, PeerId, Any], None]] = {
            PublishData: self._on_publish,
            PublishSucceeded: flow.on_answer,
            PublishNumbered: flow.on_confirming,
            PublishConfirmed: flow.on_confirming,
            PublishWitness: flow.on_confirming,
        }

    # --- driver entry points ------------------------------------------------------------

    def link_up(self, now: float, peer: PeerId) -> list[Effect]:
        """A link to ``peer`` is open: introduce ourselves. The peer counts as connected
        once its own Hello arrives."""
        self.out.send(peer, Hello(self.location, self.boot_id))
        self._introduced.add(peer)
        return self._flush(now)

    def link_down(self, now: float, peer: PeerId) -> list[Effect]:
        """The link to ``peer`` is gone (closed, or declared dead by the driver)."""
        self._introduced.discard(peer)
        self.links.link_down(now, peer)
        self.swaps.lost_peer(peer)
        return self._flush(now)

    def _swap_bounds(self) -> tuple[float, ...] | None:
        """Where the keys of the streams this node keeps lie (``swaps.away_cell``), which a
        location swap may not move it toward; None while it may not swap: it routes a
        search, roots, joins or restarts a stream, is in a subtree that restarts (whose
        rules weigh its location against the restart's), or keeps more streams than a
        reveal lists (``swaps``)."""
        streams = self.streams
        if self.searches.routes or len(streams) > MAX_AWAY:
            return None
        for stream in streams.values():
            if stream.state is not State.JOINED or stream.restart_origin is not None:
                return None
        return tuple(sorted({away_cell(stream.target) for stream in streams.values()}))

    def start_swap(self, now: float) -> list[Effect]:
        """Start a location swap now, if this node may (``swaps``), as its swap timer does
        every ``swap_interval``: for a driver, or a test, that wants one at a given time."""
        self.swaps.start(now)
        return self._flush(now)

    def relocate(self, now: float, location: float) -> None:
        """Take ``location`` (a location swap: ``swaps``): every part that judges by our
        location uses it from now, and every peer hears it in a new Hello (``links``)."""
        self.location = location
        self.peers.move(location)
        for part in (
            self.restarts,
            self.probes,
            self.merges,
            self.membership,
            self.subscribing,
            self.links,
            self.clients,
        ):
            part.location = location
        told = [peer.id for peer in self.peers]
        for peer_id in (*told, *sorted(self._introduced.difference(told))):
            self.out.send(peer_id, Hello(location, self.boot_id))

    def receive(self, now: float, peer: PeerId, message: Message) -> list[Effect]:
        """Handle one message from ``peer``. The driver has decoded and validated it."""
        self.stats.received += 1
        record = self.peers.get(peer)
        if record is not None:
            record.heard = now  # any message shows the peer is alive
        if type(message) is Heartbeat and record is not None:
            return self._flush(now)  # hearing it was its whole purpose
        if (type(message) is SubscribeData or type(message) is SubscribeRun) and record is not None:
            # The messages a node handles at the broadcast's rate: skip the dispatch.
            stream = self._from_parent(peer, message.key)
            if stream is not None:
                if isinstance(message, SubscribeData):
                    self.flow.on_data(peer, message, stream)
                elif stream.fills is None:
                    self.flow.on_run(peer, message, stream)
                else:
                    # Children wait for fills: each packet may be one they wait for, and is
                    # served before the next could push it out of the window.
                    for packet in unrun(message):
                        if not self.flow.on_data(peer, packet, stream):
                            break
                        if stream.fills is not None:
                            self.refills.check_fills(now, stream)
                if stream.fills is not None:
                    self.refills.check_fills(now, stream)
        elif isinstance(message, Hello):
            self._introduced.discard(peer)
            self.links.on_hello(now, peer, message)
            self.swaps.arm(now)  # (swaps begin once a peer is known)
        elif record is None:
            self.out.drop(peer, f"sent {type(message).__name__} before Hello")
        else:
            self._dispatch(now, peer, message)
        return self._flush(now)

    def heartbeat(self, now: float, peer: PeerId) -> bool:
        """``receive(now, peer, Heartbeat(...))`` for a driver that carries many heartbeats
        and wants them cheap: True when it was handled here, with no effect to carry out
        (the peer is linked and the end of an event has nothing to do); False: nothing
        was done, pass the heartbeat to ``receive``. Hearing the peer is a heartbeat's
        whole purpose, and a Heartbeat's round number is not read (pub0sub liveness)."""
        record = self.peers.get(peer)
        if record is None or self.flow.has_event_work():
            return False
        self.stats.received += 1
        record.heard = now
        return True

    def handle_timer(self, now: float) -> list[Effect]:
        """Run every timer due at ``now``. Harmless to call early or more than once."""
        self._timers.run(now)
        return self._flush(now)

    def after_fault(self, now: float) -> list[Effect]:
        """A call into this core raised (a bug of ours, whatever input brought it on): the
        effects it produced before it raised, and the next deadline named again. A driver
        that contains the fault (the runtime: one link closed, or one timer lost) carries
        these out and goes on; the simulator and the tests let the exception stop them.
        A timer that raised was already off the queue (``TimerQueue.due``); the timers
        due after it are still on it, so the deadline named here runs them."""
        self._announced = None
        return self._flush(now)

    def announce_neighbours(self, now: float) -> list[Effect]:
        """Tell every peer where our peers are, now (normally a timer does it after links
        change; a driver that brings many links up at once may call it when done)."""
        self.liveness.announce()
        return self._flush(now)

    def busy(self) -> bool:
        """Whether protocol work is pending: a search (not one waiting for a peer, which may
        never come), an unanswered local publish (or one waiting behind a batch), a root's
        takeover grace, a waiter, a linger, an announcement or a root's mark due
        (``showing``). Heartbeats do not count; a driver that runs until the network is
        quiet (the simulator) waits for every node to stop being busy."""
        searches = self.searches
        ours = len(searches.routes) > len(searches.parked) or self.liveness.announce_at is not None
        waits = self.restarts.awaiting or self.refills.waiting or self.leaving.linger_keys
        return bool(ours or waits or self.clients.waiting or self.flow.busy())

    def next_deadline(self) -> float | None:
        """When ``handle_timer`` should next be called (None: no timer pending)."""
        return self._timers.earliest()

    # --- local clients (``overlay.core.clients``) -----------------------------------------

    def subscribe(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        *,
        last_seen: int | None = None,
        atomic: bool = False,
        descriptor: bytes | None = None,
    ) -> list[Effect]:
        """Subscribe a local client (``LocalClients.subscribe``)."""
        self.clients.subscribe(
            now, key, client, last_seen=last_seen, atomic=atomic, descriptor=descriptor
        )
        return self._flush(now)

    def publish(
        self,
        now: float,
        key: bytes,
        client: ClientId,
        uid: int,
        data: bytes,
        *,
        packet: int | None = None,
        epoch: int | None = None,
        kind: PacketKind = PacketKind.DATA,
        sig: bytes | None = None,
        descriptor: bytes | None = None,
    ) -> list[Effect]:
        """Publish ``data`` for a local client (``LocalClients.publish``)."""
        self.clients.publish(
            now,
            key,
            client,
            uid,
            data,
            packet=packet,
            epoch=epoch,
            kind=kind,
            sig=sig,
            descriptor=descriptor,
        )
        return self._flush(now)

    def publish_room(self, key: bytes) -> int:
        """How many more local publishes of stream ``key`` would go up its tree now rather
        than wait at this node (``credit``, ``pace``): a publisher that keeps within it
        keeps its packets' latency within the tree's pace."""
        flow = self.flow
        return flow.credit.room_for(key) if flow.built else self._first_window()

    def publish_window(self, key: bytes) -> int:
        """How many local publishes of stream ``key`` this node sends up its tree (or, at
        its root, numbers) at once (``credit``, ``pace``), so how many its publishers gain
        nothing by keeping unanswered: beyond it they wait here, and that wait is in their
        latency."""
        flow = self.flow
        return flow.credit.window_for(key) if flow.built else self._first_window()

    def _first_window(self) -> int:
        """A stream's window before this node has published to any (``pace``)."""
        config = self.config
        return first_window(config.publish_credit_packets, config.publish_queue_delay)

    def publishing(self, key: bytes) -> dict[str, int | float | None] | None:
        """How this node paces its clients' publishes of stream ``key``, for tools
        (``PublishCredit.describe``); None if it has not published to it lately."""
        flow = self.flow
        return flow.credit.describe(key) if flow.built else None

    def publish_batch(
        self, now: float, key: bytes, client: ClientId, items: Sequence[tuple[int, bytes]]
    ) -> list[Effect]:
        """Publish ``(uid, data)`` pairs for a local client (``LocalClients.publish_batch``)."""
        self.clients.publish_batch(now, key, client, items)
        return self._flush(now)

    def unsubscribe(self, now: float, key: bytes, client: ClientId) -> list[Effect]:
        """Remove a local client (``LocalClients.unsubscribe``)."""
        self.clients.unsubscribe(now, key, client)
        return self._flush(now)

    def remove_client(self, now: float, client: ClientId) -> list[Effect]:
        """A local client went away (``LocalClients.remove_client``)."""
        self.clients.remove_client(now, client)
        return self._flush(now)

    # --- dispatch -------------------------------------------------------------------------

    def _dispatch(self, now: float, peer: PeerId, message: Message) -> None:
        # The messages that come at the packets' rate, in bundles (the publish path's),
        # reach their handler by type, before the match tries its cases one by one.
        # Packets and heartbeats never come here (``receive`` takes them).
        handler = self._publish_path.get(type(message))
        if handler is not None:
            handler(now, peer, message)
            return
        match message:
            # The commits' messages, also at the packets' rate, are tried first.
            case Bundle():
                # Its messages in order, each as if it had come alone (``messages.Bundle``):
                # what the end of an event does runs between them too (a backlog drains
                # before the next publish, which would otherwise overtake it); none after
                # one that got the peer cut off.
                for index, each in enumerate(message.messages):
                    if index:
                        self._settle(now)
                    self._dispatch(now, peer, each)
                    if self.out.dropping(peer):
                        break
            case PublishCollision() | PublishRejected():
                self.flow.on_answer(now, peer, message)
            case Committed() | PastQuery():
                stream = self._from_parent(peer, message.key)
                if stream is not None:
                    self.flow.from_parent(now, stream, message)  # (``showing``, ``gathering``)
            case HeldQuery():
                self.flow.on_held_query(peer, message)
            case Held():
                self.flow.on_held(peer, message)
            case SubscribeRequest() | ResubscribeRequest():
                self.subscribing.on_request(now, peer, message)
            case Accepted():
                self.searches.on_accepted(now, peer, message.uid)
            case SubscribeSucceeded() | SubscribeSucceededNewRoot():
                self.subscribing.on_success(now, peer, message)
            case DataNotFound() | RejectOverload() | RejectedLoop():
                self.searches.on_failure(now, peer, message)
            case SubscribeRestarted():
                self.restarts.on_restarted(now, peer, message)
            case RestartConfirmed():
                self.restarts.on_restart_confirmed(now, peer, message)
            case RestartEnded():
                self.restarts.on_restart_ended(now, peer, message.uid, message.key)
            case Unsubscribe():
                self.leaving.on_unsubscribe(now, peer, message.key)
            case Neighbours():
                self.links.on_neighbours(peer, message)
            case PacketsMissed():
                stream = self._from_parent(peer, message.key)
                if stream is not None:
                    self.flow.on_missed(peer, message, stream)
                    if stream.fills is not None:
                        self.refills.check_fills(now, stream)
            case FillRequest():
                self.refills.on_fill_request(now, peer, message)
            case RootProbe():
                self.probes.on_probe(now, peer, message)
            case ProbeAnswer():
                self.probes.on_answer(now, peer, message)
            case SwapRequest():
                self.swaps.on_request(now, peer, message)
            case SwapReply():
                self.swaps.on_reply(now, peer, message)
            case SwapCommit():
                self.swaps.on_commit(now, peer, message)
            case SwapComplete():
                self.swaps.on_complete(now, peer, message)
            case SwapRejected():
                self.swaps.on_rejected(now, peer, message)
            case _:
                self.stats.ignored += 1

    def _on_publish(self, now: float, peer: PeerId, message: PublishData) -> None:
        self.flow.on_publish(now, peer, message)
        self.refills.served(now, message.key)  # it may be one a waiting child lacks

    def _from_parent(self, peer: PeerId, key: bytes) -> Stream | None:
        """The stream ``peer`` may send packets of, as our parent in its tree. Anything else
        is answered with Unsubscribe: lazy pushing (pub0sub), negative subscription
        (nanomsg), so a sender that thinks we are its child stops."""
        stream = self.streams.get(key)
        if stream is None or stream.parent != peer or not stream.carried:
            self.leaving.leave(peer, key)
            return None
        return stream

    @property
    def routes(self) -> dict[int, Route]:
        """The searches in flight here, by uid (``searches``)."""
        return self.searches.routes

    # --- plumbing -------------------------------------------------------------------------

    def _settle(self, now: float) -> None:
        """The end of an event: what it let go (held publishes, a backlog, marks, local
        clients' deferred calls) goes, and the streams' pace is told."""
        self.flow.after_event(now)
        self.clients.run_deferred(now)  # (after the backlog and credit let theirs go)
        self.flow.settle_pace(now)

    def _flush(self, now: float) -> list[Effect]:
        self._settle(now)
        deadline = self._timers.earliest()
        if deadline is not None and deadline != self._announced:
            self.out.append(SetTimer(deadline))
        self._announced = deadline
        return self.out.take()
