"""Greedy routing with HTL and backtracking: the rules of one search, as pure functions.

A search (a SubscribeRequest or ResubscribeRequest, named by its uid) visits nodes greedily:
each node forwards it to its connected peer closest to the key that it has not tried yet for
this uid. A node that has seen the uid answers RejectedLoop; one that is full answers
RejectOverload; a search that ends below a peer without success comes back as DataNotFound
with the budget it has left. On any of these the node tries its next-closest peer
(backtracking), until it has none left or the budget is spent, and then the search *ends*
at this node.

HTL (spec): "Each SubscribeRequest includes the location of the last nearest node. If we are
closer to the key than the last nearest node, we reset this field to our location. If not, we
decrement HTL." So HTL never runs out while the search makes progress; it bounds only the
search past the closest node found, which is how that node learns it is the root: "If we run
out of HTL, and we are the closest node, we become the root."

Invariant: the node where a search ends is the root iff it is the closest node the search
saw. A closer node further on would have ended the search itself, with success, so a failure
that comes back never hides a closer node; that is why DataNotFound needs no location.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from keyspace.location import is_closer
from overlay.core.effects import PeerId
from overlay.messages import MAX_WIRE_HTL, ResubscribeRequest, SubscribeRequest

# The budget a look starts along a trail with (``searches``): the most the wire carries.
# A trail is one way, walked already, so a look on it costs at most this many messages.
TRAIL_HTL = MAX_WIRE_HTL


@dataclass(slots=True, eq=False)
class Route:
    """One search in flight through this node."""

    uid: int
    key: bytes
    target: float  # the key's location
    upstream: PeerId | None  # who asked; None when the search started here
    htl: int  # budget for the next hop
    best_loc: float  # closest location the search has seen up to this node
    i_am_best: bool  # this node set best_loc: it is the closest node seen so far
    last_seen: int | None
    must_beat: float | None  # set for a resubscribe: only a closer node may accept it
    descriptor: bytes | None = None  # a signed stream's public key and name, passed on
    tried: set[PeerId] = field(default_factory=set)
    current: PeerId | None = None  # the peer whose answer we wait for
    attempt: int = 0  # numbers each forward, so a timer for an earlier one is ignored
    deadline: float = 0.0  # when we stop waiting for ``current``
    accepted: bool = False  # ``current`` sent Accepted: the long deadline applies
    # "Not found" may be wrong (DataNotFound ``lost``): a peer it went to dropped its link
    # before answering, or we refused it only for our label (``must_beat.label_refuses``).
    lost: bool = False
    prefer: PeerId | None = None  # tried before greedy order, once (a look's, ``searches``)
    # The restart label our whole subtree had confirmed when the search reached us, if any
    # (``must_beat.may_move_to``).
    labelled: int | None = None
    trail: int | None = None  # a look's: the key its way was noted under (``probes``)
    # The budget the hop that trail names here carries; 0: it names none (``searches``).
    trail_htl: int = 0

    @property
    def is_resubscribe(self) -> bool:
        return self.must_beat is not None

    def request(self, htl: int | None = None) -> SubscribeRequest | ResubscribeRequest:
        """The message that carries this search to the next hop, with ``htl`` if given."""
        if htl is None:
            htl = self.htl
        if self.must_beat is None:
            return SubscribeRequest(
                self.uid, self.key, htl, self.best_loc, self.last_seen, self.descriptor
            )
        return ResubscribeRequest(
            self.uid,
            self.key,
            htl,
            self.best_loc,
            self.must_beat,
            self.last_seen,
            self.descriptor,
            self.trail,
        )


def advance(
    own: float, target: float, best_loc: float, htl: int, max_htl: int, cap: int | None = None
) -> tuple[float, int, bool]:
    """The (best_loc, htl, i_am_best) a node routes with after receiving ``best_loc``/``htl``.

    Progress resets the budget to ``max_htl``. A peer's HTL above ``cap`` (``max_htl`` unless
    given: the widest budget we would grant a search of our own of this kind) is clamped: a
    peer must not buy a longer search here than that.
    """
    if is_closer(target, own, best_loc):
        return own, max_htl, True
    return best_loc, max(min(htl, max_htl if cap is None else cap) - 1, 0), False
