"""A node's protocol limits. Every bound on memory and work the core keeps comes from here."""

from __future__ import annotations

import math
from dataclasses import dataclass

from overlay.messages import MAX_OPEN_EPOCHS, MAX_WIRE_HTL


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Limits of one node's protocol core; the defaults suit a testnet of up to 10^5 nodes."""

    # Spec: "certainly max HTL should be low, say 10". HTL resets whenever a route gets
    # closer to the key, so it only bounds the search *past* the closest node found.
    max_htl: int = 10
    # The budget a root starts its own checks for another root with: a look (``merges``) and
    # a probe (``probes``); None: twice max_htl (``check_htl``). A root is where a search
    # ran out of budget, so a check with the same budget explores little beyond what that
    # search did; after heavy churn greedy routing has many local minima, where two roots of
    # one connected network can miss each other and number the same packets. Checks are
    # rare (once per repair, once per probe round), so a wider one costs little. Progress
    # resets a search, a look among them, to max_htl, and a probe to this budget again.
    repair_htl: int | None = None
    # Spec: "If we have less than 32 streams, we route the request. Otherwise we send a
    # RejectOverload". Searches in flight for a key count too, so a burst of requests for
    # many keys cannot exceed the limit.
    max_streams: int = 32
    # Searches one node routes for one key at once. A root's failure sends one resubscribe
    # per orphaned subtree through the nodes near the key; a peer sending fresh uids in a
    # loop is answered RejectOverload beyond this, instead of holding a route for each.
    max_searches_per_key: int = 256
    # A peer answers a forwarded search at once, with Accepted or a reply; one that has not
    # within this time counts as failed and the search backtracks past it. Several round
    # trips of a loaded link.
    accept_timeout: float = 5.0
    # After Accepted, how long the search below that peer may take before we backtrack. A
    # search may run many hops below a peer, so this is far above one round trip.
    request_timeout: float = 60.0
    # A restarting node routes its resubscribe once its whole subtree has confirmed the
    # restart, or after this long: a member slow to confirm may let the request close a
    # cycle, a dead one is dropped by liveness long before. Many round trips of a deep tree.
    confirm_timeout: float = 10.0
    # A node asked to serve a child packets from before it joined asks its parent for them
    # (``refills``) and waits this long at most before serving what it has: a few round
    # trips up a deep tree, well within the child's own request_timeout.
    fill_timeout: float = 10.0
    # Loop detection remembers uids this long and at most this many (oldest forgotten
    # first); together they bound memory whatever the request rate.
    seen_uid_ttl: float = 600.0
    seen_uid_capacity: int = 100_000
    # Links that come and go within this many seconds are announced to peers together, in
    # one Neighbours message per peer (friend-of-a-friend routing).
    announce_delay: float = 1.0
    # Liveness (pub0sub): every ``heartbeat_interval`` a node sends each peer a Heartbeat and
    # drops any peer it has heard nothing from for ``dead_after``; so a dead or cut-off peer
    # is noticed within ``dead_after + heartbeat_interval``, whatever the transport says.
    # Three missed beats make a dead peer: one lost to a busy link is no reason to tear a
    # tree apart, and 15 s keeps a 10^4-node testnet's chatter to a few messages a second
    # per node.
    heartbeat_interval: float = 5.0
    dead_after: float = 15.0
    # A node that becomes root of a tree that already carried packets (its root died, or
    # it is closer to the key) numbers no new packet for this long: the old root's other
    # children notice the loss up to one heartbeat interval later than the first, and then
    # need a search to report what they hold. Numbering earlier could give a number twice,
    # so keep it above heartbeat_interval plus a search's time.
    takeover_grace: float = 10.0
    # A root whose link to a child closed (the driver saw it go, or the child came back
    # with a new boot id) holds numbering this long, not ``takeover_grace``, before it
    # looks for a tree the lost subtree may make (``merges``). The subtree's members saw
    # the same close at the same moment and restart at once, so a few of their searches'
    # round trips suffice; a loss found by silence keeps ``takeover_grace``, as the two
    # ends may notice it a heartbeat interval apart. Small, because any peer can join as
    # a child and drop its link: each drop costs the stream this much delay. (Never more
    # than ``takeover_grace``.)
    lost_child_grace: float = 1.0
    # A node whose last child died (not one that left) while it holds packets stays in the
    # tree this long before it leaves: if its parent dies too, its window may be the only
    # copy of packets a new root must gather (were it to leave, the subscribers below a dead
    # branch would never get them).
    # Long enough for its parent's loss to be noticed and a takeover to gather; 0: leave at
    # once, as a node whose last child unsubscribes does.
    linger: float = 30.0
    # A root whose last member left keeps the stream this long (``keeping``): its numbering,
    # uid table and window, so the next publisher goes on from the next number, a retried
    # publish is still recognised and a late subscriber catches up. 0: drop it at once.
    keep_idle: float = 600.0
    # How many streams' newest packet numbers a node remembers after it stops carrying
    # them (``memory``): a root founded again continues from there, not from 0. About
    # 100 bytes each; the least recently raised is dropped first.
    remembered_streams: int = 65_536
    # Every ``probe_interval`` (rounded to whole heartbeat rounds) each root routes a
    # RootProbe toward its key, asking whether a closer root of the stream exists: a split
    # that outlived every takeover's look (two sides of a healed partition) is found and
    # merged within about this long. A probe costs a handful of messages; 0 turns it off.
    probe_interval: float = 30.0
    # Whether this node's driver dials peers (the runtime sets it for a node with peers to
    # connect to; the simulator for every node of a network). Such a node, with no peer up,
    # holds its own searches until one is, rather than become the root of a tree of one that
    # numbers publishes beside the real tree (``searches``). A node that has had a peer holds
    # them too, whatever this says. Off: a node started alone is the whole network.
    wait_for_peers: bool = False

    # --- publishing -----------------------------------------------------------------------
    # The catch-up window of each stream: this many recent packets, and at most this many
    # payload bytes, whichever binds first. 1024 packets cover a subscriber that was away
    # for 10 s of a 100 packet/s stream; 4 MiB keeps 32 full streams under 128 MiB. Packets
    # a local client has not been shown yet (the root's commit trails them: ``showing``)
    # stay beyond these, up to twice them, so a member with clients may hold 8 MiB.
    window_packets: int = 1024
    window_bytes: int = 4 * 1024 * 1024
    # What one peer may draw from this node in catch-ups (``catch_up_budget``), across all
    # streams, in whole windows (``window_packets`` frames and ``window_bytes`` payload
    # bytes each): ``catch_up_rate`` a second, up to ``catch_up_burst`` at once; a search
    # past it is refused (RejectOverload) and backtracks to another peer. An honest peer
    # draws one catch-up per stream it joins or rejoins through us, mostly a few packets
    # after its ``last_seen``, at most one window; four windows at once and two a second
    # cover a relay joining from the first packet on several full streams together, so
    # it rarely notices (and a refused search backtracks: it costs hops, not packets). Four
    # windows of bytes are one link's send queue (16 MiB), the most one link should take
    # at once. A hostile peer sending fresh searches in a loop draws two windows a second
    # instead of one per request (a 70-byte request answered with 4 MiB). The burst is at
    # least one window, so a whole catch-up always fits a full bucket.
    catch_up_rate: float = 2.0
    catch_up_burst: float = 4.0
    # The root remembers at least this many publish uids per stream (up to an eighth more,
    # then the oldest go at once), so a retried publish (a client reconnect, a Spark task
    # retry) is acknowledged with its original number, not stored twice. About 100 bytes
    # each.
    publish_uids: int = 65_536
    # Publishes a node relays up the tree and is waiting on, node-wide; and publishes a
    # stream holds while the node is joining or restarting. Beyond these: BUSY.
    max_relayed_publishes: int = 16_384
    # Payload bytes the relayed publishes keep, node-wide, until answered: one whose
    # confirmation passes up through us is claimed for its publisher, should it die
    # (``witnesses``). Past this, a relayed publish is passed up without being kept. Peer
    # witnesses (``peer_witnesses``) take at most half of it, an eighth per peer.
    witness_bytes: int = 64 * 1024 * 1024
    # Direct peers (not the stream's parent, the closest to its location first) that a
    # publisher's node tells the number it confirms for its own publish, so they claim it
    # should it die before its claim reaches a new root (``peer_witnesses``). 0: none.
    # Three, not two: the failure that takes the publisher's node may take the two closest
    # peers too (dead, or cut off with it).
    witness_peers: int = 3
    max_queued_publishes: int = 1024
    # Local publishes one stream sends up and awaits the answers of at once, by count and
    # by payload bytes; the node holds the rest in order (``credit``). 2 MiB is an eighth of
    # a link's send queue (16 MiB), so a publisher's burst never fills the link to its
    # parent, and half a window's bytes, so it never fills the root's window by itself;
    # it covers a commit round trip of a fast link (2 MiB per millisecond). 256 keeps a
    # round trip of small packets busy (a quarter of a window, a quarter of the root's
    # backlog bound, ``max_queued_publishes``).
    publish_credit_packets: int = 256
    publish_credit_bytes: int = 2 * 1024 * 1024
    # How much longer than with nothing queued a stream's publishes may take to be answered:
    # the node keeps as many out as the tree answers within that (``pace``), so a publisher
    # that outruns the tree waits here, not in queues inside it. 0: always the full credit.
    publish_queue_delay: float = 0.1
    # A local publish not answered within this time is sent again (same uid, so it takes
    # effect once), up to ``publish_attempts`` times; relayed ones are forgotten then.
    publish_timeout: float = 10.0
    publish_attempts: int = 3
    # Open epochs a stream may have at once (the root refuses more) and done epochs each
    # node remembers, so a late packet of a finished epoch is refused.
    max_open_epochs: int = 64
    max_done_epochs: int = 4096
    # Whether this node, as a root, sends a peer's publish down only once the publisher's
    # node has confirmed its number (``confirming``). On (the default): a packet numbered in
    # the instant a partition cuts the root off from its publisher is shown to nobody, so
    # the two sides of the cut never show one number with two contents; it costs every
    # packet from a peer one more round trip between the root and the publisher's node
    # (about twice the delivery latency, see the README). Off: packets go down as soon as
    # they are numbered, and that race can show a number that the other side gives to
    # another publish. Only the root's setting counts; every node answers PublishNumbered.
    confirm_publishes: bool = True
    # How long a root holds a peer's numbered publish for its confirmation while a later
    # packet waits behind it (``confirming``); past it the packet goes down unconfirmed, so
    # a child that never confirms (or is slow to) costs the stream at most this much delay.
    # A child that fell silent is asked for a sign of life and has half of it again to give
    # one; without it, its packet and those behind are dropped and published afresh.
    # Well above a loaded link's round trip, so a healthy publisher's node confirms first.
    # A lone pending packet, which holds nobody up, waits ``confirm_timeout`` as before.
    confirm_deadline: float = 1.0
    # Good signatures remembered, so a node verifies each packet once (see signatures.py).
    signature_cache: int = 8192
    # A root's commit mark rides the packets it sends down (``showing``); when it moved and
    # no packet took it down, a standalone notice goes once this long has passed since the
    # last did (at once on a stream that was quiet that long), or ``mark_patience`` on a
    # steady stream. Above the packet interval of a stream at 100 packets a second, so
    # under load the packets carry its marks; a member shows a packet at most this much
    # (or ``mark_patience``) later than a notice at once would have.
    mark_delay: float = 0.01
    # How long a moved mark waits for the next packet on a steady stream, one whose root
    # sends packets down at least twice in this time (``packet_pace``). 0: ``mark_delay``.
    mark_patience: float = 0.03
    # Location swapping (``swaps``), for a darknet, whose links follow trust between people
    # and cannot be rewired into a small world: the locations move instead. Every
    # ``swap_interval`` seconds, with a random phase, a node starts a swap along a random
    # walk of ``swap_htl`` hops (Freenet 0.7 walks 10). 0: the node neither starts nor
    # takes part in swaps, as where a node's id gives its location.
    swap_interval: float = 0.0
    swap_htl: int = 10
    # A swap not finished within this long is given up, by its two ends and every hop.
    swap_timeout: float = 10.0
    # Walks a node relays at once (a few dozen bytes each until they end or time out); one
    # peer's walks may hold at most a quarter of them, so one peer cannot starve the rest.
    max_swap_walks: int = 256

    @property
    def check_htl(self) -> int:
        """The budget of a root's look or probe, and the most a resubscribe or probe from a
        peer may carry here (``repair_htl``)."""
        if self.repair_htl is None:
            return min(2 * self.max_htl, MAX_WIRE_HTL)
        return self.repair_htl

    def __post_init__(self) -> None:
        if not 1 <= self.max_htl <= MAX_WIRE_HTL:
            raise ValueError(f"max_htl must be in [1, {MAX_WIRE_HTL}], got {self.max_htl}")
        if self.repair_htl is not None and not self.max_htl <= self.repair_htl <= MAX_WIRE_HTL:
            raise ValueError(
                f"repair_htl must be in [max_htl, {MAX_WIRE_HTL}] (max_htl is {self.max_htl}),"
                f" got {self.repair_htl}"
            )
        if self.max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, got {self.max_streams}")
        if not 0 < self.accept_timeout <= self.request_timeout:
            raise ValueError(
                "need 0 < accept_timeout <= request_timeout, got "
                f"{self.accept_timeout} and {self.request_timeout}"
            )
        if not 0 < self.heartbeat_interval < self.dead_after:
            raise ValueError(
                "need 0 < heartbeat_interval < dead_after, got "
                f"{self.heartbeat_interval} and {self.dead_after}"
            )
        if not self.confirm_timeout > 0:
            raise ValueError(f"confirm_timeout must be positive, got {self.confirm_timeout}")
        if not 0 < self.confirm_deadline <= self.confirm_timeout:
            raise ValueError(
                "need 0 < confirm_deadline <= confirm_timeout, got "
                f"{self.confirm_deadline} and {self.confirm_timeout}"
            )
        if not isinstance(self.confirm_publishes, bool):
            raise ValueError(
                f"confirm_publishes must be true or false, got {self.confirm_publishes!r}"
            )
        if not self.fill_timeout > 0:
            raise ValueError(f"fill_timeout must be positive, got {self.fill_timeout}")
        if not self.linger >= 0:  # (NaN too)
            raise ValueError(f"linger must not be negative, got {self.linger}")
        if not self.keep_idle >= 0:
            raise ValueError(f"keep_idle must not be negative, got {self.keep_idle}")
        if self.takeover_grace < 0:
            raise ValueError(f"takeover_grace must not be negative, got {self.takeover_grace}")
        if self.lost_child_grace < 0:
            raise ValueError(f"lost_child_grace must not be negative, got {self.lost_child_grace}")
        if self.probe_interval < 0:
            raise ValueError(f"probe_interval must not be negative, got {self.probe_interval}")
        if not (self.swap_interval == 0 or 0.01 <= self.swap_interval < math.inf):  # (NaN)
            raise ValueError(
                f"swap_interval must be 0 (off) or at least 0.01 s, got {self.swap_interval}"
            )
        if not 1 <= self.swap_htl <= MAX_WIRE_HTL:
            raise ValueError(f"swap_htl must be in [1, {MAX_WIRE_HTL}], got {self.swap_htl}")
        if not 0 < self.swap_timeout < math.inf:
            raise ValueError(f"swap_timeout must be positive, got {self.swap_timeout}")
        # (Finite: a timer armed at infinity never tells a quiet stream its last mark.)
        if not 0 <= self.mark_delay < math.inf:  # (NaN too)
            raise ValueError(f"mark_delay must be a finite time, got {self.mark_delay}")
        if not 0 <= self.mark_patience < math.inf:
            raise ValueError(f"mark_patience must be a finite time, got {self.mark_patience}")
        if self.announce_delay < 0:
            raise ValueError(f"announce_delay must not be negative, got {self.announce_delay}")
        if not self.seen_uid_ttl > 0 or self.seen_uid_capacity < 1:
            raise ValueError("seen_uid_ttl must be positive and seen_uid_capacity at least 1")
        for name in (
            "window_packets",
            "window_bytes",
            "publish_uids",
            "remembered_streams",
            "max_relayed_publishes",
            "witness_bytes",
            "max_queued_publishes",
            "publish_credit_packets",
            "publish_credit_bytes",
            "publish_attempts",
            "max_done_epochs",
            "max_searches_per_key",
            "signature_cache",
            "max_swap_walks",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if isinstance(self.witness_peers, bool) or not 0 <= self.witness_peers <= 64:
            raise ValueError(f"witness_peers must be in [0, 64], got {self.witness_peers!r}")
        if not 0 < self.catch_up_rate < math.inf:  # (NaN too)
            raise ValueError(f"catch_up_rate must be positive and finite, got {self.catch_up_rate}")
        if not 1 <= self.catch_up_burst < math.inf:
            raise ValueError(
                f"catch_up_burst must be at least 1 and finite, got {self.catch_up_burst}"
            )
        if not 0 <= self.publish_queue_delay < math.inf:  # (NaN too)
            delay = self.publish_queue_delay
            raise ValueError(f"publish_queue_delay must be non-negative and finite, got {delay}")
        if not self.publish_timeout > 0:
            raise ValueError(f"publish_timeout must be positive, got {self.publish_timeout}")
        if not 1 <= self.max_open_epochs <= MAX_OPEN_EPOCHS:
            raise ValueError(
                f"max_open_epochs must be in [1, {MAX_OPEN_EPOCHS}], got {self.max_open_epochs}"
            )
