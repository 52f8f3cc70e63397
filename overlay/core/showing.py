"""Showing: every member shows its local clients only what the root has committed.

A root counts a packet committed once two of its children hold it (``commits``), and until
then neither shows it to its own clients nor acknowledges it. Another member that showed a
packet as soon as it came down could show a publisher that also subscribes its own packet
while only the root and one relay hold it: should the root die, the relay be cut off and
the publisher die, the rest of the tree gives that number to another publish. A member cut
off with such a packet that stays alive would show its subscribers a packet the stream
does not have.

So the root tells its children how far it has committed, each member passes that on to
its children, and shows its local clients packets, and gaps announced missed, only up to
that mark (``Broadcast.pump``). It costs a packet about one round trip from the root to
two of its children more before it is shown, and under load up to one packet interval
more (below).

* **The mark rides the packets.** Every ``SubscribeData`` carries its sender's mark
  (``mark``): the root stamps what it has committed when it sends a packet down, and a
  member forwards each packet stamped with its own mark, which a packet from its parent
  raises. Under load the root's commit moves about once a packet and the next packet
  takes it down, so nothing else is sent. A standalone notice (``Committed``) goes only
  when the mark moved and no packet took it down: at once if nothing went down for
  ``mark_delay``, else once that much has passed since the last packet, if none came
  meanwhile (``tell_marks``; a timer, ``MARK_TIMER``). On a steady stream the wait is
  ``mark_patience`` instead, since its next packet is due well within it
  (``overlay.core.packet_pace``). A notice per commit move would cost the latency bench
  (twenty nodes) about eleven notices per packet, one per tree edge each.
* **A member forwards a packet as it comes, before its mark covers it.** Held back until
  covered, a packet could carry the mark down itself, which would spare a sparse stream the
  notice on every edge below the root's children (more than half its control messages at 20
  packets a second). But what keeps an acknowledged number when its root dies is that the
  root's subtrees hold the packet: they claim and push it to the next root. Held back, it
  would be on the root and its children alone until the mark reached them, and a root dying
  with them, or before its mark went down, would leave the rest of the tree to give the
  number again (the chaos simulations find exactly that). Sending held packets down after a
  few milliseconds unmarked would narrow that window, not close it.
* A root's mark is what it shows its own clients: ``committed``, or while no bound
  applies (nobody to wait for, a commit timeout, a root just made) everything it has
  processed; a packet is stamped with the mark from before it, since the root does not
  know yet whether it will wait for it. A root that hands its tree on, or merges into
  another, keeps the last mark it sent and shows by the new tree's marks from then on.
* Marks only rise. A member's never passes what it has processed (``next_in``), and it
  drops to that when the member takes a parent (``settle``): over a FIFO link a mark
  comes after (or with) the packets it covers, so nothing later can arrive under it,
  whatever tree the member moves to. A member's mark from a tree whose root died stays
  good: what it covers was committed, and a new root numbers above what its subtree has
  seen.
* A parent's mark past what a member has processed therefore says that the parent will
  not send it the numbers between by itself: the parent entered the tree past them, or
  named a head past them when it took the member. The member asks it for them (a child's
  ``FillRequest``, ``refills``) before the next packet meets them as a gap: once, and
  again if the mark still says so after ``fill_timeout`` (an ask or answer may be lost).
* A member with no mark shows nothing. A child is sent its parent's mark once adopted
  and caught up (``send_mark``), so a new or moved member need not wait for a commit.
* Packets a local client has not been shown yet stay in the window beyond its bounds, up
  to twice them (``Window.keep_from``): the mark trails a member's head by what is in
  flight between the root and it, which a fast publisher makes more than a window.
  Otherwise a child's window evicts packets before they can be shown, and its client is
  told they were missed.
* A message can be lost (the simulator drops them). The root sends its mark again in each
  heartbeat round in which nothing took it down, ``REPEATS`` times after it last moved,
  and a member passes on every notice that does not lower its mark, so one repeat mends a
  loss anywhere below: under load nothing, and when the stream goes quiet at most
  ``REPEATS`` messages a link.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter, sub

from overlay.compiled_checks import compile_with
from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.packet_pace import PacketPace
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.core.timers import TimerQueue
from overlay.messages import Committed, FillRequest, SubscribeData

# Quiet heartbeat rounds a root repeats its mark after it last moved. In the simulator's
# worst weather (1% of frames dropped) a notice and all three repeats are lost on one link
# about once in 10**8; while packets flow, each one carries the mark again anyway.
REPEATS = 3
MARK_TIMER = "mark"  # a root's deferred notices are due (one timer for the node)


def root_mark(stream: Stream) -> int | None:
    """What a root shows its own clients: its commit point, or all it has processed while
    no bound applies; None if nothing (a mark is never below 0)."""
    mark = stream.root.committed
    if mark is None and stream.next_in is not None:
        mark = stream.next_in - 1
    return mark if mark is not None and mark >= 0 else None


def root_stamp(stream: Stream) -> int | None:
    """The mark a root stamps on a packet it sends down now: its mark from before the
    packet (it does not know yet whether it will wait for it), never below one it sent."""
    mark, sent = root_mark(stream), stream.shown_upto
    return sent if mark is None or (sent is not None and sent > mark) else mark


_mark = attrgetter("mark")
# A packet with another mark, built by its slots (``dataclasses.replace``, a tenth the cost).
_with_mark = compile_with(SubscribeData, "mark")
_INT = frozenset({int})


def _rising_marks(mark: int | None, packets: list[SubscribeData]) -> bool:
    """Whether ``packets``' marks, the stream's next packets at a member whose mark is
    ``mark``, never fall below ``mark`` or each other and none is past its own packet, so
    ``stamp`` takes each as it is (False says nothing: stamp each). In passes in C."""
    marks = list(map(_mark, packets))
    first = packets[0].packet
    return (
        set(map(type, marks)) == _INT
        and (mark is None or marks[0] >= mark)
        and max(map(sub, marks, range(first, first + len(marks)))) <= 0
        and marks == sorted(marks)
    )


def _below(mark: int | None) -> int:
    return -1 if mark is None else mark


class Showing:
    """The marks: what each member may show its clients, and telling its children."""

    __slots__ = (
        "config",
        "mark_timer",
        "marks_due",
        "marks_sent",
        "pump",
        "send",
        "stats",
        "streams",
        "timers",
    )

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        timers: TimerQueue,
        out: Outbox,
        pump: Callable[[Stream], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.timers = timers
        self.send = out.send
        self.pump = pump
        # Roots whose mark went down on a packet in this event, and whose mark moved with no
        # packet to take it down; when the mark timer is armed for.
        self.marks_sent: dict[bytes, None] = {}
        self.marks_due: dict[bytes, None] = {}
        self.mark_timer: float | None = None
        timers.on(MARK_TIMER, self.on_mark_timer)

    def stamp(self, stream: Stream, packet: SubscribeData) -> SubscribeData:
        """``packet`` is about to be stored and sent down: take a parent's mark from it,
        and return it carrying ours (the same object if it already does)."""
        if stream.state is State.ROOT:
            mark = root_stamp(stream)
            if mark != stream.shown_upto:
                stream.shown_upto = mark
                stream.root.mark_rounds = 0
            stream.root.mark_carried = True
            self.marks_sent[stream.key] = None  # (``tell_marks`` notes when)
            self.marks_due.pop(stream.key, None)
        else:
            mark = stream.shown_upto
            theirs = packet.mark
            if theirs is not None:
                theirs = min(theirs, packet.packet)  # (it is processed next: ``next_in``)
                if mark is None or theirs > mark:
                    stream.shown_upto = mark = theirs  # shown by the ``pump`` that follows
        return packet if packet.mark == mark else _with_mark(packet, mark)

    def stamp_run(self, stream: Stream, packets: list[SubscribeData]) -> list[SubscribeData]:
        """``stamp`` for each of ``packets``, the stream's next, stored in one pass. At a
        root the mark is the same for each (nothing between them moves it), so it is worked
        out once; a member takes each packet's mark in turn."""
        stamp = self.stamp
        if stream.state is not State.ROOT:
            if _rising_marks(stream.shown_upto, packets):
                # Each packet's mark is ours once it has come: ``stamp`` would replace none
                # and leave us the last one's.
                stream.shown_upto = packets[-1].mark
                return packets
            return [stamp(stream, packet) for packet in packets]
        mark = stamp(stream, packets[0]).mark
        return [p if p.mark == mark else _with_mark(p, mark) for p in packets]

    def mark_moved(self, stream: Stream) -> None:
        """At a root (every ``pump``): a mark no packet took down is due as a notice."""
        mark = root_mark(stream)
        if mark is not None and mark > _below(stream.shown_upto):
            self.marks_due[stream.key] = None

    def tell_marks(self, now: float) -> None:
        """The node's event is done (``PacketFlow.after_event``): note when marks went down on
        packets, and send the notices due or arm the timer for them."""
        if self.marks_sent:
            for key in self.marks_sent:
                stream = self.streams.get(key)
                if stream is not None:
                    root = stream.root
                    root.told_at = now
                    if root.pace is None:
                        root.pace = PacketPace()
                    root.pace.went_down(now, self.config.mark_patience)
            self.marks_sent.clear()
        if self.marks_due:
            self._tell_due(now)

    def on_mark_timer(self, now: float, token: int, attempt: int) -> None:
        self.mark_timer = None
        self._tell_due(now)

    def _tell_due(self, now: float) -> None:
        """Send each due mark that waited long enough since the last went down
        (``mark_delay``, or longer on a steady stream: ``packet_pace``); wait on for the
        others, lest a packet take them down first."""
        base, patience = self.config.mark_delay, self.config.mark_patience
        later: float | None = None
        for key in list(self.marks_due):
            stream = self.streams.get(key)
            mark = None if stream is None or stream.state is not State.ROOT else root_mark(stream)
            if stream is None or mark is None or mark <= _below(stream.shown_upto):
                del self.marks_due[key]  # taken down meanwhile, or no longer a root
                continue
            root = stream.root
            pace = root.pace
            if pace is not None and pace.sparse(base):
                # No packet is due to take it: it goes once ``mark_delay`` has passed since
                # the last notice (``packet_pace``).
                due = None if root.noticed_at is None else root.noticed_at + base
            else:
                wait = base if pace is None else pace.wait(base, patience)
                due = None if root.told_at is None else root.told_at + wait
            if due is not None and now < due:
                later = due if later is None else min(later, due)
                continue
            del self.marks_due[key]
            stream.shown_upto = mark
            root.mark_rounds = 0
            root.mark_carried = False
            root.told_at = root.noticed_at = now
            self._notify(stream)
        if later is not None and (self.mark_timer is None or later < self.mark_timer):
            self.mark_timer = later
            self.timers.add(later, (MARK_TIMER, 0, 0))

    def on_committed(self, now: float, message: Committed, stream: Stream) -> None:
        """Our parent's mark: show our clients up to it, and pass it on."""
        mark = stream.shown_upto
        if stream.state is State.ROOT or (mark is not None and message.upto < mark):
            self.stats.ignored += 1  # an older notice (a tree we left, or a repeat overtaken)
            return
        upto = message.upto
        if stream.next_in is not None:
            if upto >= stream.next_in and stream.parent is not None:
                self._ask_below(now, stream, stream.parent, upto)
            upto = min(upto, stream.next_in - 1)  # (see the module notes: never past it)
        if upto >= 0 and (mark is None or upto > mark):
            stream.shown_upto = upto
            self.pump(stream)
        self._notify(stream)  # a repeat too: a child may have lost the first

    def _ask_below(self, now: float, stream: Stream, parent: PeerId, upto: int) -> None:
        """Our parent's mark is past what we have processed: over a FIFO link a mark comes
        after the packets it covers, so the parent will never send us ``next_in..upto`` by
        itself (it entered the tree past them, or named a head past them when it took us).
        We ask it for them, as a child's ``FillRequest`` (``refills``: it serves them once it
        has them, asking up the tree if it never had them), before its next packet meets
        them as a gap. Each number once per parent, while the ask may still be answered
        (the root repeats its mark); after ``fill_timeout`` all of them again, as the ask or
        its answer may have been lost. Otherwise a relay that entered the tree holding
        nothing, after a search that claimed a higher head, resumes there while its child
        lags behind; the child meets the next packet as a gap and tells its subscriber
        that acknowledged packets were missed, though the marks announced them all along."""
        assert stream.next_in is not None
        first = stream.next_in
        asked = stream.asked_below
        if asked is not None and now < asked[1] + self.config.fill_timeout:
            first = max(first, asked[0] + 1)
        if first <= upto:
            stream.asked_below = (upto, now)
            self.send(parent, FillRequest(stream.key, first, upto))

    def send_mark(self, stream: Stream, child: PeerId) -> None:
        """Tell a child just adopted and caught up (or whose held-back catch-up was just
        sent: ``refills``) how far it may show."""
        self._notify(stream, [child])

    def settle(self, stream: Stream) -> None:
        """We took a parent: our mark drops to what we have processed, so no packet we get
        from the new tree comes under it uncommitted (``joining.attached``)."""
        stream.asked_below = None  # (``_ask_below``: a new parent is asked afresh)
        if stream.shown_upto is None:
            return
        if stream.next_in is None or stream.next_in <= 0:
            stream.shown_upto = None  # nothing held: the new parent's mark comes with it
        else:
            stream.shown_upto = min(stream.shown_upto, stream.next_in - 1)

    def repeat_marks(self) -> None:
        """One heartbeat round: a root repeats its mark, if nothing took it down in the
        last round, ``REPEATS`` times after it last moved."""
        for stream in self.streams.values():
            if stream.state is not State.ROOT or stream.root.mark_rounds >= REPEATS:
                continue
            if stream.root.mark_carried:
                stream.root.mark_carried = False  # packets carry it: a repeat would say no more
                continue
            stream.root.mark_rounds += 1
            self._notify(stream)

    def _notify(self, stream: Stream, children: list[PeerId] | None = None) -> None:
        mark = stream.shown_upto
        if mark is None:
            return
        notice = Committed(stream.key, mark)
        for child in stream.fed if children is None else children:
            self.send(child, notice)
            self.stats.commit_notices += 1
