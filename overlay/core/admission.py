"""Admission: which searches a node takes on, and the RejectOverload it answers the rest.

Searches in flight are state, so they are bounded: per key (``max_searches_per_key``) and,
within that, per peer that sent them (``PEER_SHARE``). Streams carried plus streams being
searched for stay within ``max_streams`` (the stream cap); a stream a root keeps while idle
(``keeping``) gives up its place, the one kept longest first. A search past any of these is
answered RejectOverload (PROTOCOL.md, "Overload"): its sender backtracks to its next peer.
So is one whose catch-up its sender's budget cannot pay for (``catch_up_budget``), when the
search would be adopted (``may_catch_up``).
"""

from __future__ import annotations

from overlay.core.catch_up_budget import CatchUpBudget, Verdict
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.joining import catch_up_span
from overlay.core.keeping import Keeping
from overlay.core.leaving import Leaving
from overlay.core.outbox import Outbox
from overlay.core.searches import Searches
from overlay.core.stats import NodeStats
from overlay.core.streams import Stream
from overlay.messages import RejectOverload

# One peer may hold at most this fraction of a key's search allowance (1/4 of
# ``max_searches_per_key``): a peer sending fresh uids in a loop is refused beyond it, while
# the other peers' searches for that key still find room. A root's death sends one
# resubscribe per orphaned subtree, so an honest peer relays a handful per key, not dozens.
PEER_SHARE = 4


class Admission:
    """The stream cap, the search allowances and the catch-up budgets, over the route table
    (``searches``) and the kept streams (``keeping``)."""

    __slots__ = (
        "_catch_ups",
        "_config",
        "_keeping",
        "_leaving",
        "_out",
        "_searches",
        "_stats",
        "_streams",
    )

    def __init__(
        self,
        config: NodeConfig,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        out: Outbox,
        catch_ups: CatchUpBudget,
        searches: Searches,
        keeping: Keeping,
        leaving: Leaving,
    ) -> None:
        self._config = config
        self._stats = stats
        self._streams = streams
        self._out = out
        self._catch_ups = catch_ups
        self._searches = searches
        self._keeping = keeping
        self._leaving = leaving

    def refuses(self, peer: PeerId, uid: int, key: bytes, stream: Stream | None) -> bool:
        """Whether ``peer``'s search ``uid`` for ``key`` (whose stream here, if any, is
        ``stream``) is refused for want of room; it is answered RejectOverload if so."""
        busy = self.too_many_searches(peer, key)
        if busy or ((stream is None or not stream.carried) and not self.has_room(key)):
            self._stats.overloads += 1
            self._out.send(peer, RejectOverload(uid, key))
            return True
        return False

    def too_many_searches(self, peer: PeerId, key: bytes) -> bool:
        """Whether routing one more search for ``key`` from ``peer`` would pass the key's
        allowance (``max_searches_per_key``) or the peer's share of it (``PEER_SHARE``)."""
        allowance = self._config.max_searches_per_key
        if len(self._searches.by_key.get(key, ())) >= allowance:
            return True
        return self._searches.by_peer.get((peer, key), 0) >= max(1, allowance // PEER_SHARE)

    def has_room(self, key: bytes) -> bool:
        """Streams carried plus streams being searched for stay within ``max_streams``; a
        kept stream gives up its place, the one kept longest first."""
        by_key = self._searches.by_key
        if key in self._streams or key in by_key:
            return True
        busy = len(self._streams.keys() | by_key.keys())
        if busy < self._config.max_streams:
            return True
        kept = self._keeping.oldest_idle()
        if kept is not None:
            self._leaving.forget(kept)
            return True
        return False

    def may_catch_up(
        self, now: float, stream: Stream, peer: PeerId, uid: int, last_seen: int | None
    ) -> bool:
        """Whether ``peer``'s budget (``catch_up_budget``) holds the catch-up its search
        ``uid`` would get here; it is charged for it if so. If not, the search is refused
        with RejectOverload, before anything is adopted, waited for or asked upward.

        Refused, not cut short with the rest announced missed: a subscriber told
        PacketsMissed records the numbers lost and its consumer skips them for good, though
        the tree holds them; refused, it loses nothing. RejectOverload is the protocol's
        answer to a node that cannot take a search on (PROTOCOL.md, "Overload" and
        "Catch-up budget"): the asker backtracks to its next peer, whose budget for it is
        its own, so an honest joiner finds its way into the tree elsewhere, and a hostile
        one gets a 20-byte answer for its 70-byte request instead of a window."""
        span = catch_up_span(stream, last_seen)
        if span is None:
            return True
        verdict = self._catch_ups.charge(now, peer, stream.window, *span)
        if verdict is Verdict.SERVE:
            return True
        self._stats.overloads += 1
        self._out.send(peer, RejectOverload(uid, stream.key))
        self.over_catch_up_budget(peer, verdict)
        return False

    def over_catch_up_budget(self, peer: PeerId, verdict: Verdict) -> None:
        """``peer`` was refused a catch-up or a replay for its budget: counted, and cut off
        as a fault the operator hears of once refused far past what a refusal teaches an
        honest peer (``catch_up_budget.MAX_STRIKES``)."""
        self._stats.catch_ups_refused += 1
        if verdict is Verdict.CUT_OFF:
            reason = "asked for catch-ups far beyond its budget, again and again"
            self._out.drop(peer, reason)
