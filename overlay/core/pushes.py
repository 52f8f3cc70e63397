"""Pushes: packets a member sends up, under their numbers and original uids, to a parent
that lacks them (see ``takeover``), until each is answered.

A restarted subtree that attaches under a new parent pushes up what it holds beyond the
parent's head (``push_up``), and a member asked for a span by a root in its grace pushes
what it holds of it (``gathering``). The root takes each in its place or acknowledges it
has it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from overlay.core.config import NodeConfig
from overlay.core.effects import PeerId
from overlay.core.outbox import Outbox
from overlay.core.stats import NodeStats
from overlay.core.streams import State, Stream
from overlay.messages import MAX_WIRE_HTL, PublishData, PublishError, PublishRejected


class Pushes:
    """Our pushes, not yet answered, oldest first (bounded as relayed publishes are)."""

    __slots__ = ("config", "pushes", "send", "stats", "streams")

    def __init__(
        self, config: NodeConfig, streams: dict[bytes, Stream], stats: NodeStats, out: Outbox
    ) -> None:
        self.config = config
        self.streams = streams
        self.stats = stats
        self.send = out.send
        self.pushes: OrderedDict[int, Push] = OrderedDict()

    def push_up(self, stream: Stream, theirs: int | None) -> None:
        """We attached under a parent that has processed up to ``theirs``: send up, in
        order and with their original uids, the packets we hold beyond it. They reached
        our branch before the tree broke and may have reached nobody else; the root takes
        each as the next packet or acknowledges one it has (``_fill``)."""
        parent = stream.parent
        if parent is None or stream.next_in is None:
            return
        first = 0 if theirs is None else theirs + 1
        for number in stream.window.packets.irange(first, stream.next_in - 1):
            self.push_one(stream, parent, number)

    def push_one(self, stream: Stream, parent: PeerId, number: int) -> None:
        """Send packet ``number`` of our window up to ``parent``, as the publish it was,
        under its number: the root takes it in that place, or acknowledges it has it.
        Until an answer comes back it is sent again (``resend_pushes``)."""
        message = _pushed(stream, number)
        if message is None:
            return  # numbered before uids travelled with packets: no publish to send
        self.stats.pushed_up += 1
        self.send(parent, message)
        pushes = self.pushes
        pushes.pop(message.uid, None)
        pushes[message.uid] = Push(stream.key, number, parent)
        if len(pushes) > self.config.max_relayed_publishes:
            pushes.popitem(last=False)  # (bounded, as relayed publishes are)

    def resend_pushes(self, now: float) -> None:
        """Every heartbeat round: send again each push that has gone unanswered for
        ``publish_timeout`` (so between that and two heartbeat intervals more after it was
        sent), up to ``publish_attempts`` times in all, to the parent it went to. A relay does not
        store what it passes up, so a push lost with a link beyond it was lost for good,
        and with it, where a push alone carried a claim, the claim (a state-changing
        request, which must be confirmed). The root takes a resend once
        (its uid table), and a relay or a root in its grace holds one copy."""
        for uid, push in list(self.pushes.items()):
            if push.since is None:
                push.since = now  # (noticed at this round; due a timeout from now)
                continue
            if now - push.since < self.config.publish_timeout:
                continue
            stream = self.streams.get(push.key)
            message = None if stream is None else _pushed(stream, push.number, uid)
            if (
                stream is None
                or message is None
                or stream.state is not State.JOINED
                or stream.parent != push.parent
                or push.attempt >= self.config.publish_attempts
            ):
                # Gone, or no longer ours to push to that parent: a restart or a new parent
                # pushes anew what the new parent lacks (``push_up``).
                del self.pushes[uid]
                continue
            push.attempt += 1
            push.since = now
            self.stats.pushes_resent += 1
            self.send(push.parent, message)

    def push_answered(self, peer: PeerId, answer: Any) -> None:
        """An answer to a publish came down from ``peer``: if it answers a push of ours to
        that peer, that is done. BUSY and NOT_CARRIED say the tree is changing: the push is
        sent again."""
        push = self.pushes.get(answer.uid)
        if push is None or push.key != answer.key or push.parent != peer:
            return
        if isinstance(answer, PublishRejected) and answer.reason in (
            PublishError.BUSY,
            PublishError.NOT_CARRIED,
        ):
            return
        del self.pushes[answer.uid]


@dataclass(slots=True)
class Push:
    """A packet we pushed up, not yet answered."""

    key: bytes
    number: int
    parent: PeerId  # where it went: resent only there, answered only from there
    attempt: int = 1
    since: float | None = None  # the heartbeat round that first saw it, then the last resend


def _pushed(stream: Stream, number: int, uid: int | None = None) -> PublishData | None:
    """Packet ``number`` of ``stream``'s window as the publish it was (None if we no longer
    hold it, it has no uid, or it is no longer the packet ``uid`` names)."""
    packet = stream.window.get(number)
    if packet is None or packet.uid is None or (uid is not None and packet.uid != uid):
        return None
    return PublishData(
        packet.uid,
        stream.key,
        number,
        stream.target,
        MAX_WIRE_HTL,
        packet.data,
        packet.epoch,
        packet.kind,
        packet.sig,
        pushed=True,
    )
