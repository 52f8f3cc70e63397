"""A stream as one node sees it, and the table of its state transitions.

States (no entry in the node's table means the node does not carry the stream):

* ``JOINING``: a local client asked for the stream and our own search is in flight. The node
  is not in the tree yet and has no children: requests from others are routed past it.
* ``JOINED``: in the tree, with a parent.
* ``ROOT``: in the tree, as its root (no parent).
* ``RESTARTING``: was in the tree, lost its parent (it died, restarted, or something closer
  appeared); it keeps its children and routes a ResubscribeRequest with must-beat = its own
  location, and becomes ``JOINED`` again when that succeeds, or ``ROOT`` when nothing closer
  than itself outside its own subtree can be found.

Invariant that keeps trees acyclic: a node takes a parent only when it has no children (it
does not carry the stream, or it is JOINING). A childless node cannot be anyone's ancestor,
so the new parent link closes no cycle.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from keyspace.location import key_location
from overlay.core.config import NodeConfig
from overlay.core.delivery import Member
from overlay.core.early_packets import EarlyPackets
from overlay.core.effects import ClientId, PeerId
from overlay.core.epochs import Frontier
from overlay.core.fills import Fill
from overlay.core.local_publishes import BatchAck
from overlay.core.packet_pace import PacketPace
from overlay.core.uid_table import UidTable
from overlay.core.window import Window
from overlay.errors import LocalProtocolError
from overlay.messages import MAX_PACKET, PublishData, PublishSucceeded

# Restart uids a stream remembers. Restarts reach a node one at a time per ancestor that lost
# its link, so a handful covers every restart still travelling through the subtree.
RESTARTS_REMEMBERED = 16


class State(Enum):
    JOINING = "joining"
    JOINED = "joined"
    ROOT = "root"
    RESTARTING = "restarting"


class Change(Enum):
    ATTACHED = "attached"  # a SubscribeSucceeded(NewRoot) made a peer our parent
    BECAME_ROOT = "became root"  # a search ended here and we are the closest node
    JOIN_FAILED = "join failed"  # our own search ended without a tree
    PARENT_LOST = "parent lost"  # the parent died, restarted, or must be replaced
    # A member that routed its restarting ancestor's resubscribe past itself takes the node
    # that accepted it as its new parent (spec: "we may need to route our resubscribe
    # request through one of our children; this must be handled correctly").
    REPARENTED = "reparented"
    # A root linked to a node closer to the key hands the tree on (spec: "when a new node
    # is added ... we restart the subscription").
    CLOSER_NODE = "closer node"
    # A root that looked again for another tree of its stream found one and joins it.
    MERGED = "merged"


# (state before, change) -> state after; None is "not carried". Anything missing is a bug.
TRANSITIONS: dict[tuple[State | None, Change], State | None] = {
    (None, Change.ATTACHED): State.JOINED,
    (State.JOINING, Change.ATTACHED): State.JOINED,
    (None, Change.BECAME_ROOT): State.ROOT,
    (State.JOINING, Change.BECAME_ROOT): State.ROOT,
    (State.JOINING, Change.JOIN_FAILED): None,
    (State.JOINED, Change.PARENT_LOST): State.RESTARTING,
    (State.ROOT, Change.CLOSER_NODE): State.RESTARTING,
    (State.JOINED, Change.REPARENTED): State.JOINED,
    (State.RESTARTING, Change.ATTACHED): State.JOINED,
    (State.RESTARTING, Change.BECAME_ROOT): State.ROOT,
    (State.ROOT, Change.MERGED): State.JOINED,
}

# What the table governs, and what it does not. A change moves ``state`` and ``parent`` only
# (``Membership.change``). The root's own record (``Stream.root``, a ``RootState``) is made
# with the stream and lives as long as it: no change creates, resets or drops it, because
# parts of it are read after the node stops being root, and dropping them would change what
# the node does:
#
# * Leaving ROOT (``CLOSER_NODE``, ``MERGED``): ``Membership.change`` sets the new state,
#   then ``children_changed`` reads the record in it (drops what is pending, commits what
#   it held, releases held acks); local publishes whose numbers were dropped go back to
#   ``backlog``, which ``Backlog.drain`` routes afresh from the new state at the event's
#   end; ``Showing.tell_marks`` sets ``told_at`` at that end too. ``Merges.merged`` clears
#   only the look, the grace, ``probe_misses`` and ``cross_misses``; ``Restarts.restart``
#   (``CLOSER_NODE``) only the look.
# * Back to ROOT (``BECAME_ROOT`` from RESTARTING, after either): ``Takeover.became_root``
#   resets ``committed``, ``asked``, ``holds`` and ``remembered`` (and, for a takeover,
#   ``look_due`` and ``relooks``); the rest is read as the last root left it: the probe
#   backoff (``probed_at``, ``looked_probe_at``, ``trailed_at``, ``crossed_at``, and
#   ``probe_misses`` and ``cross_misses`` after ``CLOSER_NODE``), the marks' rounds
#   (``mark_rounds`` may still bar repeats, ``told_at`` delay a notice, ``pace`` lengthen
#   that delay until its first packet shows the pause), ``recover_token``, ``backlog``.
#
# So "the node is root" is ``state is ROOT``; ``root`` is what this node keeps of being
# root, not a sub-state. The uid table (``Stream.uids``) is read by design at a former root
# and is not part of it.

# States in which the node is part of a tree and accepts children. A restarting node still
# has its subtree and takes new members (spec: "If we have the key ..."); the restart uid
# keeps it from adopting its own ancestors.
CARRYING = frozenset({State.JOINED, State.ROOT, State.RESTARTING})


def next_state(state: State | None, change: Change) -> State | None:
    try:
        return TRANSITIONS[(state, change)]
    except KeyError:
        raise LocalProtocolError(f"stream in state {state} cannot take {change.value}") from None


# Who a publish came from: a peer (bytes) or a local client (int).
Source = PeerId | ClientId


@dataclass(slots=True, eq=False)
class Pending:
    """A publish a root numbered and has not sent down yet (``confirming``)."""

    source: Source
    message: PublishData
    confirmed: bool
    at: float = 0.0  # when it was numbered: its confirmation is due ``confirm_deadline`` later
    waited: bool = True  # False: it goes down unconfirmed, its child not waited for
    # When the root, past its deadline and hearing nothing from its child, asked that child
    # for a sign of life (``Confirming.release_overdue``); None: not asked.
    asked: float | None = None


_DEFAULTS = NodeConfig()


@dataclass(slots=True, eq=False)
class RootState:
    """What a stream's node keeps for numbering and ordering as the tree's root: packet
    numbers, commits, confirmations, the grace after a takeover, looks and probes for other
    trees, the keep of a stream nobody is in. See ``Stream.root`` for its lifetime."""

    # New publishes held while its window is all uncommitted (``backlog``), by uid.
    backlog: dict[int, tuple[Source, PublishData]] = field(default_factory=dict)
    # At a root that took over a tree: until then it numbers nothing new (see publishing).
    recover_until: float | None = None
    recover_token: int = 0
    recover_base: int | None = None  # the head when the grace began: claims move it a window
    # The number a root founded on what it remembered (``memory``): numbers up to it were
    # given by an earlier numbering that nobody below is owed (``joining.claimed``).
    remembered: int | None = None
    # A root that took over looks again for another tree before numbering (merges).
    look_due: bool = False
    looking: int | None = None  # the uid of that look's search while it runs
    look_lost: bool = False  # a child left while it ran: look once more (merges)
    relooks: int = 0  # looks repeated so far for this takeover
    # Probes answered by a closer root whose look then found no way into its tree (probes):
    # each one doubles the time to the next probe, up to 2**_MAX_BACKOFF rounds.
    probe_misses: int = 0
    probed_at: float | None = None  # when this root last probed on its round or a new link
    looked_probe_at: float | None = None  # when a look's end last made it probe (probes)
    trailed_at: float | None = None  # when a probe last made this root look (probes)
    # Looks a closer origin's look made this root follow that have not merged yet, and when
    # the last began (probes): each one doubles the time before another crossing counts.
    cross_misses: int = 0
    crossed_at: float | None = None
    crossed: int | None = None  # a closer root's search crossed a repair: the next look's trail
    look_trail: int | None = None  # the trail the running look follows, if any (probes)
    # At a root: numbers it had recorded lost and asked a resubscriber's subtree for again,
    # which it takes in if they come (refills, ``Refills.ask_newcomer``).
    reopened: list[tuple[int, int]] | None = None
    # A root nobody is in any more, keeping the stream's numbering (``keeping``): the token
    # of the timer that ends the keep (None: not kept).
    kept: int | None = None
    # At a root (commits): the newest packet enough children are known to hold, which
    # bounds what local clients are shown (None: no bound), the newest asked about
    # (HeldQuery), the heartbeat rounds that ask has waited, what each child asked says it
    # holds (-1: no answer yet), and acknowledgements held back until committed.
    committed: int | None = None
    asked: int | None = None
    ask_rounds: int = 0
    holds: dict[PeerId, int] = field(default_factory=dict)
    # Children that let a question go unanswered for ``confirm_timeout``: still asked, and
    # what they say they hold still counts, but not waited for until they answer again.
    silent: set[PeerId] = field(default_factory=set)
    # By (who asked, publish uid), so a retry while the first waits is answered once.
    unacked: dict[tuple[Source, int], PublishSucceeded | BatchAck] = field(default_factory=dict)
    unacked_low: int | None = None  # the lowest packet number among them
    # At a root (confirming): publishes numbered but not yet sent down, by number in
    # order, and the heartbeat rounds the oldest has waited for its confirmation.
    pending: dict[int, Pending] = field(default_factory=dict)
    pending_rounds: int = 0
    # Pending numbers it gave up on (``Confirming.give_up``), by number in order, above
    # every pending one: given to no fresh publish, they go down, unconfirmed, once a
    # publish shows this side of any cut has a publisher (``Confirming.resolve``).
    set_aside: dict[int, Pending] = field(default_factory=dict)
    confirm_token: int | None = None  # the timer that next weighs the oldest (None: none)
    # The mark it last sent down (``Stream.shown_upto``): ``mark_rounds``: quiet heartbeat
    # rounds the root has repeated that mark; ``mark_carried``: a packet took its mark down
    # since the last round; ``told_at``: when the root's mark last went down, on a packet or
    # a notice (``showing``); ``noticed_at``: when a moved mark last went in a notice;
    # ``pace``: how often its packets go down, which sets how long a moved mark waits for
    # one (``packet_pace``; made when the first goes down: most members of a stream are
    # never its root).
    mark_rounds: int = 0
    mark_carried: bool = False
    told_at: float | None = None
    noticed_at: float | None = None
    pace: PacketPace | None = None


@dataclass(slots=True, eq=False)
class Stream:
    key: bytes
    target: float  # the key's location
    state: State
    parent: PeerId | None = None
    # Insertion-ordered dicts used as sets, so broadcasts go out in a deterministic order.
    children: dict[PeerId, None] = field(default_factory=dict)
    local: dict[ClientId, Member] = field(default_factory=dict)
    join_uid: int | None = None  # the uid of our own search while JOINING or RESTARTING
    # The restart label (see overlay.core.restarts): while our subtree is detached, the uid
    # of the restart routing to reattach it and the location of that restart's origin.
    restart_uid: int | None = None
    restart_origin: float | None = None
    confirming: set[PeerId] | None = None  # children yet to confirm restart_uid
    subtree_high: int | None = None  # the newest packet our subtree holds, as confirmed
    # The last few restart uids relayed or sent, newest last: none is relayed twice.
    restarts_seen: deque[int] = field(default_factory=lambda: deque(maxlen=RESTARTS_REMEMBERED))
    descriptor: bytes | None = None  # a signed stream's public key and name
    # --- packets (see overlay.core.publishing) ---
    window: Window = field(
        default_factory=lambda: Window(_DEFAULTS.window_packets, _DEFAULTS.window_bytes)
    )
    frontier: Frontier = field(
        default_factory=lambda: Frontier(_DEFAULTS.max_open_epochs, _DEFAULTS.max_done_epochs)
    )
    high: int | None = None  # the newest packet number known to exist
    next_in: int | None = None  # the number expected next from the parent (None: any)
    contiguous_from: int | None = None  # no packet from here on was missed by this node
    # Where a fresh join placed us (the parent's head + 1), while no packet has come: what
    # our subtree was told it starts at, so a resubscribe before the first packet resumes
    # there rather than at whatever head it meets.
    start: int | None = None
    queued: list[tuple[Source, PublishData]] = field(default_factory=list)
    # Publish uid -> packet number (``uid_table``), built when the node first becomes root.
    # Not part of ``RootState``: a former root (it handed the tree on, or merged) still
    # answers a publisher's retry with the number it gave (``PacketFlow``), its witnesses
    # read it, and a root again keeps it rather than rebuilding it from its window.
    uids: UidTable | None = None
    # What the node keeps as a root (``RootState``): made with the stream and never dropped,
    # as parts of it are read after it stops being root (see the notes by ``TRANSITIONS``).
    root: RootState = field(default_factory=lambda: RootState())
    # Children waiting for packets from before we joined, asked of our parent (refills).
    fills: list[Fill] | None = None
    # Children adopted whose catch-up waits for such packets (refills, ``Refills.catch_up_later``):
    # nothing live goes to them until it is sent, in order.
    catching_up: set[PeerId] | None = None
    # Our last child died and we stay a while, holding the window (``leaving``): the token
    # of the timer that ends the stay (None: not lingering).
    linger: int | None = None
    # At a publisher's node (confirming): its publishes a root numbered, by uid, that it
    # pushes up under those numbers to a root that takes the tree over.
    claims: dict[int, int] = field(default_factory=dict)
    # What local clients may be shown (``showing``): the root has committed every packet up
    # to ``shown_upto`` (None: no word yet, and a member shows nothing); at a root, the mark
    # it last sent down (see ``RootState.mark_rounds``).
    shown_upto: int | None = None
    # At a member: the newest number below its parent's mark it asked that parent for, and
    # when (``showing``, ``_ask_below``); None: nothing asked of this parent.
    asked_below: tuple[int, float] | None = None
    # At a member that asked its new parent to fill a gap: the packets that came above the
    # gap before the answer (``early_packets``); None: no such question out.
    early: EarlyPackets | None = None

    @property
    def signer(self) -> bytes | None:
        """The public key packets must be signed with (None: an open stream)."""
        return None if self.descriptor is None else self.descriptor[:32]

    @property
    def carried(self) -> bool:
        return self.state in CARRYING

    def claim(self, number: int | None) -> None:
        """Our subtree has seen up to ``number`` (a confirmation, a resubscriber we adopted
        while detached, a packet pushed up to us): kept so that, if our own search makes us
        root, we number above it (``Takeover.reported``)."""
        if number is None or number < 0:
            return
        if self.subtree_high is None or number > self.subtree_high:
            self.subtree_high = number

    @property
    def fed(self) -> Iterable[PeerId]:
        """The children live packets and gaps go to: all but those whose held-back catch-up
        (``catching_up``) must reach them first."""
        waiting = self.catching_up
        if waiting is None:
            return self.children
        return [child for child in self.children if child not in waiting]

    @property
    def idle(self) -> bool:
        """Nobody needs this node in the tree any more: it may leave (prune)."""
        return not self.children and not self.local and not self.fills and self.linger is None


def new_stream(
    key: bytes, state: State, parent: PeerId | None, descriptor: bytes | None, config: NodeConfig
) -> Stream:
    """A stream a node starts carrying (or joining), its window and frontier sized by config."""
    return Stream(
        key,
        key_location(key),
        state,
        parent=parent,
        descriptor=descriptor,
        window=Window(config.window_packets, config.window_bytes),
        frontier=Frontier(config.max_open_epochs, config.max_done_epochs),
    )


# A head a peer reports (a search's last_seen, a child's report, a parent's or new root's
# head) beyond this is not believed: numbering must have room to go on below MAX_PACKET, and
# a root that took such a head would have no number left to give (nor could a message
# carry it).
LAST_CLAIM = MAX_PACKET - 2**32


def next_number(stream: Stream) -> int:
    """The number a root gives its next new packet: past every number the tree is known to
    have given, and never below what this node has processed."""
    after = 0 if stream.high is None else stream.high + 1
    if stream.root.pending:  # numbered, not yet sent down (``confirming``)
        after = max(after, next(reversed(stream.root.pending)) + 1)
    if stream.root.set_aside:  # (given up on, above every pending one: never given again)
        after = max(after, next(reversed(stream.root.set_aside)) + 1)
    return after if stream.next_in is None else max(after, stream.next_in)
