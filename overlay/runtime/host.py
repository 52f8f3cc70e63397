"""The trio driver of one node's protocol core: it feeds the core and carries out its effects.

The core (``overlay.core.node.Node``) is a synchronous state machine; this host is the only
code that calls it, always from trio tasks of one thread, so no two calls interleave. Every
input (a message from a link, a link opening or closing, a timer, a local client's request)
becomes one core call, and the effects it returns are carried out at once and in order:

* ``Send``: queued on that peer's link (``PeerLink.send``, which never blocks). A peer with
  no open link is skipped, as the simulator does: the core learns of the loss from
  ``link_down`` or from its heartbeats, and its timeouts resend what matters.
* ``Deliver``: queued on that client's session (``ClientSink.deliver``, never blocking).
* ``SetTimer``: moves the deadline of the one timer task (the core keeps its own timer
  queue and asks for its earliest deadline only).
* ``DropPeer``: closes that peer's link with the core's reason (a warning, unless the peer
  only went silent).
* ``Remember``: appended to the node's state file, if it has one (``state_file``), once per
  core call and before any frame that call queued is sent.

Time is ``trio.current_time()``, so tests under trio's ``autojump_clock`` run the real node
in virtual time. Links and client sessions are owned by the tasks that run them (the
listener's and dialers' nurseries, the client port's); the host only keeps a table of them.

Faults: no peer input and no timer may stop the node. A core call that raises is a bug of
ours, whatever brought it on; the host contains it where it happened. On a peer's message it
closes that peer's link; in a timer it loses that one timer (``TimerQueue.due``). Either way
it logs the traceback, counts the fault (``receive_faults``, ``timer_faults`` in ``overlay
stats``) and carries out what the core had done before it raised (``Node.after_fault``), so
every other stream goes on. A message our code built that does not encode closes the link
it was for (``encode_faults``): the protocol assumes a link loses nothing silently. The
simulator and the core's tests fence nothing: there a fault fails the run.

Locations: a peer's Hello and Neighbours are the messages the host judges before the core
sees them. A Hello's location must be the one the peer's node id gives unless the operator
vouches for the peer (``vouched``, the config's ``[peers] trusted``), and its id must carry
the network's work (``id_work``, the config's ``[peers] identity_work``); a Hello that fails
either closes its link with a warning, and the core never learns of the peer
(``overlay.runtime.vouching``). With ``vouches``, each Hello we send carries our signed word
that we are linked to its peer, and an announcement of neighbours keeps only those shown
by their own word (``overlay.runtime.neighbour_vouches``).

Duplicate links: two nodes that dial each other at once end up with two authenticated links.
Both ends keep the one whose initiator has the smaller node id, so they agree without a word
(``PeerLink.initiator``); a link that loses is closed before the core ever sees it, or, if it
was already registered, replaced by the winner (the core sees the peer go and come back,
which it handles as any reconnect).
"""

from __future__ import annotations

import logging
import math
import os
import random
from collections.abc import Callable, Container, Sequence
from typing import Any, Protocol

import trio

from overlay.codec import EncodeError, encode
from overlay.core.config import NodeConfig
from overlay.core.effects import (
    ClientId,
    Deliver,
    DropPeer,
    Effect,
    PeerId,
    Remember,
    Send,
    SetTimer,
)
from overlay.core.events import ClientEvent
from overlay.core.node import Node
from overlay.messages import Hello, Message, Neighbours, SubscribeData, SubscribeRun
from overlay.runtime.budget import QueueBudget
from overlay.runtime.cooldown import FAULTS, Cooldowns
from overlay.runtime.identity import node_id_text
from overlay.runtime.location_file import LocationFile
from overlay.runtime.log_budget import LogBudget
from overlay.runtime.neighbour_vouches import NeighbourVouches
from overlay.runtime.refusals import Refusal, Refusals
from overlay.runtime.runs import Runs
from overlay.runtime.state_file import StateFile, StateFileError
from overlay.runtime.vouching import location_refusal, work_refusal

log = logging.getLogger("overlay.node")

# Messages whose vouches the host adds on their way out (``neighbour_vouches``).
_VOUCHED = frozenset({Hello, Neighbours})


class PeerLink(Protocol):
    """What the host needs of an authenticated link (``overlay.runtime.link.Link``)."""

    peer: PeerId
    initiator: PeerId  # the node id of the side that dialled
    # The IP address the peer connected from, if it dialled us (``overlay.runtime.cooldown``).
    address: str | None
    # Closed for something the operator should see, and why: counted and logged as a
    # warning (``overlay.runtime.refusals``); None for an ordinary disconnect.
    refusal: Refusal | None

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting to be written to the peer (``overlay stats`` shows it)."""

    def send(self, message: Message) -> None:
        """Queue ``message``; never blocks. A link whose queue overflows closes itself."""

    def send_encoded(self, body: bytes) -> None:
        """Queue a message the host has encoded already, for the next ``flush``."""

    def flush(self) -> None:
        """Write what is queued, as far as the connection takes it now; never blocks."""

    def close(self, reason: str) -> None:
        """Close the link (idempotent); its task then calls ``NodeHost.link_closed``."""


class ClientSink(Protocol):
    """What the host needs of a local client's session (``overlay.runtime.client_port``)."""

    def deliver(self, event: ClientEvent) -> None:
        """Queue ``event`` for the client; never blocks. A client that falls too far behind
        is disconnected by its session (then the port calls ``NodeHost.remove_client``)."""


class NodeHost:
    """Runs one ``Node`` core under trio. Create it, start ``run`` in a nursery (it runs the
    timer), then register links and clients as they come and go. ``vouched``: the peers
    whose Hello may claim any location; every other peer must sit where its id puts it,
    and its id must carry ``id_work`` bits of work (``keyspace.id_work``). ``vouches``:
    the signed word on links that neighbour announcements carry; a host without it (a
    test's) sends none and takes announced neighbours as said."""

    def __init__(
        self,
        node_id: PeerId,
        location: float,
        *,
        config: NodeConfig | None = None,
        rng: random.Random | None = None,
        clock: Callable[[], float] = trio.current_time,
        state: StateFile | None = None,
        location_file: LocationFile | None = None,
        vouched: Container[PeerId] = frozenset(),
        id_work: int = 0,
        budget: QueueBudget | None = None,
        cooldowns: Cooldowns | None = None,
        vouches: NeighbourVouches | None = None,
    ) -> None:
        self._clock = clock
        self._vouched = vouched
        self._id_work = id_work
        self._vouches = vouches
        # Every refused or cut-off peer and client, counted by reason and logged.
        self.refusals = Refusals(clock)
        # Peers cut off for a fault, refused until their cooldown ends (``cooldown``).
        self.cooldowns = cooldowns if cooldowns is not None else Cooldowns(clock)
        # The node-wide bound on queued bytes its links and client sessions share, if any.
        self.budget = budget
        self._state = state
        # Where a swapping node keeps its location across restarts, and the one it holds.
        self._location_file = location_file
        self._kept_location = location
        self._location_failed = False
        # Newest numbers the core asked to keep, not yet written (``_apply``), and whether a
        # link is handing over the messages of one read (``received`` .. ``read_done``).
        self._remembered: dict[bytes, int] = {}
        self._reading = False
        # Links sent to since their last ``flush``: flushed once a step's effects are all
        # queued, so the step's messages to one peer share frames (``_flush_outputs``).
        self._unflushed: dict[PeerId, PeerLink] = {}
        # Packets this step sends each peer, gathered into runs (``runs``), and the last
        # message encoded with its frame body: a broadcast encodes once for every child.
        self._runs: Runs[PeerLink] = Runs(self._send)
        self._encoded: tuple[Message, bytes] | None = None
        self._client_flushes: dict[ClientId, Callable[[], None]] = {}  # (``add_client``)
        self._unflushed_clients: dict[ClientId, Callable[[], None]] = {}
        remembered = None if state is None else state.kept
        # Swap nonces from the OS: a peer that saw enough of ``rng``'s output could predict
        # its next nonce and sway a swap's coin (``overlay.core.swaps``).
        self.core = Node(
            node_id,
            location,
            rng or random.Random(),
            config,
            remembered=remembered,
            entropy=os.urandom,
        )
        self.links: dict[PeerId, PeerLink] = {}
        self._clients: dict[ClientId, ClientSink] = {}
        self._next_client = 1
        self._deadline = math.inf
        self._timer_scope: trio.CancelScope | None = None
        self.started_at = clock()
        # Counters for ``overlay stats`` beyond the core's own.
        self.links_opened = 0
        self.links_refused = 0  # duplicate links closed by the tie-break
        self.frames_in = 0
        self.frames_out = 0
        self.data_in = 0  # of frames_in, SubscribeData and SubscribeRun: the rest is control
        self.packets_in = 0  # packets those carried
        # Faults contained (see the module notes): each a bug of ours to fix.
        self.receive_faults = 0  # the core raised on a peer's message: that link closed
        self.timer_faults = 0  # the core raised in a timer: that timer lost
        self.encode_faults = 0  # a message the core built did not encode: that link closed
        # Warnings a peer brings on (refusals, faults) share one budget (``log_budget``).
        self._warnings = LogBudget(clock)
        self._waiters: list[trio.Event] = []  # woken after every input (wait_until)

    @property
    def node_id(self) -> PeerId:
        return self.core.id

    # --- the timer ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Call the core's ``handle_timer`` whenever its deadline passes; runs until
        cancelled. The deadline is a cancel scope's, so moving it costs no task switch."""
        task_status.started()
        while True:
            with trio.CancelScope(deadline=self._deadline) as scope:
                self._timer_scope = scope
                await trio.sleep_forever()
            self._timer_scope = None
            now = self._clock()
            if now >= self._deadline:
                self._deadline = math.inf
                try:
                    effects = self.core.handle_timer(now)
                except Exception:
                    self.timer_faults += 1
                    self._log_fault("a timer", logging.ERROR)
                    effects = self.core.after_fault(now)
                self._apply(effects)

    # --- links ----------------------------------------------------------------------------

    def link_opened(self, link: PeerLink) -> bool:
        """An authenticated link to ``link.peer`` is up. Returns False if it lost the
        duplicate-link tie-break: the caller must close it and not report it closed."""
        current = self.links.get(link.peer)
        if current is not None:
            if current.initiator <= link.initiator:
                self.links_refused += 1
                return False
            # The new link wins: the old one goes (its task will not report it again).
            del self.links[link.peer]
            current.close("replaced by a link its peer also dialled")
            self._apply(self.core.link_down(self._clock(), link.peer))
        self.links[link.peer] = link
        self.links_opened += 1
        self._apply(self.core.link_up(self._clock(), link.peer))
        return True

    def link_closed(self, link: PeerLink, reason: str) -> None:
        """The link's task ended (EOF, error, or a close). Only the registered link of a peer
        counts: a replaced one was already taken out."""
        if self.links.get(link.peer) is not link:
            return
        del self.links[link.peer]
        if self._vouches is not None:
            self._vouches.forget(link.peer)
        if link.refusal in FAULTS:
            trusted = link.peer in self._vouched
            cooldown = self.cooldowns.cut_off(link.peer, link.address, trusted=trusted)
            self.refusals(
                link.refusal,
                node_id_text(link.peer),
                f"link closed: {reason}; refused for the next {cooldown:.0f} s",
            )
        elif link.refusal is not None:
            self.refusals(link.refusal, node_id_text(link.peer), f"link closed: {reason}")
        else:
            log.info("link to %s closed: %s", node_id_text(link.peer), reason)
        self._apply(self.core.link_down(self._clock(), link.peer))

    def received(self, link: PeerLink, message: Message) -> None:
        """A decoded message arrived on ``link``."""
        if self.links.get(link.peer) is not link:
            return  # a link being replaced: its last frames are stale
        self.frames_in += 1
        self._reading = True
        if type(message) is SubscribeData:
            self.data_in += 1
            self.packets_in += 1
        elif type(message) is SubscribeRun:
            self.data_in += 1
            self.packets_in += len(message.packets)
        if type(message) is Hello:
            refused = location_refusal(link.peer, message.location, self._vouched)
            if refused is not None:
                link.refusal = Refusal.LOCATION  # a lie about where it sits
                link.close(f"refused its Hello: {refused}")
                return
            refused = work_refusal(link.peer, self._id_work, self._vouched)
            if refused is not None:
                link.refusal = Refusal.ID_WORK  # an id that cost too little to make
                link.close(f"refused its Hello: {refused}")
                return
            if self._vouches is not None:
                refused = self._vouches.heard_hello(link.peer, message)
                if refused is not None:
                    link.refusal = Refusal.VOUCH
                    link.close(f"refused its Hello: {refused}")
                    return
        elif (
            type(message) is Neighbours
            and self._vouches is not None
            and link.peer in self.core.peers  # (before its Hello: the core cuts it off)
        ):
            taken = self._vouches.heard_neighbours(link.peer, message)
            if isinstance(taken, str):
                link.refusal = Refusal.VOUCH  # a neighbour it cannot show
                link.close(f"refused its Neighbours: {taken}")
                return
            message = taken
        now = self._clock()
        try:
            effects = self.core.receive(now, link.peer, message)
        except Exception as error:
            self.receive_faults += 1
            what = f"{type(message).__name__} from {node_id_text(link.peer)}"
            self._log_fault(what, logging.WARNING)  # (the close itself is an info line)
            link.close(f"internal error handling its {type(message).__name__}: {error!r}")
            effects = self.core.after_fault(now)
        self._apply(effects)

    def read_done(self) -> None:
        """A link handed over every message of one read: what they asked to keep goes to
        the state file in one write, and then the frames they queued go out."""
        self._reading = False
        self._write_remembered()
        self._flush_outputs()

    # --- local clients --------------------------------------------------------------------

    def add_client(self, sink: ClientSink, flush: Callable[[], None] | None = None) -> ClientId:
        """Register a client; ``flush``, if given, is called once a step's events for it are
        all delivered (as a link's ``flush``), so a session can write them in that step."""
        client = self._next_client
        self._next_client += 1
        self._clients[client] = sink
        if flush is not None:
            self._client_flushes[client] = flush
        return client

    def remove_client(self, client: ClientId) -> None:
        """The client went away: it leaves every stream it was in (the core prunes)."""
        self._client_flushes.pop(client, None)
        self._unflushed_clients.pop(client, None)
        if self._clients.pop(client, None) is not None:
            self._apply(self.core.remove_client(self._clock(), client))

    def subscribe(
        self,
        client: ClientId,
        key: bytes,
        *,
        last_seen: int | None = None,
        atomic: bool = False,
        descriptor: bytes | None = None,
    ) -> None:
        self._apply(
            self.core.subscribe(
                self._clock(),
                key,
                client,
                last_seen=last_seen,
                atomic=atomic,
                descriptor=descriptor,
            )
        )

    def unsubscribe(self, client: ClientId, key: bytes) -> None:
        self._apply(self.core.unsubscribe(self._clock(), key, client))

    def publish(self, client: ClientId, key: bytes, uid: int, data: bytes, **fields: Any) -> None:
        """``fields``: ``overlay.core.clients.LocalClients.publish``'s keyword arguments."""
        self._apply(self.core.publish(self._clock(), key, client, uid, data, **fields))

    def publish_room(self, key: bytes) -> int:
        """How many more publishes of stream ``key`` would go up now (``Node.publish_room``)."""
        return self.core.publish_room(key)

    def publish_window(self, key: bytes) -> int:
        """How many publishes of stream ``key`` go up at once (``Node.publish_window``)."""
        return self.core.publish_window(key)

    def publish_batch(
        self, client: ClientId, key: bytes, items: Sequence[tuple[int, bytes]]
    ) -> None:
        """Publish ``(uid, data)`` pairs of plain packets as one batch: each is answered as
        ``publish`` would answer it; at the stream's root they are numbered in one pass
        (``overlay.core.batches``)."""
        self._apply(self.core.publish_batch(self._clock(), key, client, items))

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, re-checking after every input the core handles:
        how tests and launchers wait for the node to reach a state without polling."""
        while not predicate():
            event = trio.Event()
            self._waiters.append(event)
            await event.wait()

    def _queued(self, peer: PeerId) -> int:
        link = self.links.get(peer)
        return 0 if link is None else link.queued_bytes

    # --- effects --------------------------------------------------------------------------

    def _apply(self, effects: list[Effect]) -> None:
        remembered = self._remembered
        runs = self._runs
        for effect in effects:
            if type(effect) is Send:
                link = self.links.get(effect.peer)
                if link is not None and not runs.offer(link, effect.peer, effect.message):
                    self._send(link, effect.peer, effect.message)  # (runs go at the flush)
            elif type(effect) is Deliver:
                sink = self._clients.get(effect.client)
                if sink is not None:
                    sink.deliver(effect.event)
                    flush = self._client_flushes.get(effect.client)
                    if flush is not None:
                        self._unflushed_clients[effect.client] = flush
            elif type(effect) is SetTimer:
                self._set_deadline(effect.at)
            elif type(effect) is DropPeer:
                dropped = self.links.get(effect.peer)
                if dropped is not None:
                    if effect.fault:
                        # The core cut the peer off for what it did (a forged signature, a
                        # message before Hello): the operator hears of it. A silent peer's
                        # drop is churn, not a refusal.
                        dropped.refusal = Refusal.PEER_DROPPED
                    dropped.close(effect.reason)
            elif type(effect) is Remember and self._state is not None:
                remembered[effect.key] = effect.number  # (each is its key's newest yet)
        if self._location_file is not None and self.core.location != self._kept_location:
            self._keep_location()  # (a swap: before the Hellos that announce it leave)
        if not self._reading:
            # The state file first, then the links and client sessions: a number is on
            # disk before any frame that shows it leaves (a restarted node must not give it
            # again). (During a link's read, both once at its end: ``read_done``.)
            if remembered:
                self._write_remembered()
            if self._unflushed or self._unflushed_clients or self._runs:
                self._flush_outputs()
        if self._waiters:
            for event in self._waiters:
                event.set()
            self._waiters.clear()

    def _flush_outputs(self) -> None:
        """Write what the step queued: on each link sent to, and to each client session
        that asked to be told (``add_client``)."""
        if self._runs:
            self._runs.send_all()
        self._encoded = None
        links, self._unflushed = self._unflushed, {}
        for link in links.values():
            link.flush()
        clients, self._unflushed_clients = self._unflushed_clients, {}
        for flush in clients.values():
            flush()

    def _send(self, link: PeerLink, peer: PeerId, message: Message) -> None:
        """Encode ``message`` and queue it on ``link``. A broadcast is one message object
        sent to every child in a row: it is encoded once (``_encoded``)."""
        encoded = self._encoded
        if encoded is not None and encoded[0] is message:
            body: bytes | None = encoded[1]
        elif self._vouches is not None and type(message) in _VOUCHED:
            body = self._encode(self._vouched_message(peer, message))
            if body is not None and type(message) is not Hello:  # (a Hello's vouch names
                self._encoded = (message, body)  # its peer: not for another)
        else:
            body = self._encode(message)
            if body is not None:
                self._encoded = (message, body)
        if body is None:  # (logged with its traceback by ``_encode``)
            link.close(f"internal error: our {type(message).__name__} did not encode")
            return
        self.frames_out += 1
        link.send_encoded(body)
        self._unflushed[peer] = link

    def _vouched_message(self, peer: PeerId, message: Message) -> Message:
        """``message`` to ``peer`` with the vouches it carries (``neighbour_vouches``)."""
        vouches = self._vouches
        assert vouches is not None
        if type(message) is Hello:
            return vouches.hello(peer, message)
        assert type(message) is Neighbours
        return vouches.announcement(message, self.core.peers)

    def _encode(self, message: Message) -> bytes | None:
        """``message``'s frame body, or None if our code built one that does not encode."""
        try:
            return encode(message)
        except EncodeError:
            self.encode_faults += 1
            self._log_fault(f"encoding our {type(message).__name__}", logging.ERROR)
            return None

    def _log_fault(self, where: str, level: int) -> None:
        """Log the exception being handled, with its traceback, within the warning budget."""
        left_out = self._warnings.allow()
        if left_out is not None:
            log.log(level, "internal error in %s%s", where, _left_out(left_out), exc_info=True)

    def _write_remembered(self) -> None:
        numbers, state = self._remembered, self._state
        if not numbers:
            return
        self._remembered = {}
        if state is None:
            return
        try:
            state.remember(numbers)
        except (OSError, StateFileError) as error:
            # A full or failing disk must not stop a node that is forwarding: the core still
            # remembers in memory; only a restart would forget. Said once, loudly.
            log.error("state file %s: %s; numbering is no longer kept on disk", state.path, error)
            self._state = None
            state.close()

    def _keep_location(self) -> None:
        location_file, location = self._location_file, self.core.location
        assert location_file is not None
        self._kept_location = location
        try:
            location_file.write(location)
        except OSError as error:
            # A full or failing disk must not stop the node. What was kept is removed, so
            # that a restart starts at the configured location rather than an older one;
            # each later move tries again. Said once.
            location_file.discard()
            if not self._location_failed:
                self._location_failed = True
                log.error(
                    "location file %s: %s; a restart will start at the configured location",
                    location_file.path,
                    error,
                )

    def _set_deadline(self, at: float) -> None:
        # SetTimer replaces any earlier one: the core names its earliest deadline each time.
        self._deadline = at
        if self._timer_scope is not None:
            self._timer_scope.deadline = at

    # --- inspection -----------------------------------------------------------------------

    def describe(self, key: bytes | None = None) -> dict[str, Any]:
        """A snapshot of this node for tools (``overlay tree``, ``overlay stats``): its
        identity, links and counters, and its view of every stream it carries (or of
        ``key`` only). Plain values only, so the client port can send it as CBOR."""
        core = self.core
        streams = []
        for stream in core.streams.values():
            if key is not None and stream.key != key:
                continue
            streams.append(
                {
                    "key": stream.key,
                    "target": stream.target,
                    "state": stream.state.value,
                    "parent": stream.parent,
                    "children": list(stream.children),
                    "clients": len(stream.local),
                    "high": stream.high,
                    "window": len(stream.window),
                    "restart": stream.restart_uid,
                    "kept": stream.root.kept is not None,
                    "publishing": core.publishing(stream.key),  # (``overlay.core.pace``)
                }
            )
        return {
            "id": core.id,
            "location": core.location,
            "boot_id": core.boot_id,
            "uptime": self._clock() - self.started_at,
            "peers": [
                {"id": p.id, "location": p.location, "queued": self._queued(p.id)}
                for p in core.peers
            ],
            "links": len(self.links),
            "queued": sum(link.queued_bytes for link in self.links.values()),
            "queued_max": max((link.queued_bytes for link in self.links.values()), default=0),
            "clients": len(self._clients),
            "queued_all": 0 if self.budget is None else self.budget.total,
            "refusals": dict(self.refusals.counts),
            "streams": streams,
            "stats": {
                **core.stats.as_dict(),
                "links_opened": self.links_opened,
                "links_refused": self.links_refused,
                "frames_in": self.frames_in,
                "frames_out": self.frames_out,
                "receive_faults": self.receive_faults,
                "timer_faults": self.timer_faults,
                "encode_faults": self.encode_faults,
            },
        }


def _left_out(count: int) -> str:
    return f" ({count} warnings left out before this one)" if count else ""
