"""Refills: a node serves a child packets from before it joined the tree by asking upward.

A node that enters a tree as a relay of someone else's search starts where that search asked
to resume: a resubscribe that had seen up to packet 19 makes the relay expect 20, and it
holds nothing below. A second resubscribe that coalesces there having seen only up to 18
needs 19, which the tree above still holds. Telling it "19 missed" (catch-up's answer for
anything not held) loses a packet the tree has.

So a node that must serve a child numbers it *never had* (below the point it joined at, not
holes its parent reported, not evicted) first asks its parent for them (FillRequest), and
serves the child once they are in: the parent answers in order with each packet it holds
and PacketsMissed for the rest, after asking its own parent for what it never had either.
The root has nobody above to ask, but a branch below may hold what it never had: a root
that continued numbering after a resubscriber's ``last_seen`` holds nothing of the tree's
past, and a subtree that attached below it since may hold it; told they were missed, a late
resubscriber loses packets another branch holds. So the root asks its whole subtree
(``PastQuery``, ``overlay.core.gathering``);
holders push the packets up (``Pushes.push_one``), and the root keeps those it asked
for (``Ordering._backfill``). In its takeover grace the resubscribers themselves push up
what they have too (``Pushes.push_up``). A child that needs those numbers waits until
they are in, or until the root's own wait ends: half of ``fill_timeout``, so its answer
reaches the waiters below it before their timeouts, and never before its grace ends (before
it, the subtree that made it root may still be pushing up the very packets a resubscriber
waits for); a grace or a look under way when their wait ends holds them a few timeouts more,
while a search waiting there would still wait for its answer (a waiter at a relay below
may give up first; it is told the numbers were missed, as before), and a search waiting at
the root itself is held so at any time: a partition may hide the branch that holds them. A
child's FillRequest for numbers such a search still waits for is held with it: told they
were missed, the child's branch would record them lost while the root has not.
What nobody brought is then lost for good: the root records it missed, and every later
asker hears so at once (not while a waiter asked since still waits for it). A resubscriber
adopted while waiters wait has a subtree that was not there when they asked, so it is asked
for what it may hold too (PastQuery), by whichever node adopts it; a root asks one that has
seen past numbers it recorded lost for those as well, and takes them back in.
A root with no children, past its grace, has nobody to ask and reports the numbers missed at
once.
Meanwhile:

* A child joining through a search is not adopted yet (it would be sent live packets before
  the older ones, and take the first as a gap): its search is told Accepted and waits. Once
  the numbers are in, the node checks again that it may accept the search (it may have
  restarted meanwhile) and adopts it, catching it up from its ``last_seen`` as usual.
* A child's own FillRequest is answered by a replay of the range.
* A child whose search made our new root cannot wait like that: the root lacks the tree's
  past, and the subtree beyond that child is what brings it up. It is adopted at once, and
  only its catch-up waits, with every live packet behind it (``Stream.catching_up``).

Nothing waits for ever: each waiter has ``fill_timeout`` (at the root, as above), after
which it is served with what the node has (the rest reported missed, never skipped in
silence). A node restarting keeps its waiters, whose clocks stand still while it has nobody
to ask, asks its new parent once attached and starts their clocks again; one that becomes
the root asks its subtree. The members of its subtree hold their waiters too (their asks are
held above them), until the restart ends and their clocks start again, for at most
``MAX_HOLDS`` timeouts. Old packets that arrive are kept in the window only, never sent
to other children or local clients (all of them are past those numbers). Waiters per
stream are bounded, and a root asks its subtree for a number only until it arrives or is
recorded missed: a child repeating FillRequests cannot make it query its tree for ever.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from overlay.core.catch_up_budget import CatchUpBudget, Verdict
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.fills import Fill, Span, gaps, outside
from overlay.core.must_beat import may_hang_below
from overlay.core.outbox import Outbox
from overlay.core.peers import PeerTable
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.core.timers import TimerQueue
from overlay.messages import (
    Accepted,
    FillRequest,
    PacketsMissed,
    RejectedLoop,
    SubscribeData,
)

FILL_TIMER = "fill"

# Timeouts a waiter sits out while its node's subtree is detached, or its root is in a
# grace or a look (``on_fill_timer``).
MAX_HOLDS = 3

# Children one stream keeps waiting at once. A refill is rare (a late joiner meets an older
# resubscribe); past this bound a child is served at once, any gap reported missed, so a
# child sending FillRequests in a loop holds at most this much state here.
MAX_FILLS = 64

# Holes a root forgets and asks a resubscriber's subtree for again, at most, per adoption
# (``ask_newcomer``): the newest, the ones a branch that was just cut off may still hold.
REOPEN = 8


class Asker(Protocol):
    """What waiters use of the ``PacketFlow``: asking a root's subtree (``gathering``), and
    telling a child caught up how far it may show (``showing``)."""

    def ask_spans(self, stream: Stream, spans: list[Span], child: PeerId | None = None) -> None: ...
    def send_mark(self, stream: Stream, child: PeerId) -> None: ...


# Take ``peer`` as a child of ``stream``, answering its search ``uid`` (``Membership.adopt``):
# (now, stream, peer, uid, new_root, last_seen, must_beat, wait).
Adopt = Callable[[float, Stream, PeerId, int, bool, int | None, float | None, bool], None]


class Refills:
    """The children waiting for packets we never had (see the module notes): each waiter's
    timer (``FILL_TIMER``), and when and how it is served."""

    __slots__ = (
        "_adopt",
        "_catch_ups",
        "_config",
        "_fill_keys",
        "_fill_tokens",
        "_flow",
        "_out",
        "_over_catch_up_budget",
        "_peers",
        "_prune",
        "_stats",
        "_streams",
        "_timers",
    )

    def __init__(
        self,
        config: NodeConfig,
        stats: NodeStats,
        streams: dict[bytes, Stream],
        peers: PeerTable,
        timers: TimerQueue,
        out: Outbox,
        catch_ups: CatchUpBudget,
        flow: Asker,
        adopt: Adopt,
        prune: Callable[[float, Stream], None],
        over_catch_up_budget: Callable[[PeerId, Verdict], None],
    ) -> None:
        self._config = config
        self._stats = stats
        self._streams = streams
        self._peers = peers
        self._timers = timers
        self._out = out
        self._catch_ups = catch_ups
        self._flow = flow
        self._adopt = adopt
        self._prune = prune  # (``leaving``)
        self._over_catch_up_budget = over_catch_up_budget
        self._fill_keys: dict[int, bytes] = {}  # refill timer token -> key, while it waits
        self._fill_tokens = 0
        timers.on(FILL_TIMER, self.on_fill_timer)

    @property
    def waiting(self) -> bool:
        """Whether any child waits here (a waiter's timer is pending)."""
        return bool(self._fill_keys)

    def served(self, now: float, key: bytes | None) -> None:
        """Serve the children waiting on ``key``'s stream that can be served now."""
        stream = None if key is None else self._streams.get(key)
        if stream is not None and stream.fills is not None:
            self.check_fills(now, stream)

    def serve_later(
        self,
        now: float,
        stream: Stream,
        peer: PeerId,
        first: int,
        last: int | None,
        uid: int | None,
        must_beat: float | None,
    ) -> bool:
        """Whether serving ``peer`` from ``first`` must wait for packets we never had; if so,
        it waits (see the module notes) and our parent is asked for them."""
        root = stream.state is State.ROOT
        if stream.next_in is None and stream.start is not None and first < stream.start:
            # A fresh join placed us at ``start`` and nothing has come yet: we never had the
            # numbers before it, though the tree has them: a resubscriber that had seen less
            # must not be told they were missed.
            stream.next_in = stream.contiguous_from = stream.start
        if stream.next_in is None:
            return False
        if root and not stream.children and stream.root.recover_until is None:
            # Nobody below to ask, and past its grace no subtree is on its way to push up
            # what it holds: what the root lacks is lost (reported missed).
            return False
        end = stream.next_in - 1 if last is None else min(last, stream.next_in - 1)
        missing = gaps(stream.window, first, end)
        fills = stream.fills or []
        if not missing or len(fills) >= MAX_FILLS:
            return False
        if uid is not None:
            if any(f.uid == uid and f.peer == peer for f in fills):
                return True  # the same search again (a duplicate): it already waits
            self._out.send(peer, Accepted(uid))  # a long wait is fine: the search goes on here
        asked = (missing[0][0], missing[-1][1])
        covered = any(f.asked[0] <= asked[0] and asked[1] <= f.asked[1] for f in fills)
        token = self._arm_fill(now, stream)
        fills.append(Fill(peer, first, last, uid, must_beat, token, asked, now))
        stream.fills = fills
        if not covered:
            if root:
                self._flow.ask_spans(stream, missing)
            elif stream.parent is not None:
                self._out.send(stream.parent, FillRequest(stream.key, *asked))
        return True

    def catch_up_later(
        self, now: float, stream: Stream, peer: PeerId, last_seen: int | None
    ) -> Fill | None:
        """We just adopted ``peer``, whose search made our new root, naming no head: that
        root lacks the tree's past, and the subtree beyond ``peer`` is what brings it up, so
        ``peer`` cannot wait to be adopted (as a search does) until we have it. But if we
        never had some of what it must be caught up on, we ask our parent, and its catch-up
        (and everything live meanwhile) waits until that is in, or the wait times out.
        Otherwise the child is told a packet was missed that the root is about to gather,
        and then drops it as old when it comes down. Returns its wait, if the catch-up
        waits (``_finish_fill`` sends it); None if not."""
        if last_seen is None or not self.serve_later(
            now, stream, peer, last_seen + 1, None, None, None
        ):
            return None
        if stream.catching_up is None:
            stream.catching_up = set()
        stream.catching_up.add(peer)
        assert stream.fills is not None  # (``serve_later`` appended it: no uid to repeat)
        return stream.fills[-1]

    def _arm_fill(self, now: float, stream: Stream) -> int:
        """A timer for a waiter of ``stream`` whose numbers were asked for just now."""
        self._fill_tokens += 1
        token = self._fill_tokens
        self._fill_keys[token] = stream.key
        until = now + self._config.fill_timeout
        if stream.state is State.ROOT:
            # It answers within half the timeout, so that the answer still reaches every
            # waiter on the way down before theirs runs out; in its grace, not before the
            # grace ends (what the subtree pushes up comes in until then). A look keeps the
            # grace on until its search's own deadline, far past the waiter's patience: the
            # look holds waiters by rounds instead (``on_fill_timer``).
            until = now + self._config.fill_timeout / 2
            if stream.root.looking is None:
                until = max(until, stream.root.recover_until or now)
        self._timers.add(until, (FILL_TIMER, token, 0))
        return token

    def on_fill_request(self, now: float, peer: PeerId, message: FillRequest) -> None:
        """A child asks for packets it never had: replay them, once we have them too."""
        stream = self._streams.get(message.key)
        if (
            stream is None
            or not stream.carried
            or peer not in stream.children
            or message.first > message.last
        ):
            self._stats.ignored += 1  # the child's wait times out; it reports them missed
            return
        if stream.next_in is not None:
            # A replay answers a small request with up to a window, as a catch-up does, from
            # the same budget (``catch_up_budget``). Past it the request is not answered: a
            # child's wait times out and reports the numbers missed (an honest child asks
            # for a few numbers now and then, far within its budget).
            last = min(message.last, stream.next_in - 1)
            verdict = self._catch_ups.charge(now, peer, stream.window, message.first, last)
            if verdict is not Verdict.SERVE:
                self._over_catch_up_budget(peer, verdict)
                return
        # A fresh relay that no packet has reached yet asks on too, for numbers before its
        # start: ignoring the request would leave its child to report missed packets that
        # the root holds.
        if self.serve_later(now, stream, peer, message.first, message.last, None, None):
            return
        if stream.next_in is None:
            self._stats.ignored += 1  # nothing here yet: what comes from above reaches it too
            return
        self._replay(stream, peer, message.first, min(message.last, stream.next_in - 1))

    def check_fills(self, now: float, stream: Stream) -> None:
        """Serve every waiter none of whose asked-for numbers we still lack (each is held
        or known missing). Not "the last number asked is in" (a parent answers in order):
        that number may be the answer to another waiter's narrower ask, sent earlier, and
        the wider waiter would be told the numbers below it were missed just before they
        arrive. At a root in its grace the numbers come from below, from any child, the
        same way."""
        for fill in list(stream.fills or ()):
            # (the first test is the cheap one: while the last number is lacking, so is one)
            if not stream.window.accepts(fill.asked[1]) and not gaps(stream.window, *fill.asked):
                self._finish_fill(now, stream, fill)

    def refill(self, now: float, stream: Stream) -> None:
        """We have a new parent (or became root): ask it for what our waiters still lack.
        Their clocks start again, as for any ask: the wait they had ran while nobody could
        answer, and what is left of it may be shorter than the new parent's answer takes."""
        if not stream.fills:
            return
        if stream.state is State.ROOT:
            self.check_fills(now, stream)
            if stream.fills and stream.children:
                self._flow.ask_spans(stream, sorted({fill.asked for fill in stream.fills}))
        elif stream.state is State.JOINED and stream.parent is not None:
            for span in sorted({fill.asked for fill in stream.fills}):
                self._out.send(stream.parent, FillRequest(stream.key, *span))
        else:
            return
        self.restart_fill_clocks(now, stream)

    def restart_fill_clocks(self, now: float, stream: Stream) -> None:
        """Each waiter's wait starts again now. Also when our subtree's origin is attached
        again: our asks are still held above us and asked again from there."""
        for fill in stream.fills or ():
            del self._fill_keys[fill.token]
            fill.token = self._arm_fill(now, stream)

    def on_fill_timer(self, now: float, token: int, attempt: int) -> None:
        key = self._fill_keys.get(token)
        stream = None if key is None else self._streams.get(key)
        for fill in () if stream is None else list(stream.fills or ()):
            if fill.token == token:
                assert stream is not None
                # Detached, we have nobody to ask, and the tree may well hold what the
                # waiter lacks: its wait begins again once we are back (``refill``). So
                # too below a restarting ancestor: our parent holds our ask and asks again
                # once its origin is back, and our clock starts again then
                # (``restart_fill_clocks``). Served now, the waiter would be told the
                # numbers were missed just before the new root fetches them from a branch
                # that holds them. That wait is bounded (``MAX_HOLDS``): a label whose
                # RestartEnded was lost would hold the waiter for ever.
                below = stream.state is State.JOINED and stream.restart_uid is not None
                # So too at a root in a grace (a subtree it lost may come back and push up
                # what it holds) or a look (it may be about to join a tree that holds it),
                # while the search that waits here would still wait for the answer: each
                # hop gives it ``request_timeout`` from its Accepted, and the answer must
                # still get down the path. A search waiting here is held so at any time:
                # a root cannot tell a packet every holder lost from one a partition hides.
                # A child's FillRequest waits only its own ``fill_timeout``, unless such a
                # search waits for some of the same numbers (``with_search``): a child told
                # they were missed records them lost and tells every later asker, the root
                # too if it rejoins through that branch, while the far side holds them.
                patience = (self._config.request_timeout - self._config.fill_timeout) / 2
                settling = (
                    stream.state is State.ROOT
                    and (stream.root.recover_until is not None or fill.uid is not None)
                    and now - fill.since < patience
                )
                # (The child's wait lasts as long as the search's, whichever came first; the
                # search's is bounded by its patience and ``MAX_HOLDS``, above.)
                with_search = (
                    stream.state is State.ROOT
                    and fill.uid is None
                    and any(
                        other.uid is not None
                        and other.asked[0] <= fill.asked[1]
                        and fill.asked[0] <= other.asked[1]
                        for other in stream.fills or ()
                    )
                )
                if (
                    stream.state is State.RESTARTING
                    or ((below or settling) and fill.held < MAX_HOLDS)
                    or with_search
                ):
                    fill.held += below or settling
                    del self._fill_keys[token]
                    fill.token = self._arm_fill(now, stream)
                else:
                    self._finish_fill(now, stream, fill)
                return
        self._fill_keys.pop(token, None)  # the stream is gone

    def _finish_fill(self, now: float, stream: Stream, fill: Fill) -> None:
        """Serve ``fill`` with what we hold now (anything still lacking: reported missed)."""
        assert stream.fills is not None
        stream.fills.remove(fill)
        if not stream.fills:
            stream.fills = None
        del self._fill_keys[fill.token]
        peer = fill.peer
        live = self._streams.get(stream.key) is stream and stream.carried
        if live and stream.state is State.ROOT:
            # Nobody brought these: they are lost for good, and every later asker is told so
            # at once, the same way, instead of asking the subtree again. Not those another
            # waiter still waits for, asked since: a subtree that attached meanwhile may
            # bring them (``ask_newcomer``).
            others = [other.asked for other in stream.fills or ()]
            for first, last in gaps(stream.window, *fill.asked):
                for span in outside(first, last, others):
                    stream.window.mark_missing(*span)
        if fill.uid is None:
            if live and peer in stream.children and stream.next_in is not None:
                end = stream.next_in - 1 if fill.last is None else fill.last
                self._replay(stream, peer, fill.first, min(end, stream.next_in - 1))
            if fill.last is None and stream.catching_up is not None:
                # A held-back catch-up (``catch_up_later``), now sent: live packets again,
                # and how far it may show (``showing``).
                stream.catching_up.discard(peer)
                if not stream.catching_up:
                    stream.catching_up = None
                if live and peer in stream.children:
                    self._flow.send_mark(stream, peer)
        elif peer in self._peers:
            if live and peer != stream.parent and may_hang_below(stream, fill.uid, fill.must_beat):
                # Not ``must_beat.may_accept``: the search may have ended beyond us, at a
                # tree member that took it, and we relay that success; what may have changed
                # while it waited is only whether we restarted since. Judged by must-beat here, a
                # relay would refuse a look its root had taken, and the two roots would stay
                # apart and number the same packets.
                self._adopt(now, stream, peer, fill.uid, False, fill.first - 1, None, False)
            else:
                # We may no longer take it (we restarted meanwhile, or left): the search
                # backtracks to its next peer with the budget it has.
                self._out.send(peer, RejectedLoop(fill.uid))
        self._prune(now, stream)

    def ask_newcomer(
        self,
        stream: Stream,
        peer: PeerId,
        last_seen: int | None,
        own: Fill | None = None,
    ) -> None:
        """We adopted ``peer``'s resubscribe, having seen up to ``last_seen``, while our
        waiters lack older numbers, or (at a root) after we recorded older numbers lost: its
        subtree was not here when those were asked for, and may hold them. Ask it as well;
        what it holds is pushed up to the root, which asked for it too. Otherwise the waiter
        is told a packet was missed that the newly attached subtree holds."""
        if last_seen is None:
            return
        spans: list[Span] = []
        if stream.state is State.ROOT:
            # What we recorded lost up to ``last_seen`` may be down there too: nobody brought
            # it while we asked, but this subtree was not here then (a restarting branch
            # that attaches just after a look ends, holding what the look gave up on).
            # Asked again, and taken in if it comes (``gathered``); the newest few only.
            reopened = stream.window.reopen(last_seen, REOPEN)
            if reopened:
                stream.root.reopened = reopened
                spans.extend(reopened)
        for fill in stream.fills or ():
            if fill is own and stream.state is State.ROOT:
                # Its own wait, just made (``joining.owed_after``), asked every child, it
                # included, or was covered by another's, which this loop asks it for. Not
                # an older wait of the same peer: the subtree it brings now was not asked.
                continue
            first, last = fill.asked
            if first <= last_seen:
                spans.extend(gaps(stream.window, first, min(last, last_seen)))
        if spans:
            self._flow.ask_spans(stream, spans, peer)

    def _replay(self, stream: Stream, peer: PeerId, first: int, last: int) -> None:
        for item in stream.window.replay(first, last):
            if isinstance(item, SubscribeData):
                self._out.send(peer, item)
            else:
                self._out.send(peer, PacketsMissed(stream.key, *item))
