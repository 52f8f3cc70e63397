"""Credit: a node sends up at most a credit of its clients' publishes per stream.

Why. A client may keep a thousand publishes in flight (``max_in_flight`` is its own bound,
not the tree's). Passed up at once, a thousand 60 KB publishes are 60 MB queued on the link
to the parent, whose send queue holds 16 MiB: the link is cut as "send queue full", the
subtree below it restarts, and its subscribers are told ``Missed`` for packets the tree
carried. Nothing upstream can slow a publish already on the wire, so the publisher's
node, where it enters the tree, is where it must wait.

How. Per stream, at most a window of local publishes (``pace``: set by how long the tree
takes to answer them, up to ``publish_credit_packets``), and at most
``publish_credit_bytes`` of their payload, are out: sent up (or handed to this node's own
numbering, at a root) and not yet answered. One more is always allowed when none is out,
whatever its size. The rest wait here in ``Credit.held``, in the order their clients sent
them, as entries of ``PacketFlow.local`` that are neither routed nor timed: each answer
that settles an out publish (``free_credit``, as ``PacketFlow`` forgets it) lets the oldest
held ones go, after the event (``release_held``, from ``PacketFlow.after_event``), with their own
``publish_timeout`` counted from then. The answers come once the root has committed a
packet, so the tree's pace, not the client's, sets how fast publishes go up.

A publish that comes back for a number this node already claimed (a client's retry of a
lapsed one, whose claim ``PacketFlow`` kept) goes up at once: its claim is pushed up the tree anyway
(``confirming``), and holding the publish would not hold its claim.

Bounds and faults. Held publishes count in ``PacketFlow.local``, so the node-wide bound on
local publishes (``max_relayed_publishes``, BUSY beyond) bounds them too; the client port
stops reading a client's requests well before that (``overlay.runtime.client_port``), so a
fast client meets TCP's back-pressure, not a refusal. A stream whose out publishes time out
(its tree did not answer for ``publish_attempts`` tries) fails its held ones at once with
the same error: they would go into the same silent tree, one credit's worth per timeout,
and keep their clients waiting for minutes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from overlay.core.config import NodeConfig
from overlay.core.effects import ClientId
from overlay.core.local_publishes import LocalPublish
from overlay.core.pace import Pace, first_window
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, Stream
from overlay.messages import PublishData, PublishError


@dataclass(slots=True)
class Credit:
    """One stream's local publishes at this node: those out (uid -> payload bytes, and
    when each went up on its first try), and those held, in order; its ``pace``."""

    pace: Pace
    out: dict[int, int] = field(default_factory=dict)
    out_bytes: int = 0
    sent: dict[int, float] = field(default_factory=dict)
    held: dict[int, None] = field(default_factory=dict)

    def room(self, size: int, max_bytes: int) -> bool:
        """Whether a publish of ``size`` payload bytes may go out now."""
        if not self.out:
            return True
        return len(self.out) < self.pace.limit and self.out_bytes + size <= max_bytes

    def take(self, now: float, uid: int, size: int, timed: bool) -> None:
        """Publish ``uid`` goes out; ``timed``: its answer will tell the pace how long the
        tree took (not for a uid this node knows already: its answer may come at once)."""
        if uid not in self.out:
            self.out[uid] = size
            self.out_bytes += size
            if timed:
                self.sent[uid] = now

    @property
    def idle(self) -> bool:
        return not self.out and not self.held


# Streams whose pace a node keeps once their credit is idle (see ``paces``).
KEPT_PACES = 64


def _known(stream: Stream, uid: int) -> bool:
    """Whether this node knows ``uid``'s number already (a claim, or a root's table), so
    its answer may come at once and says nothing of the tree's pace."""
    return uid in stream.claims or (stream.uids is not None and uid in stream.uids)


class PublishCredit:
    """Each stream's credit of local publishes out, and those held for it."""

    __slots__ = (
        "arm",
        "config",
        "credits",
        "fail_local",
        "local",
        "paces",
        "released",
        "route",
        "samples",
        "stats",
        "streams",
    )

    def __init__(
        self,
        config: NodeConfig,
        streams: dict[bytes, Stream],
        stats: NodeStats,
        local: dict[int, LocalPublish],
        arm: Callable[[float, int, int], None],
        route: Callable[[float, Stream, Source, PublishData], None],
        fail_local: Callable[[ClientId, PublishData, PublishError], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.local = local
        self.arm = arm
        self.route = route
        self.fail_local = fail_local
        self.credits: dict[bytes, Credit] = {}  # local publishes out and held, by stream
        self.released: dict[bytes, None] = {}  # streams whose credit moved since ``release_held``
        # Each stream's pace outlives its credit (dropped when idle): the streams whose
        # publishing began most recently.
        self.paces: OrderedDict[bytes, Pace] = OrderedDict()
        # Answers in this event: their stream's pace, and when the publish went up (``settle``).
        self.samples: list[tuple[Pace, float, int]] = []  # (pace, sent, publishes)

    def _credit(self, key: bytes) -> Credit:
        credit = self.credits.get(key)
        if credit is None:
            credit = self.credits[key] = Credit(self._pace(key))
        return credit

    def _pace(self, key: bytes) -> Pace:
        """Stream ``key``'s pace: its credit's, else the one kept (made if none is)."""
        credit = self.credits.get(key)
        if credit is not None:
            return credit.pace
        pace = self.paces.pop(key, None)
        if pace is None:
            config = self.config
            pace = Pace(config.publish_credit_packets, config.publish_queue_delay)
        self.paces[key] = pace  # (the most recent last)
        while len(self.paces) > KEPT_PACES:
            self.paces.popitem(last=False)
        return pace

    def batch_answered(self, key: bytes, sent: float, count: int) -> None:
        """A batch of ``count`` publishes that this node, the stream's root, numbered in one
        pass at ``sent`` (``batches``) is acknowledged: they are answers for its pace like
        any publish's, so a root's publishers are told a window (``Node.publish_window``)
        that follows how fast its commits come, as a member's follows its tree."""
        self.samples.append((self._pace(key), sent, count))

    def room_for(self, key: bytes) -> int:
        """How many more local publishes of stream ``key`` would go up now, not wait."""
        credit = self.credits.get(key)
        if credit is not None:
            return 0 if credit.held else max(0, credit.pace.limit - len(credit.out))
        return self.window_for(key)

    def window_for(self, key: bytes) -> int:
        """How many local publishes of stream ``key`` go up at once: its pace's window, and
        no more than its byte credit takes at the mean size of those out now."""
        credit = self.credits.get(key)
        pace = credit.pace if credit is not None else self.paces.get(key)
        config = self.config
        if pace is None:
            return first_window(config.publish_credit_packets, config.publish_queue_delay)
        window = pace.limit
        if credit is not None and credit.out_bytes:
            size = credit.out_bytes // len(credit.out)
            window = min(window, max(1, config.publish_credit_bytes // max(1, size)))
        return window

    def describe(self, key: bytes) -> dict[str, int | float | None] | None:
        """Stream ``key``'s pace for tools: its window, base delay, publishes out and held
        (None: this node has not published to it lately)."""
        credit = self.credits.get(key)
        pace = credit.pace if credit is not None else self.paces.get(key)
        if pace is None:
            return None
        out, held = (0, 0) if credit is None else (len(credit.out), len(credit.held))
        return {"window": pace.limit, "base": pace.base, "out": out, "held": held}

    def resent(self, key: bytes, uid: int) -> None:
        """Local publish ``uid`` goes up again on its timeout: its answer will not be timed
        (it may answer either try: Karn's rule, ``pace``)."""
        credit = self.credits.get(key)
        if credit is not None:
            credit.sent.pop(uid, None)

    def settle(self, now: float) -> None:
        """After an event: each answer in it tells its stream's pace how long it took."""
        samples, self.samples = self.samples, []
        for pace, sent, count in samples:
            pace.answered(now, now - sent, count)

    def send_or_hold(
        self, now: float, stream: Stream, client: ClientId, message: PublishData
    ) -> None:
        """A new local publish (its entry is in ``local``): up now if the stream's credit
        has room and nothing waits before it, else held."""
        credit = self._credit(stream.key)
        size = len(message.data)
        retry = message.uid in stream.claims
        if not retry and (credit.held or not credit.room(size, self.config.publish_credit_bytes)):
            credit.held[message.uid] = None
            self.stats.held_up += 1
            return
        credit.take(now, message.uid, size, timed=not retry and not _known(stream, message.uid))
        self.arm(now, message.uid, 1)
        self.route(now, stream, client, message)

    def free_credit(self, key: bytes, uid: int, timed: bool = False) -> None:
        """Local publish ``uid`` of ``key`` is answered or given up: its credit is free.
        ``timed``: the tree answered it (its delay is a sample for the pace)."""
        credit = self.credits.get(key)
        if credit is None:
            return
        size = credit.out.pop(uid, None)
        if size is not None:
            credit.out_bytes -= size
            sent = credit.sent.pop(uid, None)
            if sent is not None and timed:
                self.samples.append((credit.pace, sent, 1))
            if credit.held:
                self.released[key] = None
        else:
            credit.held.pop(uid, None)
        if credit.idle:
            del self.credits[key]

    def fail_held(self, key: bytes, error: PublishError) -> None:
        """Fail every publish ``key`` holds: its out ones got no answer (see the notes)."""
        credit = self.credits.get(key)
        if credit is None:
            return
        for uid in list(credit.held):
            entry = self.local.get(uid)
            if entry is None:
                credit.held.pop(uid, None)  # (cannot be: ``free_credit`` removes it first)
                continue
            self.fail_local(entry.client, entry.message, error)
        if key in self.credits and self.credits[key].idle:
            del self.credits[key]

    def release_held(self, now: float) -> None:
        """After an event: send up the oldest held publishes of each stream whose credit
        moved, while it has room."""
        config = self.config
        while self.released:
            key = next(iter(self.released))
            del self.released[key]
            credit = self.credits.get(key)
            stream = self.streams.get(key)
            while credit is not None and credit.held:
                uid = next(iter(credit.held))
                entry = self.local.get(uid)
                if entry is None:
                    del credit.held[uid]  # (cannot be: ``free_credit`` removes it first)
                    continue
                size = len(entry.message.data)
                if not credit.room(size, config.publish_credit_bytes):
                    break
                del credit.held[uid]
                if stream is None:
                    # (A stream with a local publisher is kept: this is a safety net.)
                    self.fail_local(entry.client, entry.message, PublishError.NOT_CARRIED)
                    continue
                credit.take(now, uid, size, timed=not _known(stream, uid))
                self.arm(now, uid, entry.attempt)
                self.route(now, stream, entry.client, entry.message)
                credit = self.credits.get(key)  # (an answer at once may have settled it)
            if credit is not None and credit.idle:
                del self.credits[key]
