"""Local publishes: a node's own clients' publishes, from their start until their answer.

Each is resent on timeout (``publish_timeout``, up to ``publish_attempts`` tries) with the
same uid, so the root acknowledges a retry with its original number. Up the tree goes at
most a credit of them per stream (``credit``: the rest are held here). The claim a root's
number gives one (``confirming``) leaves with it; one given up without an answer keeps its
claim for a retry of its uid (``_lapse``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from overlay.core.config import NodeConfig
from overlay.core.credit import PublishCredit
from overlay.core.effects import ClientId
from overlay.core.events import (
    EXPLAIN,
    BatchAcked,
    ClientEvent,
    PublishAcked,
    PublishCollided,
    PublishFailed,
    explain,
)
from overlay.core.local_publishes import BatchAck, LocalPublish
from overlay.core.outbox import Outbox
from overlay.core.stats import NodeStats
from overlay.core.streams import Source, Stream
from overlay.core.timers import TimerQueue
from overlay.messages import (
    PublishCollision,
    PublishData,
    PublishError,
    PublishRejected,
    PublishSucceeded,
)

PUBLISH_TIMER = "publish"

Answer = PublishSucceeded | PublishCollision | PublishRejected


class LocalPublishes:
    """The local publishes in flight, by uid, and the claims of those that lapsed."""

    __slots__ = (
        "batched",
        "config",
        "credit",
        "deliver",
        "lapsed",
        "local",
        "route",
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
        route: Callable[[float, Stream, Source, PublishData], None],
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.timers = timers
        self.deliver = out.deliver
        self.route = route
        self.local: dict[int, LocalPublish] = {}
        # The uids of batches numbered in one pass, until their answer (``batches``).
        self.batched: dict[int, BatchAck] = {}
        # Claims of local publishes that timed out (uid -> key, number), bounded: a client
        # that retries the uid takes its claim back (``publish``; see ``fail``).
        self.lapsed: OrderedDict[int, tuple[bytes, int]] = OrderedDict()
        # At most a credit of them out per stream (``credit``), the rest held here.
        self.credit = PublishCredit(config, streams, stats, self.local, self.arm, route, self.fail)
        timers.on(PUBLISH_TIMER, self.on_timer)

    def publish(self, now: float, stream: Stream, client: ClientId, message: PublishData) -> None:
        """Start a local client's publish. The node checked the request, its signature
        included (``clients.py``, before joining a tree for it)."""
        self.local[message.uid] = LocalPublish(client, message)
        lapsed = self.lapsed.get(message.uid)
        if lapsed is not None and lapsed[0] == message.key:
            del self.lapsed[message.uid]
            stream.claims.setdefault(message.uid, lapsed[1])
        self.credit.send_or_hold(now, stream, client, message)  # (``credit``)

    def on_timer(self, now: float, uid: int, attempt: int) -> None:
        """A publish's answer is overdue: send it again, or fail it after its last try."""
        entry = self.local.get(uid)
        if entry is None or entry.attempt != attempt:
            return
        stream = self.streams.get(entry.message.key)
        if stream is None or attempt >= self.config.publish_attempts:
            self.fail(entry.client, entry.message, PublishError.TIMEOUT)
            self.credit.fail_held(entry.message.key, PublishError.TIMEOUT)  # (``credit``)
            return
        entry.attempt += 1
        self.stats.publish_retries += 1
        self.credit.resent(entry.message.key, uid)  # (its answer is not timed: ``pace``)
        self.arm(now, uid, entry.attempt)
        self.route(now, stream, entry.client, entry.message)

    def in_flight(self, uid: int) -> bool:
        """Whether local publish ``uid`` awaits its answer (alone, or in a batch)."""
        return uid in self.local or uid in self.batched

    def none_in_flight(self, uids: list[int]) -> bool:
        """Whether none of ``uids`` is in flight (``in_flight`` for each, in one pass)."""
        return self.local.keys().isdisjoint(uids) and self.batched.keys().isdisjoint(uids)

    def join(self, uid: int, client: ClientId) -> None:
        """Another client published ``uid`` while it is in flight (``in_flight``), or the
        same one again: it gets the same answer, once."""
        entry = self.local.get(uid)
        if entry is not None:
            if client not in entry.clients:
                entry.also.append(client)
            return
        batch = self.batched[uid]
        waiting = batch.also.setdefault(uid, [])
        if client != batch.client and client not in waiting:
            waiting.append(client)

    def forget_client(self, client: ClientId) -> None:
        """A local client went: its publishes go on for the other clients that wait."""
        for uid, entry in list(self.local.items()):
            if client in entry.also:
                entry.also.remove(client)
            elif entry.client == client:
                if entry.also:
                    entry.client = entry.also.pop(0)  # still wanted: keep it going
                else:
                    self._lapse(entry.message)  # (a client that comes back may retry it)
                    self.drop(uid)

    def arm(self, now: float, uid: int, attempt: int) -> None:
        self.timers.add(now + self.config.publish_timeout, (PUBLISH_TIMER, uid, attempt))

    def drop(self, uid: int, timed: bool = False) -> LocalPublish | None:
        """Forget a local publish, and its claim on a number (``confirming``) with it.
        ``timed``: the tree answered it, and how long it took tells the stream's pace."""
        entry = self.local.pop(uid, None)
        if entry is not None:
            self.credit.free_credit(entry.message.key, uid, timed)  # (``credit``)
            stream = self.streams.get(entry.message.key)
            if stream is not None:
                stream.claims.pop(uid, None)
        return entry

    def _lapse(self, message: PublishData) -> None:
        """Keep the claim of a publish we give up without an answer (a timeout, or its
        client went) for a retry of its uid (``publish``). The root, or a root cut off
        with it, may hold the packet under that number and acknowledge the retry with it;
        kept, the claim goes up to the next root as before (``push_claims``). Dropped, our
        side of a cut would announce the number missed while the other side keeps the uid
        under it, and after the heal acknowledges a retry with a number our subscribers
        were told was missed."""
        stream = self.streams.get(message.key)
        number = None if stream is None else stream.claims.get(message.uid)
        if number is None:
            return
        self.lapsed[message.uid] = (message.key, number)
        self.lapsed.move_to_end(message.uid)
        while len(self.lapsed) > self.config.max_queued_publishes:
            self.lapsed.popitem(last=False)

    def fail(self, client: ClientId, message: PublishData, error: PublishError) -> None:
        """Tell ``client`` (and whoever waits with it) that its publish failed."""
        if error is PublishError.TIMEOUT:
            self._lapse(message)  # (any other failure is an answer: no number stands)
        entry = self.drop(message.uid)
        failed = PublishFailed(message.key, message.uid, error, EXPLAIN[error])
        for waiting in [client] if entry is None else entry.clients:
            self.deliver(waiting, failed)

    def answer(self, client: ClientId, answer: Answer | BatchAck) -> None:
        """Tell the clients of a local publish the root's answer (of a batch numbered in
        one pass, its client: each of its publishes is acknowledged)."""
        if type(answer) is BatchAck:
            key, numbers, batched = answer.key, answer.numbers, self.batched
            for uid, _ in numbers:
                batched.pop(uid, None)
            self.deliver(client, BatchAcked(key, tuple(numbers)))
            self.credit.batch_answered(key, answer.sent, len(numbers))  # (``pace``)
            if answer.also:  # (others that published one of its uids: one answer each)
                numbered = dict(numbers)
                for uid, others in answer.also.items():
                    acked = PublishAcked(key, uid, numbered[uid])
                    for other in others:
                        self.deliver(other, acked)
            return
        assert not isinstance(answer, BatchAck)
        # Only an ordering (a number, or a collision) says how long the tree took: a refusal
        # may come from anywhere on the way, or from this node itself (``pace``).
        timed = isinstance(answer, PublishSucceeded | PublishCollision)
        entry = self.drop(answer.uid, timed)
        if entry is None:
            return  # answered already (a resend crossed the first answer)
        key, uid = answer.key, answer.uid
        event: ClientEvent
        if isinstance(answer, PublishSucceeded):
            event = PublishAcked(key, uid, answer.packet)
        elif isinstance(answer, PublishCollision):
            event = PublishCollided(key, uid, answer.packet, answer.suggested_next)
        else:
            try:
                error = PublishError(answer.reason)
            except ValueError:
                error = PublishError.INVALID
            event = PublishFailed(key, uid, error, explain(answer.reason))
        for client in entry.clients:
            self.deliver(client, event)
